"""Streams, compression, TFRecord files and prefetch, on file:// and
mem://, on asyncio and trio."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import gzip
import importlib
import io
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import pytest
from conftest import FIXTURES, exit_code_of, leave_prefetches_early, open_fds, settle
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import asyncfs
from asyncfs import _uri, tfrecord
from asyncfs._streams import streams
from asyncfs._streams import tfrecord as _tfrecord

# the module, which the face's prefetch (the function) hides
_prefetch = importlib.import_module("asyncfs._streams.prefetch")

pytestmark = pytest.mark.anyio
# what tests/fixtures/known.tfrecord* hold (written by TensorFlow 2.21, see fixtures/README.md)
KNOWN_RECORDS = [b"", b"hello", bytes(range(256)) * 4, b"x" * 70000]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


# ---- modes ------------------------------------------------------------------------


async def test_binary_modes(env: asyncfs.Env, base: str) -> None:
    uri = f"{base}/data.bin"
    async with env.open(uri, "wb") as f:
        assert await f.write(b"hello ") == 6
        await f.writelines([b"wor", b"ld\n"])
        assert f.tell() == 12
        await f.flush()
        await f.sync()
    async with env.open(uri, "ab") as f:
        await f.write(b"more\n")
    async with env.open(uri, "rb") as f:
        assert f.size() == 17
        assert await f.read(5) == b"hello"
        assert await f.readline() == b" world\n"
        assert await f.read() == b"more\n"
        assert await f.read() == b""
    f = await env.open(uri, "rb")  # awaitable as well as a context manager
    assert await f.readlines() == [b"hello world\n", b"more\n"]
    await f.close()
    assert f.closed
    with pytest.raises(ValueError, match="closed"):
        await f.read()


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "utf-16"])
async def test_text_modes(env: asyncfs.Env, base: str, encoding: str) -> None:
    uri = f"{base}/text.txt"
    text = "première ligne\nsecond line\r\nthird\rlast"
    async with env.open(uri, "w", encoding=encoding) as f:
        await f.write(text)
    async with env.open(uri, "a", encoding=encoding) as f:
        await f.write(" + appended\n")
    raw = await env.read_file(uri)
    assert raw.decode(encoding) == text + " + appended\n"
    async with env.open(uri, "r", encoding=encoding) as f:  # universal newlines
        assert [line async for line in f] == [
            "première ligne\n",
            "second line\n",
            "third\n",
            "last + appended\n",
        ]
    async with env.open(uri, "rt", encoding=encoding) as f:
        assert await f.read(8) == "première"
        assert await f.read() == " ligne\nsecond line\nthird\nlast + appended\n"


async def test_bad_modes_and_options(env: asyncfs.Env, base: str) -> None:
    with pytest.raises(asyncfs.InvalidArgumentError, match="mode"):
        await env.open(f"{base}/x", "rw")
    with pytest.raises(ValueError, match="encoding"):
        await env.open(f"{base}/x", "wb", encoding="utf-8")
    with pytest.raises(FileNotFoundError):
        await env.open(f"{base}/missing", "rb")
    with pytest.raises(asyncfs.InvalidArgumentError, match="compression"):
        await env.open(f"{base}/x", "wb", compression="lzma")


# ---- buffering, lines, seek ------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 3, 7, 64, 1 << 20])
async def test_lines_across_block_edges(env: asyncfs.Env, base: str, block_size: int) -> None:
    lines = [b"", b"a", b"bb", b"x" * 50, b"ccc", b"d" * 200, b"tail without newline"]
    data = b"\n".join(lines)
    await env.write_file(f"{base}/lines", data)
    async with env.open(f"{base}/lines", "rb", block_size=block_size, readahead=3) as f:
        got = [line async for line in f]
    assert got == io.BytesIO(data).readlines()
    async with env.open(f"{base}/lines", "rb", block_size=block_size) as f:
        assert await f.readline(limit=2) == b"\n"
        assert await f.readline(limit=1) == b"a"
        assert await f.readline() == b"\n"
        assert await f.readline(limit=4) == b"bb\n"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
@pytest.mark.parametrize("block_size", [5, 4096])
async def test_text_decoded_from_blocks_lent_by_the_runtime(
    env: asyncfs.Env, tmp_path: Path, encoding: str, block_size: int
) -> None:
    """A local text stream decodes each block read ahead straight from the
    runtime's buffer (AsyncBinaryReader.read1_lent): characters and "\r\n"
    split across the blocks' edges decode as io decodes them, and nothing is
    lost between blocks lent and blocks read (the first, read ahead from the
    open, and the end)."""
    path = tmp_path / "text"
    text = "".join(f"ligne {i} é€😀\r\nsuite\r" for i in range(3000))
    path.write_bytes(text.encode(encoding))
    async with env.open(str(path), "r", encoding=encoding, block_size=block_size) as f:
        got = [line async for line in f]
    with open(path, encoding=encoding) as theirs:
        assert got == theirs.readlines()
    async with env.open(str(path), "r", encoding=encoding, block_size=block_size) as f:
        batches = [lines async for lines in f.iter_lines()]
        assert [line for lines in batches for line in lines] == got
        assert await f.read() == ""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
async def test_a_file_without_a_size_is_read_when_read(env: asyncfs.Env) -> None:
    """A local file's first block is read ahead from its open, but not a
    file whose size says nothing of its bytes (/proc's, a FIFO's: 0): it is
    read when read, all of it, as io reads it."""
    async with env.open("/proc/self/status", "r") as f:
        assert not f.binary._ahead
        got = await f.read()
    assert got.startswith("Name:") and got.count("\n") > 10


async def test_seek_and_tell_after_partial_reads(env: asyncfs.Env, base: str) -> None:
    data = bytes(range(256)) * 40
    await env.write_file(f"{base}/seek", data)
    async with env.open(f"{base}/seek", "rb", block_size=100) as f:
        assert await f.read(10) == data[:10]
        assert f.tell() == 10
        assert await f.seek(5, io.SEEK_CUR) == 15
        assert await f.read(3) == data[15:18]
        assert await f.seek(-10, io.SEEK_END) == len(data) - 10
        assert await f.read() == data[-10:]
        assert await f.seek(1234) == 1234
        buffer = bytearray(20)
        assert await f.readinto(buffer) == 20
        assert bytes(buffer) == data[1234:1254]
        assert await f.seek(0) == 0
        assert await f.readline() == data[: data.index(b"\n") + 1]
        with pytest.raises(ValueError):
            await f.seek(-1)


@pytest.mark.skipif(sys.platform != "linux", reason="counts descriptors in /proc/self/fd")
@pytest.mark.parametrize("mode", ["rb", "r"])
async def test_closed_readers_release_their_files_even_when_the_env_closes_at_once(tmp_path: Path, mode: str) -> None:
    """A reader's close does not wait for its release on a worker (the
    ABI's cleanup has nothing to report), and no release is lost: readers
    closed just before their Env, read to the end or not, leave no
    descriptor open once the releases have run."""
    paths = []
    for i in range(40):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"line\n" * (i * 1000))
        paths.append(path)
    baseline = open_fds()
    async with asyncfs.Env() as env:

        async def read(path: Path, whole: bool) -> None:
            async with env.open(str(path), mode, compression=None) as f:
                await (f.read() if whole else f.read(3))

        async with anyio.create_task_group() as tasks:
            for i, path in enumerate(paths):
                tasks.start_soon(read, path, i % 2 == 0)
        async with env.open(str(paths[1]), mode, compression=None) as f:
            assert await f.read(5) == ("line\n" if mode == "r" else b"line\n")
    with anyio.fail_after(10):
        while open_fds() > baseline:
            await anyio.sleep(0.01)


@pytest.mark.parametrize("mode", ["rb", "r"])
@pytest.mark.parametrize("call", ["read", "readline"])
async def test_a_read_cancelled_while_it_waits_for_more_loses_nothing(
    env: asyncfs.Env, base: str, mode: str, call: str
) -> None:
    """A read(n) or readline that has collected some blocks and is
    cancelled while the next one is on its way (a store that hangs, here
    the third block) leaves what it collected unread: the position is
    where the read began (binary), and the next reads return every byte."""
    data = b"".join(b"%06d," % i for i in range(300_000))  # one 2.1 MB line
    uri = f"{base}/hangs-{mode}-{call}"
    await env.write_file(uri, data)
    async with env.open(uri, mode, block_size=4096, compression=None, readahead=0) as f:
        expected = data if mode == "rb" else data.decode()
        assert await f.read(10) == expected[:10]
        before = f.tell() if mode == "rb" else None  # type: ignore[union-attr]
        more = f._more if mode == "rb" else f.binary._more  # type: ignore[attr-defined, union-attr]
        blocks = 0

        async def hangs_at_the_third() -> Any:
            nonlocal blocks
            blocks += 1
            if blocks == 3:
                await anyio.sleep_forever()
            return await more()

        target = f if mode == "rb" else f.binary  # type: ignore[union-attr]
        target._more = hangs_at_the_third
        with anyio.move_on_after(0.5) as scope:
            # more than one read at hand takes (streams.AT_HAND_MOST): block by block
            await (f.read(1_500_000) if call == "read" else f.readline())
        assert scope.cancelled_caught
        del target._more  # the store answers again
        if mode == "rb":
            assert f.tell() == before  # type: ignore[union-attr]
        assert await f.read() == expected[10:]


# ---- atomic writers -------------------------------------------------------------------------


async def test_failed_writer_leaves_the_target_and_no_debris(env: asyncfs.Env, base: str) -> None:
    uri = f"{base}/model.bin"
    await env.write_file(uri, b"the good version")
    with pytest.raises(RuntimeError, match="crashed"):
        async with env.open(uri, "wb", block_size=4) as f:
            await f.write(b"half of the new ver")  # pushed to the plugin already
            raise RuntimeError("crashed mid-write")
    assert await env.read_file(uri) == b"the good version"
    assert await env.listdir(base) == ["model.bin"]


async def test_writer_replaces_the_target_only_on_close(env: asyncfs.Env, base: str) -> None:
    uri = f"{base}/model.bin"
    await env.write_file(uri, b"old")
    f = await env.open(uri, "wb", block_size=2)
    await f.write(b"new content")
    assert await env.read_file(uri) == b"old"
    await f.close()
    assert await env.read_file(uri) == b"new content"
    async with env.open(uri, "wb", atomic=False) as f:  # opt out: in place
        await f.write(b"direct")
    assert await env.read_file(uri) == b"direct"


# ---- compression ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec, suffix", [("gzip", ".gz"), ("zlib", ".zz"), ("zstd", ".zst"), ("snappy", ".sz")])
async def test_codec_round_trips(env: asyncfs.Env, base: str, codec: str, suffix: str) -> None:
    payload = b"".join(f"record {i} {'z' * (i % 50)}\n".encode() for i in range(5000)) + os.urandom(3000)
    by_suffix = f"{base}/data{suffix}"
    async with env.open(by_suffix, "wb", block_size=1000) as f:
        for start in range(0, len(payload), 777):
            await f.write(payload[start : start + 777])
    assert len(await env.read_file(by_suffix)) < len(payload)  # it really compressed
    async with env.open(by_suffix, "rb", block_size=333) as f:
        assert await f.read() == payload
    by_name = f"{base}/data.bin"
    async with env.open(by_name, "wb", compression=codec) as f:
        await f.write(payload)
    async with env.open(by_name, "rb", compression=codec) as f:
        assert [line async for line in f] == io.BytesIO(payload).readlines()
    async with env.open(by_name, "rb", compression=codec, block_size=256) as f:
        await f.read(10_000)
        assert await f.seek(50) == 50  # backwards: decoded again from the start
        assert await f.read(20) == payload[50:70]
        with pytest.raises(io.UnsupportedOperation):
            await f.seek(0, io.SEEK_END)


async def test_gzip_is_standard_gzip(env: asyncfs.Env, base: str) -> None:
    await env.write_file(f"{base}/std.gz", gzip.compress(b"first member\n") + gzip.compress(b"second\n"))
    async with env.open(f"{base}/std.gz", "rb") as f:
        assert await f.read() == b"first member\nsecond\n"
    async with env.open(f"{base}/ours.gz", "wb") as f:
        await f.write(b"ours")
    assert gzip.decompress(await env.read_file(f"{base}/ours.gz")) == b"ours"


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".sz"])
async def test_corrupt_compressed_data_is_a_typed_error(env: asyncfs.Env, base: str, suffix: str) -> None:
    async with env.open(f"{base}/good{suffix}", "wb") as f:
        await f.write(os.urandom(1000) * 20)
    data = await env.read_file(f"{base}/good{suffix}")
    await env.write_file(f"{base}/cut{suffix}", data[: len(data) // 2])
    with pytest.raises(asyncfs.DataLossError):
        async with env.open(f"{base}/cut{suffix}", "rb") as f:
            await f.read()


# ---- TFRecord -----------------------------------------------------------------------------


async def test_tfrecord_round_trip_is_byte_for_byte_tensorflows(env: asyncfs.Env, base: str) -> None:
    async with await tfrecord.writer(env, f"{base}/ours.tfrecord") as out:
        for record in KNOWN_RECORDS:
            await out.write(record)
    assert await env.read_file(f"{base}/ours.tfrecord") == (FIXTURES / "known.tfrecord").read_bytes()
    assert [r async for r in tfrecord.reader(env, f"{base}/ours.tfrecord")] == KNOWN_RECORDS


async def test_tfrecord_iteration_can_break_and_go_on(env: asyncfs.Env, base: str) -> None:
    """On asyncio records come from a native async generator, on trio from
    the reader's __anext__; either way a break leaves the rest in the
    reader, and reading to the end closes the stream."""
    records = [b"%d" % i for i in range(300)]
    async with await tfrecord.writer(env, f"{base}/r.tfrecord") as out:
        for record in records:
            await out.write(record)
    reader = tfrecord.TFRecordReader(await env.open(f"{base}/r.tfrecord", "rb"))
    async for record in reader:
        if record == b"9":
            break
    assert await reader.read() == b"10"
    assert [r async for r in reader] == records[11:]
    assert reader.stream.closed
    taken = []
    async for record in tfrecord.reader(env, f"{base}/r.tfrecord"):
        taken.append(record)
    assert taken == records


@pytest.mark.parametrize(
    "name, compression", [("known.tfrecord", None), ("known.tfrecord.gz", "GZIP"), ("known.tfrecord.zz", "ZLIB")]
)
async def test_tfrecord_reads_files_tensorflow_wrote(env: asyncfs.Env, name: str, compression: str | None) -> None:
    uri = str(FIXTURES / name)
    assert [r async for r in tfrecord.reader(env, uri, compression=compression)] == KNOWN_RECORDS


@pytest.mark.parametrize("compression", ["GZIP", "zstd", "snappy"])
async def test_compressed_tfrecord_round_trip(env: asyncfs.Env, base: str, compression: str) -> None:
    records = [os.urandom(n) for n in (0, 1, 100, 5000)] * 10
    async with await tfrecord.writer(env, f"{base}/c.tfrecord", compression=compression) as out:
        for record in records:
            await out.write(record)
    assert [r async for r in tfrecord.reader(env, f"{base}/c.tfrecord", compression=compression)] == records


async def test_tfrecord_corruption_names_the_file_and_offset(env: asyncfs.Env, base: str) -> None:
    good = (FIXTURES / "known.tfrecord").read_bytes()
    first = 12 + 0 + 4  # the empty first record
    second = first + 12 + 5 + 4
    damaged = bytearray(good)
    damaged[first + 12 + 2] ^= 0xFF  # a byte of the second record's data ("hello")
    uri = f"{base}/damaged.tfrecord"
    await env.write_file(uri, bytes(damaged))
    with pytest.raises(tfrecord.TFRecordCorruptionError) as info:
        [r async for r in tfrecord.reader(env, uri)]
    assert info.value.offset == first
    assert uri in str(info.value) and f"offset {first}" in str(info.value)
    assert isinstance(info.value, asyncfs.DataLossError)
    records = tfrecord.TFRecordReader(await env.open(uri, "rb"), skip_corrupt=True)
    assert [r async for r in records] == [KNOWN_RECORDS[0], *KNOWN_RECORDS[2:]]
    assert records.skipped == 1
    # a damaged length: the reader finds the next record header again
    damaged = bytearray(good)
    damaged[second + 3] ^= 0x55
    await env.write_file(uri, bytes(damaged))
    records = tfrecord.TFRecordReader(await env.open(uri, "rb"), skip_corrupt=True)
    assert [r async for r in records] == [KNOWN_RECORDS[0], KNOWN_RECORDS[1], KNOWN_RECORDS[3]]
    assert records.skipped >= 1
    await env.write_file(uri, good[:-3])
    with pytest.raises(tfrecord.TFRecordCorruptionError, match="ends inside"):
        [r async for r in tfrecord.reader(env, uri)]


# ---- streams inside a transaction --------------------------------------------------------------


async def test_streams_in_a_transaction(env: asyncfs.Env, base: str) -> None:
    root = f"{base}/ckpt"
    await env.makedirs(root)
    await env.write_file(f"{root}/log.txt", b"line 1\n")
    async with env.transaction(root) as txn:
        async with txn.open("weights.bin", "wb") as f:
            await f.write(b"w" * 1000)
        async with txn.open(f"{root}/log.txt", "a") as f:
            await f.write("line 2\n")
        async with txn.open("log.txt", "r") as f:
            assert [line async for line in f] == ["line 1\n", "line 2\n"]
        assert await env.read_file(f"{root}/log.txt") == b"line 1\n"  # not yet
        assert not await env.exists(f"{root}/weights.bin")
    assert await env.read_file(f"{root}/log.txt") == b"line 1\nline 2\n"
    assert await env.read_file(f"{root}/weights.bin") == b"w" * 1000


@pytest.mark.parametrize("native", [True, False])
async def test_tfrecords_written_inside_a_transaction(env: asyncfs.Env, base: str, native: bool) -> None:
    """A Transaction opens streams as an Env does, so TFRecord readers and
    writers take it: the file lands with the commit, not before."""
    root = f"{base}/shards-{native}"
    async with env.transaction(root, native=native) as txn:
        async with await tfrecord.writer(txn, "train.tfrecord.gz") as out:
            for i in range(3):
                await out.write(b"record %d" % i)
        assert [r async for r in tfrecord.reader(txn, "train.tfrecord.gz")] == [b"record 0", b"record 1", b"record 2"]
        assert not await env.exists(f"{root}/train.tfrecord.gz")
    assert [r async for r in tfrecord.reader(env, f"{root}/train.tfrecord.gz")] == [
        b"record 0",
        b"record 1",
        b"record 2",
    ]


# ---- prefetch ---------------------------------------------------------------------------------


async def make_files(env: asyncfs.Env, base: str, count: int) -> list[str]:
    uris = [f"{base}/f{i:04d}" for i in range(count)]
    for i, uri in enumerate(uris):
        await env.write_file(uri, bytes([i % 256]) * (1000 + 37 * i))
    return uris


async def test_prefetch_in_order(env: asyncfs.Env, base: str) -> None:
    uris = await make_files(env, base, 120)
    got = [(path, data) async for path, data in env.prefetch(uris, in_flight=8)]
    assert [path for path, _ in got] == uris
    assert all(data == bytes([i % 256]) * (1000 + 37 * i) for i, (_, data) in enumerate(got))


async def test_prefetch_as_completed(env: asyncfs.Env, base: str) -> None:
    uris = await make_files(env, base, 120)
    got = [path async for path, _ in env.prefetch(uris, in_flight=8, ordered=False)]
    assert sorted(got) == uris


async def test_prefetch_budget(env: asyncfs.Env, base: str) -> None:
    uris = await make_files(env, base, 150)
    largest = 1000 + 37 * 149
    for ordered in (True, False):
        budget = asyncfs.Budget(20_000)
        count = 0
        async for _ in env.prefetch(uris, in_flight=16, ordered=ordered, budget=budget, max_bytes=20_000):
            count += 1
            await anyio.sleep(0)  # a consumer that takes its time
        assert count == len(uris)
        # out of order the budget holds; in order the file due next may exceed it by itself
        assert budget.peak <= 20_000 + (largest if ordered else 0), budget.peak
        assert budget.used == 0


def test_a_budget_reserves_a_group_all_or_none() -> None:
    """reserve_all, a group's fast path: every byte, or none (and the
    group's files are then reserved one by one)."""
    budget = asyncfs.Budget(100)
    assert budget.reserve_all(60) and budget.used == 60
    assert not budget.reserve_all(41) and budget.used == 60
    assert budget.reserve_all(40) and budget.used == budget.peak == 100
    budget.release(100)
    assert budget.used == 0 and budget.peak == 100


