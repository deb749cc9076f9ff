"""Where the native libraries and the C header live.

The built libraries (status runtime and built-in plugins) are installed in
``asyncfs/_lib`` and found through :mod:`importlib.resources`. When the
imported package has no such folder (a source checkout on ``sys.path`` ahead
of the install, or an editable install, whose compiled files stay in
site-packages) they are found through the installed distribution's files.
``ASYNCFS_LIB_DIR`` overrides both.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

__all__ = ["get_include", "header_path", "lib_dir", "library_path", "unavailable_reason"]

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
    packaged = Path(str(resources.files("asyncfs") / "_lib"))
    if packaged.is_dir():
        return packaged
    from importlib import metadata  # noqa: PLC0415 (slow to import; needed only here)

    try:
        installed = Path(str(metadata.distribution("asyncfs").locate_file("asyncfs/_lib")))
    except metadata.PackageNotFoundError:
        return packaged
    return installed if installed.is_dir() else packaged


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


def unavailable_reason(name: str) -> str | None:
    """Why an optional built-in plugin (``s3``) was not built, or None when
    its library is there. The build leaves the reason in ``<name>.unavailable``."""
    folder = lib_dir()
    if (folder / f"libasyncfs_{name}{_SUFFIX}").exists():
        return None
    note = folder / f"{name}.unavailable"
    if note.exists():
        return note.read_text(encoding="utf-8").strip()
    return f"libasyncfs_{name}{_SUFFIX} is not in {folder}"
