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

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from . import _fanout, _plans
from ._fallbacks import write_by_rename
from ._marshal import Option, OptionValue
from ._pool import WorkerPool
from .errors import AlreadyExistsError, StatusError
from .files import RandomAccessFile, ReadOnlyMemoryRegion, WritableFile
from .filesystem import FileStatistics, ModularFileSystem

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


def _close(handle: RandomAccessFile | WritableFile | ReadOnlyMemoryRegion) -> None:
    handle.close()


class _AsyncHandle:
    def __init__(self, handle: Any, pool: WorkerPool) -> None:
        self.sync = handle
        self._pool = pool

    @property
    def uri(self) -> str:
        return str(self.sync.uri)

    @property
    def closed(self) -> bool:
        return bool(self.sync.closed)

    async def close(self) -> None:
        await self._pool.run(self.sync.close, mutating=True)

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
    sync: RandomAccessFile

    async def read(self, offset: int, n: int, *, strict: bool = False) -> bytes:
        return await self._pool.run(partial(self.sync.read, strict=strict), offset, n, mutating=False)

    async def read_into(self, offset: int, buffer: Buffer, *, strict: bool = False) -> int:
        # shielded: the buffer is the caller's, and a read it gave up on must
        # not go on writing into it
        return await self._pool.run(partial(self.sync.read_into, strict=strict), offset, buffer, mutating=True)


class AsyncWritableFile(_AsyncHandle):
    sync: WritableFile

    async def append(self, data: Buffer) -> None:
        await self._pool.run(self.sync.append, data, mutating=True)

    async def tell(self) -> int:
        return await self._pool.run(self.sync.tell, mutating=False)

    async def flush(self) -> None:
        await self._pool.run(self.sync.flush, mutating=True)

    async def sync_data(self) -> None:
        await self._pool.run(self.sync.sync, mutating=True)


class AsyncReadOnlyMemoryRegion(_AsyncHandle):
    sync: ReadOnlyMemoryRegion

    @property
    def data(self) -> memoryview:
        return self.sync.data

    def __len__(self) -> int:
        return len(self.sync)


