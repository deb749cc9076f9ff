"""Safe on a shared machine and on hostile data: what another user of the
machine, a planted file or a hostile answer can make asyncfs do. Each
finding of the shared-machine audit has its regression test here (the CLI's
in tests/test_cli.py, the s3 plugin's in tests/test_s3.py). Tests that need a
second user run as a real one: made with useradd when the suite runs as
root, skipped (saying why) otherwise."""

from __future__ import annotations

import gzip
import os
import struct
import sys
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import asyncfs
from asyncfs import tfrecord
from asyncfs.tfrecord import masked_crc32c

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


# ---- reads sized by the caller ---------------------------------------------------------


async def test_a_read_of_more_than_memory_holds_gives_what_the_file_has(env: asyncfs.Env, tmp_path: Path) -> None:
    (tmp_path / "ten").write_bytes(b"0123456789")
    file = await env.new_random_access_file(str(tmp_path / "ten"))
    try:
        assert await file.read(0, 2**62) == b"0123456789"
        assert await file.read(3, 2**40) == b"3456789"
        with pytest.raises(asyncfs.OutOfRangeError):
            await file.read(0, 2**62, strict=True)
    finally:
        await file.close()


# ---- decompression bombs ----------------------------------------------------------------


def _bomb(path: Path, codec: str, zeros: int) -> None:
    """A small file that decompresses to zeros bytes of zeros."""
    from asyncfs.compression import compressor  # noqa: PLC0415

    squeeze = compressor(codec, str(path))
    block = bytes(1 << 20)
    with path.open("wb") as out:
        for _ in range(zeros >> 20):
            out.write(squeeze.compress(block))
        out.write(squeeze.flush())


def _need(codec: str) -> None:
    if codec == "zstd" and sys.version_info < (3, 14):
        pytest.importorskip("backports.zstd", reason="zstd streams need backports.zstd before Python 3.14")
    if codec == "snappy":
        pytest.importorskip("snappy", reason="snappy streams need python-snappy")


@pytest.mark.parametrize("codec, suffix", [("gzip", ".gz"), ("zstd", ".zst"), ("snappy", ".sz")])
async def test_a_decompression_bomb_costs_only_what_is_read(
    env: asyncfs.Env, tmp_path: Path, codec: str, suffix: str
) -> None:
    """256 MiB of zeros in a few kilobytes (zstd, gzip): read(10), and a
    whole read in blocks, hold about a block at a time, never the whole."""
    _need(codec)
    bomb = tmp_path / f"bomb{suffix}"
    _bomb(bomb, codec, 256 << 20)
    assert bomb.stat().st_size < 16 << 20
    tracemalloc.start()
    try:
        async with env.open(str(bomb), "rb") as stream:
            assert await stream.read(10) == bytes(10)
            _, peak = tracemalloc.get_traced_memory()
            assert peak < 24 << 20, f"read(10) of a {codec} bomb held {peak >> 20} MiB"
            total = 10
            while chunk := await stream.read(4 << 20):
                total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 256 << 20
    assert peak < 48 << 20, f"reading a {codec} bomb in 4 MiB pieces held {peak >> 20} MiB"


# ---- TFRecord files that claim more than they hold ---------------------------------------


def _record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


async def test_a_record_of_many_blocks_is_read_in_linear_time(env: asyncfs.Env, tmp_path: Path) -> None:
    """A valid 96 MiB record between small ones: read whole, with about the
    memory of the record twice (its pieces and the joined bytes), not the
    quadratic re-joining of everything before each block."""
    big = os.urandom(1 << 20) * 96
    (tmp_path / "big.tfrecord").write_bytes(_record(b"a") + _record(big) + _record(b"z"))
    tracemalloc.start()
    try:
        records = [record async for record in tfrecord.reader(env, str(tmp_path / "big.tfrecord"))]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [len(r) for r in records] == [1, len(big), 1] and records[1] == big
    assert peak < 3 * len(big), f"{peak >> 20} MiB held for a {len(big) >> 20} MiB record"


@pytest.mark.parametrize("compression", [None, "gzip"])
async def test_a_header_claiming_exabytes_holds_only_what_the_file_has(
    env: asyncfs.Env, tmp_path: Path, compression: str | None
) -> None:
    """A header whose length (2**62, its checksum right) is more than the
    file holds: a record cut short, found after reading what is there, with
    memory bounded by the file, not the claim."""
    length = struct.pack("<Q", 2**62)
    hostile = length + struct.pack("<I", masked_crc32c(length)) + bytes(32 << 20)
    suffix = ".gz" if compression else ""
    path = tmp_path / f"claims.tfrecord{suffix}"
    path.write_bytes(gzip.compress(hostile, 1) if compression else hostile)
    tracemalloc.start()
    try:
        with pytest.raises(tfrecord.TFRecordCorruptionError, match="ends inside a record"):
            async for _ in tfrecord.reader(env, str(path)):
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * len(hostile), f"{peak >> 20} MiB held for a file of {len(hostile) >> 20} MiB"
    skipped = tfrecord.reader(env, str(path), skip_corrupt=True)
    assert [record async for record in skipped] == []
