"""Which names go to a plugin: a URI whose scheme a loaded plugin serves
(``mem://``, ``s3://``). ``file://`` URIs name local paths; everything else
(paths, descriptors, and a string with ``://`` of no plugin's scheme) is what
the standard library takes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .. import _uri
from ..env import default_env

__all__ = ["c_path", "local", "packed_c_paths", "plugin_uri"]


def plugin_uri(name: object) -> str | None:
    """name, when it is a URI a plugin other than the local one serves."""
    if not isinstance(name, str) or "://" not in name:
        return None
    scheme = _uri.parse_uri(name).scheme
    if scheme in ("", "file") or scheme not in default_env().schemes():
        return None
    return name


def local(name: Any) -> Any:
    """The local path a ``file://`` URI names; anything else as given."""
    if isinstance(name, str) and name.startswith("file://"):
        return _uri.parse_uri(_uri.check_uri(name)).path
    return name


def fspath_or_fd(name: Any) -> Any:
    """What os functions take: a path, as os.fspath gives it, or a descriptor."""
    return name if isinstance(name, int) else os.fspath(name)


def c_path(path: str | bytes) -> bytes | None:
    """path as the runtime's C calls take it (os.fsencode's bytes), or None
    for one that the standard library refuses before any system call (a
    NUL in it, a character the filesystem encoding cannot encode): the
    caller leaves it to the function itself, which raises its own error."""
    try:
        name = os.fsencode(path)
    except UnicodeEncodeError:
        return None
    return None if b"\0" in name else name


def packed_c_paths(paths: Sequence[str | bytes]) -> tuple[bytes, list[int]]:
    """The paths the runtime's C calls can take (see :func:`c_path`) packed
    as they take them, each NUL-terminated, and their indices in paths. A
    group of plain strings, the usual one, is checked and encoded at once."""
    if all(type(path) is str for path in paths):
        joined = "\0".join(paths)  # type: ignore[arg-type]
        if joined.count("\0") == len(paths) - 1:  # no NUL in any of them
            try:
                return os.fsencode(joined) + b"\0", list(range(len(paths)))
            except UnicodeEncodeError:
                pass  # one of them cannot be encoded: which, c_path says
    taken: list[int] = []
    names: list[bytes] = []
    for i, path in enumerate(paths):
        name = c_path(path)
        if name is not None:
            taken.append(i)
            names.append(name)
    return b"".join(name + b"\0" for name in names), taken
