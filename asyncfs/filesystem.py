"""Deprecated: ``asyncfs.filesystem`` moved to ``asyncfs._sync.filesystem``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._sync.filesystem", "asyncfs", {"_rebuild_filesystem": "asyncfs._sync.registry"})
