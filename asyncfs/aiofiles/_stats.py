"""``os.stat`` of many local paths in one C call, for the drop-in's queries.

A program that awaits ``aiofiles.os.stat`` or ``aiofiles.ospath.exists`` in
a task per path hands the pool many stats in one event-loop iteration. Run
one by one on a worker, each ``os.stat`` gives up the GIL for its system call
and then waits for the loop's thread to give it back, so the calls and the
loop take turns. Here the pool's combiner (:class:`asyncfs._async.pool.Combiner`)
makes them one call into the runtime (``ASYNCFS_StatPaths``), which stats
every path with the GIL released; the loop runs meanwhile.

Each answer is the standard library's: the ``os.stat_result`` ``os.stat``
builds from the same ``struct stat``, or the ``OSError`` it raises (the
subclass its errno selects, with strerror and the path as given). Only the
plain call takes this way: a ``str``, ``bytes`` or ``os.PathLike`` path
(symbolic links followed, no ``dir_fd``); anything else goes to the function
itself, which answers it as it always does.
"""

from __future__ import annotations

import os
import stat as _stat
from collections.abc import Callable, Coroutine, Sequence
from errno import EAGAIN
from functools import partial
from pathlib import PurePath
from typing import Any, Generic, TypeVar

from .._native import local
from ..env import default_env
from ._paths import c_path, packed_c_paths

__all__ = [
    "FIELDS",
    "Fields",
    "StatMany",
    "exists",
    "getatime",
    "getctime",
    "getmtime",
    "getsize",
    "isdir",
    "isfile",
    "stat",
]

T = TypeVar("T")

FIELDS = local.STAT_FIELDS
_UNSIGNED = 1 << 64
_BILLION = 1_000_000_000
# os.stat_result as os.stat fills it on this platform: the 10 fields of the
# tuple, float and nanosecond times, st_blksize, st_blocks, st_rdev
_LAYOUT = os.stat_result.n_fields == 19 and hasattr(os.stat_result, "st_rdev")


def stat_result(f: Sequence[int]) -> os.stat_result:
    """The os.stat_result of the fields ASYNCFS_StatPaths wrote for a path."""
    mode, ino, dev, nlink, uid, gid, size, asec, ansec, msec, mnsec, csec, cnsec, blksize, blocks, rdev = f
    # ino, dev and rdev are unsigned: made so inline, as this runs for every path
    return os.stat_result((
        mode, ino if ino >= 0 else ino + _UNSIGNED, dev if dev >= 0 else dev + _UNSIGNED, nlink, uid, gid, size,
        asec, msec, csec,
        asec + ansec * 1e-9, msec + mnsec * 1e-9, csec + cnsec * 1e-9,
        asec * _BILLION + ansec, msec * _BILLION + mnsec, csec * _BILLION + cnsec,
        blksize, blocks, rdev if rdev >= 0 else rdev + _UNSIGNED,
    ))  # fmt: skip


class Fields:
    """The mode, size and block size among the fields a C call wrote for
    its i-th path (all an open needs of its fstat: see ``_stack.layer_up``)."""

    __slots__ = ("st_blksize", "st_mode", "st_size")

    def __init__(self, fields: Any, i: int) -> None:
        base = i * FIELDS
        self.st_mode: int = fields[base]
        self.st_size: int = fields[base + 6]
        self.st_blksize: int = fields[base + 13]


def _refusal(path: str | bytes) -> Exception:
    """What os.stat raises for a path it refuses before any system call
    (see :func:`._paths.c_path`), in its words."""
    try:
        os.stat(path)
    except (OSError, ValueError) as exc:
        return exc
    raise AssertionError(f"os.stat took {path!r}")  # pragma: no cover (c_path refuses what os.stat does)


def _os_error(errno: int, path: str | bytes) -> OSError:
    """What os.stat raises for a path its system call refused."""
    return OSError(errno, os.strerror(errno), path)


