"""The file objects of the fsspec bridge (:mod:`asyncfs.fsspec`): what
``fs.open`` returns, by mode, store and caller.

- :class:`BridgeFile`: an asyncfs stream driven from a synchronous caller
  (a network store's files, a caller on a thread running an event loop,
  writes inside ``fs.transaction``);
- :class:`DirectFile` and :class:`DirectWriter`: a local store's files read
  and written on the caller's own thread, under the standard library's
  buffer (the writer staged beside its target, landing at close);
- :class:`RangeFile`: fsspec's own buffered file, for a caller that names
  one of fsspec's caches (``cache_type=``, ``blockcache::``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import posixpath
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fsspec.asyn import sync
from fsspec.spec import AbstractBufferedFile

from .. import _uri
from .._sync import Landing, ModularFileSystem

if TYPE_CHECKING:
    from .._streams import AsyncBinaryReader, AsyncBinaryWriter
    from ..env import Env

__all__ = ["DIRECT_BLOCK", "Bridge", "BridgeFile", "DirectFile", "DirectWriter", "RangeFile", "StagedFile"]

T = TypeVar("T")


class Bridge(Protocol):
    """What these file objects need of the bridge filesystem that opens
    them (:class:`asyncfs.fsspec.AsyncfsFileSystem`)."""

    env: Env
    loop: asyncio.AbstractEventLoop

    def _uri(self, path: str) -> str: ...
    def invalidate_cache(self, path: str | None = None) -> None: ...
    def unstrip_protocol(self, name: str) -> str: ...
    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes: ...


class StagedFile:
    """A file written under a staging name beside its target, landed by
    :meth:`commit` (or with the whole transaction)."""

    def __init__(self, fs: Bridge, path: str) -> None:
        self.fs = fs
        self.path = path
        self.uri = _uri.staging_name(fs._uri(path))
        self.staged_path = posixpath.join(posixpath.dirname(path), posixpath.basename(self.uri))

    def commit(self) -> None:
        """Land it: renamed over its target, with the target's permissions."""
        afs = self.fs.env.filesystem(self.uri)
        try:
            sync(self.fs.loop, afs.run, afs.wrapped.replace_file, self.uri, self.fs._uri(self.path), mutating=True)
        finally:
            self.fs.invalidate_cache(self.path)

    def discard(self) -> None:
        sync(self.fs.loop, self.fs.env.rm, self.uri)