async def test_prefetch_errors(env: asyncfs.Env, base: str) -> None:
    uris = await make_files(env, base, 10)
    uris.insert(4, f"{base}/missing")
    delivered = [(path, data) async for path, data in env.prefetch(uris, errors="deliver")]
    assert [path for path, _ in delivered] == uris
    assert isinstance(delivered[4][1], FileNotFoundError)
    seen = []
    with pytest.raises(FileNotFoundError):
        async for path, _ in env.prefetch(uris):
            seen.append(path)
    assert seen == uris[:4]


@pytest.mark.parametrize("ordered", [True, False])
async def test_cancelling_prefetch_leaks_nothing(env: asyncfs.Env, tmp_path: Path, ordered: bool) -> None:
    """Cancelled, or left after a few files: no descriptor stays open, and
    every byte reserved (files read and not handed over, the one the loop
    had, groups that finish afterwards) goes back to the budget, which
    prefetches may share."""
    uris = await make_files(env, f"file://{tmp_path}", 400)
    baseline = open_fds()
    budget = asyncfs.Budget(1 << 30)
    await leave_prefetches_early(env, uris, budget, ordered=ordered)
    assert open_fds() == baseline
    assert budget.used == 0


@pytest.mark.parametrize("ordered", [True, False])
async def test_prefetch_of_a_slow_store_goes_on_in_its_workers(ordered: bool) -> None:
    """On a store that waits (the memory plugin's latency_us), a worker
    that read a group reads the next one itself, in its slot of in_flight
    (no trip through the loop between them): each file arrives once, with
    its bytes, in order when asked. Workers stop going on when the loop
    is left, and when a consumer that kept the iterator stops asking;
    leaving early gives every byte back and leaves no call in flight."""
    fs = asyncfs.get_filesystem("mem://")
    root = f"mem:///slow-prefetch-{ordered}"
    uris = [f"{root}/f{i:03d}" for i in range(240)]
    fs.recursively_create_dir(root)
    for i, uri in enumerate(uris):
        fs.write_file(uri, b"%d" % i)
    followed = 0
    follow = _prefetch.Prefetch._follow

    def counting(self: Any, *args: Any) -> Any:
        nonlocal followed
        after = follow(self, *args)
        followed += after is not None
        return after

    budget = asyncfs.Budget(1 << 20)
    measured = _prefetch._LATELY.get(fs)
    fs.set_option("latency_us", 2000)
    try:
        with mock.patch.object(_prefetch.Prefetch, "_follow", counting):
            async with asyncfs.Env(workers=16) as env:
                assert env.filesystem(root).wrapped is fs
                _prefetch._LATELY[fs] = 0.002  # a file per group, as measured
                got = [item async for item in env.prefetch(uris, in_flight=16, ordered=ordered, budget=budget)]
                assert followed > 100  # most groups were started by the worker before them
                followed = 0
                async for _ in env.prefetch(uris, in_flight=16, ordered=ordered, budget=budget):
                    break  # the prefetch is collected, and closed: its workers stop going on
                await settle(env)
                assert followed <= 64, followed  # about the 16 groups being read then; 224 when it lived on
                followed = 0
                held = env.prefetch(uris, in_flight=16, ordered=ordered, budget=budget)
                await held.__anext__()  # then asks for nothing more, and keeps the iterator
                await settle(env)
                assert followed <= 64, followed  # in_flight groups waiting stop the workers; 224 without
                await held.aclose()
                await leave_prefetches_early(env, uris, budget, ordered=ordered)
    finally:
        if measured is None:
            _prefetch._LATELY.pop(fs, None)
        else:
            _prefetch._LATELY[fs] = measured
        fs.set_option("latency_us", 0)
        fs.delete_recursively(root)
    expected = [(uri, b"%d" % i) for i, uri in enumerate(uris)]
    assert (got if ordered else sorted(got)) == expected
    assert budget.used == 0


