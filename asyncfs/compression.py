"""Stream codecs: gzip, zlib, zstd and snappy, as incremental compressors and
decompressors for :mod:`asyncfs.streams`. gzip and zlib come from the
standard library, zstd from ``zstandard``, snappy (the framing format) from
``python-snappy``; the latter two are the ``asyncfs[compression]`` extra.

A codec is chosen by name or, with ``"infer"``, by the file's suffix:
``.gz``, ``.zz``/``.zlib``, ``.zst``/``.zstd``, ``.sz``/``.snappy``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, Protocol

from .errors import DataLossError, InvalidArgumentError

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
    def decompress(self, data: bytes) -> bytes: ...
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


def _module(name: str, package: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise InvalidArgumentError(
            f"{name} compression needs the {package} package (pip install 'asyncfs[compression]')"
        ) from None


class _Frames:
    """Decodes concatenated frames (gzip members, zstd frames): each ends
    its decompressor, whose unused input starts the next one."""

    def __init__(self, new: Callable[[], Any], error: type[Exception], name: str, uri: str) -> None:
        self._new = new
        self._error = error
        self._name = name
        self._uri = uri
        self._decompress = new()
        self._pending = False  # inside a frame

    def decompress(self, data: bytes) -> bytes:
        out = []
        try:
            while data:
                out.append(self._decompress.decompress(data))
                self._pending = not self._decompress.eof
                if not self._decompress.eof:
                    break
                data = self._decompress.unused_data
                self._decompress = self._new()
        except self._error as exc:
            raise DataLossError(f"corrupt {self._name} data: {exc}", op="decompress", path=self._uri) from exc
        return b"".join(out)

    def finish(self) -> None:
        if self._pending:
            raise DataLossError(f"the {self._name} stream ends inside a frame", op="decompress", path=self._uri)


class _Zlib(_Frames):
    """gzip (wbits 31) or zlib (15); a gzip file may hold several members."""

    def __init__(self, wbits: int, uri: str) -> None:
        super().__init__(lambda: zlib.decompressobj(wbits), zlib.error, "gzip" if wbits == 31 else "zlib", uri)
        self._compress = zlib.compressobj(6, zlib.DEFLATED, wbits)

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        return self._compress.compress(data)

    def flush(self) -> bytes:
        return self._compress.flush()


class _Zstd(_Frames):
    def __init__(self, uri: str) -> None:
        zstandard = _module("zstandard", "zstandard")
        super().__init__(lambda: zstandard.ZstdDecompressor().decompressobj(), zstandard.ZstdError, "zstd", uri)
        # a content checksum per frame: a flipped bit reads back as an error
        self._compress = zstandard.ZstdCompressor(write_checksum=True).compressobj()

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(self._compress.compress(bytes(data)))

    def flush(self) -> bytes:
        return bytes(self._compress.flush())


class _Snappy:
    def __init__(self, uri: str) -> None:
        snappy = _module("snappy", "python-snappy")
        self._uri = uri
        # a bad frame checksum comes up from cramjam as a bare OSError
        self._error = (snappy.UncompressError, OSError)
        self._compress = snappy.StreamCompressor()
        self._decompress = snappy.StreamDecompressor()

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(self._compress.add_chunk(bytes(data)))

    def flush(self) -> bytes:
        return b""  # every chunk is a whole frame

    def decompress(self, data: bytes) -> bytes:
        try:
            return bytes(self._decompress.decompress(data))
        except self._error as exc:
            raise DataLossError(f"corrupt snappy data: {exc}", op="decompress", path=self._uri) from exc

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
