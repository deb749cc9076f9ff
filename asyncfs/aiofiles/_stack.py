"""The standard library's file object, built on a worker as ``open()``
builds it (``FileIO``, then ``BufferedReader``/``BufferedWriter``, then
``TextIOWrapper``, with the same arguments, in the same order, so that
every error is the one ``open()`` raises), with asyncfs's memory layer
(:mod:`._memory`) between ``FileIO`` and the buffer where that changes
nothing a program can see: a regular file opened only to read, or only to
write. Every other file (``+`` modes, ``buffering=0``, pipes, terminals,
unusual arguments) is exactly what ``open()`` returns.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .. import _uri
from .._streams import AT_HAND_MOST
from ..env import default_env
from ..errors import StatusError
from ._memory import Descriptor, ReadAhead, WriteBehind

__all__ = ["Info", "Landing", "Opened", "Unlayered", "close_opened", "layer_up", "layered", "open_stack"]

# the modes with a memory layer: mode -> (FileIO's mode, binary)
_LAYERED: dict[str, tuple[str, bool]] = {}
for _kind in "rwax":
    for _suffix in ("", "b", "t"):
        _LAYERED[_kind + _suffix] = _LAYERED[_suffix + _kind] = (_kind, _suffix == "b")

# what ends a line in each newline mode, as bytes of an ASCII-compatible encoding
_LINE_ENDS: dict[str | None, bytes] = {None: b"\n", "": b"\n", "\n": b"\n", "\r": b"\r", "\r\n": b"\r\n"}

# ASCII-compatible encodings, with the most bytes a character read takes
# ("\r\n" read as "\n" is two bytes)
# read() of an unlayered file is made on the loop's thread when the page
# cache holds all of it and it is at most AT_HAND_MOST bytes: preadv2 with
# RWF_NOWAIT refuses (EAGAIN) where it would wait for the disk (Linux)
_NOWAIT: int = getattr(os, "RWF_NOWAIT", 0) if hasattr(os, "preadv") else 0
_WIDTHS = {"utf-8": 4, "utf-8-sig": 4, "ascii": 2, "iso8859-1": 2, "cp1252": 2, "iso8859-15": 2}


class Info(Protocol):
    """What :func:`layer_up` needs of a file's fstat (an os.stat_result has it)."""

    @property
    def st_mode(self) -> int: ...
    @property
    def st_size(self) -> int: ...
    @property
    def st_blksize(self) -> int: ...


@dataclass
class Opened:
    """What the worker opened: the file object (or the :class:`Unlayered`
    file to build it on), its memory layer, and whether it is a regular file
    (a read of anything else may wait forever)."""

    file: Any
    memory: ReadAhead | WriteBehind | None
    regular: bool
    landing: Landing | None = None


@dataclass(frozen=True)
class Landing:
    """An atomic write: the temporary sibling written (created new and
    private, :func:`create_private`), and the target it replaces on close,
    with the target's permissions (the plugin's ``replace_file``)."""

    staged: str
    target: str
    replace: Callable[[str, str], None]

    def land(self) -> None:
        self.replace(self.staged, self.target)

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.staged)


def create_private(path: str, flags: int) -> int:
    """The opener of an atomic write's temporary sibling: a new file (never
    one that is there, nor through a link), its owner's alone until it
    lands."""
    return os.open(path, flags | os.O_EXCL | os.O_NOFOLLOW, 0o600)


def layered(
    mode: object, buffering: object, encoding: object, errors: object, newline: object
) -> tuple[str, bool] | None:
    """FileIO's mode and whether binary, when open() would take these
    arguments without a word and the file may get a memory layer."""
    spelled = _LAYERED.get(mode) if isinstance(mode, str) else None
    if spelled is None or type(buffering) is not int:
        return None
    if spelled[1]:  # binary: open() refuses text arguments, and warns of line buffering
        plain = encoding is None and errors is None and newline is None and buffering not in (0, 1)
    else:
        plain = (
            buffering != 0
            and (newline is None or (isinstance(newline, str) and newline in _LINE_ENDS))
            and isinstance(encoding, (str, type(None)))
            and isinstance(errors, (str, type(None)))
        )
    return spelled if plain else None


