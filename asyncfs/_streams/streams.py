"""Async buffered streams: what ``env.open(uri, mode)`` returns.

Readers fetch large blocks (one worker hop each) and serve ``read``,
``readline`` and line iteration from a buffer on the event loop, so a line
costs no hop; the next blocks are read ahead in the background (bounded, at
most ``readahead`` blocks) for stores with high latency. Writers gather
writes into large appends. ``"w"``/``"wb"`` write to a temporary sibling that
replaces the target on close, so a writer that fails or crashes never leaves
a truncated file under the target's name (``atomic=False`` opts out; appends
always go to the file itself). Any stream can be compressed
(:mod:`asyncfs._streams.compression`); text modes decode and encode, reading with
universal newlines.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import io
import sys
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Iterator, Mapping
from itertools import islice
from time import perf_counter_ns
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from anyio.lowlevel import checkpoint

from .._async import AT_HAND_TURN
from .._native import refuse_text
from .._sync import AheadRead, Landing, ModularFileSystem, RandomAccessFile
from ..errors import InvalidArgumentError
from . import compression as _compression
from .lines import Handover, split_keep

if TYPE_CHECKING:
    from typing_extensions import Buffer, Self

    from .._async import AsyncModularFileSystem, Pending
else:
    Buffer = object
    Self = object

__all__ = [
    "AsyncBinaryReader",
    "AsyncBinaryWriter",
    "AsyncTextReader",
    "AsyncTextWriter",
    "BLOCK_SIZE",
    "SPLIT",
    "Opener",
    "Stream",
    "StreamOpener",
]

BLOCK_SIZE = 1 << 20
# Buffered lines are split this much at a time (bytes or characters): a
# whole block split at once has all its lines alive together, out of the
# CPU's caches. On 100k lines of 39 characters, splitlines took 66 ns a line
# in pieces of up to 256 KiB, 88 ns in 1 MiB pieces and 125 ns in 4 MiB
# ones, where a loop over open() takes 62 ns.
SPLIT = 128 * 1024
# A network store's file is read this far with its open: a smaller one is
# then whole in the reader, and its size needs no request of its own; a
# bigger one's first bytes are the reader's first buffer.
HEAD = 64 << 10
# A local file's bytes are read on the event loop's thread, AT_HAND at a
# time, while its plugin has them at hand (``RandomAccessFile.read_if_ready``:
# in the page cache, in memory), and its block is at most AT_HAND_MOST. Such
# a read copies, and wakes no thread: reading a cached file 64 KiB at a time
# took 0.8 ms where reads on other threads took 2.5-3.2 ms. The loop's other
# tasks get a turn between such reads (AsyncModularFileSystem.turn_due),
# so one is at most what is read between turns.
AT_HAND_MOST = AT_HAND_TURN
AT_HAND = SPLIT


T = TypeVar("T", str, bytes)
R = TypeVar("R")
P = ParamSpec("P")


class _Stream(ABC):
    uri: str
    closed: bool

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on a closed stream: {self.uri}")


class _BufferedReader(_Stream, Generic[T]):
    """Reading from a buffer of T (bytes or str) that _fill tops up: what a
    binary and a text reader share."""

    _newline: T
    _buf: T
    _pos: int
    _buf_start: int  # stream offset of _buf[0]

    _empty: T
    # the lines a line iteration split and has not handed over yet, whose
    # bytes or characters _pos has already passed (see _split_ahead), and
    # what each of them lacks of its length in the stream (its newline,
    # when they are handed over without it)
    _unyielded: Iterator[T] | None = None
    _cut: int = 0

    def _split_ahead(self, lines: list[T], end: int, cut: int = 0) -> Iterator[T]:
        """lines, split from the buffer up to end (the last newline's
        index), to hand over one by one or a list at a time: the position
        moves past all of them at once, and any other read takes back
        those not handed over yet (_take_back), emptying the iterator. The
        caller took back any earlier ones first: an iterator that is not
        empty is still the stream's."""
        self._pos = end + 1
        self._unyielded = ahead = iter(lines)
        self._cut = cut
        return ahead

    def _take_back(self) -> None:
        """Put the position back before the lines a line iteration split
        but has not handed over (it then splits again from there)."""
        ahead = self._unyielded
        if ahead is not None:
            self._unyielded = None
            rest = list(ahead)
            self._pos -= sum(map(len, rest)) + len(rest) * self._cut

    def _ready(self) -> None:
        """Check that the stream is open and make its buffer and position
        exact (see _take_back): what every reading method does first."""
        self._check_open()
        self._take_back()

    @abstractmethod
    async def _more(self) -> T | None:
        """The next decoded chunk of the stream; None at its end."""

    async def _fill(self) -> bool:
        """Add to the buffer; False at the end of the stream."""
        data = await self._more()
        if data is None:
            return False
        self._append(data)
        return True

    def _split_end(self, buf: T, pos: int) -> int:
        """Where the next lines to split at once end in buf: at its last
        newline within SPLIT of pos; -1 when there is none (no whole line
        is buffered, or the next one is longer: readline takes it)."""
        return buf.rfind(self._newline, pos, pos + SPLIT)

    def _split(self, chunk: T, keepends: bool = True) -> list[T]:
        """The lines of chunk, which ends with a newline, each keeping it
        (or without it): split in C (:func:`._lines.split_keep`, or
        ``str.split``)."""
        lines = split_keep(chunk, self._newline) if keepends else chunk.split(self._newline)
        lines.pop()  # the empty rest after the last newline
        return lines

    def _holds_no_line_end(self) -> bool:
        """Whether the buffer holds at most the start of a line."""
        return self._buf.find(self._newline, self._pos) < 0

    async def _split_next(self, keepends: bool) -> tuple[list[T], int] | None:
        """With the buffer holding at most the start of a line: the whole
        lines of the next chunk, the first of them completing that start,
        split from the chunk itself (not copied into the buffer first, then
        out of it again). The chunk is then the buffer, the position past
        its first line, and the index of its last newline is returned with
        them, for _split_ahead. No lines (and -1) when the chunk ends none,
        or is longer than SPLIT (a binary stream's block): it is added to the
        buffer. None at the end of the stream."""
        data = await self._more()
        if data is None:
            return None
        if len(data) > SPLIT:  # a block bigger than a piece: split from the buffer a piece at a time
            self._append(data)
            return [], -1
        newline = self._newline
        lines = split_keep(data, newline) if keepends else data.split(newline)
        tail = lines.pop()  # after the last newline (empty when the chunk ends with one)
        if not lines:
            self._append(data)
            return lines, -1
        first = len(lines[0]) + (0 if keepends else len(newline))
        start = self._take_buffer()
        self._buf, self._pos = data, first
        if start:
            lines[0] = start + lines[0]
        return lines, len(data) - len(tail) - 1

    def _append(self, data: T) -> None:
        rest = self._buf[self._pos :]
        self._buf_start += self._pos
        self._buf = rest + data if rest else data
        self._pos = 0

    def _take_buffer(self) -> T:
        """All that is buffered, consumed."""
        rest = self._buf[self._pos :]
        self._buf_start += len(self._buf)
        self._buf, self._pos = self._empty, 0
        return rest

    async def read(self, n: int = -1) -> T:
        """Up to n bytes or characters (all the rest when n < 0); empty at
        the end. Chunks are collected and joined once: linear in the size."""
        self._ready()
        data = self._from_buffer(n)
        if data is not None:  # the common case: buffered
            return data
        start = self._buf_start + self._pos
        parts = [self._take_buffer()]
        have = len(parts[0])
        try:
            while n < 0 or have < n:
                chunk = await self._more()
                if chunk is None:
                    break
                parts.append(chunk)
                have += len(chunk)
            rest = self._empty
            if 0 <= n < have:  # the last chunk went past n: keep its tail
                cut = len(parts[-1]) - (have - n)
                parts[-1], rest = parts[-1][:cut], parts[-1][cut:]
            data = parts[0] if len(parts) == 1 else await self._join(parts)
        except BaseException:
            self._put_back(start, parts)
            raise
        self._buf_start, self._buf, self._pos = start + len(data), rest, 0
        return data

    def _put_back(self, start: int, parts: list[T]) -> None:
        """A read that collected parts from start was cancelled (or failed)
        while it waited for more: they stay buffered, unread, before what
        is still buffered, so the next read begins at start again."""
        parts.append(self._buf[self._pos :])
        self._buf, self._buf_start, self._pos = self._empty.join(parts), start, 0

    def _from_buffer(self, n: int) -> T | None:
        """The next n items when the buffer holds them (consumed), else None."""
        if 0 <= n <= len(self._buf) - self._pos:
            data = self._buf[self._pos : self._pos + n]
            self._pos += n
            return data
        return None

    async def _join(self, parts: list[T]) -> T:
        return self._empty.join(parts)

    async def readline(self, limit: int = -1) -> T:
        """The next line with its newline (at most limit long when limit >=
        0); empty at the end. A line longer than the buffer is collected in
        parts and joined once."""
        self._ready()
        newline = self._newline
        start = self._buf_start + self._pos
        parts: list[T] = []
        got = 0
        while True:
            buf, pos = self._buf, self._pos
            end = buf.find(newline, pos)
            stop = len(buf) if end < 0 else end + 1
            if 0 <= limit <= got + stop - pos:
                stop = pos + limit - got
                end = stop  # the limit ends the line
            parts.append(buf[pos:stop])
            got += stop - pos
            self._pos = stop
            if end >= 0:
                break
            try:
                more = await self._fill()
            except BaseException:
                self._put_back(start, parts)
                raise
            if not more:  # the buffer is all consumed
                break
        return parts[0] if len(parts) == 1 else self._empty.join(parts)

    async def readlines(self) -> list[T]:
        """The rest of the lines, each with its newline: split in C, a list
        at a time (see :meth:`iter_lines`)."""
        lines: list[T] = []
        async for part in self.iter_lines(batch=sys.maxsize):
            lines += part
        return lines

    def __aiter__(self) -> Handover[T]:
        """``async for line in f``: each line with its newline, from a
        :class:`._lines.Handover` of the lines split ahead (see
        :meth:`_next_line`)."""
        return Handover(self._next_line)

    async def _next_line(self, handover: Handover[T]) -> T:
        """The next line, once handover has handed over the lines split
        before: the buffer's whole lines up to SPLIT are split at once (in
        C) and ahead (_split_ahead), and become handover.ahead, which hands
        them over with no coroutine step. Any other read takes back those
        not handed over yet, so a break then a read() loses nothing, and a
        loop that finds them gone splits again from where that read left
        off. StopAsyncIteration at the end."""
        while True:
            self._take_back()
            buf, pos = self._buf, self._pos
            end = self._split_end(buf, pos)
            if end >= 0:
                lines = self._split(buf[pos : end + 1])
            elif self._holds_no_line_end():
                split = await self._split_next(keepends=True)
                if split is None:  # the end: what is left is the last line, without a newline
                    rest = self._take_buffer()
                    if rest:
                        return rest
                    raise StopAsyncIteration
                lines, end = split
                if not lines:  # a chunk inside one line
                    continue
            else:  # a line longer than SPLIT
                return await self.readline()
            handover.ahead = ahead = self._split_ahead(lines, end)
            return next(ahead)

    def iter_lines(self, batch: int = 65536, *, keepends: bool = True) -> LineBatches[T]:
        """``async for lines in f.iter_lines()``: lists of up to batch lines
        (each with its newline, or without it when keepends is false, as
        ``str.splitlines`` has it), split in C :data:`SPLIT` bytes or
        characters at a time (so a list holds that much of whole lines,
        and the line that began before them, unless batch is smaller): one
        await per list, for code that wants
        throughput. The position stays exact at each list, so a break then
        a read() loses nothing."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        return LineBatches(self, batch, keepends)


class LineBatches(Generic[T]):
    """What :meth:`AsyncBinaryReader.iter_lines` and
    :meth:`AsyncTextReader.iter_lines` return: an async iterator of lists of
    lines that needs no finalizing (leaving the loop early is fine on any
    event loop; the stream stays usable)."""

    def __init__(self, reader: _BufferedReader[T], batch: int, keepends: bool = True) -> None:
        self._reader: _BufferedReader[T] = reader
        self._batch = batch
        self._keepends = keepends
        self._ahead: Iterator[T] | None = None  # lines it split ahead (see _BufferedReader._split_ahead)

    def __aiter__(self) -> LineBatches[T]:
        return self

    async def __anext__(self) -> list[T]:
        reader = self._reader
        if self._ahead is not None:  # lines it split ahead, unless a read took them back (and so emptied it)
            part = list(islice(self._ahead, self._batch))
            if part:
                return part
        reader._take_back()
        while True:
            buf, pos = reader._buf, reader._pos
            end = reader._split_end(buf, pos)
            if end >= 0:
                lines = reader._split(buf[pos : end + 1], self._keepends)
            elif reader._holds_no_line_end():  # the usual case: the next chunk's lines
                split = await reader._split_next(self._keepends)
                if split is None:  # the end: what is left is the last line, without a newline
                    rest = reader._take_buffer()
                    if not rest:
                        raise StopAsyncIteration
                    return [rest]
                lines, end = split
                if not lines:  # a chunk inside one line
                    continue
            else:  # a line longer than SPLIT
                line = await reader.readline()
                return [line if self._keepends else line.removesuffix(reader._newline)]
            if len(lines) <= self._batch:  # SPLIT's worth of lines, one list
                reader._pos = end + 1
                return lines
            cut = 0 if self._keepends else len(reader._newline)
            self._ahead = reader._split_ahead(lines, end, cut)
            return list(islice(self._ahead, self._batch))


class AsyncBinaryReader(_BufferedReader[bytes]):
    """A buffered reader over a plugin file (optionally decompressing)."""

    def __init__(
        self,
        afs: AsyncModularFileSystem,
        file: RandomAccessFile,
        uri: str,
        size: int,
        *,
        block_size: int = BLOCK_SIZE,
        readahead: int = 2,
        codec: str | None = None,
        first: bytes | AheadRead | None = None,
    ) -> None:
        """first: the file's first bytes, read with the open (the whole
        file when there are size of them)."""
        self.uri = uri
        self.closed = False
        self._afs = afs
        self._file = file
        self._size = size
        self._block = block_size
        self._readahead = max(0, readahead)
        self._codec = codec
        self._decompressor = _compression.decompressor(codec, uri) if codec else None
        self._newline = b"\n"
        self._empty = b""
        self._ahead: deque[tuple[int, AheadRead | Pending[bytes] | None]] = deque()
        self._raw_offset = 0  # next raw byte to fetch
        self._fetched = len(first) if isinstance(first, bytes) else 0  # raw bytes read, for the Env's metrics
        self._raw_eof = False
        self._buf = b""  # decoded bytes not yet consumed start at _buf[_pos]
        self._pos = 0
        self._buf_start = 0  # stream offset of _buf[0]
        self._eof = False
        # blocks are read on the loop's thread while the plugin has them at
        # hand; once one is not, it and the next are read ahead on other threads
        # (see AT_HAND_MOST); an uncompressed file whose first block was not
        # at hand when it was opened is read ahead from the start
        cold = isinstance(first, AheadRead) and codec is None
        self._at_hand = not afs.network and block_size <= AT_HAND_MOST and file.reads_if_ready and not cold
        if isinstance(first, AheadRead):
            self._ahead.append((0, first))
        elif first is not None:
            self._buf, self._raw_offset = first, len(first)
            self._raw_eof = self._eof = len(first) >= size

    # ---- fetching ----------------------------------------------------------------------

    async def _raw_block(self) -> bytes:
        if await self._at_hand_turn():
            at_hand = self._take_at_hand(self._raw_offset, min(self._block, AT_HAND))
            if at_hand is not None:
                return at_hand
        offset = self._raw_offset
        data = None
        if self._ahead and self._ahead[0][0] == offset:
            pending = self._ahead.popleft()[1]
            if isinstance(pending, AheadRead):
                data = pending.result() if pending.done() else await self._afs.run(pending.result, mutating=False)
            elif pending is not None:
                data = await pending.result()
        if data is None:
            await self._drop_ahead()
            data = await self._afs.run(self._file.read, offset, self._block, mutating=False)
        self._took_block(len(data))
        return data

    async def _at_hand_turn(self) -> bool:
        """Whether the next block is read at hand (see AT_HAND): the plugin
        had the ones before at hand, and none is on its way. The loop's
        other tasks may get a turn first (AsyncModularFileSystem.turn_due),
        as they would while a block was read on another thread."""
        if not self._at_hand or self._ahead:
            return False
        if self._afs.turn_due():
            await checkpoint()
        return True

    def _take_at_hand(self, offset: int, n: int) -> bytes | None:
        """The n bytes at offset, read at hand, and the raw position past
        them; None when they are not at hand: they, and the blocks after
        them, are then read ahead."""
        data = self._file.read_if_ready(offset, n)
        if data is None:
            self._at_hand = False
            return None
        self._afs.took_at_hand(len(data))
        self._raw_offset = offset
        self._took_block(len(data), n)
        return data

    def _took_block(self, count: int, asked: int = 0) -> None:
        """The block at _raw_offset (or the asked bytes read at hand) came
        with count bytes: the next is past it; a short one is the end (for
        now: see _more), and after a whole one the next blocks are read
        ahead, unless they are read at hand."""
        self._raw_offset += count
        self._fetched += count
        if count < (asked or self._block):
            self._raw_eof = True
        elif not self._at_hand:
            self._read_ahead()

    def _read_ahead(self) -> None:
        """Keep up to readahead next blocks on their way. Not the read at a
        local file's end that finds nothing more: the file may grow before
        the reader gets there, and the standard library asks then (see _more)."""
        start = self._ahead[-1][0] + self._block if self._ahead else self._raw_offset
        while len(self._ahead) < self._readahead and start < self._size:
            self._ahead.append((start, self._start_read(start)))
            start += self._block

    def _start_read(self, start: int) -> AheadRead | Pending[bytes] | None:
        """A block's read, started. A local file's goes to a runtime thread:
        a worker of the pool would start it, and hand it over, only when it
        gets the interpreter's lock, which a reader busy with the block it
        has (splitting lines, checking records) gives up only when it waits
        for the next; so the read would start then. A network store's read
        waits on the network, not on that lock, and goes to the pool, whose
        threads grow for such waits."""
        if not self._afs.network:
            ahead = self._file.read_ahead(start, self._block)
            if ahead is not None:
                return ahead
        return self._afs.start(self._file.read, start, self._block)

    async def _drop_ahead(self) -> None:
        """Forget read-ahead (after a seek), once it is off the handle."""
        while self._ahead:
            pending = self._ahead.popleft()[1]
            if isinstance(pending, AheadRead):
                continue  # dropped; the handle's close waits for it if it is still reading
            if pending is not None:
                with contextlib.suppress(Exception):  # its error no longer matters
                    await pending.result()  # but the worker must be done with the handle

    def _end_is_final(self) -> bool:
        """Whether the end, once reached, stays the end: the end of a
        compressed stream's data, or of a network store's object (it cannot
        change under its reader). A local file can grow: as the standard
        library asks the OS again at a file's end (tail -f), this reader
        asks the plugin again."""
        return self._decompressor is not None or self._afs.network

    async def _more(self) -> bytes | None:
        if self._eof and not self._end_is_final():
            self._raw_eof = self._eof = False  # asked at the end again: the file may have grown
        decoder = self._decompressor
        while not self._eof:
            if decoder is None:
                data = await self._raw_block()
                if self._raw_eof and not data:
                    self._eof = True
                    return None
            elif decoder.needs_input:
                if self._raw_eof:
                    decoder.finish()
                    self._eof = True
                    return None
                data = decoder.decompress(await self._raw_block(), self._block)
            else:  # output held back from the block before: at most a block of it at a time
                data = decoder.decompress(b"", self._block)
            if data:
                return data
        return None

    # ---- reading ----------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all the rest when n < 0); empty at the end. All
        the rest of an uncompressed file is one plugin call on a worker,
        straight into the bytes returned: no copy, and nothing on the loop.
        Up to AT_HAND_MOST of them, when the plugin has them at hand, are
        one read on the loop's thread."""
        if n >= 0 or self._decompressor is not None or self._eof:
            if 0 < n <= AT_HAND_MOST and self._decompressor is None:
                at_hand = await self._read_at_hand(n)
                if at_hand is not None:
                    return at_hand
            return await super().read(n)
        self._ready()
        start = self.tell()
        wanted = self._size - start
        if wanted <= 0:  # past the size seen at the open (a pipe has none): onward from what is buffered
            return await super().read(n)
        await self._drop_ahead()
        data, ended = await self._afs.run(_read_rest, self._file, start, wanted, mutating=False)
        self._fetched += len(data)
        self._raw_offset = self._buf_start = start + len(data)
        self._buf, self._pos = b"", 0
        if ended:
            self._raw_eof = self._eof = True
            return data
        self._raw_eof = self._eof = False  # it goes on past what was read (it grew since it was opened)
        more = await super().read(-1)
        return data + more if more else data

    async def _read_at_hand(self, n: int) -> bytes | None:
        """read(n) as one read at hand from the position, when the buffer
        holds fewer than n bytes (they are read again, with the rest: no
        join), or None: the buffer holds them, or they are not at hand."""
        self._ready()
        if len(self._buf) - self._pos >= n or not await self._at_hand_turn():
            return None
        start = self._buf_start + self._pos
        data = self._take_at_hand(start, n)
        if data is not None:
            self._buf_start, self._buf, self._pos = start + len(data), b"", 0
        return data

    async def read1(self, n: int = -1) -> bytes:
        """Up to n bytes (any number, when n < 0) with at most one block
        read: what the buffer holds, or else what the next block brings, as
        the standard library's read1. Empty at the end."""
        self._ready()
        if self._pos == len(self._buf) and not await self._fill():
            return b""
        stop = len(self._buf) if n < 0 else min(len(self._buf), self._pos + n)
        data = self._buf[self._pos : stop]
        self._pos = stop
        return data

    async def read1_lent(self, n: int, use: Callable[[bytes | memoryview], R]) -> R:
        """use(what read1(n) returns), but a whole block read ahead, done,
        uncompressed, and no longer than n, is lent to use straight from the
        runtime's buffer (see :meth:`AheadRead.lend`: use must keep none of
        it), not copied into a bytes first: what a text reader decodes."""
        self._ready()
        if self._pos == len(self._buf) and self._decompressor is None and self._ahead and self._block <= n:
            offset, pending = self._ahead[0]
            if offset == self._raw_offset and isinstance(pending, AheadRead) and pending.done():
                self._ahead.popleft()
                result, count = pending.lend(lambda view: (use(view), len(view)))
                self._buf_start += len(self._buf) + count
                self._buf, self._pos = b"", 0
                self._took_block(count)
                return result
        return use(await self.read1(n))

    async def _join(self, parts: list[bytes]) -> bytes:
        if sum(map(len, parts)) < 1 << 20:
            return b"".join(parts)
        # bytes.join releases the GIL for large joins: on a worker, the
        # loop runs meanwhile
        return await self._afs.run(b"".join, parts, mutating=False)

    async def readinto(self, buffer: Buffer) -> int:
        view = memoryview(buffer).cast("B")
        data = await self.read(len(view))
        view[: len(data)] = data
        return len(data)

    # ---- position ----------------------------------------------------------------------

    def tell(self) -> int:
        self._take_back()
        return self._buf_start + self._pos

    def size(self) -> int:
        """The size of the file as stored (compressed, for compressed streams)."""
        return self._size

    def _seek_target(self, offset: int, whence: int) -> int:
        if whence == io.SEEK_CUR:
            offset += self.tell()
        elif whence == io.SEEK_END:
            if self._codec is not None:
                raise io.UnsupportedOperation(f"cannot seek from the end of a {self._codec} stream: {self.uri}")
            offset += self._size
        elif whence != io.SEEK_SET:
            raise InvalidArgumentError(f"whence must be 0, 1 or 2, not {whence}")
        if offset < 0:
            raise InvalidArgumentError(f"cannot seek to {offset}: {self.uri}")
        return offset

    def _restart_at(self, offset: int) -> None:
        """Empty the buffer; the next block is fetched from raw offset."""
        self._raw_offset = self._buf_start = offset
        self._raw_eof = self._eof = False
        self._buf, self._pos = b"", 0

    async def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to offset (from the start, the current position, or the end).
        Compressed streams seek by decoding: forward from here, or from the
        start; from the end they cannot. The end of a local file is where it
        ends now (it may have grown since the open), as io's seek has it."""
        self._ready()
        if whence == io.SEEK_END and not self._end_is_final():
            self._size = await self._afs.run(self._afs.wrapped.get_file_size, self.uri, mutating=False)
        offset = self._seek_target(offset, whence)
        if self._seek_quickly(offset):
            return offset
        if self._codec is None:
            await self._drop_ahead()
            self._restart_at(offset)
            return offset
        if offset < self._buf_start:  # decode again from the start
            await self._drop_ahead()
            self._decompressor = _compression.decompressor(self._codec, self.uri)
            self._restart_at(0)
        while self.tell() < offset:
            if not await self.read(min(offset - self.tell(), self._block)):
                break
        return self.tell()

    # ---- answers that need no plugin call (a synchronous caller's fast path) ----------

    def _rest_is_buffered(self) -> bool:
        if not self._end_is_final():
            return False  # more may have come since: only the plugin can say (see _more)
        return self._eof or (self._raw_eof and self._decompressor is None and not self._ahead)

    def read_nowait(self, n: int = -1) -> bytes | None:
        """What :meth:`read` would return, when the buffer alone holds it;
        None when it would wait for a plugin call (then await read). For a
        caller on another thread than the loop's, whose hop to the loop
        costs more than a small read."""
        self._ready()
        data = self._from_buffer(n)
        if data is not None:
            return data
        return self._take_buffer() if self._rest_is_buffered() else None

    def readline_nowait(self, limit: int = -1) -> bytes | None:
        """:meth:`readline` from the buffer alone, or None (see :meth:`read_nowait`)."""
        self._ready()
        end = self._buf.find(b"\n", self._pos)
        stop: int | None = end + 1 if end >= 0 else len(self._buf) if self._rest_is_buffered() else None
        if limit >= 0 and self._pos + limit <= (len(self._buf) if stop is None else stop):
            stop = self._pos + limit  # the limit ends the line inside the buffer
        if stop is None:
            return None
        line = self._buf[self._pos : stop]
        self._pos = stop
        return line

    async def fill(self) -> bool:
        """Read the next block into the buffer now (so that the reads after
        it may be answered with :meth:`read_nowait`); False at the end."""
        self._ready()
        return await self._fill()

    def close_nowait(self) -> bool:
        """:meth:`close` when no read-ahead is on its way; False (and still
        open) otherwise."""
        if self._ahead:
            return False
        self.closed = True
        return True

    def seek_nowait(self, offset: int, whence: int = io.SEEK_SET) -> int | None:
        """:meth:`seek` when it needs no plugin call, or None."""
        self._ready()
        if whence == io.SEEK_END and not self._end_is_final():
            return None  # where a local file ends now takes a call
        offset = self._seek_target(offset, whence)
        return offset if self._seek_quickly(offset) else None

    def _seek_quickly(self, offset: int) -> bool:
        """Move to offset if that needs no plugin call: inside the buffer,
        or an uncompressed stream with nothing read ahead."""
        if self._buf_start <= offset <= self._buf_start + len(self._buf):
            self._pos = offset - self._buf_start
            return True
        if self._codec is None and not self._ahead:
            self._restart_at(offset)
            return True
        return False

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self._drop_ahead()
        # a reader's close reports nothing (the ABI's cleanup returns
        # nothing): it runs on a worker, and nobody waits for the round trip
        self._afs.run_soon(self._file.close)
        self._afs.counted("open", None, self._fetched)


