"""Handles to open files and memory regions of a plugin filesystem.

Each wraps a core-allocated handle struct whose inside the plugin owns. The
plugin's cleanup runs exactly once: on :meth:`close` (or leaving a ``with``
block), or, for a handle that was never closed, when it is garbage
collected, so a handle is never leaked.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from .._native import CData, ffi, refuse_text
from .._native import binding as _ffi
from ..errors import Code

if TYPE_CHECKING:
    from typing_extensions import Buffer, Self
else:
    Buffer = object
    Self = object

R = TypeVar("R")

__all__ = ["AheadRead", "RandomAccessFile", "ReadOnlyMemoryRegion", "WritableFile"]


class _Handle:
    """Runs a cleanup function once, on close or at garbage collection;
    until then it keeps its owner (the filesystem that opened it) alive."""

    _closed: bool

    def __init__(self, cleanup: Callable[[CData], None], handle: CData, uri: str, owner: object = None) -> None:
        self._handle = handle
        self.uri = uri
        self._closed = False
        self._finalizer = weakref.finalize(self, _clean_up, cleanup, handle, owner)

    @property
    def closed(self) -> bool:
        return self._closed

    def _release(self) -> None:
        self._closed = True
        self._finalizer()

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise ValueError(f"{op} on a closed file: {self.uri}")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def close(self) -> None:
        self._release()

    def discard(self) -> None:
        """Release after an error (a ``with`` block that raised): the same as
        close, except for writable files, which drop what was written."""
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {self.uri!r} {state}>"


def _clean_up(cleanup: Callable[[CData], None], handle: CData, owner: object) -> None:
    """A handle's cleanup; owner, held until now, may go after it."""
    cleanup(handle)


# read_all's largest single read
_MOST_AT_ONCE = 64 << 20


def _after_reads_ahead(cleanup: Callable[[CData], None], handle: CData) -> None:
    """A file's cleanup, once no runtime thread reads it any more."""
    _ffi.runtime().ASYNCFS_WaitReadsOf(handle)
    cleanup(handle)


def _counted(status: CData, count: int, asked: int, *, strict: bool, plugin: str, uri: str) -> int:
    """What a read of asked bytes that answered count with status read: a
    short read at the end of the file is no error, unless strict."""
    code = status.code
    if code == Code.OUT_OF_RANGE and not strict:
        return _ffi.check_count(max(count, 0), asked, plugin=plugin, op="read", path=uri)
    if code != Code.OK:
        raise _ffi.error_from(status, "read", uri)
    return _ffi.check_count(count, asked, plugin=plugin, op="read", path=uri)


