"""URI parsing and path cleaning, with TensorFlow's semantics.

A URI is ``scheme://host/path``; the scheme is ``[a-zA-Z][a-zA-Z0-9.]*``.
Anything else (a bare path) has the empty scheme, which the posix plugin
serves. These are the generic versions the core falls back to when a plugin
does not offer ``translate_name``.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

__all__ = ["URI", "clean_path", "join", "parse_uri", "scheme_of", "translate_name"]

_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9.]*)://")


class URI(NamedTuple):
    scheme: str
    host: str
    path: str

    def prefix(self) -> str:
        """``scheme://host``, or "" for a bare path."""
        return f"{self.scheme}://{self.host}" if self.scheme else ""


def parse_uri(uri: str) -> URI:
    match = _SCHEME.match(uri)
    if match is None:
        return URI("", "", uri)
    rest = uri[match.end() :]
    slash = rest.find("/")
    if slash < 0:
        return URI(match.group(1), rest, "")
    return URI(match.group(1), rest[:slash], rest[slash:])


def scheme_of(uri: str) -> str:
    match = _SCHEME.match(uri)
    return match.group(1) if match else ""


def clean_path(path: str) -> str:
    """Collapse "//", "." and ".."; drop a trailing "/"; "" becomes "."."""
    absolute = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append("..")
            continue
        parts.append(part)
    cleaned = "/".join(parts)
    if absolute:
        return "/" + cleaned
    return cleaned or "."


def translate_name(uri: str) -> str:
    """TensorFlow's generic TranslateName: "" stays "", an empty path is
    "/", otherwise the cleaned path part of the URI."""
    if not uri:
        return uri
    path = parse_uri(uri).path
    return clean_path(path) if path else "/"


def join(base: str, name: str) -> str:
    """Append a child name to a URI or path."""
    if not base:
        return name
    return base + name if base.endswith("/") else f"{base}/{name}"


def staging_name(uri: str) -> str:
    """A temporary sibling of uri for writes that land by rename."""
    return f"{uri}.~asyncfs-tmp.{os.getpid()}.{os.urandom(6).hex()}"
