"""The little the worker pool needs from an event loop, for asyncio (and
uvloop) and for trio: scheduling a callback on the loop (from its own thread
or another), and a one-shot waiter a task can await.

A waiter is awaited in one of two ways. *Abandonable*: cancelling the task
raises at once and marks the waiter abandoned, so its result is discarded
(side-effect-free reads). *Shielded*: the task keeps waiting until the result
arrives and the cancellation is raised after it (mutations are never left
half-done).
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, Protocol

__all__ = ["Backend", "Waiter", "backend_for", "current_loop"]


class Waiter:
    """A one-shot result slot, awaited shielded or abandonable (as it was
    made: see the module's text). ``abandoned`` is true once the awaiting
    task gave up on it (it was cancelled during an abandonable wait), or
    once its owner said so."""

    __slots__ = ("_given_up", "_native", "delivered", "shielded")

    def __init__(self, native: Any, *, shielded: bool = False) -> None:
        self._native = native
        self.shielded = shielded
        self._given_up = False
        self.delivered = False

    @property
    def abandoned(self) -> bool:
        return self._given_up

    @abandoned.setter
    def abandoned(self, value: bool) -> None:
        self._given_up = value


class _FutureWaiter(Waiter):
    """An asyncio waiter: the task awaits its future itself, with no
    coroutine around it (a call then costs one coroutine less, which the
    garbage collector would otherwise traverse), so a cancelled abandonable
    wait shows as the future's own cancellation."""

    __slots__ = ()

    @property
    def abandoned(self) -> bool:
        return self._given_up or self._native.cancelled()

    @abandoned.setter
    def abandoned(self, value: bool) -> None:
        self._given_up = value


class Backend(Protocol):
    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run callback on the loop thread at its next iteration (from the
        loop thread)."""

    def call_soon_threadsafe(self, callback: Callable[[], object]) -> None:
        """Run callback on the loop thread (from any thread)."""

    def new_waiter(self, *, shielded: bool = False) -> Waiter:
        """A waiter, to be awaited shielded or abandonable (see :meth:`wait`)."""

    def resolve(self, waiter: Waiter, value: object, error: BaseException | None) -> bool:
        """Deliver a result (on the loop thread). False when nobody will
        receive it: the waiting task was cancelled out of an abandonable
        wait."""

    def wait(self, waiter: Waiter) -> Awaitable[Any]:
        """The waiter's result, to await as the waiter was made to be."""


def _gone() -> NoReturn:
    raise RuntimeError("the event loop is gone")


class _Uncancellable(asyncio.Future[Any]):
    """The future of a shielded wait: a task cancelled while awaiting it
    cannot cancel it, so asyncio raises the cancellation into the task
    when the result is in, as after ``asyncio.shield``, without a second
    future and its callbacks per wait."""

    __slots__ = ()

    def cancel(self, msg: Any = None) -> bool:
        return False


class AsyncioBackend:
    """A backend holds its loop weakly: the pool keeps one per loop it
    served, and a program that calls asyncio.run once per task (a Celery
    worker, a test suite) must not keep every loop it ran alive."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)

    def call_soon(self, callback: Callable[[], object]) -> None:
        (self._loop() or _gone()).call_soon(callback)

    def call_soon_threadsafe(self, callback: Callable[[], object]) -> None:
        (self._loop() or _gone()).call_soon_threadsafe(callback)

    def new_waiter(self, *, shielded: bool = False) -> Waiter:
        loop = self._loop() or _gone()
        return _FutureWaiter(_Uncancellable(loop=loop) if shielded else loop.create_future(), shielded=shielded)

    def resolve(self, waiter: Waiter, value: object, error: BaseException | None) -> bool:
        future: asyncio.Future[Any] = waiter._native
        if future.done():  # cancelled along with its task
            return False
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
        waiter.delivered = True
        return True

    def wait(self, waiter: Waiter) -> Awaitable[Any]:
        """The future itself: a task cancelled while awaiting it cancels it,
        unless it is an _Uncancellable, whose task asyncio then cancels once
        it is done (see there)."""
        future: asyncio.Future[Any] = waiter._native
        return future


class TrioBackend:
    def __init__(self) -> None:
        # trio is optional: only a program already running trio gets here
        import outcome  # noqa: PLC0415
        import trio  # noqa: PLC0415

        self._trio = trio
        self._outcome = outcome
        self._token = weakref.ref(trio.lowlevel.current_trio_token())  # as AsyncioBackend's loop

    def call_soon(self, callback: Callable[[], object]) -> None:
        (self._token() or _gone()).run_sync_soon(callback)

    call_soon_threadsafe = call_soon

    def new_waiter(self, *, shielded: bool = False) -> Waiter:
        # [task, outcome]: the task parks itself; a result may come first
        return Waiter([None, None], shielded=shielded)

    def resolve(self, waiter: Waiter, value: object, error: BaseException | None) -> bool:
        outcome = self._outcome
        if waiter.abandoned:
            return False
        waiter.delivered = True
        slot = waiter._native
        result = outcome.Error(error) if error is not None else outcome.Value(value)
        if slot[0] is None:
            slot[1] = result
        else:
            task, slot[0] = slot[0], None
            self._trio.lowlevel.reschedule(task, result)
        return True

    async def wait(self, waiter: Waiter) -> Any:
        lowlevel = self._trio.lowlevel
        shielded = waiter.shielded
        slot = waiter._native
        if slot[1] is not None:
            await lowlevel.checkpoint()
            return slot[1].unwrap()
        slot[0] = lowlevel.current_task()

        def abort(raise_cancel: Any) -> Any:
            if shielded:
                return lowlevel.Abort.FAILED  # keep waiting for the result
            waiter.abandoned = True
            slot[0] = None
            return lowlevel.Abort.SUCCEEDED

        try:
            return await lowlevel.wait_task_rescheduled(abort)
        finally:
            if shielded:  # a cancellation that came meanwhile is raised now, as on asyncio
                await lowlevel.checkpoint_if_cancelled()


def current_loop() -> object:
    """The running event loop: an asyncio loop, or trio's token for the run."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    if "trio" in sys.modules:
        import trio  # noqa: PLC0415 (optional: only a program running trio gets here)

        try:
            return trio.lowlevel.current_trio_token()
        except RuntimeError:
            pass
    raise RuntimeError("asyncfs needs a running asyncio or trio event loop")


def backend_for(loop: object) -> Backend:
    """The backend of a loop returned by :func:`current_loop`."""
    if isinstance(loop, asyncio.AbstractEventLoop):
        return AsyncioBackend(loop)
    return TrioBackend()
