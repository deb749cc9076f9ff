"""URI parsing, validation and path cleaning, with TensorFlow's semantics.

A URI is ``scheme://authority/path``; the scheme follows RFC 3986
(``[a-zA-Z][a-zA-Z0-9+.-]*``). Anything without ``://`` (a bare path) has the
empty scheme, which the posix plugin serves. The path helpers are the generic
versions the core falls back to when a plugin does not offer
``translate_name``.

:func:`check_uri` is the one place where a URI is validated before a plugin
sees it (docs/uris.md has the rules): the sync adapter calls it for every
path it hands to C, and ``Env`` when it resolves a URI to a filesystem.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import NamedTuple, TypeAlias

from .errors import InvalidArgumentError

# What the Env accepts wherever it takes a URI or path: a str, or a
# pathlib.Path (any os.PathLike[str]), which stands for a bare local path.
StrPath: TypeAlias = "str | os.PathLike[str]"

__all__ = [
    "NAME_MAX",
    "URI",
    "StrPath",
    "all_start_with",
    "check_uri",
    "check_uris",
    "checked_scheme",
    "hashed_name",
    "is_internal_name",
    "is_scheme",
    "join",
    "parse_uri",
    "scheme_of",
    "scheme_part",
    "short_sibling",
]

_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*)://")
_SCHEME_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*\Z")
# The schemes scheme_of found well formed: a program uses a handful, and the
# next URI with one is then parsed without the pattern (bounded, so that
# hostile input cannot grow it).
_SCHEMES_SEEN: set[str] = set()
_SCHEMES_SEEN_MOST = 64
# Beginnings that settle every rule of check_uri but the NUL byte's (see
# _settling_prefix): those of the URIs checked in full so far, a few (a
# program uses a handful of schemes; bounded, so that hostile input cannot
# grow it). A URI that starts with one is searched for a NUL byte only.
_SETTLED: tuple[str, ...] = ("/",)
_SETTLED_MOST = 8
# The authorities a file:// URI may have (RFC 8089): none, or this host.
_LOCAL_AUTHORITIES = ("", "localhost")
# The longest name of one directory entry on the filesystems asyncfs serves
# (Linux, macOS, S3 key segments are longer but never need more).
NAME_MAX = 255


def is_scheme(name: str) -> bool:
    """Whether name is a scheme a URI can carry (RFC 3986), or "" (bare paths)."""
    return name == "" or _SCHEME_NAME.match(name) is not None


def check_uri(uri: str, argument: str = "path") -> str:
    """Return uri if a plugin may be handed it, else raise
    :class:`InvalidArgumentError` naming what is wrong.

    Refused: a NUL byte (C would cut the path there and reach another file);
    text before ``://`` that is not a scheme (``bad fs:///x`` is not a bare
    path); a ``file://`` URI with an authority other than ``localhost``
    (``file://data/x`` names host "data", not the folder ``data``).
    A URI that begins like one checked before (see _SETTLED) is only
    searched for a NUL byte.
    """
    global _SETTLED  # (a tuple replaced whole: safe to read from any thread)
    if type(uri) is str and uri.startswith(_SETTLED) and "\0" not in uri:
        return uri
    checked_scheme(uri, argument)
    settled = _settling_prefix(uri)
    if settled is not None and settled not in _SETTLED and len(_SETTLED) < _SETTLED_MOST:
        _SETTLED = (*_SETTLED, settled)
    return uri


def checked_scheme(uri: str, argument: str = "path") -> str:
    """:func:`check_uri` of uri, returning its scheme ("" for a bare path)."""
    if not isinstance(uri, str):
        raise TypeError(f"{argument} must be a str URI or path, not {type(uri).__name__}")
    if "\0" in uri:
        raise InvalidArgumentError(
            f"the {argument} contains a NUL byte at index {uri.index(chr(0))}; no file name can hold one",
            path=repr(uri),
        )
    scheme = scheme_of(uri, argument)
    if scheme == "file" and uri[7:8] not in ("/", ""):  # (file:/// and file:// have no authority)
        authority = uri[7:].partition("/")[0]
        if authority.lower() not in _LOCAL_AUTHORITIES:
            raise InvalidArgumentError(
                f"file:// URIs take no host (only 'localhost'), but {uri!r} names host {authority!r}; "
                f"write file:///{authority}/... for an absolute path or a bare path for a relative one",
                path=uri,
            )
    return scheme


def check_uris(uris: Sequence[str], argument: str = "path") -> str:
    """:func:`check_uri` of each of uris, and them joined by NUL bytes (how
    C is handed many), at a fraction of its cost where all share a
    beginning (the files of a dataset): with the first one's beginning that
    settles every other rule (its scheme, and for ``file://`` an empty
    authority), the others are only searched for a NUL byte, in C, over
    them joined. Otherwise each goes through check_uri, which remembers
    such beginnings across calls."""
    try:
        joined = "\0".join(uris)
    except TypeError:  # not all str: the loop below says which
        joined = ""
    if joined and uris:
        settled = _settling_prefix(check_uri(uris[0], argument))
        if settled is not None and all_start_with(joined, len(uris), settled):
            return joined
    for uri in uris:
        check_uri(uri, argument)
    return joined


def all_start_with(joined: str, count: int, prefix: str) -> bool:
    """Whether each of the count strings joined by NUL bytes in joined
    holds no NUL and starts with prefix: two counts, in C."""
    return joined.count("\0") == count - 1 and ("\0" + joined).count("\0" + prefix) == count


def _settling_prefix(uri: str) -> str | None:
    """A beginning of uri that passes every rule of :func:`check_uri` but
    the NUL byte's for any string that starts with it."""
    if uri.startswith("/"):  # a bare absolute path: no scheme can start with "/"
        return "/"
    match = _SCHEME.match(uri)
    if match is None:
        return None
    if match.group(1) == "file":  # the authority must be checked unless it is empty
        return "file:///" if uri.startswith("file:///") else None
    return match.group(0)


class URI(NamedTuple):
    scheme: str
    host: str
    path: str

    def prefix(self) -> str:
        """``scheme://host``, or "" for a bare path."""
        return f"{self.scheme}://{self.host}" if self.scheme else ""


def parse_uri(uri: str) -> URI:
    """Split uri into scheme, authority and path (no validation: see
    :func:`check_uri`)."""
    match = _SCHEME.match(uri)
    if match is None:
        return URI("", "", uri)
    rest = uri[match.end() :]
    slash = rest.find("/")
    if slash < 0:
        return URI(match.group(1), rest, "")
    return URI(match.group(1), rest[:slash], rest[slash:])


def scheme_part(uri: str) -> str:
    """What comes before the first ``://`` of uri, or "": its scheme if uri
    is valid, unchecked (a lookup among served schemes needs no check: a
    malformed one is never among them)."""
    end = uri.find("://")
    return uri[:end] if end >= 0 else ""


def scheme_of(uri: str, argument: str = "path") -> str:
    """The scheme of uri, "" for a bare path. Text before the first ``://``
    that is not a scheme is refused: a path holding ``://`` before any
    ``/`` is a mistyped URI, not a file name."""
    end = uri.find("://")
    if end < 0:
        return ""
    head = uri[:end]
    if head in _SCHEMES_SEEN:
        return head
    if _SCHEME_NAME.match(head) is not None:
        if len(_SCHEMES_SEEN) < _SCHEMES_SEEN_MOST:
            _SCHEMES_SEEN.add(head)
        return head
    if "/" not in head:
        raise InvalidArgumentError(
            f"{head!r} is not a URI scheme (letters, digits, '+', '-', '.', starting with a letter); "
            f"the {argument} {uri!r} names no filesystem",
            path=uri,
        )
    return ""


def parent(uri: str) -> str:
    """The folder that holds uri, as a URI: ``mem://a/b/c`` -> ``mem://a/b``,
    ``/tmp/x`` -> ``/tmp``; "" for a filesystem's top."""
    parsed = parse_uri(uri)
    path = parsed.path.rstrip("/")
    if not path:
        return ""
    head = path.rpartition("/")[0]
    if head or parsed.host:
        return parsed.prefix() + head
    return parsed.prefix() + "/" if path.startswith("/") else ""  # file:///x -> file:///


def join(base: str, name: str) -> str:
    """Append a child name to a URI or path."""
    if not base:
        return name
    return base + name if base.endswith("/") else f"{base}/{name}"


def short_sibling(uri: str, prefix: str, suffix: str) -> str:
    """``<parent>/<prefix><name><suffix>`` beside uri, with the name replaced
    by a short hash of itself when the whole would pass :data:`NAME_MAX`
    bytes, so that any name the filesystem accepts has its siblings too."""
    parent, slash, name = uri.rpartition("/")
    if len(prefix.encode()) + len(name.encode("utf-8", "surrogateescape")) + len(suffix.encode()) > NAME_MAX:
        name = hashed_name(name)
    return f"{parent}{slash}{prefix}{name}{suffix}"


def hashed_name(name: str) -> str:
    """The short stand-in :func:`short_sibling` uses for a long name."""
    return "~" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:24]


# The names asyncfs gives its own transient files beside the ones it
# writes: temporary siblings of atomic writes and copies, and a
# transaction's siblings (Siblings in _generic_staging, posix_transactions.c).
_INTERNAL = re.compile(r"\.~asyncfs-(?:tmp|copy)\.|\A\..*\.asyncfs-(?:txn\.|lock\.d\Z|journal\Z|intent\.d\Z)", re.S)


def is_internal_name(name: str) -> bool:
    """Whether a directory entry's name is one of asyncfs's own transient
    siblings, which walks, globs and listings for copies leave out: it may
    vanish at any moment (a write landing, a commit), and is never the
    caller's data."""
    return "asyncfs-" in name and _INTERNAL.search(name) is not None


def staging_name(uri: str) -> str:
    """A temporary sibling of uri for writes that land by rename."""
    return short_sibling(uri, "", f".~asyncfs-tmp.{os.getpid()}.{os.urandom(6).hex()}")
