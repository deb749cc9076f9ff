"""TFRecord files, read and written asynchronously, byte for byte as
TensorFlow writes them.

A record is ``length`` (uint64, little-endian), the masked CRC32C of those
8 bytes (uint32), ``length`` bytes of data, and the masked CRC32C of the
data. A file may be compressed as a whole (TensorFlow's "GZIP" and "ZLIB";
asyncfs also offers zstd and snappy). Writing checksums with
``google-crc32c``; reading parses whole blocks of records in the runtime's
C, checksums included (CRC-32C in hardware where the CPU has it).

    async with await tfrecord.writer(env, "mem://data/train.tfrecord") as out:
        await out.write(b"example")
    async for record in tfrecord.reader(env, "mem://data/train.tfrecord"):
        ...
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING

import google_crc32c

from .._native import RecordParser, Stop, find_header
from ..errors import DataLossError
from .lines import Handover
from .streams import AsyncBinaryReader, AsyncBinaryWriter, Opener

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["TFRecordCorruptionError", "TFRecordReader", "TFRecordWriter", "masked_crc32c", "reader", "writer"]

_HEADER = struct.Struct("<QI")
_LENGTH = struct.Struct("<Q")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_BLOCK = 1 << 20  # bytes read from the stream at a time
_PER_CALL = 8192  # records parsed per call into C at most


def masked_crc32c(data: Buffer) -> int:
    """TensorFlow's masked CRC32C: rotate right by 15, add a constant."""
    crc = int(google_crc32c.value(data if isinstance(data, bytes) else bytes(data)))
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class TFRecordCorruptionError(DataLossError):
    """A record failed its checksum or was cut short. ``offset`` is where
    the record starts in the (decompressed) stream."""

    def __init__(self, message: str, *, path: str, offset: int) -> None:
        super().__init__(f"{message} at offset {offset}", op="read_tfrecord", path=path)
        self.offset = offset


def _compression(compression: str | None) -> str | None:
    """TensorFlow's names ("GZIP", "ZLIB", "") as well as asyncfs's."""
    if compression is None or compression == "":
        return None
    return compression.lower()


class TFRecordWriter:
    """Writes records to a stream; closing it closes (and, for a fresh
    file, lands) the file."""

    def __init__(self, stream: AsyncBinaryWriter) -> None:
        self.stream = stream
        self.records = 0

    async def write(self, record: Buffer) -> None:
        data = memoryview(record).cast("B")
        length = _LENGTH.pack(len(data))
        await self.stream.write(length + _FOOTER.pack(masked_crc32c(length)))
        await self.stream.write(data)
        await self.stream.write(_FOOTER.pack(masked_crc32c(data)))
        self.records += 1

    async def flush(self) -> None:
        await self.stream.flush()

    async def close(self) -> None:
        await self.stream.close()

    async def __aenter__(self) -> TFRecordWriter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stream.__aexit__(exc_type, exc, tb)


