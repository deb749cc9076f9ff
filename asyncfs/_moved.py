"""The old, flat module paths: modules that moved into the layer packages
keep their old name for a release, for imports and pickles that name them.
Each is a module whose attributes come from the new one, with a
DeprecationWarning that says where to import from instead."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["moved"]


def moved(
    old: str, new: str, instead: str = "asyncfs", elsewhere: dict[str, str] | None = None
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of old, which moved to new; the names in
    elsewhere moved to the module they map to."""

    def forward(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        warnings.warn(
            f"{old} is deprecated and will be removed in a later release: import {name} from {instead}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module((elsewhere or {}).get(name, new)), name)

    return forward
