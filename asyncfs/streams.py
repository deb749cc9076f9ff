"""Deprecated: ``asyncfs.streams`` moved to ``asyncfs._streams.streams``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._streams.streams", "asyncfs")