@pytest.mark.parametrize("ordered", [True, False])
async def test_prefetch_takes_a_group_that_arrives_after_the_one_its_worker_read_next(
    env: asyncfs.Env, tmp_path: Path, ordered: bool
) -> None:
    """A worker that read a group reads the next one itself (see
    test_prefetch_of_a_slow_store_goes_on_in_its_workers), and another of
    the batch's threads may hand that one to the loop first. Here each
    group and the ones its worker read after it arrive last first: every
    file still comes, once (the prefetch had counted a worker's chain of
    groups as done when its last one came, and 1 prefetch in about 400 of
    a fresh process raised "prefetch stalled" with files in the sink)."""
    uris = [str(tmp_path / f"f{i:03d}") for i in range(40)]
    for i, uri in enumerate(uris):
        Path(uri).write_bytes(b"%d" % i)

    async def last_first(self: Any, sink: Any, tag: Any, fn: Any, *args: Any, follow: Any = None) -> None:
        done = []
        while True:  # the call, and those its worker reads next
            result = fn(*args)
            done.append((tag, result))
            after = None if follow is None else follow(tag, result)
            if after is None:
                break
            tag, args = after
        for tag, result in reversed(done):
            sink.deliver(tag, result, None)

    with mock.patch.object(asyncfs.AsyncModularFileSystem, "run_into", last_first):
        got = [item async for item in env.prefetch(uris, in_flight=4, ordered=ordered)]
    assert (got if ordered else sorted(got)) == [(uri, b"%d" % i) for i, uri in enumerate(uris)]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"in_flight": 0}, "in_flight"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"errors": "ignore"}, "errors"),
        ({"records": True, "cycle_length": 0}, "cycle_length"),
    ],
)
def test_prefetch_refuses_bad_options_by_name_and_leaves_nothing_behind(options: dict[str, Any], named: str) -> None:
    """A refused option is an InvalidArgumentError naming it, and the
    half-made iterator has nothing to close when it is collected (no
    "Exception ignored" from its finalizer)."""
    unraisable: list[Any] = []
    env = asyncfs.Env()
    try:
        with mock.patch.object(sys, "unraisablehook", unraisable.append):
            with pytest.raises(asyncfs.InvalidArgumentError, match=named):
                env.prefetch(["/no/such/file"], **options)
            gc.collect()
    finally:
        env.close()
    assert unraisable == []


