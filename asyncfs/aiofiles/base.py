"""What aiofiles's ``aiofiles.base`` holds: the base of the async file
objects, the awaitable context manager ``open`` returns, and ``wrap``.

A file object wraps the standard library's own file object. Its calls run
on a worker (see :mod:`._run`), except those the file's bytes in memory
answer (see :mod:`._memory`): those run on the event loop's thread, with no
hop, when no other call of the same file is on a worker. Calls of one file
that do go to a worker run one at a time, in the order they were made.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Generator
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager
from functools import partial, wraps
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._async import Combiner
from ._memory import ReadAhead, WriteBehind
from ._run import run
from ._stack import Landing

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["AiofilesContextManager", "AsyncBase", "AsyncIndirectBase", "LineIteration", "wrap"]

T = TypeVar("T")


def wrap(func: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """An async version of func that runs it on a worker, as aiofiles's
    ``wrap``: ``loop=`` and ``executor=`` keyword arguments are taken off;
    the call is shielded from cancellation (func may change something)."""
    return _wrap(func, shielded=True)


def _wrap(func: Callable[..., Any], *, shielded: bool) -> Callable[..., Coroutine[Any, Any, Any]]:
    @wraps(func)
    async def call(*args: Any, loop: object = None, executor: Executor | None = None, **kwargs: Any) -> Any:
        del loop  # the call runs for the running loop, as aiofiles does with loop=None
        return await on_worker(executor, func, args, kwargs, shielded=shielded)

    return call


def on_worker(
    executor: Executor | None, func: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], *, shielded: bool
) -> Coroutine[Any, Any, T]:
    """func(*args, **kwargs) on a worker (see :func:`._run.run`), to await."""
    if kwargs:
        return run(executor, partial(func, *args, **kwargs), shielded=shielded)
    return run(executor, func, *args, shielded=shielded)


def query(func: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """:func:`wrap` for a function that changes nothing: a cancelled
    caller does not wait for it."""
    return _wrap(func, shielded=False)


class LineIteration(ABC):
    """``async for line in f``: readline until it returns nothing."""

    @abstractmethod
    async def readline(self, size: int = -1, /) -> Any: ...

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        line = await self.readline()
        if line:
            return line
        raise StopAsyncIteration


class AsyncBase(LineIteration):
    """A file object: the standard library's ``_file``, run off the loop."""

    _memory: ReadAhead | WriteBehind | None = None

    def __init__(
        self,
        file: Any,
        loop: asyncio.AbstractEventLoop | None = None,
        executor: Executor | None = None,
        *,
        memory: ReadAhead | WriteBehind | None = None,
        abandonable_reads: bool = False,
        landing: Landing | None = None,
    ) -> None:
        del loop  # calls run for the running loop (aiofiles's loop= is accepted, not needed)
        self._file = file
        self._landing = landing  # an atomic write: lands on close, is dropped on abort
        self._executor = executor
        self._memory = memory
        self._abandonable_reads = abandonable_reads  # a pipe or a terminal: a read may wait forever
        self._lock = threading.Lock()
        self._sent = 0  # calls handed to a worker (counted on the loop's thread)
        self._done = 0  # of them, finished (counted on the worker, under _lock)

    async def readline(self, size: int = -1, /) -> Any:
        return await self._call(self._file.readline, size, line=True)

    def __repr__(self) -> str:
        return f"{super().__repr__()} wrapping {self._file!r}"

    # ---- where a call runs ------------------------------------------------------------

    def _on_loop(self, fn: Callable[..., T], *args: Any, line: bool = False) -> T:
        """fn(*args) here, on the loop's thread: the callers checked that
        the bytes in memory answer it (the layer refuses a system call)."""
        memory = self._memory
        assert memory is not None
        memory.on_loop = True
        try:
            return self._counted(fn, args, line)
        finally:
            memory.on_loop = False

    def _call(
        self, fn: Callable[..., T], *args: Any, read: bool = False, line: bool = False, combine: Combiner | None = None
    ) -> Coroutine[Any, Any, T]:
        """fn(*args) on a worker, to await, after the calls of this file
        sent before (a readline is a read, and says so: see
        ReadAhead.lines_above); on the pool, with combine's other calls of
        this loop iteration, each given as (file, fn, args, line). (The
        pool's coroutine, as :func:`._run.run` returns it: one less a call.)"""
        self._sent += 1
        shielded = not ((read or line) and self._abandonable_reads)
        return run(self._executor, AsyncBase._locked, self, fn, args, line, shielded=shielded, combine=combine)

    def _locked(self, fn: Callable[..., T], args: tuple[Any, ...], line: bool) -> T:
        self._lock.acquire()
        return self._claimed(fn, args, line)

    def _claim(self) -> bool:
        """Take the file for a worker's call, if no other call has it (then
        :meth:`_claimed` makes the call)."""
        return self._lock.acquire(blocking=False)

    def _claimed(self, fn: Callable[..., T], args: tuple[Any, ...], line: bool = False) -> T:
        """fn(*args) by the worker's call that took the file; then the file is free."""
        try:
            return self._counted(fn, args, line)
        finally:
            self._done += 1
            self._lock.release()

    def _counted(self, fn: Callable[..., T], args: tuple[Any, ...], line: bool) -> T:
        """fn(*args), then tell the read-ahead layer whether a line was taken."""
        took_line = False
        try:
            result = fn(*args)
            took_line = line
            return result
        finally:
            if isinstance(self._memory, ReadAhead):
                self._memory.took(took_line)


class AsyncIndirectBase(AsyncBase):
    """A file object over whatever ``indirect()`` returns when called
    (``sys.stdin`` and the like, which a program may replace)."""

    def __init__(
        self,
        name: str,
        loop: asyncio.AbstractEventLoop | None,
        executor: Executor | None,
        indirect: Callable[[], Any],
    ) -> None:
        self._indirect = indirect
        self._name = name
        super().__init__(None, loop, executor, abandonable_reads=True)

    @property
    def _file(self) -> Any:
        return self._indirect()

    @_file.setter
    def _file(self, value: Any) -> None:
        pass  # the file is always indirect()'s


FileT = TypeVar("FileT")


class AiofilesContextManager(Awaitable[FileT], AbstractAsyncContextManager[FileT], Generic[FileT]):
    """What ``open`` returns: await it for the file, or use it in ``async
    with``, which closes the file on the way out."""

    __slots__ = ("_coro", "_obj")

    def __init__(self, coro: Coroutine[Any, Any, FileT]) -> None:
        self._coro = coro
        self._obj: FileT | None = None

    def __await__(self) -> Generator[Any, None, FileT]:
        if self._obj is None:
            self._obj = yield from self._coro.__await__()
        return self._obj

    # Neither makes a coroutine of its own (a file costs two fewer, which
    # the garbage collector would otherwise traverse): ``async with``
    # awaits what they return. (Hence the overrides of the base's async defs.)
    def __aenter__(self) -> Awaitable[FileT]:  # type: ignore[override]
        return self

    def __aexit__(  # type: ignore[override]
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> Awaitable[None]:
        obj: Any = self._obj
        self._obj = None
        if exc_type is not None and hasattr(obj, "abort"):
            aborting: Awaitable[None] = obj.abort()  # an atomic write whose block raised: the target stays as it was
            return aborting
        closing: Awaitable[None] = obj.close()
        return closing
