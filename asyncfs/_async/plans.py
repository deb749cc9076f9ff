"""The async driver of the plans in :mod:`asyncfs._sync.plans`: each step's
calls handed to the worker pool as one batch, so a level of N directories
costs about N / workers round trips, not N (the sync driver makes them one
after another on the calling thread)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

from .._sync.plans import Calls, Emit, Plan


class Batcher(Protocol):
    """What the async driver hands a plan's steps to: an async filesystem
    (AsyncModularFileSystem), whose pool runs a step's calls as one batch."""

    @property
    def wrapped(self) -> Any: ...
    async def run_many(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]], *, mutating: bool) -> list[Any]: ...


__all__ = ["iterate", "run"]

R = TypeVar("R")


async def _call_batch(afs: Batcher, step: Calls) -> list[Any]:
    return await afs.run_many(getattr(afs.wrapped, step.op), step.args, mutating=step.mutating)


async def iterate(afs: Batcher, plan: Plan[Any]) -> AsyncIterator[Any]:
    """Run plan on the worker pool, a step's calls as one batch, yielding
    what it emits."""
    try:
        step = next(plan)
        while True:
            if isinstance(step, Emit):
                yield step.item
                step = plan.send([])
            else:
                step = plan.send(await _call_batch(afs, step))
    except StopIteration:
        return


async def run(afs: Batcher, plan: Plan[R]) -> R:
    """Run a plan that emits nothing on the worker pool; its result."""
    try:
        step = next(plan)
        while True:
            assert isinstance(step, Calls), "run() is for plans that emit nothing"
            step = plan.send(await _call_batch(afs, step))
    except StopIteration as done:
        result: R = done.value
        return result
