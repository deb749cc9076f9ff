"""File objects for URIs (``mem://``, ``s3://``, any scheme a plugin
serves): asyncfs's own streams (``Env.open``) behind the methods of
aiofiles's file objects. Plugins read and append; they have no descriptor,
no truncation and no writing in place, so the modes are ``r``, ``rb``,
``w``, ``wb``, ``a``, ``ab`` (``t`` allowed), and what needs more raises
:class:`io.UnsupportedOperation`, as the standard library does for a file
that cannot do it.
"""

from __future__ import annotations

import io
from typing import Any

from ..._streams import AsyncBinaryReader, AsyncBinaryWriter, AsyncTextReader, AsyncTextWriter
from ..base import LineIteration

__all__ = ["AsyncStreamFile"]

_Stream = AsyncBinaryReader | AsyncTextReader | AsyncBinaryWriter | AsyncTextWriter


class AsyncStreamFile(LineIteration):
    """A URI opened with ``asyncfs.aiofiles.open``."""

    def __init__(self, stream: _Stream, name: str, mode: str) -> None:
        self._stream = stream
        self._name = name
        self._mode = mode

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self._name!r} mode={self._mode!r}>"

    def _reader(self, op: str) -> AsyncBinaryReader | AsyncTextReader:
        self._check_open()
        if isinstance(self._stream, (AsyncBinaryReader, AsyncTextReader)):
            return self._stream
        raise io.UnsupportedOperation(f"{op}: {self._name} is open for writing")

    def _writer(self, op: str) -> AsyncBinaryWriter | AsyncTextWriter:
        self._check_open()
        if isinstance(self._stream, (AsyncBinaryWriter, AsyncTextWriter)):
            return self._stream
        raise io.UnsupportedOperation(f"{op}: {self._name} is open for reading")

    def _check_open(self) -> None:
        if self._stream.closed:
            raise ValueError("I/O operation on closed file.")

    # ---- reads ------------------------------------------------------------------------

    async def read(self, size: int | None = -1, /) -> Any:
        return await self._reader("read").read(-1 if size is None else size)

    async def readline(self, size: int | None = -1, /) -> Any:
        return await self._reader("readline").readline(-1 if size is None else size)

    async def readlines(self, hint: int = -1, /) -> list[Any]:
        reader = self._reader("readlines")
        if hint is None or hint <= 0:
            return await reader.readlines()
        lines: list[Any] = []
        total = 0
        while total < hint and (line := await reader.readline()):
            lines.append(line)
            total += len(line)
        return lines

    async def readinto(self, buffer: Any, /) -> int:
        reader = self._reader("readinto")
        if not isinstance(reader, AsyncBinaryReader):
            raise io.UnsupportedOperation("readinto: a text file reads str")
        return await reader.readinto(buffer)

    async def seek(self, offset: int, whence: int = io.SEEK_SET, /) -> int:
        reader = self._reader("seek")
        if not isinstance(reader, AsyncBinaryReader):
            raise io.UnsupportedOperation("seek: a text stream on a URI seeks only in binary mode")
        return await reader.seek(offset, whence)

    async def tell(self) -> int:
        self._check_open()
        stream = self._stream
        if isinstance(stream, (AsyncBinaryReader, AsyncBinaryWriter)):
            return stream.tell()
        raise io.UnsupportedOperation("tell: a text stream on a URI tells only in binary mode")

    # ---- writes -----------------------------------------------------------------------

    async def write(self, data: Any, /) -> int:
        return await self._writer("write").write(data)

    async def writelines(self, lines: Any, /) -> None:
        await self._writer("writelines").writelines(lines)

    async def flush(self) -> None:
        self._check_open()
        if isinstance(self._stream, (AsyncBinaryWriter, AsyncTextWriter)):
            await self._stream.flush()

    async def truncate(self, size: int | None = None, /) -> int:
        raise io.UnsupportedOperation(f"truncate: {self._name} is a URI; plugins only append")

    # ---- the rest ---------------------------------------------------------------------

    async def close(self) -> None:
        await self._stream.close()

    async def abort(self) -> None:
        """Close, dropping what was written (a writer whose block raised)."""
        if isinstance(self._stream, (AsyncBinaryWriter, AsyncTextWriter)):
            await self._stream.abort()
        else:
            await self._stream.close()

    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"fileno: {self._name} is a URI, with no descriptor")

    async def isatty(self) -> bool:
        self._check_open()
        return False

    def readable(self) -> bool:
        return isinstance(self._stream, (AsyncBinaryReader, AsyncTextReader))

    async def writable(self) -> bool:
        return isinstance(self._stream, (AsyncBinaryWriter, AsyncTextWriter))

    async def seekable(self) -> bool:
        return isinstance(self._stream, AsyncBinaryReader)

    @property
    def closed(self) -> bool:
        return self._stream.closed

    @property
    def name(self) -> str:
        return self._name

    @property
    def mode(self) -> str:
        return self._mode