class StatMany(Generic[T]):
    """A :class:`asyncfs._async.pool.Combiner` of ``os.stat(path)`` calls, each
    answered by ``answer(fields)`` (the path's ASYNCFS_STAT_FIELDS values),
    or True when answer is None (only whether the path could be stat'ed:
    no field is read); with ``failed``, a path that cannot be stat'ed is
    answered ``failed`` instead of raising (``os.path.exists``). A stat
    made at hand, on the loop's thread, is answered by ``of_stat`` from the
    ``os.stat_result`` of the path's descriptor (True when answer is None)."""

    # paths per C call: a turn's 10,000 stats go as 40 calls, whose answers
    # reach the loop while the next are stat'ed (128 and 1024 measured the
    # same within this machine's noise)
    limit = 256

    def __init__(
        self,
        answer: Callable[[Sequence[int]], T] | None,
        of_stat: Callable[[os.stat_result], T] | None = None,
        *,
        failed: T | None = None,
    ) -> None:
        self.answer = answer
        self.of_stat = of_stat
        self.failed = failed
        self._one = self.one  # bound once, not per call

    def __call__(self, calls: list[tuple[Any, ...]]) -> list[tuple[Any, BaseException | None]]:
        paths = [path for (path,) in calls]
        packed, wanted = packed_c_paths(paths)
        outcomes: list[tuple[Any, BaseException | None]] = [(None, None)] * len(calls)
        if len(wanted) < len(paths):
            for i in set(range(len(paths))).difference(wanted):
                outcomes[i] = self._failed(partial(_refusal, paths[i]))
        if not wanted:
            return outcomes
        fields, errnos = local.stat_paths(packed, len(wanted))
        answer = self.answer
        if answer is None:
            for i, errno in zip(wanted, errnos, strict=True):
                outcomes[i] = self._failed(partial(_os_error, errno, paths[i])) if errno else (True, None)
            return outcomes
        each = zip(*[iter(fields)] * FIELDS, strict=True)  # a path's fields at a time
        for i, errno, path_fields in zip(wanted, errnos, each, strict=True):
            if errno:
                outcomes[i] = self._failed(partial(_os_error, errno, paths[i]))
            else:
                outcomes[i] = (answer(path_fields), None)
        return outcomes

    def _failed(self, error: Callable[[], Exception]) -> tuple[Any, BaseException | None]:
        """The answer for a path that cannot be stat'ed: failed, or the
        error os.stat raises (made only then)."""
        if self.failed is not None:
            return self.failed, None
        return None, error()

    def one(self, path: str | bytes) -> T:
        """The answer for one path (a call the pool did not combine)."""
        ((result, error),) = self([(path,)])
        if error is not None:
            raise error
        value: T = result
        return value

    def call(self, path: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Coroutine[Any, Any, T] | None:
        """The pool's combined call for fn(path), to await; None when the
        call is not a plain one of a path (see the module's text)."""
        if args or kwargs:
            return None
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, (str, bytes)):
            return None
        return self._combined(path)

    def plain(self, path: object) -> Coroutine[Any, Any, T] | None:
        """:meth:`call` for a path that is certainly local and plain (a
        ``str`` with no ``://`` in it, or a standard library path object),
        decided without anything that could raise; None for any other."""
        if type(path) is str:
            if "://" in path:
                return None
        elif isinstance(path, PurePath):
            path = str(path)
        else:
            return None
        return self._combined(path)

    def _combined(self, path: str | bytes) -> Coroutine[Any, Any, T] | None:
        if not _LAYOUT:  # os.stat_result is not what stat_result builds
            return None
        return self._at_hand_or_pooled(path)

    async def _at_hand_or_pooled(self, path: str | bytes) -> T:
        """The answer from what the kernel holds in memory, on the loop's
        thread (ASYNCFS_PathIfReady, then an fstat of its descriptor: neither
        waits); else from a worker, with the other stats of the loop's
        iteration."""
        name = c_path(path)
        if name is not None:
            fd = local.path_if_ready(name)
            if fd >= 0:
                try:
                    of_stat = self.of_stat
                    return True if of_stat is None else of_stat(os.stat(fd))  # type: ignore[return-value]
                finally:
                    os.close(fd)
            if fd != -EAGAIN:
                if self.failed is not None:
                    return self.failed
                raise _os_error(-fd, path)
        return await default_env().pool.run(self._one, path, mutating=False, combine=self)


# what each function answers, from a path's fields (see ASYNCFS_STAT_FIELDS)
def _is_file(fields: Sequence[int]) -> bool:
    return _stat.S_ISREG(fields[0])


def _is_dir(fields: Sequence[int]) -> bool:
    return _stat.S_ISDIR(fields[0])


def _size(fields: Sequence[int]) -> int:
    return fields[6]


def _atime(fields: Sequence[int]) -> float:
    return fields[7] + fields[8] * 1e-9  # as os.stat's st_atime


def _mtime(fields: Sequence[int]) -> float:
    return fields[9] + fields[10] * 1e-9


def _ctime(fields: Sequence[int]) -> float:
    return fields[11] + fields[12] * 1e-9


def _same(result: os.stat_result) -> os.stat_result:
    return result


# os.stat, and the os.path functions that are os.stat and one field of it:
# from the fields of a combined call, and from a stat made at hand
stat = StatMany(stat_result, _same)
exists = StatMany(None, failed=False)
isfile = StatMany(_is_file, lambda st: _stat.S_ISREG(st.st_mode), failed=False)
isdir = StatMany(_is_dir, lambda st: _stat.S_ISDIR(st.st_mode), failed=False)
getsize = StatMany(_size, lambda st: st.st_size)
getmtime = StatMany(_mtime, lambda st: st.st_mtime)
getatime = StatMany(_atime, lambda st: st.st_atime)
getctime = StatMany(_ctime, lambda st: st.st_ctime)