class BridgeFile(io.RawIOBase):
    """The file object of ``fs.open``: an asyncfs stream (reads buffered in
    large blocks, writes landing atomically on close) driven from a
    synchronous caller. A call the stream's buffer can answer runs on the
    caller's thread; the rest hop to fsspec's loop."""

    def __init__(self, fs: Bridge, path: str, mode: str, *, block_size: int | None, autocommit: bool) -> None:
        super().__init__()
        if mode not in ("rb", "wb", "ab", "xb"):
            raise ValueError(f"mode must be rb, wb, ab or xb, not {mode!r}")
        self.fs = fs
        self.path = path
        self.mode = mode
        self.autocommit = autocommit
        self._staged = StagedFile(fs, path) if mode != "rb" and not autocommit else None
        options: dict[str, Any] = {"compression": None}
        if block_size:
            options["block_size"] = block_size
        uri = fs._uri(path)
        if mode == "xb":
            if self._call(fs.env.exists, uri):
                raise FileExistsError(f"{fs.unstrip_protocol(path)} exists")
            mode = "wb"
        if self._staged is not None:
            uri, options["atomic"] = self._staged.uri, False
            mode = "wb"
            if self.mode == "ab" and self._call(fs.env.exists, fs._uri(path)):
                self._call(fs.env.copy, fs._uri(path), uri)
                mode = "ab"
        opening = self._open_reading if mode == "rb" else fs.env.open
        self._stream: Any = self._call(opening, uri, mode, **options)

    async def _open_reading(self, uri: str, mode: str, **options: Any) -> AsyncBinaryReader:
        """Open, and read the first block in the same hop: a small file is
        then read and closed without another."""
        reader = await self.fs.env.open(uri, "rb", **options)
        try:
            await reader.fill()
        except BaseException:
            await reader.close()
            raise
        return reader

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return sync(self.fs.loop, fn, *args, **kwargs)

    @property
    def name(self) -> str:
        return self.path

    @property
    def size(self) -> int:
        reader: AsyncBinaryReader = self._stream
        return reader.size()

    def readable(self) -> bool:
        return self.mode == "rb"

    def writable(self) -> bool:
        return self.mode != "rb"

    def seekable(self) -> bool:
        return self.mode == "rb"

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on a closed file: {self.path}")

    def _reader(self) -> AsyncBinaryReader:
        self._check_open()
        if self.mode != "rb":
            raise io.UnsupportedOperation(f"not readable: opened with {self.mode!r}")
        reader: AsyncBinaryReader = self._stream
        return reader

    def _writer(self) -> AsyncBinaryWriter:
        self._check_open()
        if self.mode == "rb":
            raise io.UnsupportedOperation("not writable: opened with 'rb'")
        writer: AsyncBinaryWriter = self._stream
        return writer

    def read(self, size: int | None = -1) -> bytes:
        reader = self._reader()
        n = -1 if size is None else size
        data = reader.read_nowait(n)
        return data if data is not None else self._call(reader.read, n)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        reader = self._reader()
        limit = -1 if size is None else size
        line = reader.readline_nowait(limit)
        return line if line is not None else self._call(reader.readline, limit)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        reader = self._reader()
        where = reader.seek_nowait(offset, whence)
        return where if where is not None else self._call(reader.seek, offset, whence)

    def tell(self) -> int:
        self._check_open()
        return int(self._stream.tell())

    def write(self, data: Any) -> int:
        writer = self._writer()
        written = writer.write_nowait(data)
        return written if written is not None else self._call(writer.write, data)

    def flush(self) -> None:
        if not self.closed and self.mode != "rb" and not self._stream.closed:
            self._call(self._stream.flush)

    def close(self) -> None:
        """Reading: release the handle. Writing: land the file on its target
        (or, inside a transaction, keep it staged for the commit)."""
        if self.closed:
            return
        try:
            if self.mode != "rb" or not self._stream.close_nowait():
                self._call(self._stream.close)
        finally:
            super().close()
            if self.mode != "rb":
                self.fs.invalidate_cache(self.path)

    def discard(self) -> None:
        """Drop what was written (the target is left as it was)."""
        if self.mode == "rb":
            return
        if not self.closed:
            try:
                self._call(self._stream.abort)
            finally:
                super().close()
        if self._staged is not None:
            self._staged.discard()

    def commit(self) -> None:
        """Land a file written with ``autocommit=False`` on its target."""
        self.close()
        if self._staged is not None:
            self._staged.commit()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and self.mode != "rb" and self.autocommit:
            self.discard()  # a failed block never lands half a file
        else:
            self.close()

    def __del__(self) -> None:
        # Never land a half-written file from the garbage collector; give
        # the handle back. (Closing from here may be impossible: on the loop's
        # own thread, or at interpreter exit.)
        if not getattr(self, "closed", True) and hasattr(self, "_stream"):
            with contextlib.suppress(Exception):  # a finalizer has no one to tell
                self.discard() if self.mode != "rb" else self.close()


DIRECT_BLOCK = 64 << 10  # the standard library's buffer over a local plugin


def _made_or_closed(file: io.RawIOBase, make: Callable[[], T]) -> T:
    """make() in a file's __init__; if it raises, the file is marked closed
    first, so that its finalizer's close() finds nothing half made (Python
    3.13 reports what that close() raises)."""
    try:
        return make()
    except BaseException:
        io.RawIOBase.close(file)
        raise


class _PluginRaw(io.RawIOBase):
    """A file of a local store read on the caller's own thread: positional
    reads of one plugin handle (the standard library's buffer goes on top)."""

    def __init__(self, plugin: ModularFileSystem, uri: str, path: str) -> None:
        super().__init__()
        self._file = _made_or_closed(self, lambda: plugin.new_random_access_file(uri))
        self._plugin = plugin
        self._uri = uri
        self.path = path
        self.mode = "rb"  # what the buffer on top reports as its own
        self._pos = 0

    @property
    def name(self) -> str:
        return self.path

    def size(self) -> int:
        """The file's size now (what ``seek(0, SEEK_END)`` goes to, as
        with a file of the standard library)."""
        return self._plugin.get_file_size(self._uri)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._check_open()
        count = self._file.read_into(self._pos, buffer)
        self._pos += count
        return count

    def readall(self) -> bytes:
        """The rest of the file (what ``read()`` of the buffer above asks
        for): one plugin call for a file that fits the first read, where
        ``RawIOBase.readall`` makes two."""
        self._check_open()
        data = self._file.read_all(self._pos)
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence not in (io.SEEK_SET, io.SEEK_CUR, io.SEEK_END):
            raise ValueError(f"whence must be 0, 1 or 2, not {whence!r}")
        base = 0 if whence == io.SEEK_SET else self._pos if whence == io.SEEK_CUR else self.size()
        if base + offset < 0:  # as the standard library's file: EINVAL
            raise OSError(errno.EINVAL, f"negative seek position {base + offset}", self.path)
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on a closed file: {self.path}")

    def close(self) -> None:
        if not self.closed:
            try:
                self._file.close()
            finally:
                super().close()