def open_stack(
    file: Any,
    mode: Any,
    buffering: Any,
    encoding: Any,
    errors: Any,
    newline: Any,
    closefd: Any,
    opener: Any,
    close_later: Callable[[io.FileIO | int], object],
    atomic: bool = False,
) -> Opened:
    """open(file, ...) on a worker. With atomic, the file opened is a new
    temporary sibling of file (of the file it leads to, where it is a
    link), to land on it by rename; a device or a FIFO is opened in place.
    (Nothing is read here: a read sees the file as it is when the read is
    made.)"""
    spelled = layered(mode, buffering, encoding, errors, newline)
    if atomic:
        if spelled is None or spelled[0] != "w" or not isinstance(file, (str, os.PathLike)):
            raise ValueError(f"atomic=True takes a path and a 'w' mode ('w', 'wb', 'wt'), not {file!r}, {mode!r}")
        target = os.fspath(file)
        if not isinstance(target, str):
            raise ValueError(f"atomic=True takes a str path, not {target!r}")
        plugin = default_env().filesystem(target).wrapped
        try:
            landed = plugin.landing_path(target)  # through links, as open() writes
        except StatusError:  # a loop of links: open() says so, as it would
            landed = None
        if landed is None:  # a device or a FIFO, which a rename would replace: written in place
            return open_stack(target, mode, buffering, encoding, errors, newline, True, opener, close_later)
        landing = Landing(_uri.staging_name(landed), landed, plugin.replace_file)
        create = create_private if opener is None else opener
        opened = open_stack(landing.staged, mode, buffering, encoding, errors, newline, True, create, close_later)
        opened.landing = landing
        if opened.memory is not None:
            opened.memory.file.name = target  # the file's name is the one it will have
        return opened
    if spelled is None:
        plain = open(file, mode, buffering, encoding, errors, newline, closefd, opener)  # noqa: SIM115 (returned)
        return Opened(plain, None, _is_regular(plain))
    kind = spelled[0]
    if isinstance(file, os.PathLike):
        file = os.fspath(file)  # as open() does: the file's name is the str (or bytes)
    raw = io.FileIO(file, kind, closefd, opener=opener)
    try:
        info = os.fstat(raw.fileno())
    except BaseException:
        raw.close()
        raise
    # a file opened by name starts at 0; one given as a descriptor anywhere
    position = 0 if opener is None and not isinstance(file, int) else None
    return layer_up(raw, info, position, mode, buffering, encoding, errors, newline, close_later)


def layer_up(
    raw: io.FileIO | Descriptor,
    info: Info,
    position: int | None,
    mode: str,
    buffering: int,
    encoding: Any,
    errors: Any,
    newline: Any,
    close_later: Callable[[io.FileIO | int], object],
) -> Opened:
    """The layers open() puts on raw (a FileIO of a mode :func:`layered`
    takes, or a regular file's descriptor opened to read, of which fstat
    said info, at position if known), with the memory layer. If they cannot
    be built, raw is closed and the error raised is open()'s."""
    kind, binary = _LAYERED[mode]
    regular = stat.S_ISREG(info.st_mode)
    memory: ReadAhead | WriteBehind | None = None
    outer: Any = raw  # what closes the file, as far as the layers are built
    try:
        if regular and kind == "r":
            memory = outer = ReadAhead(raw, close_later, position=position, size=info.st_size)
        elif regular:
            assert isinstance(raw, io.FileIO)
            memory = outer = WriteBehind(raw)
        line_buffering = buffering == 1 or (buffering < 0 and not regular and outer.isatty())
        blksize = info.st_blksize
        size = buffering if buffering > 1 else blksize if blksize > 1 else io.DEFAULT_BUFFER_SIZE
        outer = io.BufferedReader(outer, size) if kind == "r" else io.BufferedWriter(outer, size)
        if not binary:
            outer = io.TextIOWrapper(outer, encoding, errors, newline, line_buffering)
            outer.mode = mode
            if isinstance(memory, ReadAhead):
                memory.width = _WIDTHS.get(codecs.lookup(outer.encoding).name)
                memory.line_end = _LINE_ENDS[newline] if memory.width is not None else None
                memory.universal = newline in (None, "")
        return Opened(outer, memory, regular)
    except BaseException:
        if isinstance(outer, Descriptor):
            os.close(outer.fd)
        else:
            outer.close()
        raise


