"""The raw layer of a drop-in file's standard library stack.

``asyncfs.aiofiles.open`` builds exactly the stack ``open()`` builds
(``FileIO`` under ``BufferedReader``/``BufferedWriter`` under
``TextIOWrapper``), with one layer added between ``FileIO`` and the buffer:

- :class:`ReadAhead` (files opened only for reading) holds the file's next
  bytes: when the buffer above asks for more, it reads :data:`CHUNK` on the
  worker making that call (the end of the file is never remembered);
- :class:`WriteBehind` (files opened only for writing) collects what the
  buffer hands down until a worker writes it, :data:`CHUNK` at a time.

A call that these bytes answer (a line that is already read, a write that
fits) then runs on the event loop's thread, in the standard library's own
code, with no system call: decoding, newlines and ``tell`` cookies stay the
standard library's. Everything else runs on a worker. To the layers above,
each is just a bigger buffer.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["CHUNK", "Descriptor", "ReadAhead", "WriteBehind"]

CHUNK = 64 * 1024  # bytes read ahead, or written behind, per worker call
# bytes a decoder may hold back (a character cut in two, a "\r" waiting to
# see whether "\n" follows), beyond `width` per character
_SLACK = 8


class Descriptor(NamedTuple):
    """A regular file the runtime opened to read (:mod:`._bulk`): its
    descriptor, and its name as ``open()`` gives it. The ReadAhead it is
    given to owns the descriptor, and makes a ``FileIO`` of it only when
    something needs one (a small file read to its end never does)."""

    fd: int
    name: str | bytes


# held while a ReadAhead makes its FileIO or lets go of its descriptor
_MAKING = threading.Lock()


class _Layer(io.RawIOBase):
    """What both layers pass straight to the file."""

    def __init__(self, file: io.FileIO | None) -> None:
        super().__init__()
        self._file = file
        self.on_loop = False  # set while a call runs on the event loop's thread

    @property
    def file(self) -> io.FileIO:
        assert self._file is not None
        return self._file

    @property
    def name(self) -> Any:
        return self.file.name

    @property
    def mode(self) -> str:
        return self.file.mode

    @property
    def closefd(self) -> bool:
        return self.file.closefd

    def fileno(self) -> int:
        return self.file.fileno()

    def isatty(self) -> bool:
        return self.file.isatty()

    def seekable(self) -> bool:
        return self.file.seekable()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")  # FileIO's words

    def _blocking(self, what: str) -> None:
        if self.on_loop:  # the callers check what is in memory first; this must not happen
            raise RuntimeError(f"asyncfs.aiofiles: {what} would block the event loop")


class ReadAhead(_Layer):
    """A file opened for reading, whose next bytes may be in memory.

    It reads when the buffer above asks, as ``FileIO`` would, but CHUNK bytes
    at a time where the buffer asks for one buffer's worth: the bytes beyond
    stay here, for calls on the loop's thread. The end of the file is never
    remembered: a read that reaches it asks the file again, as the standard
    library does (the file may have grown: a log being followed).
    """

    def __init__(
        self,
        file: io.FileIO | Descriptor,
        close_later: Callable[[io.FileIO | int], object],
        *,
        position: int | None = None,
        size: int = 0,
    ) -> None:
        if isinstance(file, Descriptor):
            super().__init__(None)
            self._fd, self._name = file
        else:
            super().__init__(file)
            self._fd, self._name = file.fileno(), file.name
        self._let_go = False  # the descriptor is closed, or being closed: no FileIO is made of it
        self._ahead = b""
        self._start = 0  # what of _ahead was handed up already
        self._close_later = close_later
        self.size = size  # the file's size when it was opened: a guide to how much a read to the end takes
        # What a worker just read to the end of the file (ReadToEnd), for
        # the readall it makes next: the bytes, and whether the last read
        # found the end. Set only for that call.
        self.fetched: tuple[bytes, bool] | None = None
        # the file's own offset, counted here once known (0 for a file just
        # opened by name): the buffer's tell() then costs no system call
        self._position = position
        # What the layers above take: at most `width` bytes per unit they
        # count (a byte, or a character of an encoding known here), and a
        # line ends at or before `line_end`; None: not known, and then no
        # read of characters is answered here.
        self.width: int | None = 1
        self.line_end: bytes | None = b"\n"
        self.universal = False  # lines end at "\n", "\r" and "\r\n" alike
        # Complete lines the layers above hold: those in the bytes last handed
        # up (the layers ask for more only when they hold no complete line),
        # less those readline took since. Any other call makes it unknown (0).
        self.lines_above = 0

    @property
    def file(self) -> io.FileIO:
        """The FileIO of the descriptor (made now if it was opened in C)."""
        file = self._file
        if file is None:
            with _MAKING:
                if self._let_go:
                    raise ValueError("I/O operation on closed file")  # FileIO's words
                if self._file is None:
                    self._file = io.FileIO(self._fd, "r", True)
                    self._file.name = self._name
                file = self._file
        return file

    @property
    def name(self) -> Any:
        return self._name if self._file is None else self._file.name

    @property
    def mode(self) -> str:
        return "rb"  # FileIO's, for "r"

    @property
    def closefd(self) -> bool:
        return True if self._file is None else self._file.closefd

    def fileno(self) -> int:
        self._check_open()
        return self._fd

    def isatty(self) -> bool:
        self._check_open()
        return False  # a regular file

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        self._check_open()
        return True  # a regular file

    # ---- what the event loop's thread asks ------------------------------------------

    @property
    def held(self) -> int:
        """Bytes in memory, not handed up yet."""
        return len(self._ahead) - self._start

    def answers(self, size: object) -> bool:
        """Whether a read of size units needs no system call."""
        if type(size) is not int or size < 0 or self.width is None:
            return False  # to the end (the file is asked where it ends), or a bad argument
        return self.held >= size * self.width + _SLACK

    def answers_line(self, limit: object) -> bool:
        """Whether a readline(limit) needs no system call."""
        if self.lines_above >= 2 or self.answers(limit):  # 2: a "\r" last may wait to see if "\n" follows
            return True
        return self.line_end is not None and self._ahead.find(self.line_end, self._start) != -1

    def answers_some(self) -> bool:
        """Whether read1 or peek (one read of the file at most) needs no system call."""
        return self.held > 0

    def took(self, line: bool) -> None:
        """A call is over: a readline took one line; anything else (or a
        readline that raised) leaves the lines above unknown."""
        self.lines_above = max(0, self.lines_above - 1) if line else 0

    def _lines_in(self, start: int, end: int) -> int:
        ahead, line_end = self._ahead, self.line_end
        if line_end is None:
            return 0
        if self.universal:
            return ahead.count(b"\n", start, end) + ahead.count(b"\r", start, end) - ahead.count(b"\r\n", start, end)
        return ahead.count(line_end, start, end)

    # ---- the raw interface the buffer calls ------------------------------------------

    def readinto(self, buffer: Any) -> int | None:
        if not self.held:
            self._blocking("a read")
            if len(buffer) >= CHUNK:
                self.lines_above = 0
                return self._moved(self.file.readinto(buffer))
            data = self.file.read(CHUNK)
            if not data:
                return None if data is None else 0
            self._moved(len(data))
            self._ahead, self._start = data, 0
        start = self._start
        self._start = end = min(start + len(buffer), len(self._ahead))
        self.lines_above = self._lines_in(start, end)
        with memoryview(self._ahead) as view:
            buffer[: end - start] = view[start:end]
        if end == len(self._ahead):
            self._ahead, self._start = b"", 0
        return end - start

    def readall(self) -> bytes:
        parts = [self._ahead[self._start :]] if self.held else []
        self._ahead, self._start, self.lines_above = b"", 0, 0
        fetched, self.fetched = self.fetched, None
        if fetched is not None:
            parts.append(fetched[0])
            self._moved(len(fetched[0]))
        if fetched is None or not fetched[1]:  # the end is not known: ask the file
            self._blocking("a read to the end")
            size = CHUNK  # growing: a small file costs two reads (FileIO.readall adds fstat and lseek)
            while data := self.file.read(size):
                parts.append(data)
                self._moved(len(data))
                size = min(size * 2, 64 << 20)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _moved(self, count: int | None) -> int | None:
        if self._position is not None and count:
            self._position += count
        return count

    def tell(self) -> int:
        self._check_open()
        if self._position is None:
            self._position = self.file.tell()
        return self._position - self.held

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset -= self.held
        self._ahead, self._start, self.lines_above = b"", 0, 0
        self._position = None  # until the seek returns
        self._position = self.file.seek(offset, whence)
        return self._position

    def truncate(self, size: int | None = None) -> int:
        return self.file.truncate(size)  # raises: the file is not open for writing

    def closed_already(self) -> None:
        """Mark closed a layer whose descriptor was closed before it was
        built (see ``_stack.Unlayered``): nothing is closed."""
        with _MAKING:
            self._let_go = True
        super().close()

    def close(self) -> None:
        if self.closed:
            return
        self._ahead, self._start = b"", 0
        with _MAKING:
            file, self._let_go = self._file, True
        try:
            if self.on_loop:  # a read-only descriptor: its close is not waited for
                self._close_later(self._fd if file is None else file)
            elif file is None:
                os.close(self._fd)
            else:
                file.close()
        finally:
            super().close()


class WriteBehind(_Layer):
    """A file opened for writing, whose last writes may be in memory."""

    def __init__(self, file: io.FileIO) -> None:
        super().__init__(file)
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    @property
    def pending(self) -> int:
        """Bytes written but not handed to the file yet."""
        return len(self._pending)

    def write(self, data: Any) -> int:
        with memoryview(data) as view:
            self._pending += view
            return view.nbytes

    def drain(self) -> None:
        """Hand everything pending to the file (a worker's call)."""
        if not self._pending:
            return
        self._blocking("a write")
        done = 0
        view = memoryview(self._pending)
        try:
            while done < len(view):
                count = self.file.write(view[done:])
                if count is None:  # a non-blocking file that is full: the rest stays pending
                    raise BlockingIOError(11, "write could not complete without blocking", done)
                done += count
        finally:
            view.release()
            del self._pending[:done]

    def flush(self) -> None:
        self.drain()
        super().flush()

    def tell(self) -> int:
        return self.file.tell() + self.pending

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.drain()
        return self.file.seek(offset, whence)

    def truncate(self, size: int | None = None) -> int:
        self.drain()
        return self.file.truncate(size)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.drain()
        finally:
            try:
                self.file.close()
            finally:
                super().close()
