"""What an Env measures of its work (``env.metrics()``): per scheme and
operation, the calls, their errors by type, the bytes moved and the latency
histogram; and its pools' threads, calls in flight and stuck calls. Real
plugins, real files."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.flaky_store import Flaky, flaky_az

import asyncfs
from asyncfs._async import pool as _pool


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.mark.anyio
async def test_counts_bytes_and_errors_after_known_work(anyio_backend: Any, tmp_path: Path) -> None:
    async with asyncfs.Env(own={"mem"}) as env:
        for i in range(20):
            await env.write_file(f"mem://m/{i}", b"x" * 100)
            await env.write_file(tmp_path / str(i), b"y" * 1000)
        for i in range(20):
            assert await env.read_file(f"mem://m/{i}") == b"x" * 100
            await env.read_file(tmp_path / str(i))
        for missing in ("mem://m/none", str(tmp_path / "none")):
            with pytest.raises(asyncfs.NotFoundError):
                await env.read_file(missing)
        buffer = bytearray(600)
        assert await env.read_into(tmp_path / "3", buffer) == 600
        await env.stat(tmp_path / "4")
        assert await env.listdir(tmp_path) == sorted([*map(str, range(20))])
        metrics = env.metrics()

    reads = metrics.operation("mem", "read_file")
    assert reads is not None
    assert (reads.count, reads.bytes, dict(reads.errors)) == (21, 2000, {"NOT_FOUND": 1})
    local = metrics.operation("", "read_file")
    assert local is not None and (local.count, local.bytes, dict(local.errors)) == (21, 20_000, {"NOT_FOUND": 1})
    into = metrics.operation("", "read_into")
    assert into is not None and (into.count, into.bytes) == (1, 600)
    writes = metrics.operation("", "write_file")
    assert writes is not None and writes.bytes == 20_000 and writes.count == 20
    assert metrics.operation("", "stat") is not None
    listing = metrics.operation("", "get_children")  # listdir is the plugin's get_children
    assert listing is not None and listing.count == 1
    assert metrics.operation("", "delete_file") is None

    for stats in metrics.operations:
        assert stats.latency.count == stats.count
        assert stats.seconds > 0
        assert 0 < stats.latency.quantile(0.5) <= stats.latency.quantile(0.99)
        # the bucket bounds bracket the mean (each bound at most twice what it holds)
        assert stats.latency.quantile(0.0) / 2 <= stats.seconds / stats.count <= stats.latency.quantile(1.0)
    json.dumps(metrics.as_dict())  # plain data


@pytest.mark.anyio
async def test_a_write_into_a_missing_folder_shows_its_three_calls(anyio_backend: Any) -> None:
    """Operations are the filesystem's calls as made: the write that found
    no folder, the folders made, the write again."""
    async with asyncfs.Env(own={"mem"}) as env:
        await env.write_file("mem://a/b/c", b"data")
        metrics = env.metrics()
    writes = metrics.operation("mem", "write_file")
    assert writes is not None and writes.count == 2 and dict(writes.errors) == {"NOT_FOUND": 1}
    assert writes.bytes == 4  # the failed write moved nothing
    made = metrics.operation("mem", "recursively_create_dir")
    assert made is not None and made.count == 1


@pytest.mark.anyio
async def test_an_env_made_without_metrics_counts_nothing(anyio_backend: Any) -> None:
    async with asyncfs.Env(metrics=False, own={"mem"}) as env:
        await env.write_file("mem://x", b"1")
        assert await env.read_file("mem://x") == b"1"
        assert env.metrics().operations == ()


@pytest.mark.anyio
async def test_two_envs_count_apart(anyio_backend: Any) -> None:
    async with asyncfs.Env(own={"mem"}) as one, asyncfs.Env(own={"mem"}) as other:
        await one.write_file("mem://x", b"1")
        await other.write_file("mem://x", b"22")
        await other.write_file("mem://y", b"333")
        first, second = one.metrics().operation("mem", "write_file"), other.metrics().operation("mem", "write_file")
    assert first is not None and (first.count, first.bytes) == (1, 1)
    assert second is not None and (second.count, second.bytes) == (2, 5)


@pytest.mark.anyio
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
async def test_an_abandoned_read_counts_as_cancelled(anyio_backend: Any, tmp_path: Path) -> None:
    """A read of a FIFO no one writes blocks on a worker; its caller gives
    up: the call is counted, as CANCELLED."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    async with asyncfs.Env() as env:
        with anyio.move_on_after(0.2):
            await env.read_file(fifo)
        with open(fifo, "wb"):  # (the worker's open returns: it reads an empty file and leaves)
            pass
        reads = env.metrics().operation("", "read_file")
    assert reads is not None and dict(reads.errors) == {"CANCELLED": 1}


