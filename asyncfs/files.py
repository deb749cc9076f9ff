"""Deprecated: ``asyncfs.files`` moved to ``asyncfs._sync.files``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._sync.files", "asyncfs")
