"""Opening local files to read, and reading them to the end, many per C call.

``async with aiofiles.open(path) as f: data = await f.read()`` in a task
per file hands the pool many opens in one event-loop iteration, then many
reads. Run one by one on a worker, each ``open``, ``fstat`` and ``read``
gives up the GIL for its system call and waits for the loop's thread to
give it back, so the worker and the loop take turns at every call. Here the
pool's combiner (:class:`asyncfs._async.pool.Combiner`) makes each group one call
into the runtime, with the GIL released once: ``ASYNCFS_OpenPaths`` opens
and fstat's every path, ``ASYNCFS_ReadFds`` reads every file to its end.

What the caller gets is what it would get otherwise, to the byte and the
exception: the opened file has the layers :func:`._stack.open_stack` builds
(over the descriptor, named by the path as given: its ``FileIO`` is made
when something needs it, see :class:`._memory.Descriptor`), a file that
cannot be opened raises the ``OSError`` ``open()`` raises, with its errno
and the path; each read is made when the call is, from the file's offset,
and only a read that returned nothing ends it.
Anything else takes the ordinary way (:func:`._stack.open_stack`, the file
object's own ``read``): other modes and arguments, a path C cannot take, and
whatever is not a regular file (a FIFO's open may wait for a writer, which
must not hold up the others).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from .._async import ALONE
from .._native import local
from ._memory import Descriptor, ReadAhead
from ._paths import c_path
from ._stack import Opened, Unlayered, layer_up, layered
from ._stats import Fields

if TYPE_CHECKING:
    from .base import AsyncBase

__all__ = ["OPEN_TO_READ", "READ_TO_END", "close_descriptors"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)  # FileIO's for mode "r", as its audit event says
# a read to the end takes at most this much per file in the C call; a
# bigger file's rest is read by the file object, in growing reads
_MOST = 1 << 20
_Outcome = tuple[Any, BaseException | None]


class OpenToRead:
    """A :class:`asyncfs._async.pool.Combiner` of :func:`._stack.open_stack`
    calls that it :meth:`takes`: their opens in one C call. A path with a
    NUL or an unencodable character in it, and what is not a regular file,
    are opened by themselves, after the others (see ALONE), and answered as
    open() answers them."""

    limit = 256  # paths per C call, as for ASYNCFS_StatPaths

    @staticmethod
    def takes(args: tuple[Any, ...]) -> bool:
        """Whether open_stack(*args) is a plain open of a local path to read
        (no descriptor, closefd, opener or atomic write)."""
        file, mode, buffering, encoding, errors, newline, closefd, opener, _close_later, atomic = args
        spelled = layered(mode, buffering, encoding, errors, newline)
        return (
            spelled is not None
            and spelled[0] == "r"
            and closefd is True
            and opener is None
            and not atomic
            and isinstance(file, (str, bytes, os.PathLike))
        )

    @staticmethod
    def at_hand(args: tuple[Any, ...]) -> Opened | None:
        """open_stack(*args), for args it :meth:`takes`, made on the loop's
        thread when the kernel can open the file from what it holds in
        memory (``ASYNCFS_OpenIfReady`` never waits); None when it cannot:
        the caller opens it on the pool (the same call, answered the same)."""
        path = os.fspath(args[0])
        name = c_path(path)
        if name is None:
            return None
        ready = local.open_if_ready(name)
        if ready is None:
            return None
        fd, fields = ready
        try:
            sys.audit("open", path, "r", _OPEN_FLAGS)  # as FileIO announces it
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        if fd < 0:
            raise OSError(-fd, os.strerror(-fd), path)
        _file, mode, buffering, encoding, errors, newline, _closefd, _opener, close_later, _atomic = args
        info = Fields(fields, 0)
        opened, error = _layered_on(fd, path, info, mode, buffering, encoding, errors, newline, close_later)
        if error is not None:
            raise error
        return opened  # type: ignore[no-any-return]

    def __call__(self, calls: list[tuple[Any, ...]]) -> list[_Outcome]:
        outcomes: list[_Outcome] = [(ALONE, None)] * len(calls)
        native: list[tuple[int, str | bytes, bytes]] = []  # (call, its path as open() names the file, for C)
        for i, args in enumerate(calls):
            path = os.fspath(args[0])
            name = c_path(path)
            if name is None:
                continue  # open() refuses it, in its words
            try:
                sys.audit("open", path, "r", _OPEN_FLAGS)  # as FileIO announces it
            except Exception as exc:  # a hook refused it
                outcomes[i] = (None, exc)
                continue
            native.append((i, path, name))
        if native:
            self._open(calls, native, outcomes)
        return outcomes

    def _open(
        self, calls: list[tuple[Any, ...]], native: list[tuple[int, str | bytes, bytes]], out: list[_Outcome]
    ) -> None:
        packed = b"\0".join(name for _, _, name in native) + b"\0"
        fds, fields, errnos = local.open_paths(packed, len(native))
        try:
            for k, (i, path, _name) in enumerate(native):
                _file, mode, buffering, encoding, errors, newline, _closefd, _opener, close_later, _atomic = calls[i]
                fd, errno = fds[k], errnos[k]
                if fd >= 0:
                    fds[k] = -1  # the file object owns it now
                    out[i] = _layered_on(
                        fd, path, Fields(fields, k), mode, buffering, encoding, errors, newline, close_later
                    )
                elif errno:
                    out[i] = (None, OSError(errno, os.strerror(errno), path))
                # else not a regular file, not opened: it is opened by itself
        finally:  # whatever was opened and not handed over is closed
            for fd in fds:
                if fd >= 0:
                    os.close(fd)


def _layered_on(
    fd: int, name: str | bytes, info: Fields, mode: str, buffering: int, encoding: Any, errors: Any, newline: Any,
    close_later: Any,
) -> _Outcome:  # fmt: skip
    if "b" in mode:  # binary ("rb", "br"): its layers are built when something needs them
        return (Opened(Unlayered(fd, name, info, buffering, close_later), None, True), None)
    try:
        return (layer_up(Descriptor(fd, name), info, 0, mode, buffering, encoding, errors, newline, close_later), None)
    except Exception as exc:  # as open() raises it (an unknown encoding): the descriptor is closed
        return (None, exc)


def close_descriptors(fds: list[int]) -> None:
    """Close descriptors that were only read (errors are not reported, as a
    read-only FileIO's close has none worth reporting), in one C call."""
    local.close_fds(fds)


class ReadToEnd:
    """A :class:`asyncfs._async.pool.Combiner` of a file object's worker calls
    (see :meth:`.base.AsyncBase._call`) of its read to the end: the reads
    from the descriptors, to their ends, in one C call, then each file
    object's read, which takes them: from its read-ahead layer
    (:attr:`ReadAhead.fetched`), or, for a binary file with no layers yet
    (:class:`._stack.Unlayered`), as its argument."""

    limit = 256

    def __call__(self, calls: list[tuple[Any, ...]]) -> list[_Outcome]:
        claimed: list[tuple[int, AsyncBase, ReadAhead | Unlayered]] = []
        for i, (file, _fn, _args, _line) in enumerate(calls):
            source = getattr(file, "_unlayered", None) or file._memory  # only binary readers can be unlayered
            # another call of the file holds it (or the file is here twice): it waits its turn
            if isinstance(source, (ReadAhead, Unlayered)) and not source.closed and file._claim():
                claimed.append((i, file, source))
        try:
            fetched = self.fetch([source for _, _, source in claimed])
        except Exception:  # each file object's read then reads by itself, and reports what it meets
            fetched = [None] * len(claimed)
        outcomes: list[_Outcome] = [(None, None)] * len(calls)
        taken = set()
        for (i, file, source), got in zip(claimed, fetched, strict=True):
            taken.add(i)
            _file, fn, args, line = calls[i]
            if isinstance(source, Unlayered):
                outcomes[i] = _outcome(file._claimed, fn, (got,), line)
                continue
            source.fetched = got
            outcomes[i] = _outcome(file._claimed, fn, args, line)
            source.fetched = None  # if the read did not take it (a closed file raised first)
        for i, (file, fn, args, line) in enumerate(calls):
            if i not in taken:
                outcomes[i] = _outcome(file._locked, fn, args, line)
        return outcomes

    def fetch(self, files: list[ReadAhead | Unlayered]) -> list[tuple[bytes, bool] | None]:
        """Each file's bytes from its offset to its end (or _MOST of them),
        and whether the end was seen; None where the first read failed (the
        file object's own read then fails, as it would)."""
        if not files:
            return []
        caps = [_MOST if memory.size >= _MOST else memory.size + 1 for memory in files]  # one more: the end seen
        read = local.read_fds([memory.fileno() for memory in files], caps)
        # a read that failed after others read something: the file object's next read reports it
        return [None if errno and not data else (data, end) for data, end, errno in read]


def _outcome(fn: Any, *args: Any) -> _Outcome:
    try:
        return (fn(*args), None)
    except Exception as exc:
        return (None, exc)


OPEN_TO_READ = OpenToRead()
READ_TO_END = ReadToEnd()