class _Writer(_Stream):
    """A writer keeps what its block wrote only if the block succeeded."""

    @abstractmethod
    async def abort(self) -> None:
        """Drop what was written: the target is left as it was."""

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.close()
        else:
            await self.abort()


class AsyncBinaryWriter(_Writer):
    """A buffered writer: data reaches the plugin in appends of at least
    block_size bytes, toward a :class:`~asyncfs._sync.landing.Landing` (staged
    and renamed over the target on close where the store stages, deleted
    if the writer is aborted, never landed once a write has failed)."""

    def __init__(
        self, afs: AsyncModularFileSystem, landing: Landing, *, block_size: int = BLOCK_SIZE, codec: str | None = None
    ) -> None:
        self.uri = landing.uri
        self.closed = False
        self._afs = afs
        self._landing = landing
        self._block = block_size
        self._compressor = _compression.compressor(codec, self.uri) if codec else None
        self._buffer = bytearray()
        self._written = 0

    def land_as(self, uri: str, staged: str) -> None:
        """Write to staged and rename it over uri on close (used to append
        to a copy of a file inside a transaction)."""
        self.uri = self._landing.uri = self._landing.landing = uri
        self._landing.staged = staged

    async def write(self, data: Buffer) -> int:
        self._check_open()
        refuse_text(data, "write", self.uri)
        view = memoryview(data).cast("B")
        self._written += len(view)
        chunk: Buffer = self._compressor.compress(view) if self._compressor is not None else view
        if not self._buffer and len(memoryview(chunk)) >= self._block:
            await self._afs.run(self._landing.append, chunk, mutating=True)  # large: no copy
        else:
            self._buffer += chunk
            if len(self._buffer) >= self._block:
                await self._push()
        return len(view)

    async def writelines(self, lines: Iterable[Buffer]) -> None:
        for line in lines:
            await self.write(line)

    def write_nowait(self, data: Buffer) -> int | None:
        """:meth:`write` when it only adds to the buffer (uncompressed, and
        the buffer stays below a block); None when it would call the plugin."""
        self._check_open()
        refuse_text(data, "write", self.uri)
        view = memoryview(data).cast("B")
        if self._compressor is not None or len(self._buffer) + len(view) >= self._block:
            return None
        self._buffer += view
        self._written += len(view)
        return len(view)

    async def _push(self) -> None:
        if self._buffer:
            buffer, self._buffer = self._buffer, bytearray()
            await self._afs.run(self._landing.append, buffer, mutating=True)

    def tell(self) -> int:
        """Bytes written so far (before compression)."""
        return self._written

    async def flush(self) -> None:
        """Hand buffered data to the plugin (a compressor keeps what it has)."""
        self._check_open()
        await self._push()
        await self._afs.run(self._landing.file.flush, mutating=True)

    async def sync(self) -> None:
        """flush, then make the data durable."""
        await self.flush()
        await self._afs.run(self._landing.file.sync, mutating=True)

    async def close(self) -> None:
        """Write what is buffered, close, and (atomic writers) replace the
        target with the new file."""
        if self.closed:
            return
        if self._compressor is not None:
            self._buffer += self._compressor.flush()
        try:
            await self._push()
        except BaseException:
            await self.abort()
            raise
        self.closed = True
        self._afs.counted("open", None, self._written)
        await self._afs.run(self._landing.land, mutating=True)

    async def abort(self) -> None:
        """Drop the file: an atomic writer's target is left as it was."""
        if self.closed:
            return
        self.closed = True
        await self._afs.run(self._landing.discard, mutating=True)


