"""A blocking facade over the async layer, so that tests written against the
sync adapter (the conformance suite) run unchanged through the async one, on
whichever event loop the portal runs."""

from __future__ import annotations

import inspect
from functools import partial
from types import TracebackType
from typing import Any

from anyio.from_thread import BlockingPortal

import asyncfs

_HANDLES = (asyncfs.AsyncRandomAccessFile, asyncfs.AsyncWritableFile, asyncfs.AsyncReadOnlyMemoryRegion)


class BlockingFacade:
    def __init__(self, target: Any, portal: BlockingPortal) -> None:
        self._target = target
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        target = self._target
        attr = getattr(target, name, None)
        if attr is None and hasattr(target, "wrapped") and not isinstance(target, _HANDLES):
            return getattr(target.wrapped, name)  # metadata, offers(), available(), ...
        if attr is None:
            raise AttributeError(name)
        if inspect.iscoroutinefunction(attr):
            return partial(self._call, attr)
        return attr

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._portal.call(partial(fn, *args, **kwargs))
        return BlockingFacade(result, self._portal) if isinstance(result, _HANDLES) else result

    def __len__(self) -> int:
        return len(self._target)

    def __enter__(self) -> BlockingFacade:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._portal.call(self._target.close)