@pytest.mark.anyio
async def test_the_pool_shows_a_stuck_call_and_the_thread_that_took_over(
    anyio_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pool, "STUCK_AFTER", 0.05)
    release = threading.Event()
    async with asyncfs.Env(workers=2) as env:
        fs = env.filesystem("mem://")
        before = env.metrics().pool
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: fs.run(release.wait, 10.0, mutating=False))
            deadline = time.monotonic() + 5
            while (pool := env.metrics().pool).stuck == 0 and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            with anyio.fail_after(5):  # a call made meanwhile: a spare thread answers it
                assert await fs.run(lambda: "answered", mutating=False) == "answered"
            beside = env.metrics().pool
            release.set()
        after = env.metrics().pool
    assert (before.threads, before.stuck) == (0, 0)
    assert pool.stuck == 1 and pool.running >= 1 and pool.in_flight == 1
    assert pool.threads == 1  # threads start when work needs them: nothing else waited
    assert beside.stuck == 1 and beside.threads == 2  # the stuck one, and the one that took the call after it
    assert after.stuck == 0 and after.in_flight == 0


@pytest.mark.anyio
async def test_streams_count_their_opens_and_the_bytes_they_moved(anyio_backend: Any, tmp_path: Path) -> None:
    """The bytes are those the stream moved to or from the filesystem,
    added when it closes: a reader that reads block by block may read a
    block twice (its first, read with the open, again from its start)."""
    target = tmp_path / "streamed.bin"
    async with asyncfs.Env() as env:

        def opens() -> asyncfs.OperationStats:
            stats = env.metrics().operation("", "open")
            assert stats is not None
            return stats

        async with env.open(target, "wb") as writer:
            for _ in range(10):
                await writer.write(b"z" * 100_000)
        assert (opens().count, opens().bytes) == (1, 1_000_000)
        async with env.open(target, "rb") as reader:
            assert len(await reader.read()) == 1_000_000
        assert (opens().count, opens().bytes) == (2, 2_000_000)
        async with env.open(target, "rb", block_size=4096) as reader:
            while await reader.read(10_000):
                pass
        assert opens().count == 3 and 3_000_000 <= opens().bytes <= 3_000_000 + 2 * 4096
        with pytest.raises(asyncfs.NotFoundError):
            await env.open(tmp_path / "none", "rb")
        assert opens().count == 4 and dict(opens().errors) == {"NOT_FOUND": 1}


@pytest.mark.anyio
async def test_prefetch_counts_each_file(anyio_backend: Any, tmp_path: Path) -> None:
    paths = []
    for i in range(50):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"p" * (i + 1))
        paths.append(str(path))
    async with asyncfs.Env() as env:
        got = [data async for _, data in env.prefetch([*paths, str(tmp_path / "none")], errors="deliver")]
        prefetched = env.metrics().operation("", "prefetch")
    assert len(got) == 51 and isinstance(got[-1], asyncfs.NotFoundError)
    assert prefetched is not None
    assert prefetched.count == 51 and dict(prefetched.errors) == {"NOT_FOUND": 1}
    assert prefetched.bytes == sum(range(1, 51))


flaky = pytest.fixture(flaky_az, name="flaky")


def test_a_stores_requests_and_retries_are_counted(flaky: Flaky) -> None:
    """The engine's counts (plugins/objstore) of a stat of a missing blob:
    the token's POST, the HEAD tried three times (two 503s retried, then
    404), and the listing that looks for a folder of that name (404); the
    test server closes each connection (HTTP/1.0)."""
    registry = asyncfs.Registry()
    flaky.az(registry)

    async def stat_a_missing_blob() -> asyncfs.Metrics:
        async with asyncfs.Env(registry=registry) as env:
            with pytest.raises(asyncfs.NotFoundError):
                await env.stat("az://cont/blob")
            return env.metrics()

    metrics = anyio.run(stat_a_missing_blob)
    traffic = metrics.stores["az"]
    assert (traffic.requests, traffic.retried, traffic.failed, traffic.connections) == (5, 2, 2, 5)
    assert traffic.bytes_sent > 0 and traffic.bytes_received > 0  # the token's form and answer
    stat = metrics.operation("az", "stat")
    assert stat is not None and dict(stat.errors) == {"NOT_FOUND": 1}


def test_a_stores_bytes_and_connections_are_counted(registry: asyncfs.Registry, s3_fs: Any, bucket: str) -> None:
    payload = os.urandom(300_000)

    async def round_trip() -> asyncfs.Metrics:
        async with asyncfs.Env(registry=registry) as env:
            for i in range(5):
                await env.write_file(f"s3://{bucket}/m{i}", payload)
            for i in range(5):
                assert await env.read_file(f"s3://{bucket}/m{i}") == payload
            return env.metrics()

    metrics = anyio.run(round_trip)
    traffic = metrics.stores["s3"]
    assert traffic.bytes_sent >= 5 * len(payload) and traffic.bytes_received >= 5 * len(payload)
    assert traffic.requests >= 10 and traffic.retried == 0
    assert traffic.connections < traffic.requests  # kept alive
    assert metrics.as_dict()["stores"]["s3"]["requests"] == traffic.requests
    assert "s3" not in asyncfs.Env().metrics().stores  # an Env that never used it


def test_an_http_servers_requests_are_counted(nginx: Any) -> None:
    (nginx.root / "counted.txt").write_bytes(b"c" * 5000)

    async def read_it() -> asyncfs.Metrics:
        async with asyncfs.Env() as env:
            for _ in range(3):
                assert await env.read_file(f"{nginx.url}/counted.txt") == b"c" * 5000
            return env.metrics()

    traffic = anyio.run(read_it).stores["http"]
    assert traffic.requests >= 3 and traffic.bytes_received >= 15_000 and traffic.failed == 0
