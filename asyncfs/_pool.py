"""asyncfs's own bounded worker pool, which batches.

Operations submitted during one event-loop iteration are collected and, at
the end of it, handed to a worker as one batch; the worker runs them in one
thread hop and hands back all its results with one wake-up of the loop.
Operations that prove slow (time spent in C with the GIL released) call more
workers onto their batch (see :class:`_Batch`); short ones, bound by the GIL,
run fastest on one thread. No operation ever waits on another, so the pool
cannot deadlock. The number of operations in flight per loop is capped;
submitters beyond the cap wait.

The pool is not the loop's default executor: it never competes with DNS
resolution or ``to_thread`` users for threads.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._backends import Backend, Waiter, backend_for, current_loop

__all__ = ["Pending", "PoolStats", "Sink", "WorkerPool", "default_workers"]

T = TypeVar("T")


def default_workers() -> int:
    """Two threads per core, at least 4 and at most 32. Local filesystems
    are served from memory copies, which more threads than that only slow
    down (and crowd the event loop's thread off the cores); for stores with
    high per-call latency, give the Env more workers."""
    return max(4, min(32, (os.cpu_count() or 1) * 2))


@dataclass(frozen=True)
class PoolStats:
    """``operations`` run, loop ``wakeups`` that delivered their results
    (one per chunk), operations ``in_flight`` now, and the
    ``peak_in_flight`` of any loop."""

    operations: int
    wakeups: int
    in_flight: int
    peak_in_flight: int


class _Group:
    """Calls of one run_many window: one waiter, resolved when the last
    of them is delivered."""

    __slots__ = ("remaining", "waiter")

    def __init__(self, waiter: Waiter, size: int) -> None:
        self.waiter = waiter
        self.remaining = size


class Sink:
    """Collects finished work, in the order it finishes, for one consumer
    that takes them one at a time (:meth:`WorkerPool.submit_to`)."""

    __slots__ = ("_backend", "_done", "_waiter", "closed")

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._done: deque[tuple[Any, Any, BaseException | None]] = deque()
        self._waiter: Waiter | None = None
        self.closed = False

    def deliver(self, tag: Any, result: Any, error: BaseException | None) -> None:
        if self.closed:
            return
        self._done.append((tag, result, error))
        if self._waiter is not None:
            waiter, self._waiter = self._waiter, None
            self._backend.resolve(waiter, None, None)

    async def next(self) -> tuple[Any, Any, BaseException | None]:
        """(tag, result, error) of the next finished work."""
        while not self._done:
            self._waiter = self._backend.new_waiter()
            await self._backend.wait(self._waiter, shielded=False)
        return self._done.popleft()

    def close(self) -> None:
        """Drop finished work and whatever is still running."""
        self.closed = True
        self._done.clear()


class _Work:
    __slots__ = ("args", "discard", "error", "fn", "group", "result", "sink", "tag", "waiter")

    # a fan-out's calls (run_many, submit_to) are meant to run in parallel:
    # their batch calls in helpers from the start, not after a slow first call
    @property
    def eager(self) -> bool:
        return self.group is not None or self.sink is not None

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        waiter: Waiter,
        discard: Any,
        group: _Group | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.waiter = waiter
        self.discard = discard
        self.group = group
        self.result: Any = None
        self.error: BaseException | None = None
        self.sink: Sink | None = None
        self.tag: Any = None

    def run(self) -> None:
        if (self.waiter.abandoned or (self.sink is not None and self.sink.closed)) and self.discard is None:
            return  # nobody wants the result and running it has no effect to keep
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # delivered to the awaiting task
            self.error = exc
        # An idle worker must not keep its last call's arguments (a buffer
        # written, say) alive: with many workers that adds up.
        self.args = ()
        if self.waiter.abandoned and self.discard is not None and self.error is None:
            self.discard(self.result)  # e.g. close a handle opened for a cancelled caller
            self.discard = None


class _Batch:
    """Operations flushed together. One worker starts draining it; when an
    operation turns out to be slow (it spent its time in C, with the GIL
    released: a large copy, a high-latency store), that worker calls in as
    many helpers as there are operations left, and they drain it together.
    Short operations, which are bound by the GIL, stay on one thread, where
    they run fastest. Each worker hands back its share with one wake-up."""

    __slots__ = ("deliver", "eager", "helpers", "items", "lock", "next")

    def __init__(self, items: list[_Work], deliver: Callable[[list[_Work]], None]) -> None:
        self.items = items
        self.deliver = deliver
        self.eager = any(work.eager for work in items)
        self.next = 0
        self.helpers = 0
        self.lock = threading.Lock()

    def take(self) -> _Work | None:
        with self.lock:
            if self.next >= len(self.items):
                return None
            self.next += 1
            return self.items[self.next - 1]

    def helpers_wanted(self, workers: int) -> int:
        """How many more workers to call in, counting them as called."""
        with self.lock:
            wanted = min(workers - 1 - self.helpers, len(self.items) - self.next)
            if wanted <= 0:
                return 0
            self.helpers += wanted
            return wanted


# An operation that takes longer than this ran in C with the GIL released,
# so more threads on its batch make it go faster.
SLOW_OPERATION = 250e-6


class _Batcher:
    """Per-event-loop state: the operations of the current iteration and
    the in-flight count with the tasks waiting for room."""

    def __init__(self, pool: WorkerPool, backend: Backend) -> None:
        self.pool = pool
        self.backend = backend
        self.pending: list[_Work] = []
        self.scheduled = False
        self.in_flight = 0
        self.peak_in_flight = 0
        self.operations = 0
        self.wakeups = 0
        self.blocked: deque[Waiter] = deque()

    def take_slot(self) -> bool:
        """Count one more operation in flight, if there is room."""
        if self.in_flight >= self.pool.max_in_flight:
            return False
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return True

    def release_slots(self, count: int) -> None:
        """Operations finished: hand their slots to tasks waiting for room."""
        self.in_flight -= count
        while self.blocked and self.in_flight < self.pool.max_in_flight:
            waiter = self.blocked.popleft()
            self.in_flight += 1  # reserved for that task
            if not self.backend.resolve(waiter, None, None):
                self.in_flight -= 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def submit(self, work: _Work) -> None:
        self.pending.append(work)
        if not self.scheduled:
            self.scheduled = True
            self.backend.call_soon(self.flush)

    def flush(self) -> None:
        batch, self.pending, self.scheduled = self.pending, [], False
        self.pool.put(_Batch(batch, self.deliver_threadsafe))

    def deliver_threadsafe(self, chunk: list[_Work]) -> None:
        self.backend.call_soon_threadsafe(lambda: self.deliver(chunk))

    def deliver(self, chunk: list[_Work]) -> None:
        resolve = self.backend.resolve
        self.wakeups += 1
        self.operations += len(chunk)
        for work in chunk:
            if work.sink is not None:
                work.sink.deliver(work.tag, work.result, work.error)
                continue
            group = work.group
            if group is not None:
                group.remaining -= 1
                if group.remaining == 0 and not group.waiter.abandoned:
                    resolve(group.waiter, None, None)
                continue
            received = not work.waiter.abandoned and resolve(work.waiter, work.result, work.error)
            if not received and work.discard is not None and work.error is None:
                # opened for a caller that was cancelled meanwhile: release it
                self.pool.put(_Batch([_Work(work.discard, (work.result,), Waiter(None), None)], _ignore))
        self.release_slots(len(chunk))


def _ignore(chunk: list[_Work]) -> None:
    del chunk


class Pending(Generic[T]):
    """Work started by :meth:`WorkerPool.submit`."""

    __slots__ = ("_backend", "_work")

    def __init__(self, work: _Work, backend: Backend) -> None:
        self._work = work
        self._backend = backend

    async def result(self) -> T:
        """Wait for the result (abandoned if the waiting task is cancelled)."""
        value: T = await self._backend.wait(self._work.waiter, shielded=False)
        return value


class WorkerPool:
    """Threads that run chunks of plugin calls for any number of loops."""

    def __init__(self, workers: int | None = None, *, max_in_flight: int = 4096, worker_nice: int = 10) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.workers = workers or default_workers()
        self.max_in_flight = max_in_flight
        self.worker_nice = worker_nice
        self._queue: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self._batchers: weakref.WeakKeyDictionary[object, _Batcher] = weakref.WeakKeyDictionary()

    def put(self, batch: _Batch) -> None:
        if not self._threads:
            self._start()
        self._queue.put(batch)

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            while len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name=f"asyncfs-worker-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        if self.worker_nice and hasattr(os, "setpriority"):
            # Linux nice values are per thread: the event loop keeps its
            # priority and gets a core first when both want one.
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.worker_nice)
        clock = time.perf_counter
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            done: list[_Work] = []
            if batch.eager:
                for _ in range(batch.helpers_wanted(self.workers)):
                    self._queue.put(batch)
            while (work := batch.take()) is not None:
                start = clock()
                work.run()
                done.append(work)
                if clock() - start > SLOW_OPERATION:
                    for _ in range(batch.helpers_wanted(self.workers)):
                        self._queue.put(batch)
            if done:
                batch.deliver(done)
            del batch, done  # nothing of this batch outlives it in an idle worker

    def batcher(self) -> _Batcher:
        """This event loop's batcher (made on the loop's first operation)."""
        loop = current_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self, backend_for(loop))
        return batcher

    async def _acquire(self, batcher: _Batcher) -> None:
        """Take an in-flight slot, waiting for one when the cap is reached."""
        if batcher.take_slot():
            return
        room = batcher.backend.new_waiter()
        batcher.blocked.append(room)
        try:
            await batcher.backend.wait(room, shielded=False)
        except BaseException:
            if room.delivered:  # a slot was reserved for us: give it back
                batcher.release_slots(1)
            raise

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the worker pool is shut down")

    async def run(self, fn: Callable[..., T], *args: Any, mutating: bool, discard: Any = None) -> T:
        """Run fn(*args) on a worker and return its result.

        ``mutating`` work is shielded: a cancelled caller waits for it to
        finish, then sees the cancellation. Other work may be abandoned; if
        it produced something that must be released (``discard`` is given),
        ``discard(result)`` runs on a worker.
        """
        self._check_open()
        batcher = self.batcher()
        await self._acquire(batcher)
        work = _Work(fn, args, batcher.backend.new_waiter(), discard)
        batcher.submit(work)
        result: T = await batcher.backend.wait(work.waiter, shielded=mutating)
        return result

    def submit(self, fn: Callable[..., T], *args: Any, discard: Any = None) -> Pending[T] | None:
        """Start side-effect-free fn(*args) on a worker without waiting for it
        (read-ahead). Returns None when the in-flight cap leaves no room."""
        self._check_open()
        batcher = self.batcher()
        if not batcher.take_slot():
            return None
        work = _Work(fn, args, batcher.backend.new_waiter(), discard)
        batcher.submit(work)
        return Pending(work, batcher.backend)

    def sink(self) -> Sink:
        """A sink for this event loop (see :meth:`submit_to`)."""
        return Sink(self.batcher().backend)

    async def submit_to(self, sink: Sink, tag: Any, fn: Callable[..., Any], *args: Any) -> None:
        """Start side-effect-free fn(*args) on a worker; its (tag, result,
        error) goes to sink when done. Waits for room under the in-flight cap."""
        self._check_open()
        batcher = self.batcher()
        await self._acquire(batcher)
        work = _Work(fn, args, batcher.backend.new_waiter(), None)
        work.sink = sink
        work.tag = tag
        batcher.submit(work)

    async def run_many(
        self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], *, mutating: bool
    ) -> list[T | Exception]:
        """Run fn(*args) for every args in calls, concurrently and without a
        task or a waiter per call; results come back in order, exceptions in
        place. Calls go in windows of at most max_in_flight, each window
        awaited as one group, so any number of calls holds bounded work."""
        self._check_open()
        batcher = self.batcher()
        backend = batcher.backend
        results: list[T | Exception] = []
        for start in range(0, len(calls), self.max_in_flight):
            window = calls[start : start + self.max_in_flight]
            group = _Group(backend.new_waiter(), len(window))
            works: list[_Work] = []
            try:
                for args in window:
                    await self._acquire(batcher)
                    work = _Work(fn, args, group.waiter, None, group)
                    batcher.submit(work)
                    works.append(work)
                await backend.wait(group.waiter, shielded=mutating)
            except BaseException:
                group.waiter.abandoned = not mutating  # the rest need not run
                raise
            for work in works:
                error = work.error
                if error is not None and not isinstance(error, Exception):
                    raise error
                results.append(error if error is not None else work.result)
        return results

    def stats(self) -> PoolStats:
        """Counters summed over the loops this pool has served."""
        batchers = list(self._batchers.values())
        return PoolStats(
            operations=sum(b.operations for b in batchers),
            wakeups=sum(b.wakeups for b in batchers),
            in_flight=sum(b.in_flight for b in batchers),
            peak_in_flight=max((b.peak_in_flight for b in batchers), default=0),
        )

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop the threads after the work already queued."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
