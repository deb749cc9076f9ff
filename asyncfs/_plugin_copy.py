"""Each plugin loads from a private copy bound to asyncfs's runtime.

A plugin finds TensorFlow's C API (``TF_SetStatus``, ``TF_StartThread``, ...)
by name when it is loaded. asyncfs cannot export those names: TensorFlow's own
libraries, imported into the same process later, would bind to them and read
asyncfs's statuses as their own, and a plugin loaded after TensorFlow would
bind to TensorFlow's. So the runtime exports each ``TF_X`` as ``AF_X`` (a name
TensorFlow never uses), and a plugin is loaded from a copy of its file in which

- each ``TF_X`` it imports that the runtime provides is renamed ``AF_X``, and
- a dependency on TensorFlow's framework library (which TensorFlow-built
  plugins link only for those symbols) names the runtime, already loaded.

The original file is never changed, so TensorFlow can load it too, bound to
itself; the two instances share nothing. Copies are cached by content in
``$ASYNCFS_CACHE_DIR``, else ``$XDG_CACHE_HOME/asyncfs``, else
``~/.cache/asyncfs`` (a private temporary folder when none is writable);
each use touches a copy, and copies unused for 30 days are removed when a
new one is written.
A dependency the plugin finds through ``$ORIGIN`` (bundled beside it, as
auditwheel does) is loaded from beside the original first.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path

from ._elf import DynamicTables, ElfError

__all__ = ["RUNTIME_SONAME", "TENSORFLOW_FRAMEWORK", "CopyError", "loadable"]

RUNTIME_SONAME = "libasyncfs_runtime.so"
TENSORFLOW_FRAMEWORK = ("libtensorflow_framework.so.2", "libtensorflow_framework.so")
CACHE_DIR_ENV = "ASYNCFS_CACHE_DIR"

_fallback: list[Path] = []  # a private temporary folder, made on first need


class CopyError(Exception):
    """The plugin's file cannot be read as ELF or renamed in place."""


def loadable(library: str, provided: Collection[str], preload: Callable[[str], object]) -> str:
    """The file to open for library: a copy whose ``TF_X`` imports among
    ``provided`` (names without the prefix) are bound to the runtime, or
    library itself when it is not ELF or imports none of them. ``preload``
    opens each dependency found through ``$ORIGIN`` before the copy is used."""
    try:
        data = Path(library).read_bytes()
    except OSError:
        return library  # opening it says what is wrong
    if not data.startswith(b"\x7fELF"):
        return library
    try:
        tables = DynamicTables(data)
        imports = {name: f"AF_{name[3:]}" for name in tables.imports if name[:3] == "TF_" and name[3:] in provided}
        needed = {name: RUNTIME_SONAME for name in tables.needed if name in TENSORFLOW_FRAMEWORK}
        if not imports and not needed:
            return library
        bound = tables.renamed(needed=needed, imports=imports)
    except ElfError as exc:
        raise CopyError(str(exc)) from None
    for dependency in _beside(Path(library).resolve().parent, tables):
        preload(str(dependency))
    return str(_cached(bound, Path(library).name))


def _beside(origin: Path, tables: DynamicTables) -> list[Path]:
    """The dependencies the original finds through $ORIGIN, which the copy
    (in another folder) would not."""
    found = []
    folders = [
        Path(entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin)))
        for entry in tables.search_path
        if "ORIGIN" in entry
    ]
    for name in tables.needed:
        if name in TENSORFLOW_FRAMEWORK or "/" in name:
            continue
        candidate = next((folder / name for folder in folders if (folder / name).is_file()), None)
        if candidate is not None:
            found.append(candidate)
    return found


def _cached(data: bytes, name: str) -> Path:
    digest = hashlib.sha256(data).hexdigest()[:32]
    try:
        return _store(_cache_root() / digest, name, data, prune=True)
    except OSError:
        if not _fallback:
            _fallback.append(Path(tempfile.mkdtemp(prefix="asyncfs-plugins-")))
        return _store(_fallback[0] / digest, name, data)


def _prune(root: Path, before: float) -> None:
    for copy in root.glob("*/*"):
        try:
            if copy.stat().st_mtime < before:
                copy.unlink()
                copy.parent.rmdir()
        except OSError:
            continue  # in use by a concurrent prune, or not empty: leave it


def _cache_root() -> Path:
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override) / "plugins"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "asyncfs" / "plugins"


# A copy not used for this long is removed when another is written (a
# process still running it keeps its mapping; the next load writes it again).
UNUSED_FOR = 30 * 24 * 3600


def _store(folder: Path, name: str, data: bytes, *, prune: bool = False) -> Path:
    """folder/name holding data, written whole under a temporary name first
    (another process may be loading the same copy). Each use of a copy
    touches it; with prune, writing one removes the copies beside it that
    went unused for UNUSED_FOR seconds (older builds of upgraded plugins)."""
    target = folder / name
    try:
        if target.read_bytes() == data:
            os.utime(target)
            return target
    except FileNotFoundError:
        pass
    if prune:
        _prune(folder.parent, time.time() - UNUSED_FOR)
    folder.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
