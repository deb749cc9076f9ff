"""Where the native libraries and the C header live.

The built libraries (status runtime and built-in plugins) are installed in
``asyncfs/_lib`` and found through :mod:`importlib.resources`;
``ASYNCFS_LIB_DIR`` overrides the folder (useful for a build tree or a
system-wide install).
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

__all__ = ["get_include", "header_path", "library_path", "lib_dir"]

LIB_DIR_ENV = "ASYNCFS_LIB_DIR"
_SUFFIX = ".dylib" if sys.platform == "darwin" else ".so"


def get_include() -> str:
    """The folder to pass to the compiler as ``-I`` when building a plugin:
    it holds ``asyncfs/filesystem_interface.h``."""
    return str(Path(str(resources.files("asyncfs") / "include")))


def header_path() -> Path:
    return Path(get_include()) / "asyncfs" / "filesystem_interface.h"


def lib_dir() -> Path:
    override = os.environ.get(LIB_DIR_ENV)
    if override:
        return Path(override)
    return Path(str(resources.files("asyncfs") / "_lib"))


def library_path(name: str) -> Path:
    """The path of a native library shipped with asyncfs (``runtime``,
    ``posix``, ``memory``)."""
    path = lib_dir() / f"libasyncfs_{name}{_SUFFIX}"
    if not path.exists():
        raise FileNotFoundError(
            f"asyncfs native library {path.name} is not in {path.parent}; "
            f"reinstall asyncfs with 'pip install .' or point {LIB_DIR_ENV} "
            "at a folder holding the built libraries"
        )
    return path