class AsyncTextReader(_BufferedReader[str]):
    """Text over a binary reader: decoded incrementally, with universal
    newlines ("\\r\\n" and "\\r" read as "\\n")."""

    def __init__(self, binary: AsyncBinaryReader, encoding: str, errors: str | None) -> None:
        self.uri = binary.uri
        self.binary = binary
        decoder = codecs.getincrementaldecoder(encoding)(errors or "strict")
        self._decoder = io.IncrementalNewlineDecoder(decoder, translate=True)
        self._newline = "\n"
        self._empty = ""
        self._buf = ""
        self._pos = 0
        self._buf_start = 0

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return self.binary.closed

    async def _more(self) -> str | None:
        while True:  # at the end, the binary reader decides whether to ask again
            # decoded SPLIT bytes at a time, not a block: the text is then
            # split while it is in the CPU's cache, and its memory is reused
            text, more = await self.binary.read1_lent(min(self.binary._block, SPLIT), self._decode)
            if text or not more:
                return text or None

    def _decode(self, raw: bytes | memoryview) -> tuple[str, bool]:
        """raw decoded, and whether it had bytes (none: the end)."""
        return self._decoder.decode(raw, final=not raw), len(raw) > 0

    async def close(self) -> None:
        await self.binary.close()


class AsyncTextWriter(_Writer):
    """Text over a binary writer, encoded incrementally."""

    def __init__(
        self, binary: AsyncBinaryWriter, encoding: str, errors: str | None, *, continuing: bool = False
    ) -> None:
        self.uri = binary.uri
        self.binary = binary
        self._encoder = codecs.getincrementalencoder(encoding)(errors or "strict")
        if continuing:
            self._encoder.setstate(0)  # appending: no second byte-order mark, as io does

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return self.binary.closed

    async def write(self, text: str) -> int:
        await self.binary.write(self._encoder.encode(text))
        return len(text)

    async def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            await self.write(line)

    async def flush(self) -> None:
        await self.binary.flush()

    async def sync(self) -> None:
        await self.binary.sync()

    async def close(self) -> None:
        if not self.binary.closed:
            await self.binary.write(self._encoder.encode("", final=True))
        await self.binary.close()

    async def abort(self) -> None:
        await self.binary.abort()