async def test_prefetch_records_interleaves(env: asyncfs.Env, base: str) -> None:
    paths = []
    for k in range(5):
        path = f"{base}/part-{k}.tfrecord"
        async with await tfrecord.writer(env, path) as out:
            for j in range(3 + k):
                await out.write(f"{k}:{j}".encode())
        paths.append(path)
    got = [record async for _, record in env.prefetch(paths, records=True, cycle_length=2)]
    assert sorted(got) == sorted(f"{k}:{j}".encode() for k in range(5) for j in range(3 + k))
    assert got[:4] == [b"0:0", b"1:0", b"0:1", b"1:1"]


# ---- prefetch's bulk path: many files per call into C -----------------------------------


def test_read_files_reads_many_per_call_with_an_answer_for_each(base: str) -> None:
    fs = asyncfs.get_filesystem(base)
    fs.recursively_create_dir(f"{base}/bulk/folder")
    uris = [f"{base}/bulk/{i}" for i in range(5)]
    for i, uri in enumerate(uris):
        fs.write_file(uri, bytes([65 + i]) * (100 * i))  # the first is empty
    mixed = [uris[0], uris[1], f"{base}/bulk/missing", f"{base}/bulk/folder", uris[4]]
    got, _ = fs.read_files(mixed, bytearray(1 << 16))
    assert got[:2] == [b"", b"B" * 100] and got[4] == b"E" * 400
    assert isinstance(got[2], asyncfs.NotFoundError) and got[2].path == mixed[2]
    assert isinstance(got[3], asyncfs.FailedPreconditionError)
    # a file that does not fit in what is left stops the call: None, then nothing
    assert fs.read_files(uris[1:], bytearray(450))[0] == [b"B" * 100, b"C" * 200, None]
    assert fs.read_files(uris[4:], bytearray(399))[0] == [None]
    assert fs.read_files(uris[4:], bytearray(400))[0] == [b"E" * 400]  # fits exactly


def packed(contents: list[bytes], room: int) -> list[bytes | None]:
    """What read_files answers for files of these contents in a buffer of
    room bytes: each whole, in order, up to the first that does not fit in
    what is left (None), and nothing after it."""
    answers: list[bytes | None] = []
    for data in contents:
        if len(data) > room:
            return [*answers, None]
        answers.append(data)
        room -= len(data)
    return answers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 9000)), min_size=1, max_size=40),
    room=st.integers(0, 1 << 16),
)
def test_read_files_packs_files_of_any_size_from_any_folder(base: str, files: list[tuple[int, int]], room: int) -> None:
    """Files of mixed sizes in folders that change from one file to the
    next: on file://, the plugin's read_files in runs (a file larger than
    its share is read again alone), on mem://, one file at a time: both
    answer as packing them one after another would."""
    fs = asyncfs.get_filesystem(base)
    uris, contents = [], []
    for i, (folder, size) in enumerate(files):
        uri = f"{base}/packs/d{folder}/f{i}"
        fs.recursively_create_dir(f"{base}/packs/d{folder}")
        contents.append(bytes([i % 251]) * size)
        fs.write_file(uri, contents[-1])
        uris.append(uri)
    got, _ = fs.read_files(uris, bytearray(room))
    assert got == packed(contents, room)


def written_to_fifo(path: Path, data: bytes) -> threading.Thread:
    """A thread that writes data to the FIFO at path (its open waits for a
    reader's) and closes it; a reader that left early ends it."""

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as out:
            out.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def within_seconds(call: Callable[[], object], seconds: float = 10) -> object:
    """call's result, from a thread: a call that waits forever fails the
    test instead of stopping the suite."""
    answers: list[object] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert answers, f"still waiting after {seconds} s"
    return answers[0]


def test_read_files_reads_a_fifo_where_it_is_and_leaves_a_pipe_to_the_caller(tmp_path: Path) -> None:
    """A FIFO just opened may hold bytes no one will see again: read where
    it is, or failed loudly when it holds more than fits. A pipe named by
    /dev/fd stays its holder's, unread, for the caller to read onward."""
    fifo, plain = tmp_path / "fifo", tmp_path / "plain"
    os.mkfifo(fifo)
    plain.write_bytes(b"plain")
    fs = asyncfs.get_filesystem(str(tmp_path))
    bulk = [str(plain), str(fifo), str(plain)]
    writer = written_to_fifo(fifo, b"through the fifo")
    assert within_seconds(lambda: fs.read_files(bulk, bytearray(4096))[0]) == [b"plain", b"through the fifo", b"plain"]
    writer.join(10)
    written_to_fifo(fifo, b"F" * 10_000)
    got = within_seconds(lambda: fs.read_files(bulk, bytearray(4096))[0])
    assert isinstance(got, list) and got[0] == got[2] == b"plain"
    assert isinstance(got[1], asyncfs.FailedPreconditionError) and "on its own" in str(got[1])
    if os.path.isdir("/dev/fd"):
        read_end, write_end = os.pipe()
        with os.fdopen(write_end, "wb") as out:
            out.write(b"through the pipe")
        try:
            assert fs.read_files([str(plain), f"/dev/fd/{read_end}"], bytearray(4096))[0] == [b"plain", None]
            assert fs.read_file(f"/dev/fd/{read_end}") == b"through the pipe"
        finally:
            os.close(read_end)


async def test_prefetch_reads_a_fifo_among_files(env: asyncfs.Env, tmp_path: Path) -> None:
    fifo, plain = tmp_path / "fifo", tmp_path / "plain"
    os.mkfifo(fifo)
    plain.write_bytes(b"plain")
    writer = written_to_fifo(fifo, b"through the fifo")
    with anyio.fail_after(10):
        got = [data async for _, data in env.prefetch([str(plain), str(fifo), str(plain)])]
    writer.join(10)
    assert got == [b"plain", b"through the fifo", b"plain"]


def test_read_files_answers_devices_as_reading_them_would() -> None:
    fs = asyncfs.get_filesystem("/dev")
    # /dev/zero never ends: it cannot fit, so the caller reads it (or not) another way
    assert fs.read_files(["/dev/null", "/dev/zero", "/dev/null"], bytearray(100))[0] == [b"", None]


async def test_prefetch_groups_answer_for_every_file(env: asyncfs.Env, base: str) -> None:
    """Groups of files larger and smaller than the scratch buffer, with
    failures among them: each path gets its own bytes or its own error, in
    order, and the budget is back to 0."""
    uris = await make_files(env, base, 300)  # 1,000 to 12,063 bytes
    await env.makedirs(f"{base}/a-folder")
    uris[7:7] = [f"{base}/missing"]
    uris[100:100] = [f"{base}/a-folder"]
    budget = asyncfs.Budget(1 << 20)
    got = [
        item async for item in env.prefetch(uris, scratch_size=8192, errors="deliver", budget=budget, max_bytes=1 << 20)
    ]
    assert [path for path, _ in got] == uris
    files = [data for path, data in got if isinstance(data, bytes)]
    assert files == [bytes([i % 256]) * (1000 + 37 * i) for i in range(300)]
    assert isinstance(got[7][1], FileNotFoundError) and isinstance(got[100][1], asyncfs.FailedPreconditionError)
    assert budget.used == 0 and budget.peak <= (1 << 20) + 12_063


