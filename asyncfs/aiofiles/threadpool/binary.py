"""Binary file objects, as aiofiles's ``aiofiles.threadpool.binary``."""

from __future__ import annotations

from typing import Any

from ..base import AsyncIndirectBase
from ._file import AsyncFile

__all__ = [
    "AsyncBufferedIOBase",
    "AsyncBufferedReader",
    "AsyncFileIO",
    "AsyncIndirectBufferedIOBase",
    "AsyncIndirectBufferedReader",
    "AsyncIndirectFileIO",
]


class AsyncBufferedIOBase(AsyncFile):
    """A buffered binary file (``open(..., "wb")``): ``io.BufferedWriter``."""

    async def read1(self, size: Any = -1, /) -> bytes:
        data: bytes = await self._read_once("read1", size)
        return data

    async def readinto(self, buffer: Any, /) -> int | None:
        count: int | None = await self._readinto(buffer)
        return count

    def detach(self) -> Any:
        return self._file.detach()

    def readable(self) -> bool:
        answer: bool = self._file.readable()
        return answer

    @property
    def raw(self) -> Any:
        raw = self._file.raw
        return getattr(raw, "file", raw)  # the FileIO under asyncfs's memory layer


class AsyncBufferedReader(AsyncBufferedIOBase):
    """A buffered binary file that reads (``open(..., "rb")``, ``"r+b"``)."""

    async def peek(self, size: Any = 0, /) -> bytes:
        data: bytes = await self._read_once("peek", size)
        return data


class AsyncFileIO(AsyncFile):
    """An unbuffered binary file (``buffering=0``): ``io.FileIO``."""

    async def readall(self) -> bytes:
        data: bytes = await self._call(self._file.readall, read=True)
        return data

    async def readinto(self, buffer: Any, /) -> int | None:
        count: int | None = await self._readinto(buffer)
        return count

    def readable(self) -> bool:
        answer: bool = self._file.readable()
        return answer


class AsyncIndirectBufferedIOBase(AsyncIndirectBase, AsyncBufferedIOBase):
    """``stdin_bytes`` and the like."""


class AsyncIndirectBufferedReader(AsyncIndirectBase, AsyncBufferedReader):
    """An indirect binary file that reads."""


class AsyncIndirectFileIO(AsyncIndirectBase, AsyncFileIO):
    """An indirect unbuffered binary file."""
