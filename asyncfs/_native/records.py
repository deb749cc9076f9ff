"""TFRecord framing in the runtime's C: whole records found in a buffer,
both checksums checked (CRC-32C in hardware where the CPU has it), a batch
per call; and the search for the next valid record header after damage.
The reader (:mod:`asyncfs._streams.tfrecord`) needs no cffi."""

from __future__ import annotations

import enum
from typing import NamedTuple

from .binding import ffi, runtime

__all__ = ["Parsed", "RecordParser", "Stop", "find_header"]


class Stop(enum.IntEnum):
    """Why a parse stopped (``ASYNCFS_RECORDS_*``)."""

    MORE = 0  # a record goes on past the buffer: read more
    BAD_LENGTH = 1  # a header fails its checksum
    BAD_DATA = 2  # a record's data fails its checksum


class Parsed(NamedTuple):
    spans: list[int]  # (offset, length) of each record's data, flat, from the parse's start
    end: int  # where parsing stopped, from the parse's start
    stop: Stop
    skip: int  # with BAD_DATA: the damaged record's whole size


class RecordParser:
    """Parses up to ``most`` records per call; its arrays are kept for the
    next call."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._spans = ffi.new("int64_t[]", 2 * most)
        self._stop = ffi.new("int64_t[3]")

    def parse(self, buffer: bytes, start: int = 0, *, verify: bool = True, most: int | None = None) -> Parsed:
        """The whole records of buffer[start:], up to the first damaged one."""
        whole = ffi.from_buffer(buffer)
        limit = self.most if most is None else min(most, self.most)
        count = int(
            runtime().ASYNCFS_ParseRecords(whole + start, len(buffer) - start, verify, self._spans, limit, self._stop)
        )
        stop = self._stop
        return Parsed(ffi.unpack(self._spans, 2 * count), int(stop[0]), Stop(int(stop[1])), int(stop[2]))

    def one(self, record: bytes, *, verify: bool = True) -> bool:
        """Whether record is exactly one whole, valid record."""
        parsed = self.parse(record, verify=verify, most=1)
        return len(parsed.spans) == 2 and parsed.end == len(record)


def find_header(window: bytes) -> int:
    """The offset of the first valid record header in window, or -1."""
    return int(runtime().ASYNCFS_FindRecordHeader(window, len(window)))
