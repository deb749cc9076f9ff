"""Where a drop-in call runs: asyncfs's worker pool (the process-wide
:func:`asyncfs.env.default_env`'s, which batches the calls of one event-loop
iteration into one thread hop), or the executor its caller named, as
aiofiles's ``executor=`` argument does.

Calls that change something are shielded: a cancelled caller waits for the
call to finish and then sees the cancellation, so no write is left half done.
Others may be abandoned; what an abandoned call opened is closed (``discard``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from functools import partial
from typing import Any, TypeVar

from .._async import Combiner, call_quietly
from ..env import default_env

__all__ = ["run", "run_soon", "run_soon_together"]

T = TypeVar("T")


def run(
    executor: Executor | None,
    fn: Callable[..., T],
    *args: Any,
    shielded: bool,
    discard: Callable[[T], object] | None = None,
    combine: Combiner | None = None,
) -> Coroutine[Any, Any, T]:
    """fn(*args) on a worker, to await; shielded from cancellation, or
    abandonable; on the pool, with the other calls of combine in this loop
    iteration, which answers them as fn would. (A function returning the
    pool's coroutine, not one of its own: a call costs one coroutine less.)"""
    if executor is None:
        return default_env().pool.run(fn, *args, mutating=shielded, discard=discard, combine=combine)
    return _in_executor(executor, fn, args, shielded, discard)


async def _in_executor(
    executor: Executor,
    fn: Callable[..., T],
    args: tuple[Any, ...],
    shielded: bool,
    discard: Callable[[T], object] | None,
) -> T:
    future = asyncio.wrap_future(executor.submit(fn, *args))
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(future)
            break
        except asyncio.CancelledError as exc:
            if not shielded:
                if discard is not None:
                    future.add_done_callback(partial(_discard_done, executor, discard))
                raise
            cancelled = exc  # keep waiting: the call must not be left half done
    if cancelled is not None:
        if discard is not None:  # done, but its caller left: nobody will take it
            executor.submit(call_quietly, discard, result)
        raise cancelled
    return result


def run_soon(executor: Executor | None, fn: Callable[..., object], *args: Any) -> None:
    """Start fn(*args) on a worker and do not wait for it; an error it
    raises is dropped (closing a descriptor that was only read)."""
    if executor is None:
        default_env().pool.run_soon(fn, *args)
    else:
        executor.submit(call_quietly, fn, *args)


def run_soon_together(executor: Executor | None, fn: Callable[[list[Any]], object], item: Any) -> None:
    """fn(items) on a worker, not waited for, once for the items given in
    this loop iteration (on an executor: for each item alone)."""
    if executor is None:
        default_env().pool.run_soon_together(fn, item)
    else:
        executor.submit(call_quietly, fn, [item])


def _discard_done(executor: Executor, discard: Callable[[Any], object], future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        executor.submit(call_quietly, discard, future.result())
