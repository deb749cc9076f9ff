"""Concurrent dataset prefetch::

    async for path, data in env.prefetch(uris, in_flight=32, max_bytes=256 << 20):
        train_on(data)

Reads many files with at most ``in_flight`` reads at a time and at most
``max_bytes`` of file data held at once (read and not yet handed over, or
being read), in the order given (``ordered=True``) or as they complete.
A file's size is learned before its bytes are kept: one that does not fit
the budget waits until earlier ones are consumed (the next file due in order
is always admitted, so ordered delivery cannot stall; the budget can then be
exceeded by that one file). A small file costs one read request (its bytes
land in a per-worker scratch buffer and are copied out); a larger one, a
size request and a read.

On a local filesystem (not a network store) the files go to the workers in
groups: one call into C reads a whole group into the scratch buffer
(``ModularFileSystem.read_files``), its bytes are reserved in the budget
at once, and the group comes back to the event loop as one item, so the
per-file cost is a few microseconds of C, not a trip through the pool. On
a network store whose plugin reads many files at once (``read_files``: s3
keeps all of a call's requests in flight from one thread), a call carries
a share of ``in_flight`` files; on one without it, each file is its own
call, so that many wait at once.

A failing file raises when its turn comes (``errors="raise"``) or is
delivered as ``(path, exception)`` (``errors="deliver"``). Cancelling or
leaving the loop abandons every read in flight; nothing leaks.

With ``records=True`` the files are TFRecord files and the items are their
records, interleaved from ``cycle_length`` files at a time.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

from .._sync import ModularFileSystem, scratch
from .._uri import all_start_with, scheme_part
from ..errors import InvalidArgumentError, StatusError, UnknownSchemeError
from .lines import Handover
from .streams import Opener
from .tfrecord import TFRecordReader, _compression

if TYPE_CHECKING:
    from typing_extensions import Self

    from .._async import AsyncModularFileSystem, Sink

__all__ = ["Budget", "Prefetch", "PrefetchRecords", "Resolver", "prefetch", "prefetch_records"]


class Resolver(Protocol):
    """What maps a URI to its filesystem: an :class:`~asyncfs.Env`."""

    def filesystem(self, uri: str) -> AsyncModularFileSystem: ...


class Budget:
    """Bytes held by a prefetch, shared with the workers that read for it.
    A prefetch gives back the bytes of the files its consumer is done with
    in runs (see Prefetch._give_freed), and a group read whole when the
    consumer is done with its last file (see RUN_SHARE), so ``used`` may
    still count up to a 32nd of the limit that the consumer let go; never
    less than it holds.

    What it counts belongs to one process: a copy pickled to another
    process (a Dask or spawned DataLoader worker), and the Budget in a
    forked child, start with nothing used, the same limit, and a lock of
    their own (the parent's reads, and a lock one of its threads held at
    the fork, are not the child's)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.head = -1  # the index due next (in order): always admitted
        self._lock = threading.Lock()
        _budgets.add(self)

    def __reduce__(self) -> tuple[type[Budget], tuple[int]]:
        return (type(self), (self.limit,))

    def _start_afresh(self) -> None:
        self._lock = threading.Lock()
        self.used = self.peak = 0
        self.head = -1

    def reserve(self, index: int, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit and index != self.head and self.used > 0:
                return False
            self.used += size
            self.peak = max(self.peak, self.used)
            return True

    def hold(self, size: int) -> None:
        """Count size bytes that cannot be refused: read already, and not
        to be read again (a pipe's)."""
        with self._lock:
            self.used += size
            self.peak = max(self.peak, self.used)

    def reserve_group(self, indices: list[int], sizes: list[int]) -> int:
        """Reserve for files in order, under one lock, as :meth:`reserve`
        would one by one; stops at the first that does not fit and returns
        how many were admitted."""
        with self._lock:
            admitted = 0
            for index, size in zip(indices, sizes, strict=True):
                if self.used + size > self.limit and index != self.head and self.used > 0:
                    break
                self.used += size
                admitted += 1
            self.peak = max(self.peak, self.used)
            return admitted

    def reserve_all(self, size: int) -> bool:
        """Reserve size bytes for files that fit the budget together, all
        or none: whether they did (:meth:`reserve_group` decides file by
        file otherwise)."""
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            self.peak = max(self.peak, self.used)
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self.used -= size


_budgets: weakref.WeakSet[Budget] = weakref.WeakSet()


def _budgets_afresh_in_child() -> None:
    for budget in list(_budgets):
        budget._start_afresh()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_budgets_afresh_in_child)


_DEFERRED = object()


def _read(fs: ModularFileSystem, uri: str, budget: Budget, index: int, scratch_size: int) -> object:
    """A file on its own: its bytes, or _DEFERRED when the budget has no
    room. What was reserved for it and not kept (the read failed, or the
    file shrank between its size and its read) goes back to the budget."""
    reserved = 0

    def reserve(size: int, must: bool) -> bool:
        nonlocal reserved
        if must:
            budget.hold(size)
            admitted = True
        else:
            admitted = budget.reserve(index, size)
        reserved = size if admitted else 0
        return admitted

    try:
        data = fs.read_small_first(uri, scratch(scratch_size), reserve)
    except BaseException:
        budget.release(reserved)
        raise
    if data is None:
        return _DEFERRED
    if len(data) < reserved:
        budget.release(reserved - len(data))
    return data


def _reads_in_bulk(fs: ModularFileSystem) -> bool:
    """Whether many files per call into C pays: always on a local
    filesystem (the runtime reads them one after another), and on a network
    store whose plugin reads them all at once (``read_files``)."""
    return not fs.metadata.network or fs.offers("read_files")


def _read_group(
    fs: ModularFileSystem, uris: list[str], indices: Sequence[int], budget: Budget, scratch_size: int
) -> tuple[list[object], float]:
    """Each file's bytes, StatusError or _DEFERRED, in order, and the
    seconds it took: as many files at a time as fit the scratch buffer, in
    one call into C (``ModularFileSystem.read_files``), their bytes
    reserved together; a file that did not fit, or any file where bulk
    reads do not pay (a network store without ``read_files``: each file is
    its own request anyway), on its own."""
    seconds = 0.0
    items: list[object] = []
    batch: list[object] = []
    bulk = _reads_in_bulk(fs)
    try:
        while len(items) < len(uris):
            start = len(items)
            batch = [None]  # None: on its own
            if bulk:
                try:
                    read, took = fs.read_files(uris[start:], scratch(scratch_size))
                except InvalidArgumentError:  # a path no plugin may be handed: each its own answer, on its own
                    bulk = False
                else:
                    seconds += took
                    sizes = [len(item) for item in read if isinstance(item, bytes)]
                    # the usual case, reserved at once: all read (no failure, none left for
                    # later), and all fit
                    if len(sizes) == len(read) and budget.reserve_all(sum(sizes)):
                        items += read
                        continue
                    kept = [(i, len(item)) for i, item in enumerate(read) if isinstance(item, bytes)]
                    admitted = budget.reserve_group([indices[start + i] for i, _ in kept], [size for _, size in kept])
                    batch = list(read)
                    for i, _ in kept[admitted:]:
                        batch[i] = _DEFERRED  # read again when there is room
            for i, item in enumerate(batch):
                if item is None:
                    started = time.perf_counter()
                    try:
                        batch[i] = _read(fs, uris[start + i], budget, indices[start + i], scratch_size)
                    except StatusError as error:
                        batch[i] = error
                    seconds += time.perf_counter() - started
            items += batch
            batch = []
    except BaseException:  # none of it reaches the prefetch: what was reserved for it goes back
        budget.release(_size(items) + _size(batch))
        raise
    return items, seconds


def _size(items: list[object]) -> int:
    """The bytes reserved for the files among items (bytes, and runs of
    them; not errors, nor _DEFERRED)."""
    size = 0
    for item in items:
        if type(item) is bytes:
            size += len(item)
        elif type(item) is _Run:
            size += item.size
    return size


def _give_back(budget: Budget, tag: object, result: tuple[list[object], float] | None, error: object) -> None:
    """A group read after its prefetch was closed: its bytes go back to the
    budget (a Sink's on_drop)."""
    if result is not None and error is None:
        budget.release(_size(result[0]))


def _follow_weakly(
    prefetch: weakref.ref[Prefetch],
    fs: AsyncModularFileSystem,
    started: _Started,
    result: tuple[list[object], float],
) -> tuple[_Started, tuple[object, ...]] | None:
    """Prefetch._follow, while the prefetch lives."""
    alive = prefetch()
    return None if alive is None else alive._follow(fs, started, result)


def _one_scheme(paths: list[str]) -> bool:
    """Whether every path has the first one's scheme_part: checked over
    them joined, in C, in the usual cases (plain paths; URIs of one scheme),
    path by path otherwise."""
    joined = "\0".join(paths)
    if paths:
        scheme = scheme_part(paths[0])
        if scheme:  # each starts with the same "scheme://" (none has a "://" before it)
            if all_start_with(joined, len(paths), f"{scheme}://"):
                return True
        elif ":" not in joined or "://" not in joined:  # plain paths (a search for one character is a memchr)
            return True
    return len({scheme_part(path) for path in paths}) <= 1


# A group's size on a local filesystem: about GROUP_SECONDS of reading
# (enough to make the trip through the pool cheap per file, short enough
# that files which wait on a disk or a mount are not read one after
# another), at most GROUP_MAX files, and at most a core's share of the
# prefetch (files from the page cache keep a core busy). Within that, a
# share that leaves GROUPS_PER_CORE groups to each core, so that both stay
# busy to the end, unless such groups would be shorter than
# GROUP_SECONDS_LEAST. The files are cut into equal groups of that size at
# most, so the last ones are not a tail of small groups, each a trip
# through the pool. The first group, before anything was measured, has
# GROUP_FIRST files.
#
# Each trip costs the pool's wake-ups and a turn of the loop. With groups
# of 1 ms (at most 128 files), a prefetch of 20,000 files of 1 KiB from the
# page cache made 1,300-1,500 voluntary context switches and read at 1.6
# to 2.1 times the synchronous loop; with these, 200-360 switches and 2.0
# to 2.7 times (medians of 9, old and new in alternating processes,
# 2026-11-27: docs/benchmarks.md).
GROUP_SECONDS = 4e-3
GROUP_SECONDS_LEAST = 1e-3
GROUP_MAX = 512
GROUPS_PER_CORE = 8
GROUP_FIRST = 4
# The time per file each local filesystem's last prefetch measured: the
# next one starts with groups of the right size instead of GROUP_FIRST.
_LATELY: weakref.WeakKeyDictionary[ModularFileSystem, float] = weakref.WeakKeyDictionary()
# On a network store whose plugin reads many files at once, a call carries
# in_flight / NETWORK_SHARES files, so that that many calls overlap and a
# slow request holds back only its own call's share.
NETWORK_SHARES = 4


# A group read whole (every file's bytes, of consecutive indices) is handed
# over as one run, with no step of Python per file, when its bytes are at
# most a RUN_SHARE-th of the budget (they are given back when the consumer
# is done with the last of them).
RUN_SHARE = 64


class _Run:
    """The files of a group that were all read, at consecutive indices, and
    their bytes together (see Prefetch._handing_over)."""

    __slots__ = ("items", "size")

    def __init__(self, items: list[bytes], size: int) -> None:
        self.items = items
        self.size = size


def _count(fs: AsyncModularFileSystem, items: Sequence[object], sizes: list[int], seconds: float) -> None:
    """A group's files in the Env's metrics, as the operation ``prefetch``:
    each its bytes (sizes: those of the files read) or its error, and its
    share of the group's time on the worker (a file the budget deferred is
    counted when it is read again)."""
    share = int(seconds * 1e9 / max(1, len(items)))
    if sizes:  # (the files read, in one count: a file costs about 2 µs here, and a count each 0.3)
        fs.counted("prefetch", share, sum(sizes), calls=len(sizes))
    if len(sizes) < len(items):
        for item in items:
            if isinstance(item, BaseException):
                fs.counted("prefetch", share, error=item)


class _Started:
    """A group of a prefetch in flight: its files' indices, the slots of
    in_flight it holds, and whether the group its worker read next holds
    them now (see Prefetch._follow)."""

    __slots__ = ("followed", "fs", "indices", "slots")

    def __init__(self, fs: AsyncModularFileSystem, indices: Sequence[int], slots: int) -> None:
        self.fs = fs  # whose metrics count its files
        self.indices = indices
        self.slots = slots
        self.followed = False


class _Items(ABC):
    """An async iterator that needs no finalizing on the event loop: leaving
    the loop early (break, an exception, a cancellation) drops the work in
    flight at once or when the iterator is collected. ``aclose()`` and
    ``async with`` are there for code that wants it explicit."""

    _built = False  # set last in __init__: one that refused its arguments has nothing to close

    def __aiter__(self) -> AsyncIterator[tuple[str, bytes | Exception]]:
        return self

    @abstractmethod
    def __anext__(self) -> Awaitable[tuple[str, bytes | Exception]]: ...

    @abstractmethod
    def close(self) -> None:
        """Drop what is in flight; safe to call more than once."""

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if self._built:
            self.close()


class Prefetch(_Items):
    """Whole files; see :func:`prefetch`."""

    def __init__(
        self,
        resolver: Resolver,
        uris: Iterable[str],
        *,
        in_flight: int,
        max_bytes: int,
        ordered: bool,
        errors: str,
        scratch_size: int,
        budget: Budget | None,
    ) -> None:
        if in_flight < 1 or max_bytes < 1:
            raise InvalidArgumentError("in_flight and max_bytes must be positive")
        if errors not in ("raise", "deliver"):
            raise InvalidArgumentError(f"errors must be 'raise' or 'deliver', not {errors!r}")
        self._resolver = resolver
        self._paths = list(uris)
        self._in_flight = in_flight
        self._ordered = ordered
        self._errors = errors
        self._scratch_size = scratch_size
        self.budget = budget if budget is not None else Budget(max_bytes)
        self.budget.head = 0 if ordered else -1  # out of order, only an empty budget admits a refused file
        self._sink: Sink | None = None
        self._one_scheme = _one_scheme(self._paths)  # then any run of them is one filesystem's
        self._fresh = 0  # the files from this index on were never started
        self._refused: list[int] = []  # wait for room in the budget
        self._retrying: list[int] = []  # a heap of refused files to start again, lower indices first
        self._due: dict[int, object] = {}  # read, by index (in order); a _Run by its first
        self._done: deque[tuple[int, object]] = deque()  # read, as they came (out of order)
        self._next_due = 0  # the index delivered next, in order
        self._rest: Iterator[tuple[str, bytes]] | None = None  # a run's files not handed over yet
        self._arrived = 0  # files read or failed (not deferred), handed over or not
        # groups started and not arrived; a worker starts some too (see _follow),
        # and a group can arrive before the one whose worker started it
        self._reading = 0
        self._slots = 0  # in_flight used: a file each on a network store, a call each on a local one
        self._delivered = 0
        self._held = 0  # bytes of the item (or run) last handed over, freed when the consumer is back
        # bytes the consumer is done with, given back to the budget together: when a
        # run of ready files has been handed over, when they reach a 64th of the
        # budget, or when a refused file waits for room (a lock each file cost 0.2 µs)
        self._freed = 0
        self._per_file: float | None = None  # seconds a worker took per file, lately
        self._measured: ModularFileSystem | None = None  # whose time per file that is (the first file's)
        # _fresh moves on a worker too: one that read a local group reads the next (see _follow)
        self._lock = threading.Lock()
        self._built = True

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()  # reads still running are dropped (see _give_back); they hold no handle
        with self._lock:
            self._fresh = len(self._paths)
            self._retrying.clear()
        self._refused.clear()
        # what was read and not handed over, and the file the consumer had, go back to the budget
        unclaimed = [*self._due.values(), *(item for _, item in self._done)]
        self._due.clear()
        self._done.clear()
        self._rest = None  # (its bytes are _held)
        held, self._held = self._held + self._freed, 0
        self._freed = 0
        self.budget.release(held + _size(unclaimed))

    def _retry(self) -> None:
        with self._lock:
            for index in self._refused:
                heapq.heappush(self._retrying, index)
        self._refused.clear()

    def __aiter__(self) -> Handover[tuple[str, bytes | Exception]]:
        """``async for path, data in ...``: the files ready are handed over
        from :meth:`_handing_over` by a :class:`._lines.Handover`, with no
        coroutine step each; :meth:`_next` waits for the next ones."""
        return Handover(self._next)

    def __anext__(self) -> Awaitable[tuple[str, bytes | Exception]]:
        return self._next(None)

    async def _next(self, handover: Handover[tuple[str, bytes | Exception]] | None) -> tuple[str, bytes | Exception]:
        """The next file, once those handed over before are gone: starts
        reads and waits for them until one is ready; the files ready after
        it become handover.ahead (a run's, the rest of the run)."""
        while True:
            rest = self._rest
            if rest is not None:  # (held here too: a loop left midway leaves them to the next)
                for file in rest:
                    if handover is not None:
                        handover.ahead = rest
                    return file
                self._rest = None
            ready = self._handing_over()
            for item in ready:
                if handover is not None:
                    handover.ahead = ready
                return item
            if self._rest is not None:  # a run is next
                continue
            if self._delivered == len(self._paths):
                self.close()
                raise StopAsyncIteration
            if not self._reading:
                # nothing in flight will free room: retry what was refused, which
                # admits the file due next (in order) or finds the budget empty
                self._retry()
            while self._slots < self._in_flight and self._startable():
                await self._start_group()
            if self._ready_now():  # a path refused before any read
                continue
            if not self._reading:
                raise RuntimeError(f"prefetch stalled with {len(self._paths) - self._delivered} files left")
            assert self._sink is not None
            started, result, error = await self._sink.next()
            indices = started.indices
            with self._lock:
                self._reading -= 1
            if not started.followed:  # else the group read next on its worker took its place
                self._slots -= started.slots
            if error is None:
                items, seconds = result
                self._per_file = (
                    seconds / len(indices)
                    if self._per_file is None
                    else (0.7 * self._per_file + 0.3 * seconds / len(indices))
                )
                if self._measured is not None:
                    _LATELY[self._measured] = self._per_file
            else:
                items, seconds = [error] * len(indices), 0.0
            sizes = [len(item) for item in items if type(item) is bytes]
            _count(started.fs, items, sizes, seconds)
            self._arrive(indices, items, sum(sizes) if len(sizes) == len(items) else -1)

    def _handing_over(self) -> Iterator[tuple[str, bytes | Exception]]:
        """The files ready now, as they are due (in order, or as they came):
        asking for each frees the one handed over before it, whose consumer
        is back for more. A failed file raises (errors="raise": the prefetch
        closes) or is handed over as (path, exception). It stops before a
        run, which becomes self._rest: its files are handed over with no
        step of this generator each, and freed together when the consumer
        asks for the file after its last."""
        ordered = self._ordered
        while True:
            if self._held:
                self._freed += self._held
                self._held = 0
                if self._refused or self._freed * 64 >= self.budget.limit:
                    self._give_freed()
            if ordered:
                # only now may the next file pass the budget: the one handed over
                # is released, so at most one file is ever held beyond the limit
                index = self.budget.head = self._next_due
                item = self._due.pop(index, None)
                if item is None:
                    self._give_freed()
                    return
                self._next_due = index + 1
            elif self._done:
                index, item = self._done.popleft()
            else:
                self._give_freed()
                return
            if type(item) is _Run:
                count = len(item.items)
                if ordered:
                    self._next_due = index + count
                self._delivered += count
                self._held = item.size
                self._rest = zip(self._paths[index : index + count], item.items, strict=True)
                return
            self._delivered += 1
            path = self._paths[index]
            if type(item) is bytes:
                self._held = len(item)
                yield path, item
                continue
            assert isinstance(item, BaseException)
            if self._errors == "raise" or not isinstance(item, Exception):
                self.close()
                raise item
            yield path, item

    def _give_freed(self) -> None:
        """The bytes of the files the consumer is done with, back to the
        budget; the files it refused meanwhile are started again."""
        freed, self._freed = self._freed, 0
        if freed:
            self.budget.release(freed)
            if self._refused:
                self._retry()

    def _arrive(self, indices: Sequence[int], items: list[object], size: int = -1) -> None:
        """Files read (bytes) or failed (an exception): ready to hand over;
        those the budget refused (_DEFERRED) wait for room. size: the bytes
        of all of them when all were read (-1 otherwise), for a run."""
        if size >= 0 and type(indices) is range and len(items) > 1 and size * RUN_SHARE <= self.budget.limit:
            run = _Run(items, size)  # type: ignore[arg-type]  # (all bytes: size says so)
            self._arrived += len(items)
            if self._ordered:
                self._due[indices.start] = run
            else:
                self._done.append((indices.start, run))
            return
        for index, item in zip(indices, items, strict=True):
            if item is _DEFERRED:
                self._refused.append(index)
                continue
            self._arrived += 1
            if self._ordered:
                self._due[index] = item
            else:
                self._done.append((index, item))

    def _ready_now(self) -> bool:
        """Whether a file is ready to hand over."""
        return self._next_due in self._due if self._ordered else bool(self._done)

    def _startable(self) -> int:
        """How many files are left to start."""
        return len(self._retrying) + len(self._paths) - self._fresh

    async def _start_group(self) -> None:
        """Start the lowest startable file, if one is left (a worker may
        have started the last ones meanwhile: see _follow), with the next
        ones on the same filesystem (as many as _group_size says)."""
        with self._lock:
            if not self._startable():
                return
            first = self._retrying[0] if self._retrying else self._fresh
            try:
                fs = self._resolver.filesystem(self._paths[first])
            except (StatusError, UnknownSchemeError) as error:  # a path no plugin may be handed: its own answer
                self._take_group(first, 1)
                self._arrive([first], [error])
                return
            if self._sink is None:
                # (on_drop holds the budget, not self: the iterator must not be kept
                # alive by its own reads, or leaving a loop would not close it)
                self._sink = fs.sink(partial(_give_back, self.budget))
                self._measured = fs.wrapped
                self._per_file = _LATELY.get(fs.wrapped)
            group, paths = self._take_group(first, self._group_size(fs))
            self._reading += 1
        started = _Started(fs, group, len(group) if fs.network else 1)
        # (held weakly, as on_drop: a prefetch left by its consumer is closed when
        # collected, and must not be kept alive by the reads that go on by themselves)
        follow = None if fs.network or not self._one_scheme else partial(_follow_weakly, weakref.ref(self), fs)
        await fs.run_into(
            self._sink, started, _read_group, fs.wrapped, paths, group, self.budget, self._scratch_size, follow=follow
        )
        self._slots += started.slots

    def _follow(
        self, fs: AsyncModularFileSystem, started: _Started, result: tuple[list[object], float]
    ) -> tuple[_Started, tuple[object, ...]] | None:
        """On the worker that read a group from a local filesystem: the
        next group, which it reads next in the group's place (its slot of
        in_flight), with no trip through the loop in between; or None, and
        the loop starts what comes next. None when the budget refused a file
        of the group (the loop paces reads until the consumer frees room),
        when files wait to be read again, when no fresh file is left, or
        when in_flight groups' worth of files wait for the consumer: one
        that stopped asking (busy, or gone with the iterator still held)
        gets no more read ahead than the loop would start for it.
        Each trip through the loop cost the worker about 1 ms of a 5 ms
        read on a slow store, and a wake-up of 150-350 µs on this machine
        between groups of the page cache's files (docs/benchmarks.md)."""
        assert self._sink is not None  # made before the first group started
        # groups read and not taken from the sink, files taken and not handed over
        # (the loop's: a length is safe to read here)
        waiting = len(self._sink) * len(started.indices) + self._arrived - self._delivered
        if (
            waiting >= self._in_flight * len(started.indices)
            or self._refused
            or any(item is _DEFERRED for item in result[0])
        ):
            return None
        with self._lock:
            first = self._fresh
            if self._retrying or first >= len(self._paths):
                return None
            group, paths = self._take_group(first, self._group_size(fs))
            self._reading += 1
        started.followed = True
        return _Started(fs, group, 1), (fs.wrapped, paths, group, self.budget, self._scratch_size)

    def _group_size(self, fs: AsyncModularFileSystem) -> int:
        """How many files one call on fs reads: on a local filesystem, an
        equal share of what is left, about GROUP_SECONDS of reading each; on
        a network store that reads many files at once, a NETWORK_SHARES-th
        of in_flight; otherwise one."""
        if not fs.network:
            count, cores = len(self._paths), fs.cores
            share = -(-count // cores)  # a core's
            if self._per_file is None:
                most = min(GROUP_FIRST, share)
            else:
                per_file = max(self._per_file, 1e-9)
                spread = max(-(-count // (cores * GROUPS_PER_CORE)), int(GROUP_SECONDS_LEAST / per_file))
                most = min(GROUP_MAX, int(GROUP_SECONDS / per_file), spread, share)
            most = max(1, most)
            left = self._startable()
            return -(-left // -(-left // most))  # equal groups of at most that many: no small ones at the end
        if _reads_in_bulk(fs.wrapped):
            return min(-(-self._in_flight // NETWORK_SHARES), self._in_flight - self._slots)
        return 1

    def _take_group(self, first: int, size: int) -> tuple[Sequence[int], list[str]]:
        """Up to size startable files from first on, all of first's scheme
        (the same scheme is the same filesystem; each path is checked in full
        where it is read), now started: their indices and paths."""
        scheme = scheme_part(self._paths[first])
        if self._retrying:  # files the budget refused: now and then, one by one
            group = [heapq.heappop(self._retrying)]
            while len(group) < size and self._retrying and scheme_part(self._paths[self._retrying[0]]) == scheme:
                group.append(heapq.heappop(self._retrying))
            return group, [self._paths[i] for i in group]
        # the next ones never started: a run of the list
        end = min(first + size, len(self._paths))
        if not self._one_scheme:
            end = next((i for i in range(first + 1, end) if scheme_part(self._paths[i]) != scheme), end)
        self._fresh = end
        return range(first, end), self._paths[first:end]


def prefetch(
    resolver: Resolver,
    uris: Iterable[str],
    *,
    in_flight: int = 32,
    max_bytes: int = 256 << 20,
    ordered: bool = True,
    errors: str = "raise",
    scratch_size: int = 1 << 20,
    budget: Budget | None = None,
) -> Prefetch:
    """(path, data) for every path in uris; see the module's documentation.
    Pass a :class:`Budget` to watch its ``peak``."""
    return Prefetch(
        resolver,
        uris,
        in_flight=in_flight,
        max_bytes=max_bytes,
        ordered=ordered,
        errors=errors,
        scratch_size=scratch_size,
        budget=budget,
    )


class PrefetchRecords(_Items):
    """TFRecord records of many files, interleaved; see :func:`prefetch_records`."""

    def __init__(
        self,
        opener: Opener,
        uris: Iterable[str],
        *,
        cycle_length: int,
        compression: str | None,
        errors: str,
        max_bytes: int,
        skip_corrupt: bool,
    ) -> None:
        if cycle_length < 1:
            raise InvalidArgumentError("cycle_length must be positive")
        if errors not in ("raise", "deliver"):
            raise InvalidArgumentError(f"errors must be 'raise' or 'deliver', not {errors!r}")
        self._opener = opener
        self._queue = deque(uris)
        self._cycle = cycle_length
        self._compression = _compression(compression)
        self._errors = errors
        self._skip_corrupt = skip_corrupt
        self._block = max(4096, min(1 << 20, max_bytes // (cycle_length * 3)))
        self._open: deque[tuple[str, TFRecordReader]] = deque()
        self._built = True

    def close(self) -> None:
        # a stream's file is closed when it is collected, after any read ahead
        self._queue.clear()
        self._open.clear()

    async def aclose(self) -> None:
        while self._open:
            await self._open.popleft()[1].stream.close()
        self.close()

    async def __anext__(self) -> tuple[str, bytes | Exception]:
        while self._queue or self._open:
            while self._queue and len(self._open) < self._cycle:
                path = self._queue.popleft()
                try:
                    stream = await self._opener.open(path, "rb", compression=self._compression, block_size=self._block)
                except StatusError as exc:
                    if self._errors == "raise":
                        raise
                    return path, exc
                self._open.append((path, TFRecordReader(stream, skip_corrupt=self._skip_corrupt)))
            path, records = self._open.popleft()
            try:
                record = await records.read()
            except StatusError as exc:
                await records.stream.close()
                if self._errors == "raise":
                    raise
                return path, exc
            if record is None:
                await records.stream.close()
                continue
            self._open.append((path, records))
            return path, record
        raise StopAsyncIteration


def prefetch_records(
    opener: Opener,
    uris: Iterable[str],
    *,
    cycle_length: int = 4,
    compression: str | None = "infer",
    errors: str = "raise",
    max_bytes: int = 64 << 20,
    skip_corrupt: bool = False,
) -> PrefetchRecords:
    """(path, record) for every TFRecord record of every file, taking one
    record from each of cycle_length open files in turn. Each open file
    buffers at most max_bytes / cycle_length bytes, read ahead."""
    return PrefetchRecords(
        opener,
        uris,
        cycle_length=cycle_length,
        compression=compression,
        errors=errors,
        max_bytes=max_bytes,
        skip_corrupt=skip_corrupt,
    )