# ---- opening ------------------------------------------------------------------------------

Stream = AsyncBinaryReader | AsyncBinaryWriter | AsyncTextReader | AsyncTextWriter
S = TypeVar("S", bound=Stream)

_MODES = {
    "r": ("r", True), "rt": ("r", True), "rb": ("r", False),
    "w": ("w", True), "wt": ("w", True), "wb": ("w", False),
    "a": ("a", True), "at": ("a", True), "ab": ("a", False),
}  # fmt: skip


class StreamOpener(Generic[S]):
    """``await env.open(...)`` gives the stream; ``async with env.open(...)
    as f`` also closes it (or, for a writer whose block raised, aborts it)."""

    def __init__(self, opening: Callable[[], Awaitable[S]]) -> None:
        self._opening = opening
        self._stream: S | None = None

    def __await__(self) -> Generator[Any, None, S]:
        return self._opening().__await__()

    async def __aenter__(self) -> S:
        self._stream = await self._opening()
        return self._stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._stream is not None
        await self._stream.__aexit__(exc_type, exc, tb)


class Opener(Protocol):
    """What opens streams by URI: an :class:`~asyncfs.Env`, or a
    :class:`~asyncfs.Transaction` (its streams are staged in it). TFRecord
    readers and writers take either."""

    def open(self, uri: str, mode: str = "rb", **options: Any) -> StreamOpener[Any]: ...


