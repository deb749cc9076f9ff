"""Binary file objects, as aiofiles's ``aiofiles.threadpool.binary``."""

from __future__ import annotations

import threading
from typing import Any

from .._bulk import READ_TO_END
from .._memory import ReadAhead
from .._stack import Unlayered
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


# held while a file's layers are built (on the loop's thread or a worker's)
_LAYERING = threading.Lock()


class AsyncBufferedReader(AsyncBufferedIOBase):
    """A buffered binary file that reads (``open(..., "rb")``, ``"r+b"``).

    One opened by the bulk open (:mod:`.._bulk`) starts :class:`Unlayered`:
    ``read()`` to the end and ``close()`` go straight to its descriptor, and
    the standard library's layers are built the first time anything else
    needs them (``_file``), at the descriptor's offset."""

    _unlayered: Unlayered | None = None
    _layers: Any = None

    @property
    def _file(self) -> Any:
        unlayered = self._unlayered
        if unlayered is not None:
            with _LAYERING:
                if self._unlayered is unlayered:  # not built meanwhile by the other thread
                    opened = unlayered.layer_up()
                    self._layers, self._memory = opened.file, opened.memory
                    self._unlayered = None
        return self._layers

    @_file.setter
    def _file(self, file: Any) -> None:
        if isinstance(file, Unlayered):
            self._unlayered = file
        else:
            self._layers = file

    async def read(self, size: Any = -1, /) -> Any:
        unlayered = self._unlayered
        if unlayered is None or unlayered.closed or type(size) is not int or size >= 0:
            return await super().read(size)
        if self._sent == self._done:  # no call on a worker uses the descriptor
            data = unlayered.read_at_hand()
            if data is not None:
                return data
        # to the end, with the others of this loop iteration, in one C call
        return await self._call(self._read_to_end, None, read=True, combine=READ_TO_END)

    def _read_to_end(self, fetched: tuple[bytes, bool] | None) -> bytes:
        """read() to the end, on the worker holding the file: the bytes
        READ_TO_END fetched from the descriptor (with others', or now, for
        this file alone) when they reach its end and no layer was built
        meanwhile (the loop's thread builds them when another call comes
        while this one is on its way); otherwise the layers' read, given
        what was fetched."""
        unlayered = self._unlayered
        if fetched is None and unlayered is not None:  # alone, not read in bulk: the same C call, for one file
            fetched = READ_TO_END.fetch([unlayered])[0]
            unlayered = self._unlayered  # the layers may have been built during the read
        if unlayered is not None and fetched is not None and fetched[1]:
            unlayered.moved(len(fetched[0]))
            return fetched[0]
        file = self._file  # built now if not yet, at the offset before what was fetched
        if fetched is None:
            data: bytes = file.read()
            return data
        memory = self._memory
        assert isinstance(memory, ReadAhead)
        memory.fetched = fetched
        try:
            data = file.read()
            return data
        finally:
            memory.fetched = None

    async def close(self) -> None:
        unlayered = self._unlayered
        if unlayered is not None and self._sent == self._done:  # nothing on a worker uses the descriptor
            unlayered.close_soon()
            return
        await super().close()

    @property
    def closed(self) -> bool:
        unlayered = self._unlayered
        return unlayered.closed if unlayered is not None else bool(self._file.closed)

    @property
    def name(self) -> Any:
        unlayered = self._unlayered
        return unlayered.name if unlayered is not None else self._file.name

    @property
    def mode(self) -> str:
        mode: str = "rb" if self._unlayered is not None else self._file.mode  # FileIO's, as open() gives it
        return mode

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
