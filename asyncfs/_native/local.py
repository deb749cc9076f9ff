"""The runtime's system calls on local paths and descriptors, for the
aiofiles drop-in: stats and opens of many paths, and reads and closes of
many descriptors, each in one call into C; and the ones made from what the
kernel holds at hand (``RESOLVE_CACHED``), which never wait and so may run
on an event loop's thread (``plugins/runtime``; docs/aiofiles.md). Answers
are Python values: the drop-in needs no cffi.

A stat's fields are ``STAT_FIELDS`` integers per path, as
``runtime_core.h`` orders them (``st_mode`` first, then ``st_ino``,
``st_dev``, ``st_nlink``, ``st_uid``, ``st_gid``, ``st_size``, ...).
"""

from __future__ import annotations

from errno import EAGAIN

from .binding import ffi, runtime

__all__ = [
    "STAT_FIELDS",
    "close_fds",
    "open_if_ready",
    "open_paths",
    "path_if_ready",
    "read_fds",
    "stat_paths",
]

STAT_FIELDS = 16  # ASYNCFS_STAT_FIELDS (tests/native/test_header.py holds them equal)

_uncleared = ffi.new_allocator(should_clear_after_alloc=False)


def stat_paths(packed: bytes, n: int) -> tuple[list[int], list[int]]:
    """stat(2) of the n NUL-joined paths in packed: every path's fields, one
    after another, and each path's errno (0: stat'ed)."""
    fields = ffi.new("int64_t[]", n * STAT_FIELDS)
    errors = ffi.new("int[]", n)
    runtime().ASYNCFS_StatPaths(packed, n, fields, errors)
    return ffi.unpack(fields, n * STAT_FIELDS), ffi.unpack(errors, n)


def path_if_ready(name: bytes) -> int:
    """An ``O_PATH`` descriptor of name, opened through cached directory
    entries only; -errno when the answer was at hand and is an error, and
    ``-EAGAIN`` when it was not at hand."""
    return int(runtime().ASYNCFS_PathIfReady(name))


def open_if_ready(name: bytes) -> tuple[int, list[int]] | None:
    """A regular file opened to read from what the kernel holds at hand,
    and its fields; (-errno, []) when that answer was at hand and is an
    error; None when anything was not at hand."""
    fields = ffi.new("int64_t[]", STAT_FIELDS)
    fd = int(runtime().ASYNCFS_OpenIfReady(name, fields))
    if fd == -EAGAIN:
        return None
    return fd, ffi.unpack(fields, STAT_FIELDS) if fd >= 0 else []


def open_paths(packed: bytes, n: int) -> tuple[list[int], list[int], list[int]]:
    """Each of the n NUL-joined paths in packed opened to read: its
    descriptor (-1: not opened), its fields, one path's after another, and
    its errno (0 with -1: not a regular file, not opened). The caller owns
    the descriptors."""
    fds = ffi.new("int[]", n)
    fields = ffi.new("int64_t[]", n * STAT_FIELDS)
    errnos = ffi.new("int[]", n)
    runtime().ASYNCFS_OpenPaths(packed, n, fds, fields, errnos)
    return ffi.unpack(fds, n), ffi.unpack(fields, n * STAT_FIELDS), ffi.unpack(errnos, n)


def close_fds(fds: list[int]) -> None:
    """Close descriptors that were only read (errors are not reported, as a
    read-only FileIO's close has none worth reporting), in one C call."""
    runtime().ASYNCFS_CloseFds(fds, len(fds))


def read_fds(fds: list[int], caps: list[int]) -> list[tuple[bytes, bool, int]]:
    """Each descriptor read from its offset on, up to its cap, in one C
    call: (the bytes read, whether its end was seen, the errno of a read
    that failed, or 0). They are read into one buffer, left uncleared."""
    n = len(fds)
    starts = [0] * n
    for k in range(1, n):
        starts[k] = starts[k - 1] + caps[k - 1]
    buffer = _uncleared("char[]", starts[-1] + caps[-1]) if n else ffi.NULL
    counts = ffi.new("int64_t[]", n)
    ends = ffi.new("int[]", n)
    errnos = ffi.new("int[]", n)
    runtime().ASYNCFS_ReadFds(fds, n, buffer, starts, caps, counts, ends, errnos)
    view = ffi.buffer(buffer) if n else b""
    return [(view[starts[k] : starts[k] + counts[k]], bool(ends[k]), errnos[k]) for k in range(n)]
