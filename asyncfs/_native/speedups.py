"""The optional CPython extension ``asyncfs._speedups`` (``plugins/speedups``):
the steps Python cannot make cheap, in C. Each has its Python version
beside its use, which serves where the extension was not built (no
CPython headers at install), would not load, or is turned off.

- lines: ``split_keep`` and ``Handover`` (:mod:`._lines`);
- bulk reads: ``cut``, a call's files out of the buffer C read them into
  (:func:`._marshal.cut_files`).

The extension sits with the native libraries (:func:`._libs.lib_dir`), so
that it is found as they are: from an install, an editable install, or a
source checkout that stands ahead of the install on ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from types import ModuleType

from .libraries import lib_dir

__all__ = ["NAME", "NO_SPEEDUPS_ENV", "SPEEDUPS", "WHY_NOT"]

NAME = "asyncfs._speedups"
NO_SPEEDUPS_ENV = "ASYNCFS_NO_SPEEDUPS"  # set (to anything but ""): the Python versions, for comparison


def _load() -> tuple[ModuleType | None, str]:
    """The extension module, or None and why not: not built, turned off by
    NO_SPEEDUPS_ENV, or a file that would not load (built for another
    interpreter or machine): the Python versions serve then."""
    if os.environ.get(NO_SPEEDUPS_ENV):
        return None, f"{NO_SPEEDUPS_ENV} is set"
    if NAME in sys.modules:
        return sys.modules[NAME], ""
    folder = lib_dir()
    for suffix in EXTENSION_SUFFIXES:
        path = folder / f"_speedups{suffix}"
        if not path.is_file():
            continue
        spec = importlib.util.spec_from_file_location(NAME, path)
        if spec is None or spec.loader is None:  # pragma: no cover (a file with an extension's suffix)
            continue
        try:
            module = importlib.util.module_from_spec(spec)  # an extension module is loaded here
            spec.loader.exec_module(module)
        except ImportError as error:
            return None, f"{path} does not load: {error}"
        sys.modules[NAME] = module
        return module, ""
    return None, "asyncfs._speedups was not built (no CPython headers when asyncfs was installed: docs/install.md)"


SPEEDUPS, WHY_NOT = _load()
"""``asyncfs._speedups``, or None and the reason (``asyncfs doctor`` says both)."""
