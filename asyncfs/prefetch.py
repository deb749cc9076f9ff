"""Deprecated: ``asyncfs.prefetch`` moved to ``asyncfs._streams.prefetch``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._streams.prefetch", "asyncfs")
