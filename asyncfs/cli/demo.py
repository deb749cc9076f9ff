"""``asyncfs demo``: asyncfs at work on the built-in plugins, in about a
second. On mem:// and on a temporary file:// folder it writes a dataset and
TFRecord shards, commits a checkpoint in a transaction (and shows a failed
one rolling back), reads everything back with prefetch, verifies it, and
says how fast each step went."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from .._streams import tfrecord
from ..env import Env

__all__ = ["run_demo"]

T = TypeVar("T")


async def _step(label: str, count: int, unit: str, action: Callable[[], Awaitable[T]], size: int = 0) -> T:
    start = time.perf_counter()
    result = await action()
    elapsed = time.perf_counter() - start
    rate = f"{count / elapsed:>9,.0f} {unit}/s" if elapsed > 0 else ""
    volume = f"  {size / elapsed / 1e6:7.1f} MB/s" if size and elapsed > 0 else ""
    print(f"  {label:<44} {count:>6} {unit:<7} {elapsed * 1000:8.1f} ms {rate}{volume}")
    return result


async def _demo_on(env: Env, base: str, files: int) -> None:
    data = [hashlib.sha256(str(i).encode()).digest() * 128 for i in range(files)]  # 4 KiB each
    uris = [f"{base}/dataset/part-{i // 500:02d}/sample-{i:05d}.bin" for i in range(files)]
    if await env.exists(base):
        await env.rmtree(base)
    for part in sorted({uri.rsplit("/", 1)[0] for uri in uris}):
        await env.makedirs(part)

    async def write_dataset() -> None:
        for start in range(0, files, 256):
            batch = range(start, min(start + 256, files))
            await asyncio.gather(*(env.write_file(uris[i], data[i]) for i in batch))

    await _step("write the dataset (atomic files)", files, "files", write_dataset, files * 4096)

    async def write_shards() -> None:
        for shard in range(4):
            async with await tfrecord.writer(env, f"{base}/records/shard-{shard}.tfrecord.gz") as out:
                for i in range(shard, files, 4):
                    await out.write(data[i][:1024])

    await env.makedirs(f"{base}/records")
    await _step("write 4 gzip TFRecord shards", files, "records", write_shards)

    weights = os.urandom(8 << 20)

    async def checkpoint() -> None:
        async with env.transaction(f"{base}/checkpoints/step-100") as txn:
            await txn.write_file("weights.bin", weights)
            meta = {"step": 100, "sha256": hashlib.sha256(weights).hexdigest()}
            await txn.write_file("meta.json", json.dumps(meta).encode())

    await _step("commit a checkpoint in a transaction", 1, "commits", checkpoint, len(weights))
    try:
        async with env.transaction(f"{base}/checkpoints/step-100") as txn:
            await txn.write_file("weights.bin", b"half-written")
            raise RuntimeError("the training job crashed")
    except RuntimeError:
        pass
    meta = json.loads(await env.read_file(f"{base}/checkpoints/step-100/meta.json"))
    stored = await env.read_file(f"{base}/checkpoints/step-100/weights.bin")
    intact = hashlib.sha256(stored).hexdigest() == meta["sha256"]
    print(f"  {'a crashed transaction rolled back:':<44} checkpoint {'intact' if intact else 'DAMAGED'}")

    expected = dict(zip(uris, data, strict=True))

    async def read_back() -> int:
        good = 0
        async for path, blob in env.prefetch(uris, in_flight=64):
            good += blob == expected[path]
        return good

    good = await _step("read it back with prefetch, verified", files, "files", read_back, files * 4096)
    records = await _step(
        "read the shards, records interleaved",
        files,
        "records",
        lambda: _count(env.prefetch([f"{base}/records/shard-{s}.tfrecord.gz" for s in range(4)], records=True)),
    )
    pattern = f"{base}/dataset/part-*/sample-*.bin"
    matches = await _step("glob dataset/part-*/sample-*.bin", files, "matches", lambda: env.glob(pattern))
    await env.rmtree(base)
    ok = good == files and records == files and len(matches) == files and intact
    verdict = "all verified" if ok else "MISMATCH"
    print(f"  {verdict}: {good} files, {records} records, {len(matches)} matches; {base} removed")
    if not ok:
        raise SystemExit(1)


async def _count(items: AsyncIterator[object]) -> int:
    count = 0
    async for _ in items:
        count += 1
    return count


async def run_demo(env: Env, *, files: int = 2000) -> int:
    plugins = ", ".join(f"{p.metadata.name} ({'/'.join(s or 'bare' for s in p.schemes)})" for p in env.plugins())
    print(f"asyncfs demo: {files} files of 4 KiB, plugins: {plugins}, {env.pool.workers} workers\n")
    with tempfile.TemporaryDirectory(prefix="asyncfs-demo-") as local:
        for base in ("mem:///asyncfs-demo", f"file://{local}/asyncfs-demo"):
            print(base)
            await _demo_on(env, base, files)
            print()
    return 0
