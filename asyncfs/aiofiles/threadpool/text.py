"""Text file objects, as aiofiles's ``aiofiles.threadpool.text``."""

from __future__ import annotations

from typing import Any

from ..base import AsyncIndirectBase
from ._file import AsyncFile

__all__ = ["AsyncTextIOWrapper", "AsyncTextIndirectIOWrapper"]


class AsyncTextIOWrapper(AsyncFile):
    """A text file: ``io.TextIOWrapper``."""

    async def readable(self) -> bool:
        answer: bool = await self._call(self._file.readable)
        return answer

    def detach(self) -> Any:
        return self._file.detach()

    @property
    def buffer(self) -> Any:
        return self._file.buffer

    @property
    def encoding(self) -> str:
        encoding: str = self._file.encoding
        return encoding

    @property
    def errors(self) -> str | None:
        errors: str | None = self._file.errors
        return errors

    @property
    def line_buffering(self) -> bool:
        line_buffering: bool = self._file.line_buffering
        return line_buffering

    @property
    def newlines(self) -> Any:
        return self._file.newlines


class AsyncTextIndirectIOWrapper(AsyncIndirectBase, AsyncTextIOWrapper):
    """``stdin``, ``stdout`` and ``stderr``."""
