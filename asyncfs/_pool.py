"""asyncfs's own bounded worker pool, which batches.

Operations submitted during one event-loop iteration are collected and, at
the end of it, split into at most one chunk per worker; a worker runs a whole
chunk in one thread hop and hands back all its results with one wake-up of the
loop. Chunks go through one shared queue to whichever worker is free, and no
work item ever waits on another, so the pool cannot deadlock. The number of
operations in flight per loop is capped; submitters beyond the cap wait.

The pool is not the loop's default executor: it never competes with DNS
resolution or ``to_thread`` users for threads.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from ._backends import Backend, Waiter, current_backend

__all__ = ["WorkerPool", "default_workers"]

T = TypeVar("T")


def default_workers() -> int:
    """Enough threads to keep a few devices busy and hide per-call latency,
    independent of core count: plugin calls wait on I/O with the GIL
    released."""
    return min(32, (os.cpu_count() or 1) * 4 + 8)


class _Work:
    __slots__ = ("args", "discard", "error", "fn", "result", "waiter")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], waiter: Waiter, discard: Any) -> None:
        self.fn = fn
        self.args = args
        self.waiter = waiter
        self.discard = discard
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        if self.waiter.abandoned and self.discard is None:
            return  # nobody wants the result and running it has no effect to keep
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # delivered to the awaiting task
            self.error = exc
        if self.waiter.abandoned and self.discard is not None and self.error is None:
            self.discard(self.result)  # e.g. close a handle opened for a cancelled caller
            self.discard = None


_Chunk = tuple[list[_Work], Callable[[list[_Work]], None]]


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
        chunks = min(self.pool.workers, len(batch))
        size, extra = divmod(len(batch), chunks)
        start = 0
        for i in range(chunks):
            end = start + size + (1 if i < extra else 0)
            self.pool.put((batch[start:end], self.deliver_threadsafe))
            start = end

    def deliver_threadsafe(self, chunk: list[_Work]) -> None:
        self.backend.call_soon_threadsafe(lambda: self.deliver(chunk))

    def deliver(self, chunk: list[_Work]) -> None:
        resolve = self.backend.resolve
        for work in chunk:
            received = not work.waiter.abandoned and resolve(work.waiter, work.result, work.error)
            if not received and work.discard is not None and work.error is None:
                # opened for a caller that was cancelled meanwhile: release it
                self.pool.put(([_Work(work.discard, (work.result,), Waiter(None), None)], _ignore))
        self.release_slots(len(chunk))


def _ignore(chunk: list[_Work]) -> None:
    del chunk


class WorkerPool:
    """Threads that run chunks of plugin calls for any number of loops."""

    def __init__(self, workers: int | None = None, *, max_in_flight: int = 4096) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.workers = workers or default_workers()
        self.max_in_flight = max_in_flight
        self._queue: queue.SimpleQueue[_Chunk | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self._batchers: dict[int, _Batcher] = {}

    def put(self, chunk: _Chunk) -> None:
        if not self._threads:
            self._start()
        self._queue.put(chunk)

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            while len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name=f"asyncfs-worker-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            chunk, deliver = item
            for work in chunk:
                work.run()
            deliver(chunk)

    def batcher(self) -> _Batcher:
        backend = current_backend()
        key = id(getattr(backend, "loop", None) or getattr(backend, "_token", None))
        batcher = self._batchers.get(key)
        if batcher is None or type(batcher.backend) is not type(backend):
            batcher = self._batchers[key] = _Batcher(self, backend)
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

    async def run_many(
        self, fn: Callable[..., T], calls: list[tuple[Any, ...]], *, mutating: bool
    ) -> list[T | Exception]:
        """Run fn(*args) for every args in calls, concurrently and without a
        task per call; results come back in order, with exceptions in place.
        Calls made together share batches; the in-flight cap still holds."""
        self._check_open()
        batcher = self.batcher()
        backend = batcher.backend
        works: list[_Work] = []
        try:
            for args in calls:
                await self._acquire(batcher)
                work = _Work(fn, args, backend.new_waiter(), None)
                batcher.submit(work)
                works.append(work)
            results: list[T | Exception] = []
            for work in works:
                try:
                    results.append(await backend.wait(work.waiter, shielded=mutating))
                except Exception as exc:
                    results.append(exc)
            return results
        except BaseException:
            if not mutating:  # nobody will read the rest
                for work in works:
                    work.waiter.abandoned = True
            raise

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

    def peak_in_flight(self) -> int:
        """The most operations that were in flight at once, per loop, max."""
        return max((b.peak_in_flight for b in self._batchers.values()), default=0)