def _read_rest(file: RandomAccessFile, start: int, wanted: int) -> tuple[bytes, bool]:
    """The wanted bytes at start, and whether the file ends there: a read
    of one byte past them, as the standard library's read() probes for the
    end, in the same call."""
    data = file.read(start, wanted)
    return data, len(data) < wanted or not file.read(start + wanted, 1)


def _open_for_reading(
    fs: ModularFileSystem, uri: str, head: int, ahead: int, raw: bool
) -> tuple[RandomAccessFile, int, bytes | AheadRead | None]:
    """The file opened, its size, and its first bytes: with head > 0, its
    first head bytes, read with the open (on s3, from the open's own GET: a
    file shorter than head is then whole, and its size needs no request of
    its own); else, with ahead > 0, the first ahead bytes if the plugin
    has them at hand and the file is read as it is stored (raw: not
    decompressed), or else their read started on a runtime thread (see
    AsyncBinaryReader._start_read), so that they are read while the loop
    takes the open back, not after."""
    file = fs.new_random_access_file(uri)
    try:
        if head > 0:
            first = file.read(0, head)
            if len(first) < head:
                return file, len(first), first
            return file, fs.get_file_size(uri), first
        size = fs.get_file_size(uri)
        return file, size, _first_block(file, size, ahead, raw)
    except BaseException:
        file.close()
        raise