@pytest.mark.parametrize("ordered", [True, False])
async def test_prefetch_hands_a_group_over_as_a_run_and_a_loop_left_midway_loses_none(
    env: asyncfs.Env, tmp_path: Path, ordered: bool
) -> None:
    """A local group read whole is handed over as one run (no Python step
    per file), its bytes given back once the consumer asks past its last
    file. A loop left in the middle of a run, taken up by anext() and then
    by a new loop, gets each file once (in order, when ordered); the
    budget is back to 0 at the end, and a file refused by a small budget
    (no runs then: a group is more than a 64th of it) is read later."""
    uris = await make_files(env, f"file://{tmp_path}", 300)
    made = []
    init = _prefetch._Run.__init__

    def counted(self: object, items: list[bytes], size: int) -> None:
        made.append(len(items))
        init(self, items, size)

    for max_bytes, runs in ((1 << 30, True), (40_000, False)):
        made.clear()
        budget = asyncfs.Budget(max_bytes)
        with mock.patch.object(_prefetch._Run, "__init__", counted):
            prefetch = env.prefetch(uris, in_flight=8, ordered=ordered, budget=budget)
            got = []
            async for path, data in prefetch:
                got.append((path, data))
                if len(got) == 5:
                    break
            got.append(await prefetch.__anext__())
            got += [item async for item in prefetch]
        assert bool(made) is runs, made
        paths = [path for path, _ in got]
        assert paths == uris if ordered else sorted(paths) == uris
        by_path = dict(got)
        assert all(by_path[uri] == bytes([i % 256]) * (1000 + 37 * i) for i, uri in enumerate(uris))
        assert budget.used == 0


