"""``os.path`` functions, async, as aiofiles's ``aiofiles.ospath``: each
runs on a worker; none changes anything, so a cancelled caller does not
wait for it. ``exists``, ``isfile``, ``isdir``, ``getsize`` and ``getmtime``
also take URIs of a plugin's scheme (``mem://``, ``s3://``)."""

from __future__ import annotations

from os import path

from . import _plugins as plugins
from . import _stats as stats
from .base import query, wrap

__all__ = [
    "abspath",
    "exists",
    "getatime",
    "getctime",
    "getmtime",
    "getsize",
    "isdir",
    "isfile",
    "islink",
    "ismount",
    "samefile",
    "sameopenfile",
    "wrap",
]

abspath = query(path.abspath)
exists = plugins.either(path.exists, plugins.uri_exists, shielded=False, batched=stats.exists)
getatime = plugins.either(path.getatime, None, shielded=False, batched=stats.getatime)
getctime = plugins.either(path.getctime, None, shielded=False, batched=stats.getctime)
getmtime = plugins.either(path.getmtime, plugins.uri_getmtime, shielded=False, batched=stats.getmtime)
getsize = plugins.either(path.getsize, plugins.uri_getsize, shielded=False, batched=stats.getsize)
isdir = plugins.either(path.isdir, plugins.uri_isdir, shielded=False, batched=stats.isdir)
isfile = plugins.either(path.isfile, plugins.uri_isfile, shielded=False, batched=stats.isfile)
islink = query(path.islink)
ismount = query(path.ismount)
samefile = query(path.samefile)
sameopenfile = query(path.sameopenfile)
