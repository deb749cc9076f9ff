"""How the pool answers the way services call it: small-file reads in both
harnesses (one task per file via gather + a semaphore, and lanes) on asyncio
and uvloop, latency under load, a blocked call in the mix, whole-stream
reads from 16 to 256 MiB, loop lag under large reads, workers under CPU
contention, and import time. Every ratio is against peers measured in the
same run (see run.py, which calls these)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import asyncfs

from .harness import IN_FLIGHT, Row, best, best_async, bounded, optional, started_env
from .limits import describe, harness_cost, read_limits

# ---- harnesses --------------------------------------------------------------------


async def per_task(fn: Callable[[Any], Awaitable[Any]], items: Iterable[Any], limit: int = IN_FLIGHT) -> None:
    """One task per item under a semaphore: how services call an async API."""
    semaphore = asyncio.Semaphore(limit)

    async def one(item: Any) -> None:
        async with semaphore:
            await fn(item)

    await asyncio.gather(*(one(item) for item in items))


HARNESSES = {"gather + Semaphore(64)": per_task, "64 lanes": bounded}


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if name == "uvloop":
        uvloop = optional("uvloop")
        return None if uvloop is None else uvloop.new_event_loop
    return asyncio.new_event_loop


def best_on(loop: str, make: Callable[[], Awaitable[Any]], repeat: int) -> float:
    return best_async(make, repeat, loop_factory=loop_factory(loop))


# ---- small files in both harnesses -----------------------------------------------------


def _peers(paths: list[str]) -> dict[str, Callable[[str], Awaitable[Any]]]:
    def read_bytes(p: str) -> bytes:
        with open(p, "rb") as f:
            return f.read()

    peers: dict[str, Callable[[str], Awaitable[Any]]] = {
        "asyncio.to_thread": lambda p: asyncio.to_thread(read_bytes, p)
    }
    aiofiles = optional("aiofiles")
    if aiofiles:

        async def aio_read(p: str) -> bytes:
            async with aiofiles.open(p, "rb") as f:
                return await f.read()

        peers["aiofiles"] = aio_read
    anyio = optional("anyio")
    if anyio:
        peers["anyio.Path"] = lambda p: anyio.Path(p).read_bytes()
    obstore = optional("obstore")
    if obstore:
        from obstore.store import LocalStore

        store = LocalStore()

        async def obs_read(p: str) -> bytes:
            result = await obstore.get_async(store, p.lstrip("/"))
            return bytes(await result.bytes_async())

        peers["obstore"] = obs_read
    return peers


def bench_small_files(paths: list[str], repeat: int) -> list[Row]:
    """2000 files of 4 KiB, 64 in flight, in both harnesses, on asyncio and
    uvloop, beside the machine's limits: the C loop, and the harness alone.
    asyncfs's own cost per call is its time per file beyond the harness's."""
    n = len(paths)

    def sync_loop() -> None:
        for p in paths:
            with open(p, "rb") as f:
                f.read()

    rows = []
    env = started_env()
    c_limits = read_limits(paths)
    for loop in ("asyncio", "uvloop"):
        if loop_factory(loop) is None:
            continue
        for harness_name, harness in HARNESSES.items():
            row = Row(f"read {n} files × 4 KiB, {harness_name}, {loop}", "files/s")
            row.results["sync loop"] = n / best(sync_loop, repeat)
            for peer, fn in _peers(paths).items():
                row.results[peer] = n / best_on(loop, lambda fn=fn, run=harness: run(fn, paths), repeat)
            row.results["asyncfs"] = n / best_on(loop, lambda run=harness: run(env.read_file, paths), repeat)
            alone = harness_cost(harness, paths, repeat, loop_factory(loop))
            row.notes.append(describe({**c_limits.named(), "the harness alone": alone}))
            async_peers = {k: v for k, v in row.results.items() if k not in ("asyncfs", "sync loop")}
            fastest = max(async_peers, key=lambda k: async_peers[k])
            vs_async = row.results["asyncfs"] / async_peers[fastest]
            vs_sync = row.results["asyncfs"] / row.results["sync loop"]
            own, sync_cost = 1e6 / row.results["asyncfs"] - alone, 1e6 / row.results["sync loop"]
            row.target = "own cost ≤ the sync loop's per file: ≥ 4× fastest async peer, ≥ 0.5× sync loop"
            met = vs_async >= 4 and vs_sync >= 0.5 and own <= sync_cost
            row.verdict = (
                f"{vs_async:.1f}× {fastest}, {vs_sync:.2f}× sync; asyncfs's own {own:.2f} µs a call "
                f"beyond the harness, the sync loop {sync_cost:.2f} µs a file ({'met' if met else 'missed'})"
            )
            row.ratio = own / sync_cost
            rows.append(row)
    env.close()
    return rows


# ---- latency under load, and a blocked call in the mix ------------------------------------


def _quantile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1]


async def _timed_reads(
    env: asyncfs.Env, paths: list[str], harness: Callable[..., Awaitable[None]] | None
) -> tuple[float, float, list[float], float]:
    """(first result after the start, first result after the last read was
    submitted, per-op latencies, total) for reads of paths, all started at
    once (harness None) or under a harness."""
    latencies: list[float] = []
    firsts: list[float] = []
    submitted: list[float] = []
    start = time.perf_counter()

    async def one(path: str) -> None:
        began = time.perf_counter()
        submitted.append(began)
        await env.read_file(path)
        done = time.perf_counter()
        if not firsts:
            firsts.append(done)
        latencies.append(done - began)

    if harness is None:
        await asyncio.gather(*(one(p) for p in paths))
    else:
        await harness(one, paths)
    total = time.perf_counter() - start
    return firsts[0] - start, max(0.0, firsts[0] - max(submitted)), latencies, total


def bench_latency_under_load(paths: list[str]) -> Row:
    """4000 reads started at once; the per-op latency of the lanes harness."""
    env = started_env()
    at_once = asyncio.run(_timed_reads(env, paths, None))
    lanes = asyncio.run(_timed_reads(env, paths, bounded))
    env.close()
    first, after_submit, latencies, total = at_once
    lane_latencies = lanes[2]
    row = Row(f"{len(paths)} reads started at once; then the same in 64 lanes", "ms")
    row.results["first result"] = first * 1000
    row.results["of total"] = total * 1000
    row.results["first after the last submission"] = after_submit * 1000
    row.results["at once p50"] = _quantile(latencies, 50) * 1000
    row.results["at once p99"] = _quantile(latencies, 99) * 1000
    row.results["lanes p50"] = _quantile(lane_latencies, 50) * 1000
    row.results["lanes p99"] = _quantile(lane_latencies, 99) * 1000
    share = first / total
    spread = _quantile(lane_latencies, 99) / _quantile(lane_latencies, 50)
    row.target = "first result ≤ 5% of total; lanes p99 ≤ 2× p50"
    row.verdict = (
        f"first at {share:.0%} of total ({'met' if share <= 0.05 else 'missed'}: submitting {len(paths)} "
        f"tasks takes the loop until {first * 1000:.0f} ms); lanes p99/p50 {spread:.1f} "
        f"({'met' if spread <= 2 else 'missed'})"
    )
    return row


def bench_blocked_call(paths: list[str]) -> Row:
    """The lanes run with one call blocked forever in the mix (a FIFO no one
    writes): every other read completes, in about the same time."""
    folder = Path(tempfile.mkdtemp(prefix="asyncfs-fifo-"))
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    env = started_env()

    async def without() -> float:
        return (await _timed_reads(env, paths, bounded))[3]

    async def with_blocked() -> float:
        blocked = asyncio.ensure_future(env.read_file(str(fifo)))
        await asyncio.sleep(0)
        took = (await _timed_reads(env, paths, bounded))[3]
        blocked.cancel()
        return took

    base = min(asyncio.run(without()) for _ in range(3))
    blocked = min(asyncio.run(with_blocked()) for _ in range(3))
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release it
    env.close(timeout=5)
    shutil.rmtree(folder, ignore_errors=True)
    row = Row(f"{len(paths)} reads in 64 lanes, with one call blocked forever in the mix", "s")
    row.results["without"] = base
    row.results["with the blocked call"] = blocked
    ratio = row.ratio = blocked / base
    row.target = "all complete, ≤ 1.25× the run without"
    row.verdict = f"all {len(paths)} completed, {ratio:.2f}× ({'met' if ratio <= 1.25 else 'missed'})"
    return row


# ---- streams: whole reads, linear --------------------------------------------------------


async def _ticker(done: asyncio.Event, lags: list[float]) -> None:
    while not done.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - before - 0.001)


def bench_stream_reads(folder: Path) -> Row:
    """``await f.read()`` of 16 to 256 MiB, and a ticker's lag meanwhile."""
    sizes = [16, 32, 64, 128, 256]
    folder.mkdir(parents=True, exist_ok=True)
    block = os.urandom(1 << 20)
    env = started_env()
    row = Row("await f.read() on env.open(path, 'rb'), 16 to 256 MiB", "s")
    times: list[float] = []
    worst_lag = 0.0
    for mib in sizes:
        path = folder / f"stream-{mib}.bin"
        if not path.exists() or path.stat().st_size != mib << 20:
            path.write_bytes(block * mib)

        async def read_whole(path: Path = path) -> tuple[float, list[float]]:
            lags: list[float] = []
            done = asyncio.Event()
            ticker = asyncio.ensure_future(_ticker(done, lags))
            start = time.perf_counter()
            async with env.open(str(path), "rb") as f:
                data = await f.read()
            took = time.perf_counter() - start
            done.set()
            await ticker
            del data
            return took, lags

        took, lags = min((asyncio.run(read_whole()) for _ in range(2)), key=lambda r: r[0])
        times.append(took)
        worst_lag = max(worst_lag, _quantile(lags, 99) if len(lags) > 2 else max(lags, default=0.0))
        row.results[f"{mib} MiB"] = took
    env.close()
    doublings = [later / earlier for earlier, later in itertools.pairwise(times)]
    row.results["loop-lag p99 (ms)"] = worst_lag * 1000
    row.target = "≤ 2.2× per doubling; loop-lag p99 < 5 ms"
    ok = max(doublings) <= 2.2 and worst_lag < 0.005
    row.verdict = f"per doubling {', '.join(f'{d:.2f}×' for d in doublings)}; lag p99 {worst_lag * 1000:.1f} ms " + (
        "(met)" if ok else "(missed)"
    )
    return row


