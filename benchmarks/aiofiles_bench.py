"""asyncfs.aiofiles against aiofiles, in aiofiles's own idioms: the same
code, the import changed. Each row runs both libraries alternately in one
event loop (best of the repeats for each), the way their users call them:
one task per file or path through ``gather``, and plain loops of awaits."""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .harness import Row, optional

TARGET = 4.0


def _files(root: Path, count: int, size: int) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = [root / f"f{i:05d}" for i in range(count)]
    for path in paths:
        if not path.exists():
            path.write_bytes(bytes(i % 251 for i in range(size)))
    return paths


def _lines(path: Path, count: int) -> Path:
    if not path.exists():
        path.write_text("".join(f"{i},user{i % 977},{'payload' * (i % 7)},ok\n" for i in range(count)))
    return path


async def _open_read_close(lib: Any, paths: list[Path]) -> None:
    async def one(path: Path) -> bytes:
        async with lib.open(path, "rb") as f:
            data: bytes = await f.read()
            return data

    await asyncio.gather(*(one(p) for p in paths))


async def _iterate(lib: Any, path: Path) -> None:
    async with lib.open(path) as f:
        async for _line in f:
            pass


async def _readline(lib: Any, path: Path) -> None:
    async with lib.open(path) as f:
        while await f.readline():
            pass


async def _writes(lib: Any, path: Path, count: int) -> None:
    async with lib.open(path, "w") as f:
        for i in range(count):
            await f.write(f"event {i}: something happened\n")


async def _stat(lib: Any, paths: list[Path]) -> None:
    await asyncio.gather(*(lib.os.stat(p) for p in paths))


async def _exists(lib: Any, paths: list[Path]) -> None:
    await asyncio.gather(*(lib.ospath.exists(p) for p in paths))


def bench_aiofiles(data: Path, repeat: int, quick: bool) -> list[Row]:
    theirs = optional("aiofiles")
    if theirs is None:
        return [Row("asyncfs.aiofiles", "-", notes=["skipped: aiofiles is needed (pip install '.[bench]')"])]
    for name in ("os", "ospath"):
        importlib.import_module(f"aiofiles.{name}")
    from asyncfs import aiofiles as ours

    small, lines, writes, stats = (200, 10_000, 10_000, 1000) if quick else (2000, 100_000, 100_000, 10_000)
    paths = _files(data / f"small-{small}", small, 4096)
    text = _lines(data / f"lines-{lines}.csv", lines)
    probed = [paths[i % len(paths)] for i in range(stats)]
    out = data / "written.txt"
    cases: list[tuple[str, str, int, Callable[[Any], Awaitable[None]]]] = [
        (f"open, read, close of {small} × 4 KiB files (a task each)", "files/s", small,
         lambda lib: _open_read_close(lib, paths)),
        (f"async for line in f, {lines:,} lines", "lines/s", lines, lambda lib: _iterate(lib, text)),
        (f"while await f.readline(), {lines:,} lines", "lines/s", lines, lambda lib: _readline(lib, text)),
        (f"{writes:,} small writes (await f.write)", "writes/s", writes, lambda lib: _writes(lib, out, writes)),
        (f"aiofiles.os.stat on {stats:,} paths (a task each)", "calls/s", stats, lambda lib: _stat(lib, probed)),
        (f"aiofiles.ospath.exists on {stats:,} paths (a task each)", "calls/s", stats,
         lambda lib: _exists(lib, probed)),
    ]  # fmt: skip

    async def measure() -> list[Row]:
        rows = []
        for work, unit, count, run in cases:
            best = {"asyncfs.aiofiles": float("inf"), "aiofiles": float("inf")}
            await run(ours)  # warm: the pool's threads, the page cache
            await run(theirs)
            for _ in range(repeat):
                for name, lib in (("aiofiles", theirs), ("asyncfs.aiofiles", ours)):
                    start = time.perf_counter()
                    await run(lib)
                    best[name] = min(best[name], time.perf_counter() - start)
            row = Row(work, unit, target=f"≥ {TARGET:g}× aiofiles")
            row.results = {name: count / seconds for name, seconds in best.items()}
            ratio = row.ratio = best["aiofiles"] / best["asyncfs.aiofiles"]
            row.verdict = f"{ratio:.1f}× aiofiles ({'met' if ratio >= TARGET else 'missed'})"
            rows.append(row)
        return rows

    return asyncio.run(measure())
