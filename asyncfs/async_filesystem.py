"""Deprecated: ``asyncfs.async_filesystem`` moved to ``asyncfs._async.filesystem``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._async.filesystem", "asyncfs", {"_rebuild_async": "asyncfs.env"})
