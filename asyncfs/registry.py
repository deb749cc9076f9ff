"""Deprecated: ``asyncfs.registry`` moved to ``asyncfs._sync.registry``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._sync.registry", "asyncfs")