class TFRecordReader:
    """Iterates the records of a stream. Corruption raises
    :class:`TFRecordCorruptionError`, or with skip_corrupt is skipped: a
    record whose data fails its checksum is dropped, and after a damaged
    length the reader searches forward for the next valid record header.
    ``skipped`` counts what was skipped."""

    def __init__(self, stream: AsyncBinaryReader, *, skip_corrupt: bool = False, verify: bool = True) -> None:
        self.stream = stream
        self.skip_corrupt = skip_corrupt
        self.verify = verify
        self.skipped = 0
        self.records = 0
        # Bytes read from the stream and not parsed yet: _buffer[_at:] starts
        # at stream offset _base + _at. Whole records are parsed from it a
        # block at a time, in C (both checksums included).
        self._buffer = b""
        self._at = 0
        self._base = stream.tell()
        self._damaged_length: int | None = None  # a header there failed its checksum: resync after it
        self._ready: Iterator[bytes] = iter(())  # records parsed and not taken yet
        # what each call into C fills: record spans, and why parsing stopped
        self._parser = RecordParser(_PER_CALL)

    def __aiter__(self) -> Handover[bytes]:
        """``async for record in reader``: the records, each handed over
        from the batch parsed with it (see :class:`._lines.Handover`); the
        stream closes at the end (or at an error). After a ``break``, what
        was parsed and not taken stays in the reader."""
        return Handover(self._next_record)

    async def _next_record(self, handover: Handover[bytes]) -> bytes:
        """The next record, once handover has handed over those parsed
        before: the next batch is parsed and becomes handover.ahead."""
        try:
            batch = await self.read_batch()
        except BaseException:
            await self.stream.close()
            raise
        if not batch:
            await self.stream.close()
            raise StopAsyncIteration
        handover.ahead = self._ready = iter(batch)
        return next(self._ready)

    async def read(self) -> bytes | None:
        """The next record, or None at the end of the stream."""
        for record in self._ready:
            return record
        self._ready = iter(await self.read_batch())
        return next(self._ready, None)

    async def read_batch(self) -> list[bytes]:
        """The next records: every whole one in the bytes read so far (the
        stream is read further for at least one), [] at the end."""
        batch = list(self._ready)
        if batch:
            return batch
        while True:
            if self._damaged_length is not None:
                await self._resync(self._damaged_length + 1)
                self._damaged_length = None
                self._buffer, self._at, self._base = b"", 0, self.stream.tell()
            parsed_from = self._at
            batch = self._parse()
            if batch:
                self.records += len(batch)
                return batch
            if self._at != parsed_from or self._damaged_length is not None:
                continue  # a damaged record was skipped: parse on
            rest = self._buffer[self._at :]
            claimed = _claimed(rest)
            if claimed > len(rest) + _BLOCK:  # a record of many blocks: gathered whole, not joined per block
                self._base += self._at
                self._buffer, self._at = b"", 0
                batch = await self._gather(rest, claimed)
                if batch:
                    return batch
                continue  # it failed its checksum and was skipped, or the file ended (read again: it says so)
            chunk = await self.stream.read(_BLOCK)
            if not chunk:
                return self._ended()
            self._base += self._at
            straddler = self._straddler(rest, chunk)
            if straddler is None:
                self._buffer, self._at = rest + chunk if rest else chunk, 0
                continue
            # the record that straddles the two blocks is joined alone, not
            # the whole block after it (a fresh megabyte per block otherwise)
            self._buffer, self._at, self._base = chunk, len(straddler) - len(rest), self._base + len(rest)
            self.records += 1
            return [straddler[12:-4]]  # the block's own records come with the next call (or its damage does)

    async def _gather(self, start: bytes, total: int) -> list[bytes]:
        """The record that start begins, total bytes in all (its header's
        length checked): its pieces read to their end and joined once, so a
        record of n blocks costs n reads, not n joins of all before it. A
        file that ends first is a record cut short, whatever its header
        claimed: what is held is what the file had, never what it claimed."""
        offset = self._base
        parts, held = [start], len(start)
        while held < total:
            piece = await self.stream.read(min(_BLOCK, total - held))
            if not piece:
                self._buffer, self._at = start, 0  # its header says what was cut short
                return self._ended()
            parts.append(piece)
            held += len(piece)
        record = b"".join(parts)
        del parts
        self._base = offset + total
        if self._parser.one(record, verify=self.verify):
            self.records += 1
            return [record[12:-4]]
        self._corrupt("record data fails its checksum", offset)
        return []

    def _straddler(self, rest: bytes, chunk: bytes) -> bytes | None:
        """rest (the start of a record) joined with the part of chunk that
        completes it, when that is one whole, valid record (checked in C as
        any other); else None: the caller joins rest and chunk whole."""
        if not rest or len(rest) + len(chunk) < 12:
            return None
        head = rest[:12] if len(rest) >= 12 else rest + chunk[: 12 - len(rest)]
        total = 12 + _LENGTH.unpack_from(head)[0] + 4
        if not len(rest) < total <= len(rest) + len(chunk):
            return None
        straddler = rest + chunk[: total - len(rest)]
        return straddler if self._parser.one(straddler, verify=self.verify) else None

    def _parse(self) -> list[bytes]:
        """The whole records from _at on, up to a damaged one: reported, or
        (skip_corrupt) skipped, or marked for read_batch to resync after."""
        buffer, start = self._buffer, self._at
        found, end, stop, skip = self._parser.parse(buffer, start, verify=self.verify)
        offsets = [start + offset for offset in found[0::2]]
        batch = [buffer[offset : offset + length] for offset, length in zip(offsets, found[1::2], strict=True)]
        self._at = start + end
        if batch:
            return batch  # a damaged record after these is reported when parsing reaches it again
        offset = self._base + self._at
        if stop == Stop.BAD_DATA:
            self._corrupt("record data fails its checksum", offset)
            self._at += skip
        elif stop == Stop.BAD_LENGTH:
            self._corrupt("record length fails its checksum", offset)
            self._damaged_length = offset
        return batch

    def _ended(self) -> list[bytes]:
        """The stream ended: bytes left over are a record cut short."""
        rest = self._buffer[self._at :]
        offset = self._base + self._at
        self._buffer, self._at = b"", 0
        if len(rest) >= 12:
            self._corrupt(f"the file ends inside a record of {_LENGTH.unpack_from(rest)[0]} bytes", offset)
        elif rest:
            self._corrupt("the file ends inside a record header", offset)
        return []

    def _corrupt(self, message: str, offset: int) -> None:
        if not self.skip_corrupt:
            raise TFRecordCorruptionError(message, path=self.stream.uri, offset=offset)
        self.skipped += 1

    async def _resync(self, offset: int) -> None:
        """Move to the first offset from which a valid record header reads:
        one pass over the bytes, each window scanned in C."""
        stream = self.stream
        await stream.seek(offset)
        window = b""
        position = offset
        while True:
            chunk = await stream.read(1 << 16)
            window += chunk
            found = find_header(window)
            if found >= 0:
                await stream.seek(position + found)
                return
            if not chunk:
                await stream.seek(position + len(window))
                return
            keep = min(len(window), 11)  # a header may straddle two windows
            position += len(window) - keep
            window = window[-keep:]


