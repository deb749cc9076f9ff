"""Splitting a batch of calls across the worker pool, and reading its
results. (Walk, glob and tree deletion are plans in :mod:`asyncfs._sync.plans`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["chunked", "unwrap"]

T = TypeVar("T")


def chunked(items: list[T], parts: int, *, minimum: int = 64) -> list[list[T]]:
    """Split items into about parts contiguous chunks of at least minimum
    items (so small lists stay one plugin call)."""
    size = max(minimum, -(-len(items) // max(parts, 1)))
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def unwrap(results: Sequence[T | Exception]) -> list[T]:
    """Results of run_many, raising the first exception among them."""
    for result in results:
        if isinstance(result, Exception):
            raise result
    return list(results)  # type: ignore[arg-type]