class RandomAccessFile(_Handle):
    """A file opened for reads at any offset (``pread`` semantics)."""

    def __init__(self, ops: CData, handle: CData, uri: str, plugin: str = "", owner: object = None) -> None:
        super().__init__(partial(_after_reads_ahead, ops.cleanup), handle, uri, owner)
        self._read = ops.read
        self._read_if_ready = ops.read_if_ready
        self._plugin = plugin

    def _read_to(self, offset: int, target: CData, strict: bool) -> int:
        self._check_readable(offset)
        status = _ffi.thread_status()
        asked = len(target)
        count = int(self._read(self._handle, offset, asked, target, status))
        return _counted(status, count, asked, strict=strict, plugin=self._plugin, uri=self.uri)

    def _check_readable(self, offset: int) -> None:
        self._check_open("read")
        if offset < 0:
            raise ValueError(f"negative offset {offset} reading {self.uri}")
        if self._read == ffi.NULL:
            _ffi.raise_status(Code.UNIMPLEMENTED, "the plugin does not offer read", "read", self.uri)

    @property
    def reads_if_ready(self) -> bool:
        """Whether the plugin offers :meth:`read_if_ready` (its
        ``read_if_ready`` op: API 1 of the random access file table)."""
        return bool(self._read_if_ready != ffi.NULL)

    def read_if_ready(self, offset: int, n: int) -> bytes | None:
        """:meth:`read` when the store holds the bytes at hand (the page
        cache, memory), made without waiting on a device or a network, so
        it may run on an event loop's thread; None when they are not all at
        hand, or the plugin does not offer it (:meth:`read` then reads them,
        on a worker)."""
        if n <= 0:
            self._check_readable(offset)
            return b""
        data = bytes(n)  # read straight into, as in read
        count = self._read_if_ready_to(offset, ffi.from_buffer(data))
        if count is None:
            return None
        return data if count == n else data[:count]

    def read_if_ready_into(self, offset: int, buffer: Buffer) -> int | None:
        """:meth:`read_if_ready` straight into buffer: how many bytes were
        read (fewer: the end of the file), or None."""
        with ffi.from_buffer(buffer, require_writable=True) as target:
            return self._read_if_ready_to(offset, target)

    def _read_if_ready_to(self, offset: int, target: CData) -> int | None:
        self._check_readable(offset)
        if self._read_if_ready == ffi.NULL:
            return None
        status = _ffi.thread_status()
        asked = len(target)
        count = int(self._read_if_ready(self._handle, offset, asked, target, status))
        if status.code == Code.UNAVAILABLE:
            return None
        return _counted(status, count, asked, strict=False, plugin=self._plugin, uri=self.uri)

    def read_ahead(self, offset: int, n: int) -> AheadRead | None:
        """Start reading up to n bytes at offset on one of the runtime's own
        threads, which need no interpreter lock: the read is made while the
        calling thread computes, however long it holds that lock. Take the
        bytes with :meth:`AheadRead.result`. None when the runtime has no
        memory for it. Closing the file first waits for the read."""
        self._check_readable(offset)
        if n <= 0:
            raise ValueError(f"read_ahead needs n > 0, not {n}: {self.uri}")
        started = _ffi.runtime().ASYNCFS_StartRead(self._read, self._handle, offset, n)
        if started == ffi.NULL:
            return None
        return AheadRead(ffi.gc(started, _ffi.runtime().ASYNCFS_DropRead), n, self._plugin, self.uri)

    def read_into(self, offset: int, buffer: Buffer, *, strict: bool = False) -> int:
        """Read up to len(buffer) bytes at offset straight into buffer (no
        copy) and return how many were read; fewer means end of file. With
        strict, a short read raises :class:`OutOfRangeError` instead."""
        # released on the way out, raised or not: an error's traceback would
        # otherwise keep the caller's buffer exported (a bytearray that
        # cannot be resized, a memoryview that cannot be released)
        with ffi.from_buffer(buffer, require_writable=True) as target:
            return self._read_to(offset, target, strict)

    def read_all(self, offset: int = 0, *, first: int = 8192) -> bytes:
        """Everything from offset to the end of the file: reads of doubling
        size, from first bytes, until one comes back short (the plugin's end
        of file), so a file that fits the first read costs one call."""
        parts = []
        size = first
        while True:
            data = self.read(offset, size)
            parts.append(data)
            if len(data) < size:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            offset += size
            size = min(2 * size, _MOST_AT_ONCE)

    def read(self, offset: int, n: int, *, strict: bool = False) -> bytes:
        """Up to n bytes at offset; fewer at end of file (or, with strict,
        :class:`OutOfRangeError`).

        The bytes are read straight into the object returned: ``bytes(n)``
        with n > 0 is always a new, unshared object (only b"" is shared), so
        filling it before anyone else can see it is safe, and it spares a
        copy of everything read.
        """
        if n <= 0:
            return b""
        if n > _MOST_AT_ONCE:  # only what the file holds is held, not what was asked
            return self._read_up_to(offset, n, strict)
        data = bytes(n)
        count = self._read_to(offset, ffi.from_buffer(data), strict)
        return data if count == n else data[:count]

    def _read_up_to(self, offset: int, n: int, strict: bool) -> bytes:
        """read(offset, n) for an n larger than one read's buffer: reads of
        growing size, as :meth:`read_all`, ending at n bytes or the end."""
        parts = []
        got, size = 0, 1 << 20
        while got < n:
            want = min(size, n - got)
            data = self.read(offset + got, want)
            parts.append(data)
            got += len(data)
            if len(data) < want:
                if strict:
                    _ffi.raise_status(
                        Code.OUT_OF_RANGE, f"read past the end of the file ({got} of {n} bytes)", "read", self.uri
                    )
                break
            size = min(2 * size, _MOST_AT_ONCE)
        return parts[0] if len(parts) == 1 else b"".join(parts)


