"""Deprecated: ``asyncfs.compression`` moved to ``asyncfs._streams.compression``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._streams.compression", "asyncfs (the codec names of env.open's compression=)")
