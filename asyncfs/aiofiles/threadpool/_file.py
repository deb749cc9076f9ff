"""The calls every drop-in file object has, with the ones the bytes in
memory can answer (see :mod:`asyncfs.aiofiles._memory`) run on the event
loop's thread."""

from __future__ import annotations

from typing import Any, TypeVar

from .._bulk import READ_TO_END
from .._memory import CHUNK, ReadAhead, WriteBehind
from ..base import AsyncBase

__all__ = ["AsyncFile"]

M = TypeVar("M", ReadAhead, WriteBehind)


def _small(data: object) -> bool:
    """Whether data may be written through memory: a big write goes to
    the file in one call, as the standard library's buffer passes it."""
    try:
        return len(data) < CHUNK  # type: ignore[arg-type]
    except TypeError:
        return False  # not something write takes: the worker reports it


def _nbytes(buffer: object) -> int:
    try:
        with memoryview(buffer) as view:  # type: ignore[arg-type]
            return view.nbytes
    except TypeError:
        return -1  # the worker reports it


class AsyncFile(AsyncBase):
    """Reads, writes, seeks and the rest, on a worker or from memory."""

    def _here(self, kind: type[M]) -> M | None:
        """The memory layer, if it is a kind and no call of this file is on
        a worker: then a call it answers may run on the loop's thread."""
        memory = self._memory
        if isinstance(memory, kind) and self._sent == self._done:
            return memory
        return None

    # ---- reads ------------------------------------------------------------------------

    async def read(self, size: Any = -1, /) -> Any:
        ahead = self._here(ReadAhead)
        if ahead is not None and ahead.answers(size):
            return self._on_loop(self._file.read, size)
        # to the end of a regular file: with the others of this loop iteration, in one C call
        to_end = type(size) is int and size == -1 and isinstance(self._memory, ReadAhead)
        return await self._call(self._file.read, size, read=True, combine=READ_TO_END if to_end else None)

    async def readline(self, size: Any = -1, /) -> Any:
        ahead = self._here(ReadAhead)
        if ahead is not None and ahead.answers_line(size):
            return self._on_loop(self._file.readline, size, line=True)
        return await self._call(self._file.readline, size, line=True)

    async def readlines(self, hint: Any = -1, /) -> list[Any]:
        lines: list[Any] = await self._call(self._file.readlines, hint, read=True)  # to the end: ask the file
        return lines

    async def _readinto(self, buffer: Any, /) -> Any:
        ahead = self._here(ReadAhead)
        if ahead is not None and ahead.answers(_nbytes(buffer)):
            return self._on_loop(self._file.readinto, buffer)
        return await self._call(self._file.readinto, buffer, read=True)

    async def _read_once(self, name: str, size: Any) -> Any:
        """read1 or peek: at most one read of the file."""
        ahead = self._here(ReadAhead)
        call = getattr(self._file, name)
        if ahead is not None and ahead.answers_some():
            return self._on_loop(call, size)
        return await self._call(call, size, read=True)

    # ---- writes -----------------------------------------------------------------------

    async def write(self, data: Any, /) -> int:
        behind = self._here(WriteBehind)
        if behind is None or not _small(data):
            count: int = await self._call(self._file.write, data)
            return count
        count = self._on_loop(self._file.write, data)
        await self._hand_down(behind)
        return count

    async def writelines(self, lines: Any, /) -> None:
        behind = self._here(WriteBehind)
        if behind is not None and isinstance(lines, (list, tuple)) and sum(map(len, lines)) < CHUNK:
            self._on_loop(self._file.writelines, lines)
            await self._hand_down(behind)
            return
        await self._call(self._file.writelines, lines)

    async def _hand_down(self, behind: WriteBehind) -> None:
        """After a write from memory: what the buffer passed down goes to the
        file when CHUNK bytes are pending, or at once for a line-buffered
        file (whose lines others expect to see as they are written)."""
        pending = behind.pending
        if pending >= CHUNK or (pending and getattr(self._file, "line_buffering", False)):
            await self._call(behind.drain)

    async def flush(self) -> None:
        await self._call(self._flush)

    def _flush(self) -> None:
        self._file.flush()
        if isinstance(self._memory, WriteBehind):
            self._memory.drain()

    # ---- the rest ---------------------------------------------------------------------

    async def close(self) -> None:
        if self._here(ReadAhead) is not None:  # reads only: nothing to write, the descriptor's close is not awaited
            self._on_loop(self._file.close)
            return
        await self._call(self._close, True)

    async def abort(self) -> None:
        """Close, and drop what an atomic write wrote (``async with`` calls
        this when its block raises); without atomic=True, the same as close."""
        await self._call(self._close, False)

    def _close(self, keep: bool) -> None:
        """Close; an atomic write then lands on its target if kept and the
        close succeeded, and is deleted otherwise."""
        landing, self._landing = self._landing, None
        try:
            self._file.close()
        except BaseException:
            keep = False
            raise
        finally:
            if landing is not None and keep:
                landing.land()
            elif landing is not None:
                landing.discard()

    async def seek(self, offset: Any, whence: Any = 0, /) -> int:
        position: int = await self._call(self._file.seek, offset, whence)
        return position

    async def tell(self) -> int:
        position: int = await self._call(self._file.tell)
        return position

    async def truncate(self, size: Any = None, /) -> int:
        result: int = await self._call(self._file.truncate, size)
        return result

    async def isatty(self) -> bool:
        answer: bool = await self._call(self._file.isatty)
        return answer

    async def seekable(self) -> bool:
        answer: bool = await self._call(self._file.seekable)
        return answer

    async def writable(self) -> bool:
        answer: bool = await self._call(self._file.writable)
        return answer

    def fileno(self) -> int:
        fd: int = self._file.fileno()
        return fd

    @property
    def closed(self) -> bool:
        closed: bool = self._file.closed
        return closed

    @property
    def name(self) -> Any:
        return self._file.name

    @property
    def mode(self) -> str:
        mode: str = self._file.mode
        return mode