def _first_block(file: RandomAccessFile, size: int, ahead: int, raw: bool) -> bytes | AheadRead | None:
    """A file's first ahead bytes, read at hand if the plugin has them and
    the file is read as it is stored (raw: not decompressed), or else their
    read started on a runtime thread; None with nothing to read ahead, or
    for a file of size 0, whose size may say nothing of its bytes (/proc's:
    they are read when read)."""
    if ahead <= 0 or size <= 0:
        return None
    # bytes at hand are read here and now: a read ahead would have to wake
    # a runtime thread, and the loop might wait for it
    at_hand = file.read_if_ready(0, min(ahead, size)) if raw else None
    return at_hand or file.read_ahead(0, min(ahead, size))


def _open_at_hand(
    afs: AsyncModularFileSystem, uri: str, ahead: int
) -> tuple[RandomAccessFile, int, bytes | AheadRead | None] | None:
    """:func:`_open_for_reading` of a file read as it is stored, made on the
    loop's thread when the plugin has the file at hand (its open and size:
    ``new_random_access_file_if_ready``); None when it has not, and a
    worker opens it. Its first bytes are read at hand too, or their read
    started on a runtime thread."""
    opened = afs.wrapped.new_random_access_file_if_ready(uri)
    if opened is None:
        return None
    file, size = opened
    try:
        return file, size, _first_block(file, size, ahead, raw=True)
    except BaseException:
        afs.run_soon(file.close)
        raise