class Unlayered:
    """A regular file the runtime opened to read in binary (``"rb"``, see
    :mod:`._bulk`), with none of open()'s layers built yet. A read to the
    end and a close need none (the descriptor answers them), so the
    commonest use of a small file, open, ``read()``, close, builds none;
    anything else has them built (:meth:`layer_up`), at the file's offset,
    which this counts. Building them checks nothing open() would refuse in
    this mode, so building them later changes no answer.

    It owns its descriptor until it is closed or layered (then ``fd`` is
    -1); one dropped unclosed closes it, as a dropped ``FileIO`` does."""

    __slots__ = ("buffering", "close_later", "closed", "fd", "info", "name", "position")

    def __init__(
        self, fd: int, name: str | bytes, info: Info, buffering: int, close_later: Callable[[io.FileIO | int], object]
    ) -> None:
        self.fd = fd
        self.name = name
        self.info = info
        self.buffering = buffering
        self.close_later = close_later
        self.position = 0  # the descriptor's offset: opened by name, at 0; moved by reads to the end
        self.closed = False

    @property
    def size(self) -> int:
        """The file's size when it was opened: a guide to how much a read to the end takes."""
        return self.info.st_size

    def fileno(self) -> int:
        return self.fd

    def moved(self, count: int) -> None:
        """A read to the end took count bytes from the descriptor."""
        self.position += count

    def read_at_hand(self) -> bytes | None:
        """read() to the end, made here, on the loop's thread, when the
        page cache holds all of it (see _NOWAIT): no trip to a worker, as
        the standard library's read() makes it when called. None when it
        does not, is not possible here, or the file grew past its size at
        the open: a worker reads it then, as it would have."""
        # one byte more: the end seen; past the size at the open (the file
        # grew and a worker read on), that one byte alone
        want = max(self.info.st_size - self.position, 0) + 1
        if not _NOWAIT or want > AT_HAND_MOST:
            return None
        buffer = bytearray(want)
        try:
            count = os.preadv(self.fd, [buffer], self.position, _NOWAIT)
        except OSError:  # not in the page cache (EAGAIN), or not on this filesystem
            return None
        if count == want:  # grown: not the end
            return None
        self.position = os.lseek(self.fd, self.position + count, os.SEEK_SET)  # where read() leaves it
        return bytes(memoryview(buffer)[:count])

    def layer_up(self) -> Opened:
        """open()'s layers on the descriptor (which they own from now on),
        at its offset; on a closed file, closed layers (the descriptor is
        gone: nothing is closed twice)."""
        fd, self.fd = self.fd, -1
        opened = layer_up(
            Descriptor(fd, self.name),
            self.info,
            self.position,
            "rb",
            self.buffering,
            None,
            None,
            None,
            self.close_later,
        )
        if self.closed:
            assert isinstance(opened.memory, ReadAhead)
            opened.memory.closed_already()
        return opened

    def close_soon(self) -> None:
        """Close on the event loop's thread: the descriptor's close is handed
        to a worker and not waited for (it was only read)."""
        fd = self._closing()
        if fd >= 0:
            self.close_later(fd)

    def close(self) -> None:
        """Close here (on a worker)."""
        fd = self._closing()
        if fd >= 0:
            os.close(fd)

    def _closing(self) -> int:
        """Mark it closed: the descriptor to close, or -1 when there is none
        (closed already, or owned by its layers)."""
        if self.closed:
            return -1
        self.closed = True
        fd, self.fd = self.fd, -1
        return fd

    def __del__(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def _is_regular(file: Any) -> bool:
    try:
        return stat.S_ISREG(os.fstat(file.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def close_opened(opened: Opened) -> None:
    """Close what was opened for a caller that was cancelled meanwhile."""
    opened.file.close()
    if opened.landing is not None:
        opened.landing.discard()