class AheadRead:
    """A read started by :meth:`RandomAccessFile.read_ahead`. Dropping it
    frees it (never waiting: a runtime thread that is still reading frees
    it when it is done)."""

    __slots__ = ("_n", "_plugin", "_read", "uri")

    def __init__(self, read: CData, n: int, plugin: str, uri: str) -> None:
        self._read = read
        self._n = n
        self._plugin = plugin
        self.uri = uri

    def done(self) -> bool:
        """Whether :meth:`result` would return at once."""
        return self._read is not None and bool(_ffi.runtime().ASYNCFS_ReadIsDone(self._read))

    def result(self) -> bytes:
        """The bytes read (fewer at the end of the file), once: waits for the
        read, or makes it on this thread if no runtime thread has started
        it. Raises what :meth:`RandomAccessFile.read` would."""
        return self.lend(bytes)

    def lend(self, use: Callable[[memoryview], R]) -> R:
        """use(the bytes read), lent straight from the runtime's buffer:
        :meth:`result` without copying them out first (a 128 KiB block
        decoded as it is lent took 69 µs, copied then decoded 116 µs: the
        copy reads bytes another core wrote). The view is released when use
        returns, and the buffer freed: use must keep none of it."""
        read, self._read = self._read, None
        if read is None:
            raise ValueError(f"the result of this read-ahead was taken already: {self.uri}")
        try:
            status = _ffi.thread_status()
            data = ffi.new("const char **")
            count = int(_ffi.runtime().ASYNCFS_FinishRead(read, status, data))
            count = _counted(status, count, self._n, strict=False, plugin=self._plugin, uri=self.uri)
            with memoryview(ffi.buffer(data[0], count)) as view:
                return use(view)
        finally:
            ffi.release(read)


class WritableFile(_Handle):
    """A file opened for appending bytes. ``close`` commits; a file dropped
    without close is cleaned up but not closed."""

    def __init__(self, ops: CData, handle: CData, uri: str, owner: object = None) -> None:
        super().__init__(ops.cleanup, handle, uri, owner)
        self._ops = ops
        self._close_called = False

    def _call(self, op: str) -> None:
        self._check_open(op)
        fn = getattr(self._ops, op)
        if fn == ffi.NULL:
            _ffi.raise_status(Code.UNIMPLEMENTED, f"the plugin does not offer {op}", op, self.uri)
        status = _ffi.thread_status()
        fn(self._handle, status)
        _ffi.check(status, op, self.uri)

    def append(self, data: Buffer) -> None:
        """Append data (any contiguous bytes-like object, passed without a
        copy)."""
        self._check_open("append")
        refuse_text(data, "append", self.uri)
        if self._ops.append == ffi.NULL:
            _ffi.raise_status(Code.UNIMPLEMENTED, "the plugin does not offer append", "append", self.uri)
        status = _ffi.thread_status()
        with ffi.from_buffer(data) as source:  # released even if the append fails (see read_into)
            self._ops.append(self._handle, source, len(source), status)
        _ffi.check(status, "append", self.uri)

    def tell(self) -> int:
        self._check_open("tell")
        if self._ops.tell == ffi.NULL:
            _ffi.raise_status(Code.UNIMPLEMENTED, "the plugin does not offer tell", "tell", self.uri)
        status = _ffi.thread_status()
        position = int(self._ops.tell(self._handle, status))
        _ffi.check(status, "tell", self.uri)
        return position

    def flush(self) -> None:
        """Push buffered data to the filesystem (a plugin without flush has
        nothing to push)."""
        if self._ops.flush != ffi.NULL:
            self._call("flush")
        else:
            self._check_open("flush")

    def sync(self) -> None:
        """Make appended data durable; falls back to flush."""
        if self._ops.sync != ffi.NULL:
            self._call("sync")
        else:
            self.flush()

    def discard(self) -> None:
        """Release the handle without closing it: a plugin whose files appear
        only at close (an object store) drops what was written."""
        if not self._closed:
            self._release()

    def close(self) -> None:
        """Close (at most once) and release the handle; raises if the
        plugin's close failed, after releasing it all the same."""
        if self._closed:
            return
        try:
            if not self._close_called and self._ops.close != ffi.NULL:
                self._close_called = True
                self._call("close")
        finally:
            self._release()


class ReadOnlyMemoryRegion(_Handle):
    """A file's bytes mapped into memory: :attr:`data` is a read-only
    memoryview over the plugin's memory, valid until :meth:`close`."""

    def __init__(self, ops: CData, handle: CData, uri: str, owner: object = None) -> None:
        super().__init__(ops.cleanup, handle, uri, owner)
        length = int(ops.length(handle))
        address = ops.data(handle)
        self._view: memoryview | None = memoryview(ffi.buffer(ffi.cast("char*", address), length)).toreadonly()

    @property
    def data(self) -> memoryview:
        if self._view is None:
            raise ValueError(f"memory region of {self.uri} is closed")
        return self._view

    def __len__(self) -> int:
        return len(self.data)

    def close(self) -> None:
        if self._view is not None:
            self._view.release()  # raises BufferError while views of it exist
            self._view = None
        self._release()