def _close_opened(opened: tuple[RandomAccessFile, int, bytes | AheadRead | None]) -> None:
    opened[0].close()


def _counted_as_open(
    opening: Callable[Concatenate[AsyncModularFileSystem, P], Coroutine[Any, Any, S]],
) -> Callable[Concatenate[AsyncModularFileSystem, P], Coroutine[Any, Any, S]]:
    """An open of a stream, counted in the Env's metrics as the operation
    ``open`` (its latency and errors; the bytes its stream moves are added
    when it closes)."""

    @functools.wraps(opening)
    async def counted(afs: AsyncModularFileSystem, /, *args: P.args, **kwargs: P.kwargs) -> S:
        start = perf_counter_ns()
        try:
            stream = await opening(afs, *args, **kwargs)
        except BaseException as error:
            afs.counted("open", perf_counter_ns() - start, error=error)
            raise
        afs.counted("open", perf_counter_ns() - start)
        return stream

    return counted


@_counted_as_open
async def open_stream(
    afs: AsyncModularFileSystem,
    uri: str,
    mode: str = "rb",
    *,
    encoding: str | None = None,
    errors: str | None = None,
    compression: str | None = "infer",
    block_size: int | None = None,
    readahead: int = 2,
    atomic: bool = True,
    attributes: Mapping[str, str] | None = None,
) -> Stream:
    """Open uri as a stream (see :meth:`asyncfs.Env.open`)."""
    try:
        kind, text = _MODES[mode]
    except KeyError:
        raise InvalidArgumentError(f"mode must be one of {', '.join(_MODES)}, not {mode!r}") from None
    if not text and (encoding is not None or errors is not None):
        raise InvalidArgumentError(f"binary mode {mode!r} takes no encoding or errors")
    if block_size is None:
        # Local text is read a piece at a time, as it is decoded and split:
        # a piece read is then not a slice copied out of a block, and the
        # runtime's threads read the next pieces ahead whatever the reader
        # does (see AsyncBinaryReader._start_read). Elsewhere a call costs
        # more (a request, on a network store): a block at a time.
        block_size = SPLIT if kind == "r" and text and not afs.network else BLOCK_SIZE
    if block_size <= 0:
        raise InvalidArgumentError(f"block_size must be positive, not {block_size}")
    if attributes and kind != "w":
        raise InvalidArgumentError(f"attributes are given to a new file (mode 'w' or 'wb'), not in mode {mode!r}")
    codec = _compression.codec_for(uri, compression)
    encoding = encoding or "utf-8"
    fs = afs.wrapped
    if kind == "r":
        # A network store's small files are read whole with the open (an
        # object cannot change under its reader: s3 pins the version it
        # opened). A local file that the plugin can open at hand is opened
        # on the loop's thread, its first block with it: no thread wakes
        # (150 to 350 µs on this 2-core machine). Any other's first block is
        # read with the open on a worker, at hand or ahead, as the next ones
        # are from each read: the loop takes the open back while a runtime
        # thread reads it.
        head = min(HEAD, block_size) if afs.network and codec is None else 0
        ahead = block_size if readahead > 0 and not afs.network else 0
        opened = _open_at_hand(afs, uri, ahead) if head == 0 and codec is None else None
        if opened is None:
            opened = await afs.run(
                _open_for_reading, fs, uri, head, ahead, codec is None, mutating=False, discard=_close_opened
            )
        file, size, first = opened
        reader = AsyncBinaryReader(
            afs, file, uri, size, block_size=block_size, readahead=readahead, codec=codec, first=first
        )
        return AsyncTextReader(reader, encoding, errors) if text else reader
    if kind == "w":
        landing = await afs.run(Landing.open, fs, uri, atomic, attributes, mutating=True)
    else:
        landing = Landing(fs, uri, await afs.run(fs.new_appendable_file, uri, mutating=True), staged=None)
    writer = AsyncBinaryWriter(afs, landing, block_size=block_size, codec=codec)
    if not text:
        return writer
    continuing = kind == "a" and await afs.run(landing.file.tell, mutating=False) > 0
    return AsyncTextWriter(writer, encoding, errors, continuing=continuing)
