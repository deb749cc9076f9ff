"""Temporary files and folders, async, as aiofiles's ``aiofiles.tempfile``:
the standard library's ``tempfile`` objects, made and used on a worker."""

from __future__ import annotations

import asyncio
import tempfile
from concurrent.futures import Executor
from functools import partial
from typing import Any

from ._run import run
from .base import AiofilesContextManager, AsyncBase
from .threadpool import wrap
from .threadpool._file import AsyncFile

__all__ = ["NamedTemporaryFile", "SpooledTemporaryFile", "TemporaryDirectory", "TemporaryFile"]


def TemporaryFile(
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: str | None = None,
    prefix: str | None = None,
    dir: str | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManager[Any]:
    """An unnamed temporary file (``tempfile.TemporaryFile``)."""
    make = partial(tempfile.TemporaryFile, mode, buffering, encoding, newline, suffix, prefix, dir)
    return AiofilesContextManager(_temporary(make, loop, executor))


def NamedTemporaryFile(
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: str | None = None,
    prefix: str | None = None,
    dir: str | None = None,
    delete: bool = True,
    *args: Any,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
    **kwargs: Any,
) -> AiofilesContextManager[Any]:
    """A named temporary file (``tempfile.NamedTemporaryFile``; on Python
    3.12 and later it takes ``delete_on_close`` too), deleted on close when
    ``delete``."""
    make = partial(
        tempfile.NamedTemporaryFile, mode, buffering, encoding, newline, suffix, prefix, dir, delete, *args, **kwargs
    )
    return AiofilesContextManager(_temporary(make, loop, executor))


async def _temporary(make: Any, loop: asyncio.AbstractEventLoop | None, executor: Executor | None) -> AsyncBase:
    made = await run(executor, make, shielded=False, discard=_close)
    # a named file comes in a wrapper that deletes it on close: the async
    # object calls the wrapper, and takes its kind from the file inside
    inner = made.file if isinstance(made, tempfile._TemporaryFileWrapper) else made
    result = wrap(inner, loop=loop, executor=executor)
    result._file = made
    if hasattr(made, "delete"):  # as aiofiles: the named file's delete flag (Python < 3.12)
        setattr(result, "delete", made.delete)  # noqa: B010 (an attribute the class does not declare)
    return result


def _close(file: Any) -> None:
    file.close()


def SpooledTemporaryFile(
    max_size: int = 0,
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: str | None = None,
    prefix: str | None = None,
    dir: str | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManager[Any]:
    """A temporary file in memory until it grows past max_size
    (``tempfile.SpooledTemporaryFile``). In memory, its calls run on the
    event loop's thread; rolled over to disk, on a worker."""
    make = partial(tempfile.SpooledTemporaryFile, max_size, mode, buffering, encoding, newline, suffix, prefix, dir)
    return AiofilesContextManager(_spooled(make, loop, executor))


async def _spooled(make: Any, loop: asyncio.AbstractEventLoop | None, executor: Executor | None) -> AsyncBase:
    made = await run(executor, make, shielded=False, discard=_close)
    return AsyncSpooledTemporaryFile(made, loop, executor)


class AsyncSpooledTemporaryFile(AsyncFile):
    """A spooled temporary file: calls on the loop's thread while the file
    is in memory, on a worker once it is on disk."""

    @property
    def _rolled(self) -> bool:
        rolled: bool = self._file._rolled
        return rolled

    async def _maybe(self, name: str, *args: Any) -> Any:
        call = getattr(self._file, name)
        if self._rolled:
            return await self._call(call, *args)
        return call(*args)  # memory: nothing blocks

    async def read(self, size: Any = -1, /) -> Any:
        return await self._maybe("read", size)

    async def readline(self, size: Any = -1, /) -> Any:
        return await self._maybe("readline", size)

    async def readlines(self, hint: Any = -1, /) -> list[Any]:
        lines: list[Any] = await self._maybe("readlines", hint)
        return lines

    async def seek(self, offset: Any, whence: Any = 0, /) -> int:
        position: int = await self._maybe("seek", offset, whence)
        return position

    async def tell(self) -> int:
        position: int = await self._maybe("tell")
        return position

    async def truncate(self, size: Any = None, /) -> int:
        result: int = await self._maybe("truncate", size)
        return result

    async def flush(self) -> None:
        await self._maybe("flush")

    async def isatty(self) -> bool:
        answer: bool = await self._maybe("isatty")
        return answer

    async def close(self) -> None:
        await self._maybe("close")

    async def write(self, data: Any, /) -> int:
        if self._rolled:
            count: int = await self._call(self._file.write, data)
            return count
        count = self._file._file.write(data)
        await self._roll_if_full()
        return count

    async def writelines(self, lines: Any, /) -> None:
        if self._rolled:
            await self._call(self._file.writelines, lines)
            return
        self._file._file.writelines(lines)
        await self._roll_if_full()

    async def _roll_if_full(self) -> None:
        max_size = self._file._max_size
        if max_size and self._file._file.tell() > max_size:
            await self.rollover()

    async def rollover(self) -> None:
        await self._call(self._file.rollover)

    async def fileno(self) -> int:  # type: ignore[override]
        fd: int = await self._call(self._file.fileno)  # rolls the file over to disk
        return fd

    @property
    def encoding(self) -> str:
        encoding: str = self._file.encoding
        return encoding

    @property
    def newlines(self) -> Any:
        return self._file.newlines


def TemporaryDirectory(
    suffix: str | None = None,
    prefix: str | None = None,
    dir: str | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
) -> AiofilesContextManagerTempDir:
    """A temporary folder (``tempfile.TemporaryDirectory``): ``async with``
    gives its name, and removes it on the way out."""
    make = partial(tempfile.TemporaryDirectory, suffix, prefix, dir)
    return AiofilesContextManagerTempDir(_directory(make, loop, executor))


async def _directory(make: Any, loop: asyncio.AbstractEventLoop | None, executor: Executor | None) -> Any:
    made = await run(executor, make, shielded=False, discard=_cleanup)
    return AsyncTemporaryDirectory(made, loop, executor)


def _cleanup(directory: Any) -> None:
    directory.cleanup()


class AsyncTemporaryDirectory:
    """A temporary folder: ``name``, and ``cleanup``/``close`` on a worker."""

    def __init__(self, file: Any, loop: asyncio.AbstractEventLoop | None, executor: Executor | None) -> None:
        del loop  # accepted, as aiofiles's is; calls run for the running loop
        self._file = file
        self._executor = executor

    @property
    def name(self) -> str:
        name: str = self._file.name
        return name

    async def cleanup(self) -> None:
        await run(self._executor, self._file.cleanup, shielded=True)

    async def close(self) -> None:
        await self.cleanup()


class AiofilesContextManagerTempDir(AiofilesContextManager[Any]):
    """``async with TemporaryDirectory() as name``: the folder's name, as
    the standard library gives it."""

    async def __aenter__(self) -> Any:
        self._obj = await self._coro
        return self._obj.name
