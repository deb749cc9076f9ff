"""Splitting lines and handing them to ``async for``: in C when the
extension module ``asyncfs._speedups`` was built (``plugins/speedups``),
else the same in Python.

- :func:`split_keep` cuts a chunk after each newline, as ``str.split``
  cuts at it, the lines keeping it.
- :class:`Handover` is the async iterator a line loop gets. The lines a
  reader split ahead are handed over one by one with no coroutine step
  (three C calls, about 40 ns a line on CPython 3.11, where a native async
  generator's step took 140 and a coroutine's 220); once none is left, it
  awaits the reader's ``more(handover)`` for the next.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._native.speedups import SPEEDUPS

__all__ = ["Handover", "split_keep"]

T = TypeVar("T", str, bytes)
Item = TypeVar("Item")


def _split_keep(chunk: T, newline: T) -> list[T]:
    """chunk cut after each newline (one character or byte), each line
    keeping it, the rest after the last one (maybe empty) last: what
    ``chunk.split(newline)`` gives, with the newlines kept. By
    ``splitlines`` when it would break at newlines only (it makes each line
    once; the other way makes it twice)."""
    if newline in ("\n", b"\n") and _breaks_at_newlines_only(chunk):
        lines = chunk.splitlines(keepends=True)
        if not lines or lines[-1].endswith(newline):
            lines.append(chunk[:0])  # the rest after the last newline, empty
        return lines
    parts = chunk.split(newline)
    rest = parts.pop()
    lines = [part + newline for part in parts]
    lines.append(rest)
    return lines


# str.splitlines also breaks at these (and at "\r", which a text reader has
# made "\n"); bytes.splitlines at "\r" only
_OTHER_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_ASCII_BREAKS = ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e")


def _breaks_at_newlines_only(chunk: str | bytes) -> bool:
    """Whether "\n" is the only line break chunk.splitlines() would see."""
    if isinstance(chunk, bytes):
        return b"\r" not in chunk
    if chunk.isascii():
        return not any(mark in chunk for mark in _ASCII_BREAKS)
    return _OTHER_BREAKS.search(chunk) is None


class _Handover(Generic[Item]):
    """Handover(more): an async iterator of the items of ``ahead`` (an
    iterator the caller sets), then of ``more(self)``, an awaitable of the
    next item that sets ``ahead`` to the ones after it, or raises
    StopAsyncIteration at the end."""

    def __init__(self, more: Callable[[Any], Awaitable[Item]]) -> None:
        if not callable(more):
            raise TypeError("Handover(more): more must be callable")
        self._more: Callable[[Any], Awaitable[Item]] = more
        self.ahead: Iterator[Item] | None = None

    def __aiter__(self) -> _Handover[Item]:
        return self

    def __anext__(self) -> Awaitable[Item]:
        ahead = self.ahead
        if ahead is not None:
            for item in ahead:
                return _ready(item)
        return self._more(self)


async def _ready(item: Item) -> Item:
    return item


if TYPE_CHECKING:
    Handover = _Handover

    def split_keep(chunk: T, newline: T) -> list[T]: ...
elif SPEEDUPS is not None:
    Handover = SPEEDUPS.Handover
    split_keep = SPEEDUPS.split_keep
else:
    Handover = _Handover
    split_keep = _split_keep
