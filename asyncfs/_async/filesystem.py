"""The async face of one plugin filesystem: :class:`AsyncModularFileSystem`.

Every method runs the matching :class:`~asyncfs.ModularFileSystem` call on
the Env's worker pool, with the same results and errors. Cancellation:

- side-effect-free calls (reads, stat, exists, listings, glob) may be
  abandoned: a cancelled caller returns at once and the result is dropped;
- mutating calls (writes, appends, creates, deletes, renames, copies,
  configuration changes, closes) are shielded: a cancelled caller waits for
  the call to finish, then sees the cancellation;
- a call that opens a handle closes it itself when its caller was cancelled
  before receiving it, so no handle ever leaks.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from functools import partial
from time import perf_counter_ns
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from anyio.lowlevel import checkpoint

from .._native import Option, OptionValue, refuse_text
from .._sync import (
    EntryKind,
    FileStatistics,
    IncompleteWrite,
    ModularFileSystem,
    RandomAccessFile,
    ReadOnlyMemoryRegion,
    WritableFile,
    by_statistics,
    write_whole,
)
from .._sync import plans as _plans
from ..errors import FailedPreconditionError, StatusError
from . import fanout as _fanout
from . import plans as _driver
from .combined import Combiners
from .metrics import Meter
from .pool import Combiner, Follow, OnDrop, Pending, Sink, WorkerPool
from .telemetry import Watch, carried_context, watch
from .telemetry import imported as otel_imported

if TYPE_CHECKING:
    from typing_extensions import Buffer, Self
else:
    Buffer = object
    Self = object

T = TypeVar("T")

__all__ = [
    "AsyncModularFileSystem",
    "AsyncRandomAccessFile",
    "AsyncReadOnlyMemoryRegion",
    "AsyncWritableFile",
]

# What the plugin holds at hand (a cached local file, mem://) is read on the
# loop's thread: a small file's read_file (ModularFileSystem.read_file_if_ready),
# a stream's blocks. No worker is woken and waited for (2,000 cached 4 KiB
# files read one after another: 83-90 µs a file on workers, 12.8 µs so). Such
# reads never wait, but they take the loop's time: after every AT_HAND_TURN
# bytes read so by one task, each call counted as at least AT_HAND_CALL, the
# loop's other tasks get a turn (turn_due). Each task counts its own (in a
# context variable, which each task has a copy of): many tasks that each
# make a call in one iteration of the loop would not let it poll any sooner
# by giving turns, only queue behind each other (under gather and a
# semaphore, a task per stat of 10,000 cached paths took 15.8-16.1 µs a
# path with one count per filesystem, and 13.7-14.9 with one per task: a
# task that gave a turn kept its slot of the semaphore, the others queued).
AT_HAND_TURN = 1 << 20
AT_HAND_CALL = 16 << 10
_since_turn: ContextVar[int] = ContextVar("asyncfs_at_hand_since_turn", default=0)


def _close(handle: RandomAccessFile | WritableFile | ReadOnlyMemoryRegion) -> None:
    handle.close()


class _AsyncHandle:
    def __init__(self, handle: Any, pool: WorkerPool) -> None:
        self.wrapped = handle
        self._pool = pool

    @property
    def uri(self) -> str:
        return str(self.wrapped.uri)

    @property
    def closed(self) -> bool:
        return bool(self.wrapped.closed)

    async def close(self) -> None:
        await self._pool.run(self.wrapped.close, mutating=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncRandomAccessFile(_AsyncHandle):
    wrapped: RandomAccessFile

    async def read(self, offset: int, n: int, *, strict: bool = False) -> bytes:
        return await self._pool.run(partial(self.wrapped.read, strict=strict), offset, n, mutating=False)

    async def read_into(self, offset: int, buffer: Buffer, *, strict: bool = False) -> int:
        # shielded: the buffer is the caller's, and a read it gave up on must
        # not go on writing into it
        return await self._pool.run(partial(self.wrapped.read_into, strict=strict), offset, buffer, mutating=True)


class AsyncWritableFile(_AsyncHandle):
    wrapped: WritableFile

    async def append(self, data: Buffer) -> None:
        await self._pool.run(self.wrapped.append, data, mutating=True)

    async def tell(self) -> int:
        return await self._pool.run(self.wrapped.tell, mutating=False)

    async def flush(self) -> None:
        await self._pool.run(self.wrapped.flush, mutating=True)

    async def sync(self) -> None:
        """Make what was appended durable (the plugin's Sync: fsync on posix)."""
        await self._pool.run(self.wrapped.sync, mutating=True)


class AsyncReadOnlyMemoryRegion(_AsyncHandle):
    wrapped: ReadOnlyMemoryRegion

    @property
    def data(self) -> memoryview:
        return self.wrapped.data

    def __len__(self) -> int:
        return len(self.wrapped)


class AsyncModularFileSystem:
    """One scheme's filesystem, async. Get it from :meth:`Env.filesystem`."""

    def __init__(self, fs: ModularFileSystem, pool: WorkerPool, meter: Meter | None = None) -> None:
        """meter: where its calls are counted (its Env's, for its scheme;
        None counts nothing, see :mod:`.metrics`)."""
        self.wrapped = fs
        self._pool = pool
        self._meter = meter
        self._combined = Combiners(fs)
        # read_file reads a small file at hand on the loop's thread when the
        # plugin can (see AT_HAND_TURN); a network store never has it at hand
        self._reads_at_hand = not fs.metadata.network and fs.offers("new_random_access_file_if_ready")
        self._stats_at_hand = not fs.metadata.network and fs.offers("stat_if_ready")  # stat, exists, isdir, size

    @property
    def scheme(self) -> str:
        """The URI scheme served (``""`` for bare paths)."""
        return self.wrapped.scheme

    def __repr__(self) -> str:
        return f"<AsyncModularFileSystem {self.scheme!r} from {self.wrapped.metadata.name}>"

    @property
    def network(self) -> bool:
        """Whether its calls wait on a network (the plugin's
        ASYNCFS_PLUGIN_NETWORK flag): they run on the Env's network pool."""
        return self.wrapped.metadata.network

    # ---- composing sync calls: the one way in for the layers above ----------
    #
    # Streams, transactions, prefetch, TFRecord, the Env and the CLI compose
    # several calls of :attr:`wrapped` into one plain function and hand it to
    # one of these: one round trip to the pool instead of one per call, and
    # the pool stays this layer's own (docs/architecture.md).

    async def run(
        self, fn: Callable[..., T], *args: Any, mutating: bool, discard: Callable[[T], Any] | None = None
    ) -> T:
        """Run ``fn(*args)`` on the worker pool and return its result.

        ``mutating=True`` shields the call from cancellation (the caller
        waits for it, then sees the cancellation); a side-effect-free one may
        be abandoned, and if its result holds something to release (an open
        handle), ``discard(result)`` then runs on a worker."""
        return await self._pool.run(carried_context(fn), *args, mutating=mutating, discard=discard)

    async def run_many(
        self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], *, mutating: bool
    ) -> list[T | Exception]:
        """``fn(*args)`` for every args in calls, spread over the workers as
        one batch; results in order, each a value or the exception raised."""
        return await self._pool.run_many(fn, calls, mutating=mutating)

    def run_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on a worker with nobody waiting for it: the
        release of a handle that was only read, which has nothing to
        report. It never waits for room and is never leaked (see
        :meth:`asyncfs._async.pool.WorkerPool.run_soon`)."""
        self._pool.run_soon(fn, *args)

    def start(self, fn: Callable[..., T], *args: Any) -> Pending[T] | None:
        """Start side-effect-free ``fn(*args)`` now and await its
        :meth:`~asyncfs._async.pool.Pending.result` later (read-ahead); None when
        the in-flight cap leaves no room."""
        return self._pool.submit(fn, *args)

    def sink(self, on_drop: OnDrop | None = None) -> Sink:
        """A fan-in for :meth:`run_into`, on the running event loop. Any
        filesystem of the same Env may deliver into it. on_drop receives
        ``(tag, result, error)`` of work that finishes after the sink is
        closed, or is still in it then (from any thread): to release what
        it holds."""
        return self._pool.sink(on_drop)

    async def run_into(
        self, sink: Sink, tag: Any, fn: Callable[..., Any], *args: Any, follow: Follow | None = None
    ) -> None:
        """Start side-effect-free ``fn(*args)``; ``(tag, result, error)``
        arrives in sink when it is done, in the order calls finish. Waits
        for room under the in-flight cap. ``follow(tag, result)``, called on
        the worker once the call succeeded, may answer the ``(tag, args)`` of
        the next call of fn, which that worker then runs in its place."""
        await self._pool.submit_to(sink, tag, fn, *args, follow=follow)

    @property
    def workers(self) -> int:
        """How many calls its pool runs at once."""
        return self._pool.workers

    @property
    def cores(self) -> int:
        """How many cores its pool's threads may run on."""
        return self._pool.cores

    # ---- the operations' one way to the pool: each call watched ------------

    async def _call(
        self,
        operation: str,
        fn: Callable[..., T],
        *args: Any,
        mutating: bool,
        moved: Callable[[T], int] | int = 0,
        discard: Callable[[T], Any] | None = None,
        combine: Combiner | None = None,
        at_hand: Callable[..., T | None] | None = None,
    ) -> T:
        """fn(*args) on the pool as operation: counted in the Env's meter
        (moved: the bytes it moved, or how to count them in its result) and
        seen by OpenTelemetry when the application uses it (see
        :mod:`.telemetry`). at_hand, if given, is the same call made only
        from what the plugin holds at hand, tried first on the loop's thread
        (see AT_HAND_TURN): its None sends the call to the pool, and its
        answer counts towards the task's next turn as the bytes it moved."""
        seen = (
            watch(self.wrapped.scheme, operation, args[0] if args else None, network=self.network)
            if otel_imported()
            else None
        )
        meter = self._meter
        if meter is None and seen is None and at_hand is None:
            return await self._pool.run(fn, *args, mutating=mutating, discard=discard, combine=combine)
        start = perf_counter_ns()
        try:
            result = None
            if at_hand is not None:
                self._pool.check_open()
                if self.turn_due():
                    await checkpoint()
                result = at_hand(*args)
            if result is None:
                at_hand = None
                result = await self._pool.run(
                    fn if seen is None else seen.carry(fn), *args, mutating=mutating, discard=discard, combine=combine
                )
        except BaseException as error:
            if at_hand is not None:  # (an error known at hand took the loop's time too)
                self.took_at_hand(0)
            self._failed(operation, start, error, seen)
            raise
        nbytes = moved if isinstance(moved, int) else moved(result)
        if at_hand is not None:
            self.took_at_hand(nbytes)
        self._done(operation, start, nbytes, seen)
        return result

    def counted(
        self,
        operation: str,
        elapsed_ns: int | None,
        nbytes: int = 0,
        error: BaseException | None = None,
        calls: int = 1,
    ) -> None:
        """Count in the Env's metrics what a layer above did with calls of
        its own composing (see :meth:`run`): calls of operation that took
        elapsed_ns each and moved nbytes together, or one that failed with
        error; with elapsed_ns None, only nbytes more moved by the
        operation's calls (a stream's bytes, counted with its open when it
        closes)."""
        if self._meter is None:
            return
        if elapsed_ns is None:
            self._meter[operation].bytes += nbytes
        else:
            self._meter[operation].add(elapsed_ns, nbytes, error, calls)

    def _done(self, operation: str, start: int, nbytes: int, seen: Watch | None) -> None:
        if self._meter is not None:
            self._meter[operation].record(start, nbytes)
        if seen is not None:
            seen.done(nbytes)

    def _failed(self, operation: str, start: int, error: BaseException, seen: Watch | None) -> None:
        if self._meter is not None:
            self._meter[operation].failed(start, error)
        if seen is not None:
            seen.failed(error)

    async def _read(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        return await self._call(operation, fn, *args, mutating=False)

    async def _mutate(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        return await self._call(operation, fn, *args, mutating=True)

    async def _planned(self, operation: str, plan: _plans.Plan[T], uri: str) -> T:
        """A plan of several calls (see :mod:`.plans`), counted and seen as one operation."""
        seen = watch(self.wrapped.scheme, operation, uri, network=self.network) if otel_imported() else None
        start = perf_counter_ns()
        try:
            result = await _driver.run(self, plan)
        except BaseException as error:
            self._failed(operation, start, error, seen)
            raise
        self._done(operation, start, 0, seen)
        return result

    # ---- the sync adapter's operations, one to one --------------------------

    async def translate_name(self, uri: str) -> str:
        return await self._read("translate_name", self.wrapped.translate_name, uri)

    async def new_random_access_file(self, uri: str) -> AsyncRandomAccessFile:
        handle = await self._call(
            "new_random_access_file", self.wrapped.new_random_access_file, uri, mutating=False, discard=_close
        )
        return AsyncRandomAccessFile(handle, self._pool)

    async def new_writable_file(self, uri: str, *, attributes: Mapping[str, str] | None = None) -> AsyncWritableFile:
        handle = await self._call(
            "new_writable_file", partial(self.wrapped.new_writable_file, attributes=attributes), uri, mutating=True
        )
        return AsyncWritableFile(handle, self._pool)

    async def new_appendable_file(self, uri: str) -> AsyncWritableFile:
        handle = await self._call("new_appendable_file", self.wrapped.new_appendable_file, uri, mutating=True)
        return AsyncWritableFile(handle, self._pool)

    async def new_read_only_memory_region_from_file(self, uri: str) -> AsyncReadOnlyMemoryRegion:
        region = await self._call(
            "new_read_only_memory_region_from_file",
            self.wrapped.new_read_only_memory_region_from_file,
            uri,
            mutating=False,
            discard=_close,
        )
        return AsyncReadOnlyMemoryRegion(region, self._pool)

    async def create_dir(self, uri: str) -> None:
        await self._mutate("create_dir", self.wrapped.create_dir, uri)

    async def recursively_create_dir(self, uri: str) -> None:
        await self._mutate("recursively_create_dir", self.wrapped.recursively_create_dir, uri)

    async def delete_file(self, uri: str) -> None:
        await self._mutate("delete_file", self.wrapped.delete_file, uri)

    async def delete_dir(self, uri: str) -> None:
        await self._mutate("delete_dir", self.wrapped.delete_dir, uri)

    async def delete_recursively(self, uri: str) -> tuple[int, int]:
        if self.wrapped.offers("delete_recursively"):
            return await self._mutate("delete_recursively", self.wrapped.delete_recursively, uri)
        return await self._planned("delete_recursively", _plans.delete_tree(uri), uri)

    async def rename_file(self, src: str, dst: str) -> None:
        await self._mutate("rename_file", self.wrapped.rename_file, src, dst)

    async def rename_dir(self, src: str, dst: str) -> None:
        if self.wrapped.offers("rename_dir"):
            await self._mutate("rename_dir", self.wrapped.rename_dir, src, dst)
        else:
            await self._planned("rename_dir", _plans.move_tree(src, dst), src)

    async def copy_file(self, src: str, dst: str) -> None:
        await self._mutate("copy_file", self.wrapped.copy_file, src, dst)

    async def path_exists(self, uri: str) -> None:
        await self._read("path_exists", self.wrapped.path_exists, uri)

    async def paths_exist(self, uris: Sequence[str]) -> list[StatusError | None]:
        return await self._in_chunks(self.wrapped.paths_exist, uris)

    async def files_exist(self, uris: Sequence[str]) -> list[bool]:
        """Whether each uri exists: chunks of the list, each one batch
        plugin call, run in parallel."""
        return await self._in_chunks(self.wrapped.files_exist, uris)

    async def stat_files(self, uris: Sequence[str]) -> list[FileStatistics | StatusError]:
        """:meth:`stat` of each uri, a failure as that uri's entry: chunks
        of the list, each one batch plugin call, run in parallel."""
        return await self._in_chunks(self.wrapped.stat_files, uris)

    async def _in_chunks(self, fn: Callable[[list[str]], list[T]], uris: Sequence[str]) -> list[T]:
        """fn (a call for many paths, answering one item per path) over
        uris in chunks run in parallel on the pool; the items in order."""
        chunks = _fanout.chunked(list(uris), self.workers)
        parts = await self.run_many(fn, [(c,) for c in chunks], mutating=False)
        return [item for part in _fanout.unwrap(parts) for item in part]

    async def stat(self, uri: str) -> FileStatistics:
        at_hand = self.wrapped.stat_if_ready if self._stats_at_hand else None
        return await self._call(
            "stat", self.wrapped.stat, uri, mutating=False, combine=self._combined.stat, at_hand=at_hand
        )

    async def is_directory(self, uri: str) -> bool:
        return await self._read("is_directory", self.wrapped.is_directory, uri)

    async def get_file_size(self, uri: str) -> int:
        at_hand = self.wrapped.size_if_ready if self._stats_at_hand else None
        return await self._call("get_file_size", self.wrapped.get_file_size, uri, mutating=False, at_hand=at_hand)

    async def get_children(self, uri: str) -> list[str]:
        return await self._read("get_children", self.wrapped.get_children, uri)

    async def get_children_stats(self, uri: str) -> list[tuple[str, FileStatistics]]:
        """As :meth:`ModularFileSystem.get_children_stats`; without the op,
        the children's stats run in parallel on the pool."""
        if self.wrapped.offers("get_children_stats"):
            return await self._read("get_children_stats", self.wrapped.get_children_stats, uri)
        return await self._planned("get_children_stats", _plans.children_stats(uri), uri)

    async def get_children_kinds(self, uri: str) -> list[tuple[str, FileStatistics, EntryKind]]:
        """As :meth:`ModularFileSystem.get_children_kinds`; without the op,
        as :meth:`get_children_stats` (a plugin without it has no links)."""
        if self.wrapped.offers("get_children_kinds"):
            return await self._read("get_children_kinds", self.wrapped.get_children_kinds, uri)
        return by_statistics(await self.get_children_stats(uri))

    async def incomplete_writes(self, uri: str) -> list[IncompleteWrite]:
        return await self._read("incomplete_writes", self.wrapped.incomplete_writes, uri)

    async def abort_incomplete_write(self, uri: str, id: str) -> None:
        await self._mutate("abort_incomplete_write", self.wrapped.abort_incomplete_write, uri, id)

    async def get_matching_paths(self, pattern: str) -> list[str]:
        """Glob, expanding directory levels concurrently (see
        :func:`asyncfs._sync.plans.glob`); equal to the sync result."""
        native = self.wrapped.offers("get_matching_paths")
        return await self._planned("get_matching_paths", _plans.glob(pattern, native=native), pattern)

    async def flush_caches(self) -> None:
        await self._mutate("flush_caches", self.wrapped.flush_caches)

    async def configuration(self) -> list[Option]:
        return await self._read("configuration", self.wrapped.configuration)

    async def configuration_keys(self) -> list[str]:
        return await self._read("configuration_keys", self.wrapped.configuration_keys)

    async def get_option(self, key: str) -> Option:
        return await self._read("get_option", self.wrapped.get_option, key)

    async def set_option(self, name: str, *values: OptionValue | str, travels: bool | None = None) -> None:
        """As :meth:`ModularFileSystem.set_option`, on a worker."""
        await self._mutate("set_option", partial(self.wrapped.set_option, travels=travels), name, *values)

    async def set_configuration(self, options: list[Option], *, travels: bool | None = None) -> None:
        await self._mutate("set_configuration", partial(self.wrapped.set_configuration, travels=travels), options)

    # ---- whole-file and Pythonic operations ---------------------------------

    async def read_file(self, uri: str) -> bytes:
        combine = self._combined.read_file  # (a network store's: none has reads at hand)
        if combine is not None and combine.paused > 0:  # objects bigger than a share, lately
            combine.paused -= 1
            combine = None
        at_hand = self.wrapped.read_file_if_ready if self._reads_at_hand else None
        return await self._call(
            "read_file", self.wrapped.read_file, uri, mutating=False, moved=len, combine=combine, at_hand=at_hand
        )

    def turn_due(self) -> bool:
        """Before a read at hand (on the loop's thread, see AT_HAND_TURN):
        whether the loop's other tasks get a turn first (the caller awaits
        ``anyio.lowlevel.checkpoint()``), as they would while a worker read:
        once AT_HAND_TURN bytes were read so by the calling task. A plain
        method, not a coroutine: it runs before every small read."""
        if _since_turn.get() < AT_HAND_TURN:
            return False
        _since_turn.set(0)
        return True

    def took_at_hand(self, count: int) -> None:
        """After a read at hand of count bytes: it counts towards the calling
        task's next turn (as at least AT_HAND_CALL: each call takes the
        loop's time)."""
        _since_turn.set(_since_turn.get() + (count if count > AT_HAND_CALL else AT_HAND_CALL))

    async def read_into(self, uri: str, buffer: Buffer, offset: int = 0) -> int:
        """Read from offset of uri into a caller-owned buffer (no copy)."""
        return await self._call("read_into", self.wrapped.read_into, uri, buffer, offset, mutating=True, moved=int)

    async def write_file(
        self, uri: str, data: Buffer, *, atomic: bool = True, attributes: Mapping[str, str] | None = None
    ) -> None:
        """Create or replace uri with data. With atomic (the default) the
        data goes to a temporary sibling that is renamed over uri, so uri
        holds the old or the new content, never a part. attributes: see
        :meth:`ModularFileSystem.new_writable_file`."""
        refuse_text(data, "write_file", uri)
        combine = self._combined.write_file if attributes is None else None
        await self._call(
            "write_file",
            partial(write_whole, self.wrapped),
            uri,
            data,
            atomic,
            attributes,
            mutating=True,
            moved=memoryview(data).nbytes,
            combine=combine,
        )

    async def attributes(self, uri: str) -> dict[str, str]:
        return await self._read("attributes", self.wrapped.attributes, uri)

    async def append(self, uri: str, data: Buffer) -> None:
        """Append data to uri, creating it if needed."""
        refuse_text(data, "append", uri)
        moved = memoryview(data).nbytes
        await self._call("append", partial(_append, self.wrapped), uri, data, mutating=True, moved=moved)

    async def exists(self, uri: str) -> bool:
        at_hand = self.wrapped.exists_if_ready if self._stats_at_hand else None
        return await self._call("exists", self.wrapped.exists, uri, mutating=False, at_hand=at_hand)

    async def isdir(self, uri: str) -> bool:
        at_hand = self.wrapped.isdir_if_ready if self._stats_at_hand else None
        return await self._call("isdir", self.wrapped.isdir, uri, mutating=False, at_hand=at_hand)

    async def size(self, uri: str) -> int:
        """The size of the file at uri, in bytes."""
        return await self.get_file_size(uri)

    async def listdir(self, uri: str) -> list[str]:
        """Sorted names of the entries of a directory."""
        return sorted(await self.get_children(uri))

    def walk(self, uri: str) -> AsyncIterator[tuple[str, list[str], list[str]]]:
        """Like :func:`os.walk`, top-down, names sorted, listing each level
        of directories concurrently."""
        return _driver.iterate(self, _plans.walk(uri))

    async def glob(self, pattern: str, *, recursive: bool = False) -> list[str]:
        """The sorted paths matching pattern: TensorFlow's rule (``*``,
        ``?``, ``[...]`` within one path component), or with recursive,
        :func:`glob.glob`'s too, where a ``**`` component matches any number
        of directory levels (docs/uris.md)."""
        if recursive and "**" in pattern.split("/"):
            return await self._planned("get_matching_paths", _plans.recursive_glob(pattern), pattern)
        return await self.get_matching_paths(pattern)

    async def mkdir(self, uri: str) -> None:
        """Create the directory uri; its parent must exist."""
        await self.create_dir(uri)

    async def makedirs(self, uri: str, *, exist_ok: bool = True) -> None:
        """Create uri and every missing directory above it; an existing
        uri is an error only with exist_ok false."""
        await self._mutate("makedirs", partial(self.wrapped.makedirs, exist_ok=exist_ok), uri)

    async def rm(self, uri: str) -> None:
        """Delete the file uri."""
        await self.delete_file(uri)

    async def rmdir(self, uri: str) -> None:
        """Delete the empty directory uri."""
        await self.delete_dir(uri)

    async def rmtree(self, uri: str) -> tuple[int, int]:
        """Delete uri and all below it; returns (undeleted files, dirs)."""
        return await self.delete_recursively(uri)

    async def rename(self, src: str, dst: str) -> None:
        """Rename a file (replacing a file at dst) or a directory (dst must
        not exist; see :meth:`rename_dir`)."""
        try:
            await self.rename_file(src, dst)
        except FailedPreconditionError:
            if not await self.isdir(src):
                raise
            await self.rename_dir(src, dst)

    @asynccontextmanager
    async def memory_region(self, uri: str) -> AsyncIterator[memoryview]:
        """A zero-copy, read-only view of a file, valid inside the block."""
        region = await self.new_read_only_memory_region_from_file(uri)
        try:
            yield region.data
        finally:
            await region.close()


def _mirror_docstrings() -> None:
    """An async op that does what the same-named op of the sync adapter
    does, on a worker, says so with that op's docstring."""
    for name, method in vars(AsyncModularFileSystem).items():
        sync = getattr(ModularFileSystem, name, None)
        if not name.startswith("_") and callable(method) and method.__doc__ is None and sync and sync.__doc__:
            method.__doc__ = f"{inspect.cleandoc(sync.__doc__)}\n\nAwaitable: runs on the Env's worker pool."


_mirror_docstrings()


def _append(fs: ModularFileSystem, uri: str, data: Buffer) -> None:
    with fs.new_appendable_file(uri) as file:
        file.append(data)