# ---- loop lag under large reads, workers under contention -----------------------------------


def bench_loop_lag(folder: Path) -> Row:
    """A 1 ms ticker while 64 reads of 16 MiB at a time run into caller
    buffers (twelve rounds), against the same ticker idle; at the default
    worker priority and at nice 10."""
    folder.mkdir(parents=True, exist_ok=True)
    blob = os.urandom(1 << 20) * 16
    paths = []
    for i in range(8):
        path = folder / f"lag{i}.bin"
        if not path.exists() or path.stat().st_size != len(blob):
            path.write_bytes(blob)
        paths.append(str(path))
    buffers = [bytearray(len(blob)) for _ in range(64)]
    row = Row("1 ms ticker's p99 lag while 64 × 16 MiB reads run (12 rounds)", "ms")

    async def measure(env: asyncfs.Env) -> tuple[float, float]:
        async def lags_during(work: Callable[[], Awaitable[Any]]) -> list[float]:
            lags: list[float] = []
            done = asyncio.Event()
            ticker = asyncio.ensure_future(_ticker(done, lags))
            await work()
            done.set()
            await ticker
            return lags

        async def load() -> None:
            for _ in range(12):
                await asyncio.gather(*(env.read_into(paths[i % 8], buffers[i]) for i in range(64)))

        idle = await lags_during(lambda: asyncio.sleep(1))
        busy = await lags_during(load)
        return _quantile(idle, 99), _quantile(busy, 99)

    for nice in (0, 10):
        env = started_env(worker_nice=nice)
        idle, busy = asyncio.run(measure(env))
        env.close()
        row.results[f"nice {nice}: idle"] = idle * 1000
        row.results[f"nice {nice}: busy"] = busy * 1000
    default = row.results["nice 0: busy"] - row.results["nice 0: idle"]
    row.target = "busy p99 ≤ idle + 5 ms (asyncio)"
    row.verdict = f"+{default:.1f} ms at the default priority ({'met' if default <= 5 else 'missed'})"
    return row