@pytest.mark.parametrize(
    ("per_file", "rule"),
    [
        # 4 ms of reading is 400 files; 8 groups a core, unless a group would
        # then hold less than 1 ms (100 files); never more than a core's share
        (10e-6, lambda cores: min(400, max(-(-2000 // (8 * cores)), 100), -(-2000 // cores))),
        # 4 ms is 2000 files, past the cap of 512; 1 ms is 500
        (2e-6, lambda cores: min(512, max(-(-2000 // (8 * cores)), 500), -(-2000 // cores))),
    ],
)
async def test_prefetch_groups_are_sized_by_the_time_per_file_lately(
    env: asyncfs.Env, tmp_path: Path, per_file: float, rule: Any
) -> None:
    """A local prefetch cuts its files into equal groups, one call into C
    each, sized by the time per file its filesystem's last prefetch
    measured (here set): about 4 ms of reading a group, and at least 8
    groups for each core unless that makes them shorter than 1 ms."""
    paths = [str(tmp_path / f"f{i:04d}") for i in range(2000)]
    for path in paths:
        Path(path).write_bytes(b"d")
    fs = env.filesystem(paths[0])
    _prefetch._LATELY[fs.wrapped] = per_file
    before = env.pool.stats().operations
    got = [data async for _, data in env.prefetch(paths, in_flight=64)]
    assert got == [b"d"] * 2000
    size = rule(fs.cores)
    assert env.pool.stats().operations - before == -(-2000 // size)


class _ShrinkingBudget(asyncfs.Budget):
    """A Budget that truncates each file it admits to half its size first:
    the file shrinks between the size prefetch asked for and its read."""

    def __init__(self, limit: int, paths: list[str]) -> None:
        super().__init__(limit)
        self.paths = paths

    def reserve(self, index: int, size: int) -> bool:
        os.truncate(self.paths[index], size // 2)
        return super().reserve(index, size)


async def test_prefetch_counts_the_bytes_a_file_had_when_read_not_when_sized(env: asyncfs.Env, tmp_path: Path) -> None:
    """Files bigger than the scratch buffer are sized, reserved, then read:
    one that shrank in between gives the difference back, so the budget
    ends at 0 and each file arrives as it was when read."""
    paths = [str(tmp_path / f"big{i}") for i in range(6)]
    for path in paths:
        Path(path).write_bytes(b"z" * 10_000)
    budget = _ShrinkingBudget(1 << 20, paths)
    got = [data async for _, data in env.prefetch(paths, scratch_size=4096, budget=budget)]
    assert got == [b"z" * 5_000] * 6
    assert budget.used == 0


class _RefusingBudget(asyncfs.Budget):
    """A Budget that raises something no plugin status maps to (what a bug,
    or memory running out, raises) when asked for one file."""

    def __init__(self, limit: int, refused: int) -> None:
        super().__init__(limit)
        self.refused = refused

    def reserve(self, index: int, size: int) -> bool:
        if index == self.refused:
            raise MemoryError(f"no room for file {index}")
        return super().reserve(index, size)


@pytest.mark.parametrize("ordered", [True, False])
async def test_prefetch_gives_back_a_group_that_failed_unexpectedly(
    env: asyncfs.Env, tmp_path: Path, ordered: bool
) -> None:
    """A big file read on its own fails with an error that is not a
    plugin's status, after the small files of its group were read and
    reserved in one call: the error reaches the loop, and the group's bytes
    go back to the budget with it; so do those of groups still being read
    then, when they finish."""
    paths = [str(tmp_path / f"f{i}") for i in range(8)]
    for i, path in enumerate(paths):
        Path(path).write_bytes(b"s" * 100 if i != 3 else b"B" * 10_000)
    budget = _RefusingBudget(1 << 20, refused=3)
    with pytest.raises(MemoryError, match="file 3"):
        async for _ in env.prefetch(paths, scratch_size=4096, budget=budget, ordered=ordered):
            pass
    await settle(env)
    assert budget.used == 0


def _prefetch_under(budget: asyncfs.Budget, paths: list[str]) -> tuple[int, int, int]:
    """In another process: the bytes a prefetch under budget read, and
    then the budget's count and limit."""

    async def main() -> int:
        async with asyncfs.Env() as env:
            return sum([len(data) async for _, data in env.prefetch(paths, budget=budget)])

    return asyncio.run(main()), budget.used, budget.limit


def _files_and_a_full_budget(folder: Path) -> tuple[list[str], asyncfs.Budget]:
    """20 files of 1000 bytes, and a Budget of 4000 that the parent filled:
    a child that counted the parent's bytes could never admit a file."""
    paths = [str(folder / f"f{i}") for i in range(20)]
    for path in paths:
        Path(path).write_bytes(b"x" * 1000)
    budget = asyncfs.Budget(4000)
    assert budget.reserve(0, 4000)
    return paths, budget


def test_a_budget_pickled_to_a_worker_process_starts_empty(tmp_path: Path) -> None:
    """A Budget travels by pickle (a Dask task's argument, a spawned
    DataLoader worker's dataset): the copy has the limit, nothing used, and
    a lock of its own; its prefetch runs to the end."""
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

    paths, budget = _files_and_a_full_budget(tmp_path)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as workers:
        assert workers.submit(_prefetch_under, budget, paths).result(timeout=120) == (20_000, 0, 4000)
    assert budget.used == 4000  # the parent's count is its own


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_budget_in_a_forked_child_starts_empty(tmp_path: Path) -> None:
    """A forked child (a DataLoader worker) inherits a Budget while the
    parent holds bytes in it and one of the parent's threads holds its
    lock: in the child it starts with nothing used and a lock of its own."""
    paths, budget = _files_and_a_full_budget(tmp_path)
    holding, done = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with budget._lock:
            holding.set()
            done.wait()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    holding.wait()
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if _prefetch_under(budget, paths) == (20_000, 0, 4000) else 1)
        assert exit_code_of(pid, "the child hung on the budget its parent held") == 0
    finally:
        done.set()
        holder.join()
    assert budget.used == 4000


def _unreadable_file(folder: Path) -> str | None:
    """A file this process may not open for reading: one made so (not as
    root, which may read anything), or a write-only sysfs attribute."""
    if os.geteuid() != 0:
        path = folder / "unreadable"
        path.write_bytes(b"secret")
        path.chmod(0)
        return str(path)
    for candidate in ("/sys/bus/pci/rescan", "/sys/class/zram-control/hot_remove"):
        try:
            with open(candidate, "rb"):
                pass
        except PermissionError:
            return candidate
        except OSError:
            continue
    return None


@pytest.mark.parametrize("ordered", [True, False])
async def test_prefetch_answers_permission_denied_for_that_file_alone(
    env: asyncfs.Env, tmp_path: Path, ordered: bool
) -> None:
    """A file the process may not read, among others read in the same
    call into C: that file gets a PermissionError naming it, the others
    their bytes."""
    denied = _unreadable_file(tmp_path)
    if denied is None:
        pytest.skip("no file here that this process may not read (root, and no write-only sysfs attribute)")
    uris = await make_files(env, str(tmp_path), 40)
    uris[20:20] = [denied]
    got = dict([item async for item in env.prefetch(uris, ordered=ordered, errors="deliver")])
    error = got.pop(denied)
    assert isinstance(error, asyncfs.PermissionDeniedError) and isinstance(error, PermissionError), error
    assert error.path == denied
    assert [got[uri] for uri in uris if uri != denied] == [bytes([i % 256]) * (1000 + 37 * i) for i in range(40)]


async def test_prefetch_of_paths_on_several_filesystems(env: asyncfs.Env, tmp_path: Path) -> None:
    """Paths of several schemes, interleaved (runs of one, runs of many,
    plain local paths among URIs): each is read by its own filesystem, in
    order or as completed."""
    uris = []
    for i in range(90):
        kind = (i // 7) % 3  # runs of 7 of each kind, then single ones
        if i >= 63:
            kind = i % 3
        uri = [f"mem:///several/f{i}", f"file://{tmp_path}/f{i}", f"{tmp_path}/f{i}"][kind]
        await env.write_file(uri, f"file {i}".encode())
        uris.append(uri)
    for ordered in (True, False):
        got = [item async for item in env.prefetch(uris, in_flight=8, ordered=ordered)]
        assert sorted(got) == sorted((uri, f"file {i}".encode()) for i, uri in enumerate(uris))
        if ordered:
            assert [path for path, _ in got] == uris


_PATH_PART = st.text(st.sampled_from("ab/:\0"), max_size=3)
_PATH = st.builds(lambda *parts: "".join(parts), _PATH_PART, st.sampled_from(["", "://"]), _PATH_PART)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_PATH, st.builds(str.__add__, _PATH, _PATH)), max_size=5))
@example(["a://x", "ba://y"])  # "a://" inside another path
@example(["a://x", "b\0a://y"])  # a NUL before it
@example(["/d/a", "://x"])  # no scheme either way
def test_a_run_of_paths_is_one_scheme_when_each_path_says_so(paths: list[str]) -> None:
    """prefetch's check over a list joined (in C) answers as a check path
    by path would."""
    from asyncfs._streams.prefetch import _one_scheme  # noqa: PLC0415 (what is tested is private)

    assert _one_scheme(paths) == (len({_uri.scheme_part(path) for path in paths}) <= 1)


async def test_prefetch_through_a_plugin_with_only_the_core_ops(registry: asyncfs.Registry, tmp_path: Path) -> None:
    """The bulk path needs nothing but open, read and stat: the example
    plugin (no get_file_size) serves it."""
    if "demo" not in registry.schemes():
        pytest.skip("the example plugin is not built (no C compiler)")
    for i in range(150):
        (tmp_path / f"f{i:03d}").write_bytes(bytes([i]) * (i * 50))
    async with asyncfs.Env(registry=registry) as env:
        uris = [f"demo://{tmp_path}/f{i:03d}" for i in range(150)] + [f"demo://{tmp_path}/none"]
        got = [item async for item in env.prefetch(uris, errors="deliver", scratch_size=4096)]
    assert [data for _, data in got[:150]] == [bytes([i]) * (i * 50) for i in range(150)]
    assert isinstance(got[150][1], FileNotFoundError)


@pytest.mark.parametrize("then", ["read", "read 5", "readline", "tell", "seek", "iter_lines", "new loop", "same loop"])
@pytest.mark.parametrize("mode", ["r", "rb"])
async def test_a_read_after_a_per_line_loop_left_early_starts_after_its_last_line(
    env: asyncfs.Env, base: str, mode: str, then: str
) -> None:
    """``async for line in f`` left after three lines (on asyncio it has
    split eight and moved past them): whatever comes next, another read,
    tell, another loop or the same one taken up again, goes on right
    after the third line."""
    text = "".join(f"line {i}\n" for i in range(100))
    await env.write_file(f"{base}/lines", text.encode())
    lines: list[Any] = text.splitlines(keepends=True)
    if mode == "rb":
        lines = [line.encode() for line in lines]
    rest = lines[0][:0].join(lines[3:])
    async with env.open(f"{base}/lines", mode) as f:
        loop = f.__aiter__()
        with mock.patch.object(streams, "SPLIT", 64):  # eight lines at a time, and more buffered after them
            assert [await loop.__anext__() for _ in range(3)] == lines[:3]
        if then == "read":
            assert await f.read() == rest
        elif then == "read 5":
            assert await f.read(5) == rest[:5]
        elif then == "readline":
            assert await f.readline() == lines[3]
        elif then in ("tell", "seek") and mode == "rb":
            where = f.tell() if then == "tell" else await f.seek(0, io.SEEK_CUR)
            assert where == len(b"".join(lines[:3]))
            assert await f.readline() == lines[3]
        elif then == "iter_lines":
            assert await f.iter_lines(2).__anext__() == lines[3:5]
        elif then == "new loop":
            assert await f.__aiter__().__anext__() == lines[3]
        elif then == "same loop":
            assert await f.readline() == lines[3]
            assert await loop.__anext__() == lines[4]
        if then != "read":
            assert [line async for line in f][-1] == lines[-1]  # and the loop ends where the file does


async def test_iter_lines_gives_lists_and_keeps_the_position(env: asyncfs.Env, base: str) -> None:
    uri = f"{base}/lines.txt"
    text = "".join(f"line {i}\n" for i in range(5000)) + "no newline at the end"
    async with env.open(uri, "w") as out:
        await out.write(text)
    async with env.open(uri, "r", block_size=4096) as f:  # lines span buffers
        got = [line async for lines in f.iter_lines() for line in lines]
    assert "".join(got) == text and len(got) == 5001
    async with env.open(uri, "rb") as f:
        sizes = []
        async for lines in f.iter_lines(batch=100):
            sizes.append(len(lines))
            if len(sizes) == 3:
                break
        assert sizes == [100, 100, 100]
        assert await f.readline() == b"line 300\n"  # exactly where the lists ended
    async with env.open(uri, "r") as f:
        lists = f.iter_lines(batch=2)
        assert await lists.__anext__() == ["line 0\n", "line 1\n"]
        assert await f.readline() == "line 2\n"  # read between two lists of one iterator
        assert await lists.__anext__() == ["line 3\n", "line 4\n"]  # not line 2 again
        assert await f.read(7) == "line 5\n"
    with pytest.raises(ValueError, match="batch"):
        async with env.open(uri, "r") as f:
            async for _ in f.iter_lines(batch=0):
                pass


@pytest.mark.parametrize("mode", ["r", "rb"])
async def test_lines_of_a_big_buffer_split_a_piece_at_a_time(env: asyncfs.Env, base: str, mode: str) -> None:
    """A 1 MiB buffer is split streams.SPLIT at a time: lines that straddle
    a piece's edge, a line longer than a piece, and a break between pieces
    lose and repeat nothing."""
    short = "".join(f"row {i}, {'y' * (i % 13)}\n" for i in range(20_000))
    text = short + "L" * (3 * streams.SPLIT) + "\n" + short + "last"
    await env.write_file(f"{base}/big-lines", text.encode())
    lines: list[Any] = io.StringIO(text, newline="").readlines()
    expected = [line.encode() for line in lines] if mode == "rb" else lines
    async with env.open(f"{base}/big-lines", mode, block_size=1 << 20) as f:
        assert [line async for line in f] == expected
    async with env.open(f"{base}/big-lines", mode, block_size=1 << 20) as f:
        batches = [batch async for batch in f.iter_lines()]
    assert [line for batch in batches for line in batch] == expected
    # a list holds one piece's lines, the first of them with the start of
    # the line that began before the piece (here the long one)
    assert max(sum(map(len, batch)) for batch in batches) <= 4 * streams.SPLIT + 1
    async with env.open(f"{base}/big-lines", mode, block_size=1 << 20) as f:
        taken: list[Any] = []
        async for batch in f.iter_lines():
            taken += batch
            if len(taken) > 5000:
                break
        rest = await f.read()
    assert taken == expected[: len(taken)]
    assert rest == expected[0][:0].join(expected[len(taken) :])


def test_a_file_that_grew_after_its_open_is_read_to_its_new_end(tmp_path: Path) -> None:
    """posix ends a read at a short pread only where the file ended when it
    was opened (one syscall fewer per small file): bytes appended since
    are still read, and a read past the end is short."""
    path = tmp_path / "growing"
    path.write_bytes(b"0123456789")
    fs = asyncfs.get_filesystem(str(path))
    with fs.new_random_access_file(str(path)) as file:
        assert file.read(0, 100) == b"0123456789"
        with path.open("ab") as more:
            more.write(b"abcdefghij")
        assert file.read(0, 100) == b"0123456789abcdefghij"
        assert file.read(15, 3) == b"fgh"
        assert file.read(20, 5) == b""


@pytest.mark.parametrize("scheme", ["file", "mem"])
@pytest.mark.parametrize("size", [0, 1, 8191, 8192, 8193, 3 * 8192, 100_000])
def test_read_all_reads_to_the_end_in_growing_reads(tmp_path: Path, scheme: str, size: int) -> None:
    """RandomAccessFile.read_all from any offset, for sizes around its first
    read and its doublings; a file that grew after its open is read to its
    new end."""
    data = bytes(i % 251 for i in range(size))
    uri = str(tmp_path / "whole") if scheme == "file" else f"mem://read-all-{size}/whole"
    fs = asyncfs.get_filesystem(uri)
    fs.makedirs(uri.rsplit("/", 1)[0], exist_ok=True)
    fs.write_file(uri, data)
    with fs.new_random_access_file(uri) as file:
        for offset in sorted({0, 1, size // 2, size, size + 5}):
            assert file.read_all(offset) == data[offset:]
        assert file.read_all(0, first=1) == data
        if scheme == "file":
            with open(uri, "ab") as more:
                more.write(b"appended")
            assert file.read_all(max(0, size - 3)) == (data + b"appended")[max(0, size - 3) :]


async def test_read_to_the_end_sees_bytes_appended_after_the_open(env: asyncfs.Env, tmp_path: Path) -> None:
    """read() asks for the size seen at the open and probes one byte past
    it in the same call: a file that grew meanwhile is read to its new end,
    one that did not is done without another call."""
    path = tmp_path / "grows"
    path.write_bytes(b"at the open\n")
    async with env.open(str(path), "rb") as f:
        with path.open("ab") as more:
            more.write(b"appended\n")
        assert await f.read() == b"at the open\nappended\n"
        assert await f.read() == b""
    async with env.open(str(path), "rb") as f:
        assert await f.read(3) == b"at "
        assert await f.read() == b"the open\nappended\n"


async def test_reading_again_at_the_end_sees_what_was_appended_since(
    env: asyncfs.Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with io's files (and aiofiles), a read that came back empty at the
    end is not the last word: asked again, a stream reads what a writer
    appended since (a log followed with tail -f), in binary and in text,
    through read(), read(n), readline() and iteration. Each read at the end
    costs one plugin call, as each costs io a system call."""
    path = tmp_path / "log"
    path.write_bytes(b"one\n")

    def append(data: bytes) -> None:
        with path.open("ab") as more:
            more.write(data)

    async with env.open(str(path), "rb") as f:
        assert await f.read() == b"one\n"
        assert await f.read() == b""
        append(b"two\n")
        assert await f.read() == b"two\n"
        append(b"three\n")
        assert await f.read(2) == b"th"
        assert await f.readline() == b"ree\n"
        assert await f.readline() == b""
        append(b"four\nfive\n")
        assert [line async for line in f] == [b"four\n", b"five\n"]
        assert f.tell() == path.stat().st_size
        append(b"six\nseven\n")
        assert await f.readline() == b"six\n"
        assert await f.read() == b"seven\n"  # the rest of what the last block brought
    # Counted from the first line on, the plugin's reads: the file is in the
    # page cache, so they are made at hand, on the loop's thread
    # (read_if_ready), with no trip through the pool.
    reads: list[tuple[int, int]] = []
    at_hand = asyncfs.RandomAccessFile.read_if_ready

    def counted_read(file: asyncfs.RandomAccessFile, offset: int, n: int) -> bytes | None:
        reads.append((offset, n))
        return at_hand(file, offset, n)

    monkeypatch.setattr(asyncfs.RandomAccessFile, "read_if_ready", counted_read)
    size = path.stat().st_size
    async with asyncfs.Env() as counted, counted.open(str(path), "rb") as f:  # no other stream's close counted
        assert await f.readline() == b"one\n"
        calls, reads[:] = counted.pool.stats().operations, []
        assert len([line async for line in f]) == 6
        assert [offset for offset, _ in reads] == [size]  # the empty read that ends it
        assert await f.readline() == b""
        assert [offset for offset, _ in reads] == [size, size]  # asked again
        assert counted.pool.stats().operations == calls
    async with asyncfs.Env() as counted, counted.open(str(path), "r") as f:
        assert await f.readline() == "one\n"
        calls, reads[:] = counted.pool.stats().operations, []
        assert [line async for line in f] == ["two\n", "three\n", "four\n", "five\n", "six\n", "seven\n"]
        assert [offset for offset, _ in reads] == [size]
        assert counted.pool.stats().operations == calls
        append(b"six\r\nseven")
        assert await f.read() == "six\nseven"
        append(b"\n")
        assert await f.readline() == "\n"


async def test_a_compressed_stream_ends_where_its_data_ended(env: asyncfs.Env, tmp_path: Path) -> None:
    """A compressed stream that reached the end of its data stays there:
    bytes after the end of a gzip member would not decode as more of it."""
    path = tmp_path / "data.gz"
    path.write_bytes(gzip.compress(b"payload"))
    async with env.open(str(path), "rb") as f:
        assert await f.read() == b"payload"
        with path.open("ab") as more:
            more.write(b"not gzip")
        assert await f.read() == b""


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.integers(-1, 40)),
        st.tuples(st.just("readline"), st.integers(-1, 12)),
        st.tuples(st.just("seek"), st.integers(0, 90), st.just(io.SEEK_SET)),
        st.tuples(st.just("seek"), st.integers(-20, 20), st.just(io.SEEK_CUR)),
        st.tuples(st.just("seek"), st.integers(-20, 10), st.just(io.SEEK_END)),
        st.tuples(st.just("tell")),
        st.tuples(st.just("append"), st.binary(min_size=1, max_size=30) | st.just(b"a line\n")),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.binary(max_size=60) | st.just(b"x\ny\n" * 9), steps=_STEPS, block=st.sampled_from([1, 7, 64, 1 << 20]))
def test_a_stream_reads_a_growing_file_as_the_standard_library_does(
    tmp_path: Path, first: bytes, steps: list[tuple[Any, ...]], block: int
) -> None:
    """Any sequence of reads, readlines, seeks (from the end too) and tells
    on a stream, with appends to the file by another writer in between,
    answers what open(path, "rb") answers, whatever the block size
    (read-ahead, short blocks, a read() that finds the file grown, reads
    again at the end)."""
    path = tmp_path / "growing.bin"
    path.write_bytes(first)

    async def run() -> list[Any]:
        got: list[Any] = []
        async with asyncfs.Env(workers=2) as env, env.open(str(path), "rb", block_size=block) as ours:
            with open(path, "rb") as theirs:
                for step in steps:
                    if step[0] == "append":
                        with path.open("ab") as writer:
                            writer.write(step[1])
                        continue
                    if (
                        step[0] == "seek"
                        and {io.SEEK_CUR: theirs.tell(), io.SEEK_END: path.stat().st_size}.get(step[2], 0) + step[1] < 0
                    ):
                        continue  # a negative target: both refuse, with different errors
                    mine = await getattr(ours, step[0])(*step[1:]) if step[0] != "tell" else ours.tell()
                    expected = getattr(theirs, step[0])(*step[1:])
                    got.append((step, mine, expected))
        return got

    for step, mine, expected in asyncio.run(run()):
        assert mine == expected, step


async def test_read1_reads_at_most_one_block(env: asyncfs.Env, tmp_path: Path) -> None:
    """read1 answers from the buffer, or else with what one block read
    brings, as the standard library's read1; empty at the end."""
    path = tmp_path / "blocks"
    path.write_bytes(bytes(range(100)))
    async with env.open(str(path), "rb", block_size=40) as f:
        assert await f.read(10) == bytes(range(10))
        assert await f.read1() == bytes(range(10, 40))  # the rest of the first block
        assert await f.read1(5) == bytes(range(40, 45))
        assert await f.read1(-1) == bytes(range(45, 80))
        assert await f.read1() == bytes(range(80, 100))
        assert await f.read1() == b""
        assert f.tell() == 100


_TEXT_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.integers(-1, 30)),
        st.tuples(st.just("readline"), st.integers(-1, 10)),
        st.tuples(st.just("append"), st.text(max_size=20) | st.sampled_from(["line\n", "crlf\r\n", "é€\n"])),
    ),
    max_size=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.text(max_size=40), steps=_TEXT_STEPS, block=st.sampled_from([1, 7, 1 << 20]))
def test_a_text_stream_reads_a_growing_file_as_the_standard_library_does(
    tmp_path: Path, first: str, steps: list[tuple[Any, ...]], block: int
) -> None:
    """The same in text mode (UTF-8, universal newlines): reads and
    readlines, with appends in between, answer what open(path) answers."""
    path = tmp_path / "growing.txt"
    path.write_bytes(first.encode())

    async def run() -> list[Any]:
        got: list[Any] = []
        async with asyncfs.Env(workers=2) as env, env.open(str(path), "r", block_size=block) as ours:
            with open(path, encoding="utf-8") as theirs:
                for step in steps:
                    if step[0] == "append":
                        with path.open("ab") as writer:
                            writer.write(step[1].encode())
                        continue
                    got.append((step, await getattr(ours, step[0])(step[1]), getattr(theirs, step[0])(step[1])))
        return got

    for step, mine, expected in asyncio.run(run()):
        assert mine == expected, step


_LINES_TEXT = st.text(
    st.sampled_from("ab\n\r\v\x0c\x1c\x85\u2028é") | st.characters(codec="utf-8"), max_size=80
) | st.builds(lambda n, tail: "row,1\n" * n + tail, st.integers(0, 400), st.sampled_from(["", "end", "\r\n"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=_LINES_TEXT,
    binary=st.booleans(),
    keepends=st.booleans(),
    batch=st.sampled_from([1, 3, 65536]),
    block=st.sampled_from([1, 7, 1 << 20]),
    lists=st.integers(0, 4),
)
def test_iter_lines_with_or_without_ends_splits_as_the_standard_library(
    tmp_path: Path, *, text: str, binary: bool, keepends: bool, batch: int, block: int, lists: int
) -> None:
    """The lists hold open()'s lines (universal newlines in text mode, only
    b"\\n" in binary mode, never splitlines' other breaks), with their
    newline or, keepends false, without it; after a break, read() gives
    the rest exactly."""
    path = tmp_path / "lines.txt"
    path.write_bytes(text.encode())
    with open(path, "rb") if binary else open(path, encoding="utf-8") as theirs:
        lines: list[Any] = theirs.readlines()
    newline = b"\n" if binary else "\n"
    expected = lines if keepends else [line.removesuffix(newline) for line in lines]

    async def run() -> tuple[list[Any], list[Any], Any]:
        async with asyncfs.Env(workers=2) as env:
            async with env.open(str(path), "rb" if binary else "r", block_size=block) as f:
                every: list[Any] = []
                async for part in f.iter_lines(batch, keepends=keepends):
                    every += part
                    if len(every) > len(expected):  # lines repeated: stop here, not never
                        break
            async with env.open(str(path), "rb" if binary else "r", block_size=block) as f:
                taken: list[Any] = []
                async for part in f.iter_lines(batch, keepends=keepends):
                    assert 1 <= len(part) <= batch
                    taken += part
                    if len(taken) >= lists:
                        break
                return every, taken, await f.read()

    every, taken, rest = asyncio.run(run())
    assert every == expected
    assert taken == expected[: len(taken)]
    assert rest == newline[:0].join(lines[len(taken) :])


_LINE_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("lines"), st.integers(0, 5)),  # a new async for, left after n lines
        st.tuples(st.just("more"), st.integers(0, 5)),  # the last one's iterator, taken up again
        st.tuples(st.just("list"), st.integers(1, 4)),  # one list of iter_lines(batch)
        st.tuples(st.just("read"), st.integers(-1, 30)),
        st.tuples(st.just("readline"), st.integers(-1, 10)),
        st.tuples(st.just("tell"), st.none()),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=_LINES_TEXT
    | st.builds(lambda n, w: "".join(f"{i}{'x' * (i % w)}\n" for i in range(n)), st.integers(5, 60), st.integers(1, 9)),
    binary=st.booleans(),
    steps=_LINE_STEPS,
    block=st.sampled_from([1, 7, 1 << 20]),
    split=st.sampled_from([16, streams.SPLIT]),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_lines_one_by_one_between_other_reads_are_the_standard_librarys(
    tmp_path: Path, *, text: str, binary: bool, steps: list[tuple[str, Any]], block: int, split: int, backend: str
) -> None:
    """``async for line in f`` left after some lines and taken up again
    later, lists of iter_lines, reads, readlines and tell in any order
    answer what open(path)'s iteration and reads answer: nothing lost or
    repeated between them. (On asyncio the per-line loop splits up to SPLIT
    of lines at once and moves past them all; every other read takes back
    those it has not handed over.)"""
    path = tmp_path / "lines.txt"
    path.write_bytes(text.encode())

    async def run() -> list[tuple[Any, Any, Any]]:
        got: list[tuple[Any, Any, Any]] = []
        current: Any = None
        async with (
            asyncfs.Env(workers=2) as env,
            env.open(str(path), "rb" if binary else "r", block_size=block) as ours,
        ):
            with open(path, "rb") if binary else open(path, encoding="utf-8") as theirs:
                for name, arg in steps:
                    mine: Any
                    expected: Any
                    if name in ("lines", "more"):
                        if name == "lines" or current is None:
                            current = ours.__aiter__()
                        mine = []
                        while len(mine) < arg:
                            try:
                                mine.append(await current.__anext__())
                            except StopAsyncIteration:
                                break
                        expected = [line for line in (theirs.readline() for _ in range(arg)) if line]
                    elif name == "list":
                        try:
                            mine = await ours.iter_lines(arg).__anext__()
                        except StopAsyncIteration:
                            mine = []
                        expected = [line for line in (theirs.readline() for _ in range(max(len(mine), 1))) if line]
                    elif name == "tell":
                        if not binary:
                            continue  # a text stream's tell is an opaque cookie in the standard library
                        mine, expected = ours.tell(), theirs.tell()
                    else:
                        mine, expected = await getattr(ours, name)(arg), getattr(theirs, name)(arg)
                    got.append(((name, arg), mine, expected))
                got.append((("rest", None), await ours.read(), theirs.read()))
        return got

    with mock.patch.object(streams, "SPLIT", split):
        answers = anyio.run(run, backend=backend)
    for step, mine, expected in answers:
        assert mine == expected, step


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.binary(max_size=300) | st.binary(min_size=500, max_size=2500), max_size=12),
    damage=st.none() | st.integers(0, 10_000),
    skip_corrupt=st.booleans(),
    block=st.sampled_from([1, 5, 17, 100, 1000]),
)
def test_tfrecord_blocks_of_any_size_read_as_one_block_does(
    tmp_path: Path, records: list[bytes], damage: int | None, skip_corrupt: bool, block: int
) -> None:
    """Records that straddle the reader's blocks (joined alone when whole
    and valid, else with the whole block) come out as from one block that
    holds the file, damaged bytes included: the same records, the same
    skips, the same error at the same offset."""
    path = tmp_path / "r.tfrecord"

    async def write() -> None:
        async with asyncfs.Env(workers=2) as env, await tfrecord.writer(env, str(path)) as out:
            for record in records:
                await out.write(record)

    asyncio.run(write())
    if damage is not None and path.stat().st_size:
        data = bytearray(path.read_bytes())
        data[damage % len(data)] ^= 0x41
        path.write_bytes(bytes(data))

    def read(block_size: int) -> tuple[Any, ...]:
        async def run() -> tuple[Any, ...]:
            async with asyncfs.Env(workers=2) as env, env.open(str(path), "rb") as stream:
                reader = tfrecord.TFRecordReader(stream, skip_corrupt=skip_corrupt)
                got = []
                try:
                    while batch := await reader.read_batch():
                        got += batch
                except tfrecord.TFRecordCorruptionError as error:
                    return got, reader.skipped, "error", error.offset
                return got, reader.skipped

        with mock.patch.object(_tfrecord, "_BLOCK", block_size):
            return asyncio.run(run())

    assert read(block) == read(1 << 20)