class DirectFile(io.BufferedReader):
    """The file object of ``fs.open(path, "rb")`` on a local store (posix,
    mem: the plugin has no network flag) called from a plain thread: the
    plugin reads on the caller's thread, buffered by the standard library.
    Each read is microseconds there; a trip through fsspec's loop and
    asyncfs's pool would cost a hundred. A network store's reads, and a
    call from a running event loop, take :class:`BridgeFile`."""

    def __init__(self, fs: Bridge, plugin: ModularFileSystem, path: str, uri: str, block_size: int | None) -> None:
        self._raw = _PluginRaw(plugin, uri, path)
        super().__init__(self._raw, block_size or DIRECT_BLOCK)
        self.fs = fs
        self.path = path

    @property
    def size(self) -> int:
        """The file's size (fsspec's file objects have it)."""
        return self._raw.size()


class RangeFile(AbstractBufferedFile):  # type: ignore[misc]  # fsspec is untyped
    """The file object of ``fs.open(path, "rb", cache_type=...)``: a caller
    that names one of fsspec's caches (``"bytes"``, ``"readahead"``,
    ``"parts"``, ``"none"``: ``blockcache::`` opens with it and puts its own
    cache in) gets fsspec's own buffered file, whose cache asks the plugin
    for byte ranges (``fs.cat_file``). Its size is the one at the open, as
    with every fsspec file of this kind."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        data: bytes = self.fs.cat_file(self.path, start=start, end=end)
        return data


class _PluginSink(io.RawIOBase):
    """A file of a local store written on the caller's own thread: appends
    to a plugin handle, under a staging name where the store stages atomic
    writes, landing on the target when closed with ``keep`` set (see
    :mod:`asyncfs._sync.landing`) and dropped otherwise."""

    def __init__(self, plugin: ModularFileSystem, uri: str, path: str) -> None:
        super().__init__()
        self._landing = _made_or_closed(self, lambda: Landing.open(plugin, uri))
        self.path = path
        self.mode = "wb"  # what the buffer on top reports as its own
        self._written = 0
        self.keep = False  # set by an explicit close; a file dropped any other way is discarded
        self.dropping = False  # being discarded: what the buffer still holds goes nowhere

    @property
    def name(self) -> str:
        return self.path

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        with memoryview(data) as view:
            if not self.dropping:
                self._landing.append(view)
            self._written += view.nbytes
            return view.nbytes

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.keep:
                self._landing.land()
            else:
                self._landing.discard()
        finally:
            super().close()


class DirectWriter(io.BufferedWriter):
    """The file object of ``fs.open(path, "wb")`` on a local store called
    from a plain thread (as :class:`DirectFile` reads): the plugin writes on
    the caller's thread, buffered by the standard library, into a staging
    name that lands on the target at close. A ``with`` block that raises,
    a failed write, or a file dropped without close leaves the target as it
    was."""

    def __init__(self, fs: Bridge, plugin: ModularFileSystem, path: str, uri: str, block_size: int | None) -> None:
        self._sink = _PluginSink(plugin, uri, path)
        super().__init__(self._sink, block_size or DIRECT_BLOCK)
        self.fs = fs
        self.path = path

    def close(self) -> None:
        """Write what is buffered and land the file on its target."""
        if self.closed:
            return
        try:
            self.flush()
        except BaseException:
            self.discard()
            raise
        self._sink.keep = True
        super().close()

    def discard(self) -> None:
        """Drop what was written (the target is left as it was)."""
        if not self.closed:
            self._sink.dropping = True
            super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        # never land a half-written file from the garbage collector (and a
        # finalizer has no one to tell: an __init__ that raised left nothing)
        with contextlib.suppress(Exception):
            if not self.closed:
                self.discard()