def bench_contention(paths: list[str], repeat: int) -> Row:
    """Small-file reads while two other processes keep both cores busy: at
    the default worker priority and at nice 10."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    row = Row(f"read {len(paths)} × 4 KiB (64 lanes) while 2 busy processes load the cores", "files/s")
    try:
        for nice in (0, 10):
            env = started_env(worker_nice=nice)
            read = env.read_file
            row.results[f"nice {nice}"] = len(paths) / best_async(lambda read=read: bounded(read, paths), repeat)
            env.close()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    ratio = row.results["nice 0"] / row.results["nice 10"]
    row.target = "report (the default is nice 0)"
    row.verdict = f"nice 0 reads {ratio:.1f}× as fast as nice 10 under contention"
    return row


# ---- import time -----------------------------------------------------------------------------


def _import_ms(statement: str, runs: int = 7) -> float | None:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    times = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return None
        times.append(float(done.stdout))
    return min(times) * 1000


def bench_import() -> Row:
    row = Row("import time, fresh interpreter, best of 7", "ms")
    for name, statement in (
        ("asyncfs", "import asyncfs"),
        ("asyncfs + Env", "import asyncfs; asyncfs.Env"),
        ("anyio + cffi", "import anyio, cffi"),
        ("aiofiles", "import aiofiles"),
        ("fsspec", "import fsspec"),
    ):
        took = _import_ms(statement)
        if took is not None:
            row.results[name] = took
    budget = row.results["anyio + cffi"] + 30
    row.target = "asyncfs ≤ anyio + cffi + 30 ms"
    met = row.results["asyncfs"] <= budget
    row.verdict = (
        f"{row.results['asyncfs']:.0f} ms against a budget of {budget:.0f} ms ({'met' if met else 'missed'}); "
        f"with Env {row.results['asyncfs + Env']:.0f} ms"
    )
    return row
