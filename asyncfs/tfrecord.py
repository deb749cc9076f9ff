"""TFRecord files, read and written asynchronously, byte for byte as
TensorFlow writes them.

A record is ``length`` (uint64, little-endian), the masked CRC32C of those
8 bytes (uint32), ``length`` bytes of data, and the masked CRC32C of the
data. A file may be compressed as a whole (TensorFlow's "GZIP" and "ZLIB";
asyncfs also offers zstd and snappy). CRC32C comes from ``google-crc32c``.

    async with await tfrecord.writer(env, "mem://data/train.tfrecord") as out:
        await out.write(b"example")
    async for record in tfrecord.reader(env, "mem://data/train.tfrecord"):
        ...
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING

import google_crc32c

from . import _ffi
from .errors import DataLossError
from .streams import AsyncBinaryReader, AsyncBinaryWriter, Opener

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["TFRecordCorruptionError", "TFRecordReader", "TFRecordWriter", "masked_crc32c", "reader", "writer"]

_HEADER = struct.Struct("<QI")
_LENGTH = struct.Struct("<Q")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


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

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._records()

    async def _records(self) -> AsyncIterator[bytes]:
        try:
            while (record := await self.read()) is not None:
                yield record
        finally:
            await self.stream.close()

    async def read(self) -> bytes | None:
        """The next record, or None at the end of the stream."""
        stream = self.stream
        while True:
            start = stream.tell()
            header = await stream.read(12)
            if not header:
                return None
            if len(header) < 12:
                self._corrupt("the file ends inside a record header", start)
                return None
            length, length_crc = _HEADER.unpack(header)
            if self.verify and masked_crc32c(header[:8]) != length_crc:
                self._corrupt("record length fails its checksum", start)
                await self._resync(start + 1)
                continue
            body = await stream.read(length + 4)
            if len(body) < length + 4:
                self._corrupt(f"the file ends inside a record of {length} bytes", start)
                return None
            data = body[:length]
            if self.verify and masked_crc32c(data) != _FOOTER.unpack_from(body, length)[0]:
                self._corrupt("record data fails its checksum", start)
                continue
            self.records += 1
            return data

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
            found = _find_header(window)
            if found >= 0:
                await stream.seek(position + found)
                return
            if not chunk:
                await stream.seek(position + len(window))
                return
            keep = min(len(window), 11)  # a header may straddle two windows
            position += len(window) - keep
            window = window[-keep:]


def _find_header(window: bytes) -> int:
    """The offset of the first valid record header in window, or -1."""
    return int(_ffi.runtime().ASYNCFS_FindRecordHeader(window, len(window)))


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
) -> AsyncIterator[bytes]:
    """The records of uri, in order (opener: an Env, or a Transaction)."""

    async def records() -> AsyncIterator[bytes]:
        stream = await opener.open(uri, "rb", compression=_compression(compression))
        async for record in TFRecordReader(stream, skip_corrupt=skip_corrupt, verify=verify):
            yield record

    return records()
