"""``os`` functions, async, as aiofiles's ``aiofiles.os``: each runs on a
worker. Those that change something are shielded from cancellation (a
cancelled caller waits for the rename to finish, then sees the
cancellation); the queries are not. ``stat``, ``listdir``, ``remove``,
``unlink``, ``mkdir``, ``makedirs``, ``rmdir``, ``rename`` and ``replace``
also take URIs of a plugin's scheme (``mem://``, ``s3://``): a URI's stat
carries its kind, size and modification time, and zeros for the rest."""

from __future__ import annotations

import os
from typing import Any

from . import _plugins as plugins
from . import _stats as stats
from . import ospath as path
from ._run import run
from .base import query, wrap

__all__ = [
    "access",
    "getcwd",
    "listdir",
    "makedirs",
    "mkdir",
    "path",
    "readlink",
    "remove",
    "removedirs",
    "rename",
    "renames",
    "replace",
    "rmdir",
    "scandir",
    "stat",
    "symlink",
    "unlink",
    "wrap",
]

access = query(os.access)
getcwd = query(os.getcwd)
listdir = plugins.either(os.listdir, plugins.uri_listdir, shielded=False)
readlink = query(os.readlink)
stat = plugins.either(os.stat, plugins.uri_stat, shielded=False, batched=stats.stat)
makedirs = plugins.either(os.makedirs, plugins.uri_makedirs, shielded=True)
mkdir = plugins.either(os.mkdir, plugins.uri_mkdir, shielded=True)
remove = plugins.either(os.remove, plugins.uri_remove, shielded=True)
removedirs = wrap(os.removedirs)
rename = plugins.either(os.rename, plugins.uri_rename, shielded=True)
renames = wrap(os.renames)
replace = plugins.either(os.replace, plugins.uri_rename, shielded=True)
rmdir = plugins.either(os.rmdir, plugins.uri_rmdir, shielded=True)
symlink = wrap(os.symlink)
unlink = plugins.either(os.unlink, plugins.uri_remove, shielded=True)


async def scandir(path: Any = None, *, loop: object = None, executor: Any = None) -> Any:
    """os.scandir on a worker; the iterator holds an open directory (close
    it, or use it in ``with``), and a cancelled call closes the one it opened."""
    del loop
    args = () if path is None else (path,)
    return await run(executor, os.scandir, *args, shielded=False, discard=_close_scandir)


def _close_scandir(iterator: Any) -> None:
    iterator.close()


if hasattr(os, "link"):
    __all__ += ["link"]
    link = wrap(os.link)
if hasattr(os, "sendfile"):
    __all__ += ["sendfile"]
    sendfile = wrap(os.sendfile)
if hasattr(os, "statvfs"):
    __all__ += ["statvfs"]
    statvfs = query(os.statvfs)
