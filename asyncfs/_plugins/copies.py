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
``~/.cache/asyncfs``, when that folder is this user's and no one else may
write it (a private temporary folder otherwise, removed when the process
ends); a copy is checked, byte for byte, through the descriptor it is then
loaded by, so no other process can slip other code in between. Each use
touches a copy, and copies unused for 30 days are removed when a new one is
written.
A dependency the plugin finds through ``$ORIGIN`` (bundled beside it, as
auditwheel does) is loaded from beside the original first.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from .._private import PrivateFolderError, open_private_folder
from .elf import DynamicTables, ElfError

__all__ = ["RUNTIME_SONAME", "TENSORFLOW_FRAMEWORK", "CopyError", "loadable"]

RUNTIME_SONAME = "libasyncfs_runtime.so"
TENSORFLOW_FRAMEWORK = ("libtensorflow_framework.so.2", "libtensorflow_framework.so")
CACHE_DIR_ENV = "ASYNCFS_CACHE_DIR"

_fallback: list[Path] = []  # a private temporary folder, made on first need
# the descriptors loaded plugins were opened by, by the copy's (device,
# inode): a registry that loads the same copy again reuses its descriptor
# (the dynamic loader finds the library it has) instead of holding one
# more for good
_held: dict[tuple[int, int], int] = {}


class CopyError(Exception):
    """The plugin's file cannot be read as ELF or renamed in place."""


@contextmanager
def loadable(library: str, provided: Collection[str], preload: Callable[[str], object]) -> Iterator[str]:
    """The name to open for library, while the block runs: a copy whose
    ``TF_X`` imports among ``provided`` (names without the prefix) are
    bound to the runtime, or library itself when it is not ELF or imports
    none of them. The copy is checked and then loaded through one
    descriptor (``/proc/self/fd/N``, kept open once the block ends
    without an error), so the bytes checked are the bytes loaded, whatever
    anyone does to the cache meanwhile. ``preload`` opens
    each dependency found through ``$ORIGIN`` before the copy is used."""
    try:
        data = Path(library).read_bytes()
    except OSError:
        yield library  # opening it says what is wrong
        return
    if not data.startswith(b"\x7fELF"):
        yield library
        return
    try:
        tables = DynamicTables(data)
        imports = {name: f"AF_{name[3:]}" for name in tables.imports if name[:3] == "TF_" and name[3:] in provided}
        needed = {name: RUNTIME_SONAME for name in tables.needed if name in TENSORFLOW_FRAMEWORK}
        if not imports and not needed:
            yield library
            return
        bound = tables.renamed(needed=needed, imports=imports)
    except ElfError as exc:
        raise CopyError(str(exc)) from None
    for dependency in _beside(Path(library).resolve().parent, tables):
        preload(str(dependency))
    fd, path = _cached(bound, Path(library).name)
    stat = os.fstat(fd)
    copy = (stat.st_dev, stat.st_ino)
    held = _held.get(copy)
    if held is not None and _names(held, copy):  # loaded before, through a descriptor kept open
        os.close(fd)
        fd = held
    else:
        held = None
    try:
        by_descriptor = f"/proc/self/fd/{fd}"
        yield by_descriptor if os.path.exists(by_descriptor) else str(path)
    except BaseException:
        if held is None:
            os.close(fd)
        raise
    # kept open for good, as the plugin stays loaded: the dynamic loader
    # knows a library by the name it was opened by, so that name must never
    # come to mean another file
    _held[copy] = fd


def _names(fd: int, copy: tuple[int, int]) -> bool:
    """Whether fd is still open on copy (device, inode)."""
    try:
        stat = os.fstat(fd)
    except OSError:
        return False
    return (stat.st_dev, stat.st_ino) == copy


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


def _cached(data: bytes, name: str) -> tuple[int, Path]:
    """A descriptor of a copy holding data, and where it lies: in the cache
    folder when it is this user's alone, else in a private temporary folder."""
    digest = hashlib.sha256(data).hexdigest()[:32]
    root = _cache_root()
    try:
        folder = open_private_folder(root)
    except (OSError, PrivateFolderError):
        pass  # another user's, or one others may write: never trusted
    else:
        try:
            return _store(folder, root, digest, name, data, prune=True)
        except OSError:
            pass
        finally:
            os.close(folder)
    if not _fallback:
        _fallback.append(Path(tempfile.mkdtemp(prefix="asyncfs-plugins-")))
        atexit.register(_remove_fallback, os.getpid())
    folder = open_private_folder(_fallback[0], create=False)
    try:
        return _store(folder, _fallback[0], digest, name, data)
    finally:
        os.close(folder)


def _remove_fallback(owner: int) -> None:
    """The private temporary folder goes when the process that made it ends
    (the copies loaded from it stay mapped); a forked child leaves it."""
    if os.getpid() == owner:
        shutil.rmtree(_fallback[0], ignore_errors=True)


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

_PRIVATE = os.O_NOFOLLOW | os.O_CLOEXEC


def _store(root: int, root_path: Path, digest: str, name: str, data: bytes, *, prune: bool = False) -> tuple[int, Path]:
    """A descriptor of <root>/<digest>/<name> holding data, written whole
    under a temporary name first (another process may be loading the same
    copy) where it is missing or differs. Each use of a copy touches it;
    with prune, writing one removes the copies beside it that went unused
    for UNUSED_FOR seconds (older builds of upgraded plugins)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(digest, 0o700, dir_fd=root)
    folder = os.open(digest, os.O_RDONLY | os.O_DIRECTORY | _PRIVATE, dir_fd=root)
    try:
        _check_ours(folder, root_path / digest)
        fd = _open_copy(folder, name, data)
        if fd is not None:
            os.utime(fd)
            return fd, root_path / digest / name
        if prune:
            _prune(root_path, time.time() - UNUSED_FOR)
        temporary = f".{name}.{os.urandom(8).hex()}"
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _PRIVATE, 0o600, dir_fd=folder)
        try:
            with os.fdopen(out, "wb") as stream:
                stream.write(data)
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)
            raise
        fd = _open_copy(folder, name, data)
        if fd is None:
            raise OSError(f"the copy written to {root_path / digest / name} does not read back whole")
        return fd, root_path / digest / name
    finally:
        os.close(folder)


def _check_ours(fd: int, path: Path) -> None:
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise OSError(f"{path} is not this user's alone")


def _open_copy(folder: int, name: str, data: bytes) -> int | None:
    """A descriptor of the copy name in folder when it is a regular file of
    this user's, writable by no one else, holding exactly data; else None
    (it is missing, or it is written again). Never follows a link, never
    waits on a FIFO."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _PRIVATE, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        os.unlink(name, dir_fd=folder)  # a link where a copy belongs: replaced
        return None
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_size == len(data):
            _check_ours(fd, Path(name))
            if _read_all(fd, len(data)) == data:
                return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _read_all(fd: int, size: int) -> bytes:
    parts, offset = [], 0
    while offset < size + 1:
        chunk = os.pread(fd, size + 1 - offset, offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)
