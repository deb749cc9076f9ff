"""Stream codecs: gzip, zlib, zstd and snappy, as incremental compressors and
decompressors for :mod:`asyncfs._streams.streams`. gzip and zlib come from the
standard library, zstd from the standard library's ``compression.zstd``
(Python 3.14) or its backport ``backports.zstd``, snappy (the framing
format) from ``python-snappy``; the latter two are the
``asyncfs[compression]`` extra.

A codec is chosen by name or, with ``"infer"``, by the file's suffix:
``.gz``, ``.zz``/``.zlib``, ``.zst``/``.zstd``, ``.sz``/``.snappy``.

Decoding is bounded: a decompressor gives at most the output asked for per
call, keeping the rest of its input, so a few kilobytes that claim
gigabytes (a decompression bomb) cost only what the reader reads.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from ..errors import DataLossError, InvalidArgumentError

__all__ = ["CODECS", "Compressor", "Decompressor", "codec_for", "compressor", "decompressor"]

SUFFIXES = {
    ".gz": "gzip",
    ".zz": "zlib",
    ".zlib": "zlib",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".sz": "snappy",
    ".snappy": "snappy",
}
CODECS = ("gzip", "zlib", "zstd", "snappy")


class Compressor(Protocol):
    def compress(self, data: bytes | bytearray | memoryview) -> bytes: ...
    def flush(self) -> bytes: ...


class Decompressor(Protocol):
    """Decodes a stream given in pieces, never more than max_length bytes
    of output per call, whatever the input claims or holds: what it could
    not decode yet stays inside, and ``needs_input`` says whether a call
    with no new data could give more."""

    @property
    def needs_input(self) -> bool: ...
    def decompress(self, data: bytes, max_length: int) -> bytes: ...
    def finish(self) -> None:
        """Raise DataLossError if the stream ended inside a frame."""


def codec_for(uri: str, compression: str | None) -> str | None:
    """The codec to use: compression itself, or inferred from the suffix."""
    if compression is None or compression == "":
        return None
    if compression == "infer":
        lowered = uri.lower()
        return next((codec for suffix, codec in SUFFIXES.items() if lowered.endswith(suffix)), None)
    name = compression.lower()
    if name not in CODECS:
        raise InvalidArgumentError(f"unknown compression {compression!r}; one of {', '.join(CODECS)} or 'infer'")
    return name


def _module(*names: str, package: str) -> Any:
    """The first of names that imports (the standard library's, then its
    backport's), else InvalidArgumentError saying what to install."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise InvalidArgumentError(f"this compression needs the {package} package (pip install 'asyncfs[compression]')")


# What one call into a frame's decoder did: its output, the input it left
# (unconsumed, or past the frame's end), whether it may have more output
# without more input, and whether the frame ended.
Step: TypeAlias = tuple[bytes, bytes, bool, bool]


def _zlib_step(decoder: Any, data: bytes, room: int) -> Step:
    out = decoder.decompress(data, room)
    if decoder.eof:
        return out, decoder.unused_data, False, True
    # a full output may have left output inside, with all input consumed
    return out, decoder.unconsumed_tail, len(out) == room, False


def _zstd_step(decoder: Any, data: bytes, room: int) -> Step:
    out = decoder.decompress(data, room)
    if decoder.eof:
        return out, decoder.unused_data, False, True
    return out, b"", not decoder.needs_input, False  # the decoder keeps what it did not consume


class _Frames:
    """Decodes concatenated frames (gzip members, zstd frames): each ends
    its decoder, whose unused input starts the next one."""

    def __init__(
        self, new: Callable[[], Any], step: Callable[[Any, bytes, int], Step], error: Any, name: str, uri: str
    ) -> None:
        self._new = new
        self._step = step
        self._error = error
        self._name = name
        self._uri = uri
        self._decoder = new()
        self._input = b""  # input not given to the decoder yet
        self._more = False  # the decoder may give output without more input
        self._in_frame = False

    @property
    def needs_input(self) -> bool:
        return not self._input and not self._more

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if data:
            self._input = self._input + data if self._input else data
        out = []
        room = max_length
        try:
            while room > 0 and not self.needs_input:
                given, self._input = self._input, b""
                piece, self._input, self._more, ended = self._step(self._decoder, given, room)
                out.append(piece)
                room -= len(piece)
                self._in_frame = not ended
                if ended:
                    self._decoder = self._new()
                elif not piece and self._input == given:
                    break  # nothing taken, nothing given: it waits for more input
        except self._error as exc:
            raise DataLossError(f"corrupt {self._name} data: {exc}", op="decompress", path=self._uri) from exc
        return b"".join(out)

    def finish(self) -> None:
        if self._in_frame or self._input:
            raise DataLossError(f"the {self._name} stream ends inside a frame", op="decompress", path=self._uri)


class _Zlib(_Frames):
    """gzip (wbits 31) or zlib (15); a gzip file may hold several members."""

    def __init__(self, wbits: int, uri: str) -> None:
        name = "gzip" if wbits == 31 else "zlib"
        super().__init__(lambda: zlib.decompressobj(wbits), _zlib_step, zlib.error, name, uri)
        self._compress = zlib.compressobj(6, zlib.DEFLATED, wbits)

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        return self._compress.compress(data)

    def flush(self) -> bytes:
        return self._compress.flush()


class _Zstd(_Frames):
    """zstd, by the standard library's ``compression.zstd`` (Python 3.14) or
    its backport: the decoder that bounds its output (``max_length``)."""

    def __init__(self, uri: str) -> None:
        zstd = _module("compression.zstd", "backports.zstd", package="backports.zstd")
        super().__init__(zstd.ZstdDecompressor, _zstd_step, zstd.ZstdError, "zstd", uri)
        # a content checksum per frame: a flipped bit reads back as an error
        self._compress = zstd.ZstdCompressor(options={zstd.CompressionParameter.checksum_flag: 1})

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(self._compress.compress(data))

    def flush(self) -> bytes:
        return bytes(self._compress.flush())


# Input given to python-snappy's decoder at a time: it decodes all it is
# given, and a frame of snappy's (at most 64 KiB of output) is never less
# than about a twentieth of its output, so this bounds one call's output.
_SNAPPY_SLICE = 1 << 16


class _Snappy:
    def __init__(self, uri: str) -> None:
        snappy = _module("snappy", package="python-snappy")
        self._uri = uri
        # a bad frame checksum comes up from cramjam as a bare OSError
        self._error = (snappy.UncompressError, OSError)
        self._compress = snappy.StreamCompressor()
        self._decompress = snappy.StreamDecompressor()
        self._input = b""
        self._output = b""  # decoded past the last call's max_length

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(self._compress.add_chunk(bytes(data)))

    def flush(self) -> bytes:
        return b""  # every chunk is a whole frame

    @property
    def needs_input(self) -> bool:
        return not self._input and not self._output

    def decompress(self, data: bytes, max_length: int) -> bytes:
        self._input += data
        out = [self._output]
        held = len(self._output)
        try:
            while held < max_length and self._input:
                piece = bytes(self._decompress.decompress(self._input[:_SNAPPY_SLICE]))
                self._input = self._input[_SNAPPY_SLICE:]
                out.append(piece)
                held += len(piece)
        except self._error as exc:
            raise DataLossError(f"corrupt snappy data: {exc}", op="decompress", path=self._uri) from exc
        whole = b"".join(out)
        self._output = whole[max_length:]
        return whole[:max_length]

    def finish(self) -> None:
        # python-snappy keeps an incomplete frame in `remains`; beyond the
        # 10-byte stream identifier, anything left there is a cut frame
        remains = getattr(self._decompress, "remains", None)
        if remains is not None and len(remains) > 10:
            raise DataLossError("the snappy stream ends inside a frame", op="decompress", path=self._uri)
        try:
            self._decompress.flush()
        except self._error as exc:
            raise DataLossError(
                f"the snappy stream ends inside a frame: {exc}", op="decompress", path=self._uri
            ) from exc


def _codec(name: str, uri: str) -> Any:
    if name == "gzip":
        return _Zlib(31, uri)
    if name == "zlib":
        return _Zlib(15, uri)
    if name == "zstd":
        return _Zstd(uri)
    return _Snappy(uri)


def compressor(name: str, uri: str) -> Compressor:
    codec: Compressor = _codec(name, uri)
    return codec


def decompressor(name: str, uri: str) -> Decompressor:
    codec: Decompressor = _codec(name, uri)
    return codec
