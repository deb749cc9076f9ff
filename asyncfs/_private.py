"""What asyncfs keeps for one user of a shared machine, where no other user
can write: folders checked for owner and mode before use (the plugin copy
cache, the state folder), and the key that signs what a generic
transaction leaves beside its root (its journal), so that a journal another
user planted is never carried out.

Everything here is opened without following a link, by descriptor, so a
folder or file swapped in between a check and its use is never the one used.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import hmac
import os
import stat
import tempfile
from pathlib import Path

from .errors import PermissionDeniedError

__all__ = ["PrivateFolderError", "open_private_folder", "sign", "state_folder"]

_KEY_NAME = "journal.key"
_KEY_BYTES = 32


class PrivateFolderError(PermissionDeniedError):
    """A folder that must be this user's alone is not: it names the folder
    and what is wrong with it."""


def open_private_folder(path: Path, *, create: bool = True) -> int:
    """A descriptor of the folder path, made (0700, with its missing
    parents) when create and missing, and checked: a folder, not a link,
    owned by this user, and writable by no one else. Raises
    :class:`PrivateFolderError` saying what is wrong otherwise."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.makedirs(path, mode=0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        wrong = "it is a link, not a folder" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror
        raise PrivateFolderError(f"{path} cannot be used: {wrong}", path=str(path)) from None
    info = os.fstat(fd)
    wrong = None
    if info.st_uid != os.geteuid():
        wrong = "it belongs to another user"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        wrong = f"others may write in it (mode {stat.S_IMODE(info.st_mode):o})"
    if wrong is not None:
        os.close(fd)
        raise PrivateFolderError(f"{path} cannot be used: {wrong}", path=str(path))
    return fd


def state_folder() -> Path:
    """Where this user's asyncfs state lives: ``$ASYNCFS_STATE_DIR``, else
    ``$XDG_STATE_HOME/asyncfs``, else ``~/.local/state/asyncfs``; where none
    can be made, ``<tmp>/asyncfs-state-<uid>``."""
    chosen = os.environ.get("ASYNCFS_STATE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "asyncfs"


@functools.cache
def _key(euid: int) -> bytes:
    """This user's signing key (one per user, kept in the state folder)."""
    for folder in (state_folder(), Path(tempfile.gettempdir()) / f"asyncfs-state-{euid}"):
        try:
            fd = open_private_folder(folder)
        except (OSError, PrivateFolderError):
            continue
        try:
            return _read_or_make_key(fd, folder)
        finally:
            os.close(fd)
    raise PrivateFolderError(
        f"no folder of this user's alone could hold its key ({state_folder()}); set ASYNCFS_STATE_DIR to one"
    )


def _read_or_make_key(folder_fd: int, folder: Path) -> bytes:
    """The key in the folder, written whole the first time (a new file of
    random bytes linked into place, so two processes agree on one)."""
    while True:
        try:
            fd = os.open(_KEY_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
        except FileNotFoundError:
            fresh = f".{_KEY_NAME}.{os.urandom(8).hex()}"
            out = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder_fd)
            try:
                os.write(out, os.urandom(_KEY_BYTES))
            finally:
                os.close(out)
            try:
                os.link(fresh, _KEY_NAME, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
            except FileExistsError:
                pass  # another process made it first: that one is the key
            finally:
                os.unlink(fresh, dir_fd=folder_fd)
            continue
        try:
            info = os.fstat(fd)
            key = os.read(fd, _KEY_BYTES + 1)
        finally:
            os.close(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.geteuid()
            or info.st_mode & 0o077
            or len(key) != _KEY_BYTES
        ):
            raise PrivateFolderError(f"{folder / _KEY_NAME} is not a key of this user's alone", path=str(folder))
        return key


def sign(data: bytes) -> str:
    """data's signature with this user's key (HMAC-SHA256, hex): only this
    user's processes can make it."""
    return hmac.new(_key(os.geteuid()), data, hashlib.sha256).hexdigest()
