"""A store made slow (mem://'s latency_us, 5 ms per call): how close glob and
files_exist come to the ideal that the pool's width allows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncfs

from .harness import Row

# ---- 4. with 5 ms of latency per operation -------------------------------------------


def bench_latency(dirs: int, files: int, count: int, workers: int, latency_ms: float) -> list[Row]:
    mem = asyncfs.get_filesystem("mem://")
    root = "mem:///bench-latency"
    if not mem.exists(root):
        for d in range(dirs):
            mem.recursively_create_dir(f"{root}/d{d:04d}")
            for f in range(files):
                mem.write_file(f"{root}/d{d:04d}/f{f:03d}.txt", b"")
    paths = [f"{root}/d{i % dirs:04d}/f{i % (2 * files):03d}.txt" for i in range(count)]
    latency = latency_ms / 1000

    async def run(coro: Callable[[asyncfs.Env], Awaitable[Any]]) -> float:
        async with asyncfs.Env(workers=workers) as env:
            await env.pool.run_many(time.sleep, [(0.001,)] * workers, mutating=False)  # start every worker
            await env.filesystem("mem://").set_option("latency_us", int(latency * 1e6))
            try:
                start = time.perf_counter()
                await coro(env)
                return time.perf_counter() - start
            finally:
                await env.filesystem("mem://").set_option("latency_us", 0)

    rows = []
    glob_time = asyncio.run(run(lambda env: env.glob(f"{root}/d*/f*.txt")))
    ideal = dirs * latency / workers
    row = Row(f"glob over {dirs} dirs, {latency_ms:g} ms per op, {workers} workers", "s")
    row.results = {"asyncfs": glob_time, "ideal (dirs × latency ÷ workers)": ideal}
    row.target = "≤ 1.25× ideal"
    row.ratio = glob_time / ideal
    row.verdict = f"{row.ratio:.2f}× ideal"
    rows.append(row)

    exists_time = asyncio.run(run(lambda env: env.files_exist(paths)))
    # files_exist hands the pool chunks of at least 64 paths, about one per
    # worker (docs/async.md): that many plugin calls, each waiting latency
    size = max(64, -(-count // workers))
    calls = -(-count // size)
    ideal_calls = -(-calls // workers) * latency
    ideal_paths = count * latency / workers
    row = Row(f"files_exist on {count} paths, {latency_ms:g} ms per op, {workers} workers", "s")
    row.results = {
        "asyncfs": exists_time,
        f"ideal per batch call ({calls} calls)": ideal_calls,
        "ideal per path (paths × latency ÷ workers)": ideal_paths,
    }
    row.target = "≤ 1.25× ideal"
    row.ratio = exists_time / ideal_calls
    row.verdict = (
        f"{exists_time / ideal_calls:.2f}× the per-call ideal, {exists_time / ideal_paths:.3f}× the per-path one"
    )
    rows.append(row)
    return rows
