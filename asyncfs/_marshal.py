"""Deprecated: ``asyncfs._marshal`` moved to ``asyncfs._native.marshal``; this name
stays for a release, for imports and pickles that name it."""

from ._moved import moved

__getattr__ = moved(__name__, "asyncfs._native.marshal", "asyncfs")