def _claimed(start: bytes) -> int:
    """The whole size (header, data, footer) of the record start begins,
    when start holds its header and the header's length checks out; else 0."""
    if len(start) < 12:
        return 0
    length, crc = _HEADER.unpack_from(start)
    return 12 + length + 4 if masked_crc32c(start[:8]) == crc else 0


async def writer(opener: Opener, uri: str, *, compression: str | None = "infer", atomic: bool = True) -> TFRecordWriter:
    """A TFRecord writer on uri (landing by rename on close unless atomic is
    false). compression: "GZIP", "ZLIB", zstd, snappy, None, or "infer".
    opener is an Env, or a Transaction to write the file inside it."""
    stream = await opener.open(uri, "wb", compression=_compression(compression), atomic=atomic)
    return TFRecordWriter(stream)


def reader(
    opener: Opener,
    uri: str,
    *,
    compression: str | None = "infer",
    skip_corrupt: bool = False,
    verify: bool = True,
) -> AsyncIterable[bytes]:
    """The records of uri, in order (opener: an Env, or a Transaction)."""
    return _Records(opener, uri, _compression(compression), skip_corrupt, verify)


class _Records:
    """What :func:`reader` returns: the file opens at the first record; each
    record after comes straight from the reader's parsed batch."""

    def __init__(self, opener: Opener, uri: str, compression: str | None, skip_corrupt: bool, verify: bool) -> None:
        self._opening = (opener, uri, compression, skip_corrupt, verify)
        self._reader: TFRecordReader | None = None

    def __aiter__(self) -> Handover[bytes]:
        return Handover(self._next_record)

    async def _next_record(self, handover: Handover[bytes]) -> bytes:
        """The first record, once the file is open; then each batch's (see
        :meth:`TFRecordReader._next_record`)."""
        if self._reader is None:
            opener, uri, compression, skip_corrupt, verify = self._opening
            stream = await opener.open(uri, "rb", compression=compression)
            self._reader = TFRecordReader(stream, skip_corrupt=skip_corrupt, verify=verify)
        return await self._reader._next_record(handover)
