"""asyncfs's own bounded worker pool, which batches.

Operations submitted during one event-loop iteration are collected and, at
the end of it, handed to a worker as one batch; the worker runs them in one
thread hop and hands results back in small groups, one wake-up of the loop
per group and at most :data:`DELIVERY_INTERVAL` of others' work ahead of any
result. Operations that prove slow (time spent in C with the GIL released)
call more workers onto their batch (see :class:`_Batch`): as many as there
are workers when they wait (a store's latency, a disk), as many as there are
cores when they compute (copies from the page cache), since more threads
would only take turns on the cores; short ones, bound by the GIL, run
fastest on one thread. Shortly after a call that waited, new batches call
their helpers at once (see WAITS_LATELY). The number of operations in flight
per loop is capped; submitters beyond the cap wait.

No operation waits on another: a monitor thread notices a worker stuck in
one call for :data:`STUCK_AFTER` (a hung network peer, a FIFO, a dead NFS
server), hands what it finished to the loop, puts its batch back in the
queue for others to drain, and starts a spare thread when work waits
that no free thread will take (up to ``max_threads`` in all; spares leave
when idle). Shutdown waits a bounded time for such calls and then abandons
them on their daemon threads, with a warning naming each.

Threads start when work needs them: a batch queued when every thread is
busy starts one more, up to ``workers`` (ThreadPoolExecutor's rule), so a
process whose calls overlap four at a time holds about four threads, not
``workers``; helpers a batch calls in wait for a thread to come free, or
for the monitor to start one while the batch has work left, and so does a
network pool's work while one of its batches drains, until it has waited a
look of the monitor (see WorkerPool._offer).

The pool is not the loop's default executor: it never competes with DNS
resolution or ``to_thread`` users for threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from ..errors import AbandonedOperationWarning, EnvClosedError, UnavailableError
from .backends import Backend, Waiter, backend_for, current_loop

__all__ = [
    "ALONE",
    "Combiner",
    "Pending",
    "PoolStats",
    "Sink",
    "WorkerPool",
    "call_quietly",
    "closed_pool",
    "default_workers",
    "shared_network_pool",
]

_log = logging.getLogger("asyncfs.pool")

T = TypeVar("T")
# What a slow call did with its thread (see WorkerPool._verdict).
Verdict = Literal["computed", "waited", "unclear"]


def available_cores() -> int:
    """The cores this process may run on (its affinity, where the platform
    tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def default_workers() -> int:
    """Two threads per core, at least 4 and at most 32. Local filesystems
    are served from memory copies, which more threads than that only slow
    down (and crowd the event loop's thread off the cores); for stores with
    high per-call latency, give the Env more workers."""
    return max(4, min(32, available_cores() * 2))


@dataclass(frozen=True)
class PoolStats:
    """``operations`` run, loop ``wakeups`` that delivered their results
    (one per chunk), operations ``in_flight`` now (queued or running), and
    the ``peak_in_flight`` of any loop; worker ``threads`` now (spares
    included), how many are ``running`` a call, and how many of those are
    ``stuck`` in one (running longer than STUCK_AFTER: a spare thread took
    over their batch)."""

    operations: int
    wakeups: int
    in_flight: int
    peak_in_flight: int
    threads: int = 0
    running: int = 0
    stuck: int = 0


class _Group:
    """Calls of one run_many window: one waiter, resolved when the last
    of them is delivered."""

    __slots__ = ("remaining", "waiter")

    def __init__(self, waiter: Waiter, size: int) -> None:
        self.waiter = waiter
        self.remaining = size


# what a Sink hands the work nobody will take: (tag, result, error)
OnDrop = Callable[[Any, Any, BaseException | None], None]
# A sink's work may name a follow: called on the worker with the work's tag
# and result once it succeeded, it answers the (tag, args) of the next call
# of the same function, run in its place, or None.
Follow = Callable[[Any, Any], tuple[Any, tuple[Any, ...]] | None]


class Sink:
    """Collects finished work, in the order it finishes, for one consumer
    that takes them one at a time (:meth:`WorkerPool.submit_to`). Work that
    nobody will take (finished after close, or not taken before it) goes to
    on_drop, if given, which releases what it holds. It may be closed from
    any thread (its consumer collected on a worker, say), while the loop
    delivers to it."""

    __slots__ = ("_backend", "_done", "_lock", "_on_drop", "_waiter", "closed")

    def __init__(self, backend: Backend, on_drop: OnDrop | None = None) -> None:
        self._backend = backend
        self._done: deque[tuple[Any, Any, BaseException | None]] = deque()
        self._waiter: Waiter | None = None
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self.closed = False

    def deliver(self, tag: Any, result: Any, error: BaseException | None) -> None:
        with self._lock:
            if not self.closed:
                self._done.append((tag, result, error))
                waiter, self._waiter = self._waiter, None
                if waiter is not None:
                    self._backend.resolve(waiter, None, None)
                return
        self.drop(tag, result, error)

    def __len__(self) -> int:
        """How much finished work waits to be taken (from any thread)."""
        return len(self._done)

    async def next(self) -> tuple[Any, Any, BaseException | None]:
        """(tag, result, error) of the next finished work."""
        while not self._done:
            self._waiter = self._backend.new_waiter()
            await self._backend.wait(self._waiter)
        return self._done.popleft()

    def close(self) -> None:
        """Drop finished work and whatever is still running."""
        with self._lock:
            self.closed = True
            done, self._done = self._done, deque()
        for finished in done:
            self.drop(*finished)

    def drop(self, tag: Any, result: Any, error: BaseException | None) -> None:
        """Work nobody will take: to on_drop (from any thread)."""
        if self._on_drop is not None:
            self._on_drop(tag, result, error)


# What a combiner answers for a call it leaves to run by itself, after the
# others (one that may wait long, and must not hold the others up).
ALONE: Any = object()


class Combiner(Protocol):
    """Runs many calls of one function as one (a plugin's bulk op): given
    each call's arguments, returns each call's (result, error), in order,
    or (:data:`ALONE`, None) for a call to run by itself, as a call of its
    own in the same batch. Calls submitted in the same loop iteration with
    the same combiner go together, at most ``limit`` per call. A caller
    that was cancelled meanwhile is left out if its call may be abandoned
    (and what it opened is discarded); mutating callers wait for their group."""

    limit: int

    def __call__(self, calls: list[tuple[Any, ...]]) -> list[tuple[Any, BaseException | None]]: ...


class _Work:
    __slots__ = (
        "args", "combine", "discard", "error", "fn", "follow", "group", "members", "orphaned", "passed_slot",
        "result", "sink", "tag", "waiter",
    )  # fmt: skip

    # a fan-out's calls (run_many, submit_to, combined calls) are meant to run
    # in parallel: their batch calls in helpers from the start, not after a
    # slow first call
    @property
    def eager(self) -> bool:
        return self.group is not None or self.sink is not None or self.members is not None

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
        self.orphaned = False  # given up at shutdown: its caller was told
        self.combine: Combiner | None = None  # may run combined with others
        self.members: list[_Work] | None = None  # the calls this one runs combined
        self.follow: Follow | None = None  # a sink's work: what runs next in its place (see followed)
        self.passed_slot = False  # its in-flight slot went to the work that followed it

    @classmethod
    def combined(cls, combine: Combiner, members: list[_Work]) -> _Work:
        work = cls(combine, (), Waiter(None), None)  # nobody awaits it: its members are delivered
        work.members = members
        return work

    def delivered(self) -> list[_Work]:
        """What goes back to the loop when this has run: its members, or itself."""
        return self.members if self.members is not None else [self]

    def describe(self) -> str:
        """The call in user terms: the function and the URI it was given."""
        if self.members is not None:
            return f"{len(self.members)} combined calls: " + ", ".join(work.describe() for work in self.members)
        fn = getattr(self.fn, "func", self.fn)  # functools.partial
        name = getattr(fn, "__qualname__", repr(fn))
        uri = next((arg for arg in self.args if isinstance(arg, str)), None)
        return f"{name}({uri!r})" if uri is not None else f"{name}()"

    def run(self) -> list[_Work]:
        """Run it; returns the calls left to run by themselves (see ALONE)."""
        if self.members is not None:
            return self._run_combined(self.members)
        if (self.waiter.abandoned or (self.sink is not None and self.sink.closed)) and self.discard is None:
            return []  # nobody wants the result and running it has no effect to keep
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # delivered to the awaiting task
            self.error = exc
        # An idle worker must not keep its last call's arguments (a buffer
        # written, say) alive: with many workers that adds up.
        self.args = ()
        if self.waiter.abandoned:
            self.release()
        return []

    def followed(self) -> _Work | None:
        """The work its follow starts in its place, once it succeeded: run
        next on this thread, with its in-flight slot, and no trip through
        the loop in between (a prefetch's next read). None if there is none."""
        sink, follow = self.sink, self.follow
        if follow is None or sink is None or sink.closed or self.error is not None:
            return None
        after = follow(self.tag, self.result)
        if after is None:
            return None
        work = _Work(self.fn, after[1], Waiter(None), None)  # its sink says when nobody wants it
        work.sink, work.tag, work.follow = sink, after[0], follow
        self.passed_slot = True
        return work

    def _run_combined(self, members: list[_Work]) -> list[_Work]:
        """Run the members that are still wanted; returns those the combiner
        left to run alone (no longer members: they are delivered by themselves)."""
        wanted = [work for work in members if not work.waiter.abandoned]
        alone: list[_Work] = []
        if wanted:
            try:
                outcomes = self.fn([work.args for work in wanted])
            except BaseException as exc:  # every member's
                outcomes = [(None, exc)] * len(wanted)
            for work, (result, error) in zip(wanted, outcomes, strict=True):
                if result is ALONE:
                    alone.append(work)
                else:
                    work.result, work.error = result, error
        if alone:
            self.members = [work for work in members if work not in alone]
        for work in self.members or ():
            work.args = ()
        return alone

    def release(self) -> None:
        """Nobody will receive the result: release what it holds (close a
        handle opened for a caller that left, or hand it to its sink's
        on_drop)."""
        if self.sink is not None:
            sink, self.sink = self.sink, None
            sink.drop(self.tag, self.result, self.error)
        elif self.discard is not None and self.error is None:
            discard, self.discard = self.discard, None
            with contextlib.suppress(Exception):
                discard(self.result)


class _Batch:
    """Operations flushed together. One worker starts draining it; when an
    operation turns out to be slow (it spent its time in C, with the GIL
    released: a large copy, a high-latency store), that worker calls in as
    many helpers as there are operations left, and they drain it together.
    When the slow operation kept its thread on a core rather than waiting
    (copies from the page cache), the batch is limited to as many threads as
    there are cores: more would only take turns on them, and the ones beyond
    leave after their current operation. Short operations, which are bound
    by the GIL, stay on one thread, where they run fastest. Each worker
    hands back its share with one wake-up."""

    __slots__ = (
        "computed",
        "deliver",
        "eager",
        "gil_bound",
        "helpers",
        "items",
        "limit",
        "lock",
        "next",
        "running",
        "waited",
    )

    def __init__(self, items: list[_Work], deliver: Callable[[list[_Work]], None]) -> None:
        self.items = items
        self.deliver = deliver
        self.eager = any(work.eager for work in items)
        self.next = 0
        self.helpers = 0
        self.gil_bound = False  # its slow calls waited for the GIL, not in C: helpers would only contend
        self.computed = 0  # its slow calls that kept their thread on a core (see WorkerPool._on_slow)
        self.waited = 0  # and those that let go of it (for a store, a disk)
        self.limit = _UNLIMITED  # threads it may run on
        self.running = 0  # threads draining it
        self.lock = threading.Lock()

    def join(self) -> None:
        """A thread starts draining it (until :meth:`take` says None)."""
        with self.lock:
            self.running += 1

    def step_aside(self) -> None:
        """One of its threads is stuck in a call: it no longer counts
        against the limit (it joins again when the call comes back)."""
        with self.lock:
            self.running -= 1

    def take(self) -> _Work | None:
        """The next operation, or None when none is left or this thread is
        one more than the limit (it stops draining, and may be called in
        again if the limit is lifted)."""
        with self.lock:
            if self.next >= len(self.items) or self.running > self.limit:
                self.running -= 1
                if self.running >= self.limit:
                    self.helpers = max(0, self.helpers - 1)
                return None
            self.next += 1
            return self.items[self.next - 1]

    def add(self, items: list[_Work]) -> None:
        """More operations, to run after the others."""
        with self.lock:
            self.items += items

    def rest(self) -> list[_Work]:
        """Take every operation not taken yet (no thread will run them)."""
        with self.lock:
            rest, self.next = self.items[self.next :], len(self.items)
            return rest

    def left(self) -> int:
        with self.lock:
            return len(self.items) - self.next

    def judge_slow_call(self, verdict: Verdict, cores: int) -> bool:
        """Count a slow call as one that computed or one that waited, and
        limit the batch to the cores while more of its slow calls computed
        than waited, two at least (see COMPUTED_CALLS). Whether that lifted
        a limit."""
        with self.lock:
            if verdict == "computed":
                self.computed += 1
            elif verdict == "waited":
                self.waited += 1
            limited = self.limit != _UNLIMITED
            self.limit = cores if COMPUTED_CALLS <= self.computed > self.waited else _UNLIMITED
            return limited and self.limit == _UNLIMITED

    def helpers_wanted(self, workers: int) -> int:
        """How many more workers to call in (workers in all, this one
        included), counting them as called: one for each operation not
        taken yet beyond the one this thread takes next."""
        with self.lock:
            wanted = min(min(workers, self.limit) - 1 - self.helpers, len(self.items) - self.next - 1)
            if wanted <= 0:
                return 0
            self.helpers += wanted
            return wanted


# An operation that takes longer than this ran in C with the GIL released,
# so more threads on its batch make it go faster.
SLOW_OPERATION = 250e-6
# A thread that spent more than this part of its share of the cores on a
# batch computed (a copy from the page cache) rather than waited (a store,
# a disk), see WorkerPool._verdict.
COMPUTING = 0.5
SHARE_FLOOR = 0.25
# A thread that spent less than this part of its time on a core waited. One
# between the two is not counted either way: a computing thread on a
# machine that other processes keep busy gets less than its share (on 2
# cores with 2 busy loops beside, hashing threads spent 0.3 to 0.5 of
# their time on a core after half to nine tenths of their calls, where
# sleeping ones spend a hundredth: counted as waits, those lifted their
# batch's limit to the cores).
WAITED = 0.1
# How many slow calls of a batch must have computed before it is limited to
# the cores: one can mislead (a call that faulted its data's pages in took
# three times the CPU of the others, and a batch of calls that mostly
# waited went on 2 threads of 32, in about half the runs of its test). Nor
# can two when most of the batch's slow calls waited: a garbage collection
# or a page fault of a few milliseconds in two of 32 calls that sleep did
# that once in CI, and in each of 12 runs of a test that makes them.
COMPUTED_CALLS = 2
_UNLIMITED = 1 << 30
# A thread that lets go of the GIL gets it back within this when no other
# thread is running Python.
GIL_PROBE = 50e-6
# How long a probe's "the GIL is contended" holds for the batches after it
# (each probe is a hand-over of the GIL: on a busy loop, every batch would pay one).
GIL_VERDICT = 0.02
# For this long after a call that waited (for a store, a disk), a new
# batch calls in its helpers at once, as a fan-out's does, rather than
# after its first call proves slow: the calls of a loop iteration that
# follow completions on a slow store wait too. Measured with the memory
# plugin's 5 ms latency: 1000 reads, a task each through gather with 32 in
# flight, took 2.1-2.4 times the ideal (each batch of the calls started in
# one iteration waited 5 ms for its first call before the others began),
# and 1.3 times with this.
WAITS_LATELY = 0.02
# A worker hands finished work to the loop at least this often, so that no
# result waits behind more than this much of others' work; and at once
# after a call that took DELIVER_AT_ONCE or more, beside which a wake-up of
# the loop is small (a prefetch's first group of files, read in 0.8 ms,
# otherwise reached the loop only with the group read after it).
DELIVERY_INTERVAL = 1e-3
DELIVER_AT_ONCE = 100e-6
# A call running longer than this is treated as stuck: its batch-mates move
# to other threads and a spare thread starts.
STUCK_AFTER = 0.05
_MONITOR_PERIOD = 0.01
_SPARE_IDLE = 2.0  # seconds a spare thread waits for work before it leaves
# A call running this long is worth a warning in the log (asyncfs.pool):
# a plugin blocked, or a store that does not answer.
LONG_CALL = 30.0
NETWORK_IDLE = 30.0  # seconds a shared network pool's thread waits for work before it leaves
_CLOSED = "the Env is closed (close() or aclose() shut its worker pool down): make a new Env"


class _WorkerState:
    """What one worker thread is doing, for the monitor to see: the call it
    is inside (since when, in which batch) and what it finished but has not
    handed to the loop yet."""

    __slots__ = ("batch", "busy_since", "done", "lock", "stuck", "thread", "told_long", "work")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy_since = 0.0
        self.work: _Work | None = None
        self.batch: _Batch | None = None
        self.done: list[_Work] = []
        self.stuck = False
        self.told_long = False  # its call's LONG_CALL warning was logged
        self.thread: threading.Thread | None = None

    def take_done(self) -> list[_Work]:
        with self.lock:
            done, self.done = self.done, []
        return done


class _Counters:
    """What a loop's batcher counts (see :class:`PoolStats`); kept apart so
    that a gone loop's counts reach its pool with nothing else held."""

    __slots__ = ("operations", "peak_in_flight", "wakeups")

    def __init__(self) -> None:
        self.operations = 0
        self.wakeups = 0
        self.peak_in_flight = 0

    def add(self, other: _Counters) -> None:
        self.operations += other.operations
        self.wakeups += other.wakeups
        self.peak_in_flight = max(self.peak_in_flight, other.peak_in_flight)


class _Batcher:
    """Per-event-loop state: the operations of the current iteration and
    the in-flight count with the tasks waiting for room."""

    def __init__(self, pool: WorkerPool, backend: Backend) -> None:
        self.pool = pool
        self.backend = backend
        self.pending: list[_Work] = []
        self.unawaited: list[tuple[Callable[..., object], tuple[Any, ...]]] = []
        self.together: dict[Callable[[list[Any]], object], list[Any]] = {}  # see run_soon_together
        self.scheduled = False
        self.in_flight = 0
        self.counters = _Counters()
        # what waits for room, in order: tasks (their waiters, woken when a
        # slot frees) and side-effect-free work parked whole (submitted when
        # a slot frees, with no wake-up of its task in between)
        self.blocked: deque[Waiter | _Work] = deque()
        self.outbox: list[_Work] = []  # finished work on its way to the loop
        self.outbox_lock = threading.Lock()
        self.outbox_scheduled = False

    def take_slot(self, *, beyond_cap: bool = False) -> bool:
        """Count one more operation in flight, if there is room (always,
        beyond_cap: work that must never wait, a descriptor's close)."""
        if self.in_flight >= self.pool.max_in_flight and not beyond_cap:
            return False
        self.in_flight += 1
        counters = self.counters
        counters.peak_in_flight = max(counters.peak_in_flight, self.in_flight)
        return True

    def release_slots(self, count: int) -> None:
        """Operations finished: hand their slots to what waits for room."""
        self.in_flight -= count
        while self.blocked and self.in_flight < self.pool.max_in_flight:
            entry = self.blocked.popleft()
            self.in_flight += 1  # reserved for it
            if isinstance(entry, _Work):
                if entry.waiter.abandoned:  # its caller left before it started: nothing to run
                    self.in_flight -= 1
                else:
                    self.submit(entry)
            elif not self.backend.resolve(entry, None, None):
                self.in_flight -= 1
        counters = self.counters
        counters.peak_in_flight = max(counters.peak_in_flight, self.in_flight)

    def submit(self, work: _Work) -> None:
        self.pending.append(work)
        if not self.scheduled:
            self.scheduled = True
            self.backend.call_soon(self.flush)

    def run_soon(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        """Add fn(*args) to this iteration's calls that nobody waits for;
        they run together as one operation of the batch."""
        self.unawaited.append((fn, args))
        if not self.scheduled:
            self.scheduled = True
            self.backend.call_soon(self.flush)

    def run_soon_together(self, fn: Callable[[list[Any]], object], item: Any) -> None:
        """Add item to what fn is called with, once, among this iteration's
        calls that nobody waits for."""
        items = self.together.get(fn)
        if items is None:
            self.together[fn] = items = []
            self.run_soon(fn, (items,))
        items.append(item)

    def flush(self) -> None:
        if not self.pending and not self.unawaited:  # flushed already (read-ahead flushes at once)
            self.scheduled = False
            return
        batch, self.pending, self.scheduled = self.pending, [], False
        self.together = {}
        if any(work.combine is not None for work in batch):
            batch = _combine(batch)
        if self.unawaited:
            self.take_slot(beyond_cap=True)  # never waits: a close must not
            batch.append(_Work(_call_each, (self.unawaited,), self.backend.new_waiter(), None))
            self.unawaited = []
        self.pool.put(_Batch(batch, self.deliver_threadsafe))

    def deliver_threadsafe(self, chunk: list[_Work]) -> None:
        """Hand finished work to the loop (from a worker). Workers add to one
        outbox, and the loop is woken only when it has not been woken for
        the outbox already: however many workers deliver while the loop is
        busy, it wakes once for all of them."""
        with self.outbox_lock:
            self.outbox += chunk
            if self.outbox_scheduled:
                return
            self.outbox_scheduled = True
        try:
            self.backend.call_soon_threadsafe(self.deliver_outbox)
        except RuntimeError:  # the loop is closed: nobody will receive these
            with self.outbox_lock:
                orphans, self.outbox = self.outbox, []
            for work in orphans:
                work.release()

    def deliver_outbox(self) -> None:
        with self.outbox_lock:
            chunk, self.outbox, self.outbox_scheduled = self.outbox, [], False
        self.deliver(chunk)

    def deliver(self, chunk: list[_Work]) -> None:
        resolve = self.backend.resolve
        counters = self.counters
        counters.wakeups += 1
        counters.operations += len(chunk)
        passed = 0
        for work in chunk:
            passed += work.passed_slot
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
                self.pool.release_later(work)
        self.release_slots(len(chunk) - passed)


def _combine(batch: list[_Work]) -> list[_Work]:
    """batch with the works that share a combiner run together, at most its
    limit per call (one left alone runs as it is), in their first one's place."""
    together: dict[Combiner, list[_Work]] = {}
    for work in batch:
        if work.combine is not None:
            together.setdefault(work.combine, []).append(work)
    out: list[_Work] = []
    for work in batch:
        combine = work.combine
        if combine is None:
            out.append(work)
            continue
        members = together.pop(combine, None)
        if members is None:  # went with the first of its combiner
            continue
        limit = max(1, combine.limit)
        for start in range(0, len(members), limit):
            chunk = members[start : start + limit]
            out.append(chunk[0] if len(chunk) == 1 else _Work.combined(combine, chunk))
    return out


class _Jobs:
    """A pool's queue of batches, and how many of its threads wait on it
    now, counted under the lock each item is queued under: a thread that
    leaves after waiting idle seconds (see take) cannot leave behind an
    item that was counted on it. Beside the queue, the items and their
    numbers in order, so that the monitor can tell work that waited from
    work queued a moment ago, and a batch that still has work from one
    queued again for a helper after others drained it (see waited); two
    threads taking at once may drop each other's entry there, which leaves
    the count right."""

    __slots__ = ("_items", "_lock", "_number", "_queue", "_waiting")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0
        self._number = 0  # of the last item queued
        self._items: deque[tuple[int, Any]] = deque()  # (number, item), as queued: first in, first out

    def put(self, item: Any) -> int:
        """Queue item; answers how many queued items no waiting thread will take."""
        with self._lock:
            self._queue.put(item)
            self._number += 1
            self._items.append((self._number, item))
            return self._queue.qsize() - self._waiting

    def mark(self) -> int:
        """A mark of what is queued now, for :meth:`waited`."""
        with self._lock:
            return self._number

    def waited(self, mark: int) -> int:
        """How many more threads the batches queued before mark want, that
        no waiting thread will serve: a batch counts once for each time it
        was queued, up to the operations it has left (none, once others
        drained it)."""
        with self._lock:
            times: dict[_Batch, int] = {}
            for number, item in self._items:
                if number > mark:
                    break
                if isinstance(item, _Batch):
                    times[item] = times.get(item, 0) + 1
            wanted = sum(min(queued, batch.left()) for batch, queued in times.items())
            return max(0, wanted - self._waiting)

    def empty(self) -> bool:
        return self._queue.empty()

    def get_nowait(self) -> Any:
        item = self._queue.get_nowait()
        with self._lock:
            self._items.popleft()
        return item

    def take(self, idle: float | None) -> Any:
        """The next item, for a worker, counted as waiting meanwhile;
        _LEAVE once it waited idle seconds (None: forever) and nothing was
        queued since."""
        with self._lock:
            self._waiting += 1
        while True:
            try:
                item = self._queue.get(timeout=idle)
            except queue.Empty:
                with self._lock:
                    if not self._queue.empty():  # queued as it timed out, counting on this thread
                        continue
                    self._waiting -= 1
                return _LEAVE
            with self._lock:
                self._waiting -= 1
                self._items.popleft()
            return item


_LEAVE = object()  # what _Jobs.take answers a thread that waited long enough


# What a pool that was garbage-collected puts in its queue: each worker
# that takes it passes it on and leaves.
_GONE = object()


def _let_threads_go(jobs: _Jobs, active: threading.Event) -> None:
    jobs.put(_GONE)
    active.set()  # the monitor looks, finds no pool, and leaves


def _work_for(
    pool_ref: weakref.ref[WorkerPool],
    jobs: _Jobs,
    state: _WorkerState,
    idle: float | None,
    nice: int,
) -> None:
    """A worker thread: batches from jobs, run for the pool while it lives,
    leaving after idle seconds without one (None: never). It holds the
    pool only while running a batch (a queued batch holds it too, through
    its loop's batcher)."""
    if nice and hasattr(os, "setpriority"):
        # Linux nice values are per thread: the event loop keeps its
        # priority and gets a core first when both want one.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    clock = time.perf_counter
    try:
        while True:
            batch = jobs.take(idle)
            if batch is _LEAVE:
                return  # a spare no longer needed, or a worker idle for long
            if not isinstance(batch, _Batch):
                if batch is _GONE:
                    jobs.put(_GONE)
                return
            pool = pool_ref()
            if pool is None:
                return
            pool._drain(state, batch, clock)
            del batch, pool  # nothing of this batch, nor the pool, outlives it in an idle worker
    finally:
        pool = pool_ref()
        if pool is not None:
            with pool._lock:
                pool._states.remove(state)


def _watch_for(pool_ref: weakref.ref[WorkerPool], active: threading.Event) -> None:
    """The monitor thread: while work is in flight, every few milliseconds,
    one round of :meth:`WorkerPool._look`; it leaves when the pool is shut
    down or gone."""
    while True:
        active.wait()
        time.sleep(_MONITOR_PERIOD)
        pool = pool_ref()
        if pool is None or pool._closed:
            return
        pool._look()
        del pool


def _gil_contended(clock: Callable[[], float]) -> bool:
    """Whether another thread (the event loop's, most likely) is running
    Python now. A call that took long may have spent that time in C (a
    store's latency: more threads help) or waiting to get the GIL back
    while the loop ran Python (short calls on a busy loop: more threads
    only contend for the GIL, and each hand-over costs a context switch).
    Letting go of the GIL for nothing tells them apart: it comes back at
    once only when nobody else wants it."""
    start = clock()
    time.sleep(0)
    return clock() - start > GIL_PROBE


def call_quietly(fn: Callable[..., object], *args: Any) -> None:
    """fn(*args), dropping an error it raises (work nobody waits for)."""
    with contextlib.suppress(Exception):
        fn(*args)


def _call_each(calls: list[tuple[Callable[..., object], tuple[Any, ...]]]) -> None:
    for fn, args in calls:
        call_quietly(fn, *args)


def _unawaited(works: Iterable[_Work]) -> list[tuple[Callable[..., object], tuple[Any, ...]]]:
    """The calls nobody waits for (:meth:`WorkerPool.run_soon`) among works."""
    return [call for work in works if work.fn is _call_each for call in work.args[0]]


def _run_apart(calls: list[tuple[Callable[..., object], tuple[Any, ...]]]) -> None:
    """Run calls nobody waits for (a reader's close) on a thread of their
    own: the pool is shut down, and they must run all the same."""
    if calls:
        threading.Thread(target=_call_each, args=(calls,), name="asyncfs-release", daemon=True).start()


def _ignore(chunk: list[_Work]) -> None:
    del chunk


# Every pool of the process, so that a forked child can give each a fresh
# start (os.register_at_fork below): an Env made before a fork works in the
# child, on threads of its own.
_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def live_pools() -> list[WorkerPool]:
    """The process's worker pools (of every Env, and the shared network ones)."""
    return list(_pools)


_shared: dict[tuple[int, int], WorkerPool] = {}
_shared_lock = threading.Lock()


def _closed(loop: object) -> bool:
    """Whether an event loop is closed (asyncio's say; trio's runs are
    gone when closed, and their batchers with them)."""
    is_closed = getattr(loop, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


def closed_pool() -> WorkerPool:
    """A pool that is shut down: what a closed Env's filesystems hold in
    place of a shared pool, so their calls raise EnvClosedError."""
    pool = WorkerPool(1)
    pool.shutdown()
    return pool


def shared_network_pool(workers: int, max_in_flight: int) -> WorkerPool:
    """The process's network pool of this size: every Env with these
    settings runs its network stores' calls on it, so a process holds one
    set of network threads however many Envs (and fsspec filesystems with
    options of their own) it makes; they leave after NETWORK_IDLE seconds
    without work and come back with the next call."""
    key = (workers, max_in_flight)
    with _shared_lock:
        pool = _shared.get(key)
        if pool is None:
            pool = _shared[key] = WorkerPool(
                workers, max_in_flight=max_in_flight, worker_nice=0, network=True, idle_after=NETWORK_IDLE
            )
        return pool


def _reset_pools_in_child() -> None:
    for pool in list(_pools):
        pool._after_fork_in_child()


class Pending(Generic[T]):
    """Work started by :meth:`WorkerPool.submit`."""

    __slots__ = ("_backend", "_work")

    def __init__(self, work: _Work, backend: Backend) -> None:
        self._work = work
        self._backend = backend

    async def result(self) -> T:
        """Wait for the result (abandoned if the waiting task is cancelled)."""
        value: T = await self._backend.wait(self._work.waiter)
        return value


class WorkerPool:
    """Threads that run chunks of plugin calls for any number of loops."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        max_in_flight: int = 4096,
        worker_nice: int = 0,
        max_threads: int | None = None,
        network: bool = False,
        idle_after: float | None = None,
    ) -> None:
        """network: its calls wait on a network; a thread's share of the
        cores then says nothing about what more threads would gain (on a
        loopback gateway, the client computes while the server waits), so
        its batches are never limited to the cores; and as its calls wait
        on the store's engine (one thread for every transfer), a thread
        finishing its call takes the next batch sooner than a new one would
        start, so while one of its batches drains, more threads start only
        for work that waited (see WorkerPool._offer). idle_after: seconds a
        worker waits for work before it leaves (None: it stays); the next
        work starts threads again."""
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.workers = workers or default_workers()
        self.cores = available_cores()
        self.network = network
        self.max_threads = max(self.workers, max_threads if max_threads is not None else max(64, 4 * self.workers))
        self.max_in_flight = max_in_flight
        self.worker_nice = worker_nice
        self.idle_after = idle_after
        self._queue = _Jobs()
        self._looked = 0  # the queue's mark at the monitor's last look
        self._states: list[_WorkerState] = []
        self._lock = threading.Lock()
        self._closed = False
        self._active = threading.Event()  # wakes the monitor
        self._draining = 0  # batches workers are running now
        self._monitor: threading.Thread | None = None
        self._batchers: weakref.WeakKeyDictionary[object, _Batcher] = weakref.WeakKeyDictionary()
        self._last: tuple[weakref.ref[object], _Batcher] | None = None  # the loop asked for last, held weakly
        self._retired = _Counters()  # of the loops that are gone
        self._counted: list[tuple[weakref.ref[object], _Counters]] = []  # each live loop's, held past its batcher
        self._gil_bound_until = 0.0  # till then, slow calls are taken to be GIL waits (see _gil_contended)
        self._waits_until = 0.0  # till then, new batches call in helpers at once (see WAITS_LATELY)
        _pools.add(self)

    def _after_fork_in_child(self) -> None:
        """A forked child has none of the parent's threads, and the parent's
        locks may have been held when it forked: start over, empty. The
        child's loops are new, so no batcher carries over; work the parent
        had in flight is the parent's."""
        self._queue = _Jobs()
        self._looked = 0
        self._states = []
        self._lock = threading.Lock()
        self._active = threading.Event()
        self._draining = 0
        self._monitor = None
        self._batchers = weakref.WeakKeyDictionary()
        self._last = None

    @property
    def threads(self) -> int:
        """Worker threads now, spares for stuck calls included."""
        with self._lock:
            return len(self._states)

    def put(self, batch: _Batch) -> None:
        if self._closed:  # work that waited for room while the pool shut down
            _run_apart(_unawaited(batch.items))
            _fail(batch, [done for work in batch.items for done in work.delivered()], "it waited for room")
            return
        if self._monitor is None:
            self._start()
        self._offer(batch)  # the worker that takes it wakes the monitor (_drain)

    def _offer(self, batch: _Batch, *, start: bool = True) -> None:
        """Queue batch for a worker, starting a thread if none is free to
        take it, up to ``workers``. A call for one more helper on a batch
        (start=False) starts none: if no thread comes free for it before the
        monitor's next look, the monitor starts one, if the batch still has
        work then (a thread started at once for a helper came, on a store's
        short calls, after its batch was drained, and stayed idle). A
        network pool with a batch draining starts none either: the monitor
        starts one for a batch still untaken a whole look after it was
        queued (with 64 GETs in flight on a loopback Ceph gateway, threads
        started at once for batches that a finishing call was about to
        take made 5 to 7 workers where 4 did the same work as fast)."""
        if self._queue.put(batch) > 0 and start:
            with self._lock:
                # (a network pool's: only while no batch drains, as then the
                # monitor, which looks while any does, may not be looking)
                if not self._closed and len(self._states) < self.workers and not (self.network and self._draining):
                    self._spawn(spare=False)

    def release_later(self, work: _Work) -> None:
        """Release what work holds on a worker (on a thread of its own once
        the pool is shut down): never on the loop, never leaked."""
        if self._closed:
            threading.Thread(target=work.release, name="asyncfs-release", daemon=True).start()
        else:
            self.put(_Batch([_Work(work.release, (), Waiter(None), None)], _ignore))

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise EnvClosedError(_CLOSED)
            if self._monitor is not None:
                return
            self._monitor = threading.Thread(
                target=_watch_for, args=(weakref.ref(self), self._active), name="asyncfs-monitor", daemon=True
            )
            self._monitor.start()
            # The threads hold the pool weakly, as concurrent.futures' do: a
            # pool (an Env) dropped without close lets them go.
            weakref.finalize(self, _let_threads_go, self._queue, self._active).atexit = False

    def _spawn(self, *, spare: bool) -> None:
        """Start a worker thread (with self._lock held)."""
        state = _WorkerState()
        name = f"asyncfs-{'spare' if spare else 'worker'}-{len(self._states)}"
        idle = _SPARE_IDLE if spare else self.idle_after
        args = (weakref.ref(self), self._queue, state, idle, self.worker_nice)
        state.thread = threading.Thread(target=_work_for, args=args, name=name, daemon=True)
        self._states.append(state)
        state.thread.start()

    def _drain(self, state: _WorkerState, batch: _Batch, clock: Callable[[], float]) -> None:
        with self._lock:
            self._draining += 1
        self._active.set()  # after the count: the monitor cannot miss this batch
        try:
            self._run_batch(state, batch, clock)
        finally:
            with self._lock:
                self._draining -= 1

    def _run_batch(self, state: _WorkerState, batch: _Batch, clock: Callable[[], float]) -> None:
        if batch.eager or clock() < self._waits_until:
            for _ in range(batch.helpers_wanted(self.workers)):
                self._offer(batch, start=False)
        batch.join()
        delivered = began = clock()
        cpu_began = time.thread_time()
        while (work := batch.take()) is not None:
            start = clock()
            with state.lock:
                state.work, state.batch, state.busy_since = work, batch, start
            alone = work.run()
            if work.follow is not None and not self._closed and (after := work.followed()) is not None:
                alone = [*alone, after]
            end = clock()
            with state.lock:
                state.work, state.busy_since, state.told_long = None, 0.0, False
                for done in work.delivered():
                    if work.orphaned:  # given up at shutdown: its caller was told already
                        done.release()
                    else:
                        state.done.append(done)
                if state.stuck:  # it came back: the monitor started a spare for it
                    state.stuck = False
                    batch.join()  # the monitor had counted it out of the batch's threads
            if alone:
                batch.add(alone)
            if end - start > SLOW_OPERATION:
                self._on_slow(batch, began, cpu_began, end, clock, took=end - start)
            if end - delivered >= DELIVERY_INTERVAL or end - start >= DELIVER_AT_ONCE:
                self._hand_over(state, batch)
                delivered = end
        self._hand_over(state, batch)
        with state.lock:
            state.batch = None

    def _verdict(self, batch: _Batch, cpu: float, wall: float) -> Verdict:
        """Whether a thread of batch that spent cpu seconds on a core in
        wall seconds computed (copies from the page cache: its share of the
        cores, all of one when there are no more threads than cores) or
        waited (a store, a disk: a few percent), or is not clearly either
        (see WAITED). The share counted on is at least SHARE_FLOOR: with
        many more threads than cores, a computing thread's share is as
        small as a waiting one's time on a core (32 threads of 5 ms sleeps
        and some Python were once taken for computing, and went on 2
        threads), so such a batch is not limited."""
        if cpu > COMPUTING * wall * max(SHARE_FLOOR, min(1.0, self.cores / max(1, batch.running))):
            return "computed"
        return "waited" if cpu < WAITED * wall else "unclear"

    def _on_slow(
        self, batch: _Batch, began: float, cpu_began: float, end: float, clock: Callable[[], float], *, took: float
    ) -> None:
        """An operation of batch was slow: it took took seconds (this thread
        has drained batch since began on the clock, and since cpu_began on
        its CPU clock). If
        the thread computed meanwhile (C copying from the page cache), the
        batch gets as many threads as there are cores, and while most of
        its slow calls computed, two at least, no more (see COMPUTED_CALLS),
        except on the network pool: more would only take turns on them (on 2 cores, 4 threads
        reading small files made three times the context switches and read
        a fifth slower). If it waited, for the GIL (short calls on a busy
        loop) it stays where it is; for anything else (a store's latency, a
        disk) it gets all the workers, a limit to the cores lifted once as
        many of its slow calls waited as computed. A call that took longer
        than the switch interval did not wait for one hand-over of the GIL
        (a thread that wants it asks for it after that long): it waited in
        C. Shorter ones are told apart by a probe (see _gil_contended), which
        cannot tell the loop from other workers wanting the GIL: 32 calls
        that each sleep 5 ms in C, ending together, were taken for
        GIL-bound, and went on one thread."""
        verdict = "waited" if self.network else self._verdict(batch, time.thread_time() - cpu_began, end - began)
        lifted = batch.judge_slow_call(verdict, self.cores)
        if verdict == "computed":
            threads = self.cores
        elif lifted:
            threads = self.workers  # the threads that left for the limit come back
        elif took < sys.getswitchinterval() and (batch.gil_bound or self._gil_bound(batch, end, clock)):
            return
        else:
            threads = self.workers
            self._waits_until = end + WAITS_LATELY
        for _ in range(batch.helpers_wanted(threads)):
            self._offer(batch, start=False)

    def _gil_bound(self, batch: _Batch, end: float, clock: Callable[[], float]) -> bool:
        """Whether a short slow call of batch, which ended at end, waited for
        the GIL; if so, the batch stays on its thread, and so do the batches
        of the next GIL_VERDICT seconds."""
        if end < self._gil_bound_until or _gil_contended(clock):
            batch.gil_bound = True
            self._gil_bound_until = clock() + GIL_VERDICT  # the batches that follow need no probe
            return True
        return False

    @staticmethod
    def _hand_over(state: _WorkerState, batch: _Batch) -> None:
        done = state.take_done()
        if done:
            batch.deliver(done)

    def _look(self) -> None:
        """One round of the monitor (see :func:`_watch_for`): find workers
        stuck in one call and keep the rest of the pool going."""
        now = time.perf_counter()
        with self._lock:
            states = list(self._states)
        stuck = 0
        for state in states:
            with state.lock:
                since, batch = state.busy_since, state.batch
                if since == 0.0 or now - since < STUCK_AFTER:
                    continue
                stuck += 1
                newly = not state.stuck
                state.stuck = True
                work = state.work
                long_now = now - since >= LONG_CALL and not state.told_long
                state.told_long |= long_now
            level = logging.WARNING if long_now else logging.DEBUG
            if (newly or long_now) and _log.isEnabledFor(level):
                _log.log(
                    level,
                    "a plugin call has run for %.1f s on %s: %s%s",
                    now - since,
                    state.thread.name if state.thread is not None else "a worker",
                    work.describe() if work is not None else "(between calls)",
                    "" if long_now else "; the calls queued behind it move to other threads",
                )
            # what it finished before the call that hangs goes out now
            if batch is not None:
                self._hand_over(state, batch)
                if newly:
                    batch.step_aside()  # so that a thread limit leaves room for the one that takes over
                    if batch.left():
                        self._queue.put(batch)  # its batch-mates go to other threads
        # work that waits with no thread free to take it (in a network pool,
        # work queued before the last look): a worker each, up to `workers`,
        # and past them a spare each while workers are stuck
        mark = self._queue.mark()
        untaken = self._queue.waited(self._looked if self.network else mark)
        self._looked = mark
        with self._lock:
            while (
                untaken > 0
                and not self._closed
                and len(self._states) - stuck < self.workers
                and len(self._states) < self.max_threads
            ):
                spare = len(self._states) >= self.workers
                self._spawn(spare=spare)
                untaken -= 1
                if spare:
                    _log.debug("started a spare thread: %d threads, %d in a long call", len(self._states), stuck)
        if self._idle():
            self._active.clear()
            if not self._idle():  # work came meanwhile: look again
                self._active.set()

    def _idle(self) -> bool:
        with self._lock:
            return self._draining == 0 and self._queue.empty()

    def batcher(self) -> _Batcher:
        """This event loop's batcher (made on the loop's first operation).
        Neither holds the loop: when it is gone, so is its batcher (its
        counters stay in :meth:`stats`)."""
        loop = current_loop()
        last = self._last  # a program runs one loop: found here, with no weak dictionary's lookup per call
        if last is not None and last[0]() is loop:
            return last[1]
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self, backend_for(loop))
            self._count(loop, batcher.counters)
        self._last = (weakref.ref(loop), batcher)
        return batcher

    def _count(self, loop: object, counters: _Counters) -> None:
        """Keep a new loop's counts, which outlive its batcher, and fold
        those of the loops that are gone into one. Nothing is left on the
        loop: one that lives on serves many pools (an Env made per
        request), and must keep neither them nor anything of theirs."""
        with self._lock:
            counted = [(weakref.ref(loop), counters)]
            for loop_ref, kept in self._counted:
                if loop_ref() is None:
                    self._retired.add(kept)
                else:
                    counted.append((loop_ref, kept))
            self._counted = counted

    async def _wait_for_room(self, batcher: _Batcher) -> None:
        """Wait for an in-flight slot (the cap is reached: take_slot said no)."""
        room = batcher.backend.new_waiter()
        batcher.blocked.append(room)
        try:
            await batcher.backend.wait(room)
        except BaseException:
            if room.delivered:  # a slot was reserved for us: give it back
                batcher.release_slots(1)
            raise

    def check_open(self) -> None:
        """Raise EnvClosedError once the pool (its Env) is closed."""
        if self._closed:
            raise EnvClosedError(_CLOSED)

    async def run(
        self, fn: Callable[..., T], *args: Any, mutating: bool, discard: Any = None, combine: Combiner | None = None
    ) -> T:
        """Run fn(*args) on a worker and return its result.

        ``mutating`` work is shielded: a cancelled caller waits for it to
        finish, then sees the cancellation. Other work may be abandoned; if
        it produced something that must be released (``discard`` is given),
        ``discard(result)`` runs on a worker. Work given a ``combine`` runs
        through it together with the other calls that name it in this loop
        iteration (see :class:`Combiner`); mutating ones stay shielded.
        """
        self.check_open()
        batcher = self.batcher()
        backend = batcher.backend
        waiter = backend.new_waiter(shielded=mutating)
        work = _Work(fn, args, waiter, discard)
        work.combine = combine
        if batcher.take_slot():
            batcher.submit(work)
        elif mutating:  # waits for room first: cancelled meanwhile, it never starts
            await self._wait_for_room(batcher)
            batcher.submit(work)
        else:  # parked: it starts when there is room, unless its caller has left by then
            batcher.blocked.append(work)
        try:
            result: T = await backend.wait(waiter)
        except BaseException:
            if waiter.delivered and discard is not None and work.error is None:
                # The result came, but its task was cancelled before it could
                # take it (cancelled in the same loop turn, or shielded work
                # whose cancellation is raised once it is done): release it.
                self.release_later(work)
            raise
        return result

    def submit(self, fn: Callable[..., T], *args: Any, discard: Any = None) -> Pending[T] | None:
        """Start side-effect-free fn(*args) on a worker without waiting for it
        (read-ahead). Returns None when the in-flight cap leaves no room."""
        self.check_open()
        batcher = self.batcher()
        if not batcher.take_slot():
            return None
        work = _Work(fn, args, batcher.backend.new_waiter(), discard)
        batcher.submit(work)
        batcher.flush()  # now: the caller goes on computing, and the loop may not turn until it needs the result
        return Pending(work, batcher.backend)

    def run_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Run fn(*args) on a worker, in this loop iteration's batch, with
        nobody waiting for it: closing a descriptor that was only read,
        whose close has nothing to report. Never waits for room; an error
        it raises is dropped. Once the pool is shut down, or when it shuts
        down before the batch leaves, it runs on a thread of its own: a
        release is never refused, nor left to the garbage collector."""
        if self._closed:
            _run_apart([(fn, args)])
            return
        self.batcher().run_soon(fn, args)

    def run_soon_together(self, fn: Callable[[list[Any]], object], item: Any) -> None:
        """:meth:`run_soon` of fn(items), once for every item given for fn in
        this loop iteration (descriptors to close in one C call)."""
        if self._closed:
            _run_apart([(fn, ([item],))])
            return
        self.batcher().run_soon_together(fn, item)

    def sink(self, on_drop: OnDrop | None = None) -> Sink:
        """A sink for this event loop (see :meth:`submit_to` and :class:`Sink`)."""
        return Sink(self.batcher().backend, on_drop)

    async def submit_to(
        self, sink: Sink, tag: Any, fn: Callable[..., Any], *args: Any, follow: Follow | None = None
    ) -> None:
        """Start side-effect-free fn(*args) on a worker; its (tag, result,
        error) goes to sink when done. Waits for room under the in-flight
        cap. follow, if given, may start the next call on the same worker
        once this one succeeded (see _Work.followed)."""
        self.check_open()
        batcher = self.batcher()
        if not batcher.take_slot():
            await self._wait_for_room(batcher)
        work = _Work(fn, args, batcher.backend.new_waiter(), None)
        work.sink = sink
        work.tag = tag
        work.follow = follow
        batcher.submit(work)

    async def run_many(
        self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], *, mutating: bool
    ) -> list[T | Exception]:
        """Run fn(*args) for every args in calls, concurrently and without a
        task or a waiter per call; results come back in order, exceptions in
        place. Calls go in windows of at most max_in_flight, each window
        awaited as one group, so any number of calls holds bounded work."""
        self.check_open()
        batcher = self.batcher()
        backend = batcher.backend
        results: list[T | Exception] = []
        for start in range(0, len(calls), self.max_in_flight):
            window = calls[start : start + self.max_in_flight]
            group = _Group(backend.new_waiter(shielded=mutating), len(window))
            works: list[_Work] = []
            try:
                for args in window:
                    if not batcher.take_slot():
                        await self._wait_for_room(batcher)
                    work = _Work(fn, args, group.waiter, None, group)
                    batcher.submit(work)
                    works.append(work)
                await backend.wait(group.waiter)
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
        """Counters summed over the loops this pool has served (calls in
        flight: of the loops still open; a closed loop's never come back to
        it, and the pool, shared by Envs, outlives it)."""
        batchers = [b for loop, b in list(self._batchers.items()) if not _closed(loop)]
        total = _Counters()
        with self._lock:
            total.add(self._retired)
            for _loop, counters in self._counted:
                total.add(counters)
            states = list(self._states)
        running = [state for state in states if state.busy_since]  # (a glance: no state's lock)
        return PoolStats(
            operations=total.operations,
            wakeups=total.wakeups,
            in_flight=sum(b.in_flight for b in batchers),
            peak_in_flight=total.peak_in_flight,
            threads=len(states),
            running=len(running),
            stuck=sum(state.stuck for state in running),
        )

    def shutdown(self, *, wait: bool = True, timeout: float | None = None) -> list[str]:
        """Stop the threads after the work already queued. With wait, wait
        for them, at most timeout seconds (None: as long as it takes). Calls
        still running then are abandoned on their daemon threads: their
        callers get :class:`UnavailableError`, an
        :class:`AbandonedOperationWarning` names each, and their
        descriptions are returned."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            states = list(self._states)
        self._active.set()  # the monitor sees _closed and leaves
        for _ in states:
            self._queue.put(None)
        if not wait:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        for state in states:
            if state.thread is not None:
                state.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._abandon(state for state in states if state.thread is not None and state.thread.is_alive())

    def _abandon(self, states: Iterable[_WorkerState]) -> list[str]:
        abandoned: list[str] = []
        for state in states:
            with state.lock:
                work, batch = state.work, state.batch
                if work is None or batch is None:
                    continue
                work.orphaned = True
            self._hand_over(state, batch)  # what it finished before it hung
            abandoned.append(work.describe())
            _fail(batch, work.delivered(), "this call was blocked in its plugin; it may still complete")
        # batches no free thread took: all threads hung
        while True:
            try:
                queued = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(queued, _Batch):
                rest = queued.rest()
                _run_apart(_unawaited(rest))
                works = [done for work in rest for done in work.delivered()]
                _fail(queued, works, "no worker thread was free to run this call")
        if abandoned:
            _log.warning("left %d blocked plugin call(s) running at shutdown: %s", len(abandoned), ", ".join(abandoned))
            warnings.warn(
                AbandonedOperationWarning(
                    f"{len(abandoned)} plugin call(s) were still blocked at shutdown and are left running on "
                    f"daemon threads: {', '.join(abandoned)}"
                ),
                stacklevel=3,
            )
        return abandoned


def _fail(batch: _Batch, works: list[_Work], why: str) -> None:
    """Tell the callers of works that the pool gave them up at shutdown."""
    failed = []
    for work in works:
        orphan = _Work(work.fn, (), work.waiter, None, work.group)
        orphan.sink, orphan.tag = work.sink, work.tag
        if work.fn is not _call_each:  # calls nobody waits for have nobody to tell (see _run_apart)
            orphan.error = UnavailableError(f"abandoned: the Env closed; {why}", op=work.describe())
        failed.append(orphan)
    if failed:
        batch.deliver(failed)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pools_in_child)