class AsyncModularFileSystem:
    """One scheme's filesystem, async. Get it from :meth:`Env.filesystem`."""

    def __init__(self, fs: ModularFileSystem, pool: WorkerPool) -> None:
        self.sync = fs
        self.pool = pool

    @property
    def scheme(self) -> str:
        return self.sync.scheme

    def __repr__(self) -> str:
        return f"<AsyncModularFileSystem {self.scheme!r} from {self.sync.metadata.name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as its synchronous filesystem; the receiving process runs
        it on its process-wide Env (:func:`asyncfs.env.default_env`)."""
        return (_rebuild_async, (self.sync,))

    # ---- composing sync calls: the one way in for the layers above ----------

    async def run(self, fn: Callable[..., T], *args: Any, mutating: bool) -> T:
        """Run ``fn(*args)`` on the worker pool and return its result.

        This is how the layers above (streams, transactions, prefetch,
        TFRecord, the Env, the CLI) compose several calls of :attr:`sync`
        into one worker function: one round trip to the pool instead of one
        per call (docs/architecture.md). ``mutating=True`` shields the call
        from cancellation (the caller waits for it, then sees the
        cancellation); a side-effect-free one may be abandoned."""
        return await self.pool.run(fn, *args, mutating=mutating)

    async def run_many(
        self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], *, mutating: bool
    ) -> list[T | Exception]:
        """``fn(*args)`` for every args in calls, spread over the workers as
        one batch; results in order, each a value or the exception raised."""
        return await self.pool.run_many(fn, calls, mutating=mutating)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.pool.run(fn, *args, mutating=False)

    async def _mutate(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.pool.run(fn, *args, mutating=True)

    # ---- the sync adapter's operations, one to one --------------------------

    async def translate_name(self, uri: str) -> str:
        return await self._read(self.sync.translate_name, uri)

    async def new_random_access_file(self, uri: str) -> AsyncRandomAccessFile:
        handle = await self.pool.run(self.sync.new_random_access_file, uri, mutating=False, discard=_close)
        return AsyncRandomAccessFile(handle, self.pool)

    async def new_writable_file(self, uri: str) -> AsyncWritableFile:
        handle = await self.pool.run(self.sync.new_writable_file, uri, mutating=True)
        return AsyncWritableFile(handle, self.pool)

    async def new_appendable_file(self, uri: str) -> AsyncWritableFile:
        handle = await self.pool.run(self.sync.new_appendable_file, uri, mutating=True)
        return AsyncWritableFile(handle, self.pool)

    async def new_read_only_memory_region_from_file(self, uri: str) -> AsyncReadOnlyMemoryRegion:
        region = await self.pool.run(
            self.sync.new_read_only_memory_region_from_file, uri, mutating=False, discard=_close
        )
        return AsyncReadOnlyMemoryRegion(region, self.pool)

    async def create_dir(self, uri: str) -> None:
        await self._mutate(self.sync.create_dir, uri)

    async def recursively_create_dir(self, uri: str) -> None:
        await self._mutate(self.sync.recursively_create_dir, uri)

    async def delete_file(self, uri: str) -> None:
        await self._mutate(self.sync.delete_file, uri)

    async def delete_dir(self, uri: str) -> None:
        await self._mutate(self.sync.delete_dir, uri)

    async def delete_recursively(self, uri: str) -> tuple[int, int]:
        if self.sync.offers("delete_recursively"):
            return await self._mutate(self.sync.delete_recursively, uri)
        return await _plans.run_async(self, _plans.delete_tree(uri))

    async def rename_file(self, src: str, dst: str) -> None:
        await self._mutate(self.sync.rename_file, src, dst)

    async def copy_file(self, src: str, dst: str) -> None:
        await self._mutate(self.sync.copy_file, src, dst)

    async def path_exists(self, uri: str) -> None:
        await self._read(self.sync.path_exists, uri)

    async def paths_exist(self, uris: Sequence[str]) -> list[StatusError | None]:
        chunks = _fanout.chunked(list(uris), self.pool.workers)
        parts = await self.run_many(self.sync.paths_exist, [(c,) for c in chunks], mutating=False)
        return [status for part in _fanout.unwrap(parts) for status in part]

    async def files_exist(self, uris: Sequence[str]) -> list[bool]:
        """Whether each uri exists: chunks of the list, each one batch
        plugin call, run in parallel."""
        chunks = _fanout.chunked(list(uris), self.pool.workers)
        parts = await self.run_many(self.sync.files_exist, [(c,) for c in chunks], mutating=False)
        return [found for part in _fanout.unwrap(parts) for found in part]

    async def stat(self, uri: str) -> FileStatistics:
        return await self._read(self.sync.stat, uri)

    async def is_directory(self, uri: str) -> bool:
        return await self._read(self.sync.is_directory, uri)

    async def get_file_size(self, uri: str) -> int:
        return await self._read(self.sync.get_file_size, uri)

    async def get_children(self, uri: str) -> list[str]:
        return await self._read(self.sync.get_children, uri)

    async def get_matching_paths(self, pattern: str) -> list[str]:
        """Glob, expanding directory levels concurrently (see
        :func:`asyncfs._plans.glob`); equal to the sync result."""
        native = self.sync.offers("get_matching_paths")
        return await _plans.run_async(self, _plans.glob(pattern, native=native))

    async def flush_caches(self) -> None:
        await self._mutate(self.sync.flush_caches)

    async def configuration(self) -> list[Option]:
        return await self._read(self.sync.configuration)

    async def configuration_keys(self) -> list[str]:
        return await self._read(self.sync.configuration_keys)

    async def get_option(self, key: str) -> Option:
        return await self._read(self.sync.get_option, key)

    async def set_option(self, name: str, *values: OptionValue) -> None:
        await self._mutate(self.sync.set_option, name, *values)

    async def set_configuration(self, options: list[Option]) -> None:
        await self._mutate(self.sync.set_configuration, options)

    # ---- whole-file and Pythonic operations ---------------------------------

    async def read_file(self, uri: str) -> bytes:
        return await self._read(self.sync.read_file, uri)

    async def read_into(self, uri: str, buffer: Buffer, offset: int = 0) -> int:
        """Read from offset of uri into a caller-owned buffer (no copy)."""
        return await self._mutate(self.sync.read_into, uri, buffer, offset)

    async def write_file(self, uri: str, data: Buffer, *, atomic: bool = True) -> None:
        """Create or replace uri with data. With atomic (the default) the
        data goes to a temporary sibling that is renamed over uri, so uri
        holds the old or the new content, never a part."""
        await self._mutate(_write_file, self.sync, uri, data, atomic)

    async def append(self, uri: str, data: Buffer) -> None:
        await self._mutate(_append, self.sync, uri, data)

    async def exists(self, uri: str) -> bool:
        return await self._read(self.sync.exists, uri)

    async def isdir(self, uri: str) -> bool:
        return await self._read(self.sync.isdir, uri)

    async def size(self, uri: str) -> int:
        return await self.get_file_size(uri)

    async def listdir(self, uri: str) -> list[str]:
        """Sorted names of the entries of a directory."""
        return sorted(await self.get_children(uri))

    def walk(self, uri: str) -> AsyncIterator[tuple[str, list[str], list[str]]]:
        """Like :func:`os.walk`, top-down, names sorted, listing each level
        of directories concurrently."""
        return _plans.iterate_async(self, _plans.walk(uri))

    async def glob(self, pattern: str) -> list[str]:
        return await self.get_matching_paths(pattern)

    async def mkdir(self, uri: str) -> None:
        await self.create_dir(uri)

    async def makedirs(self, uri: str, *, exist_ok: bool = True) -> None:
        if not exist_ok and await self.exists(uri):
            raise AlreadyExistsError("path already exists", op="makedirs", path=uri)
        await self.recursively_create_dir(uri)

    async def rm(self, uri: str) -> None:
        await self.delete_file(uri)

    async def rmdir(self, uri: str) -> None:
        await self.delete_dir(uri)

    async def rmtree(self, uri: str) -> tuple[int, int]:
        """Delete uri and all below it; returns (undeleted files, dirs)."""
        return await self.delete_recursively(uri)

    async def rename(self, src: str, dst: str) -> None:
        await self.rename_file(src, dst)

    @asynccontextmanager
    async def memory_region(self, uri: str) -> AsyncIterator[memoryview]:
        """A zero-copy, read-only view of a file, valid inside the block."""
        region = await self.new_read_only_memory_region_from_file(uri)
        try:
            yield region.data
        finally:
            await region.close()


def _write_file(fs: ModularFileSystem, uri: str, data: Buffer, atomic: bool) -> None:
    if atomic and fs.stages_atomic_writes():
        write_by_rename(fs, uri, data)
    else:
        fs.write_file(uri, data)


def _append(fs: ModularFileSystem, uri: str, data: Buffer) -> None:
    with fs.new_appendable_file(uri) as file:
        file.append(data)


def _rebuild_async(sync: ModularFileSystem) -> AsyncModularFileSystem:
    from .env import default_env  # noqa: PLC0415 (the Env builds on this module)

    return default_env().filesystem(f"{sync.scheme}://" if sync.scheme else "")
