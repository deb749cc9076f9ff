"""Local files as one big file, a tree to glob, and paths to test for existence,
against the standard library, fsspec and obstore."""

from __future__ import annotations

import asyncio
import glob as stdlib_glob
import os
from pathlib import Path
from typing import Any

from .harness import Row, best, best_async, bounded, optional, started_env
from .limits import c_limit, describe

# ---- 1. many small files ---------------------------------------------------------


def _fsspec_async_local() -> Any:
    try:
        from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper
        from fsspec.implementations.local import LocalFileSystem
    except ImportError:
        return None
    return AsyncFileSystemWrapper(LocalFileSystem(), asynchronous=True)


# ---- 2. one big file ---------------------------------------------------------------


def bench_big_file(path: str, repeat: int) -> tuple[Row, Row]:
    size = os.path.getsize(path)
    whole = Row(f"read a {size >> 20} MiB file whole", "GB/s")

    def sync_read() -> None:
        with open(path, "rb") as f:
            f.read()

    whole.results["sync open().read()"] = size / best(sync_read, repeat) / 1e9
    aiofiles = optional("aiofiles")
    if aiofiles:

        async def aio_read() -> None:
            async with aiofiles.open(path, "rb") as f:
                await f.read()

        whole.results["aiofiles"] = size / best_async(aio_read, repeat) / 1e9
    obstore = optional("obstore")
    if obstore:
        from obstore.store import LocalStore

        store = LocalStore()

        async def obs_read() -> None:
            result = await obstore.get_async(store, path.lstrip("/"))
            await result.bytes_async()

        whole.results["obstore"] = size / best_async(obs_read, repeat) / 1e9
    opendal = optional("opendal")
    if opendal:
        operator = opendal.AsyncOperator("fs", root="/")
        whole.results["opendal"] = size / best_async(lambda: operator.read(path), repeat) / 1e9

    env = started_env()
    whole.results["asyncfs read_file"] = size / best_async(lambda: env.read_file(path), repeat) / 1e9
    whole.target = "≥ 1.0× sync"
    whole.ratio = whole.results["asyncfs read_file"] / whole.results["sync open().read()"]
    whole.verdict = f"{whole.ratio:.2f}× sync"

    chunked = Row(f"stream the {size >> 20} MiB file in 1 MiB chunks into one buffer", "GB/s")
    buffer = bytearray(size)
    view = memoryview(buffer)
    chunk = 1 << 20

    def sync_chunks() -> None:
        with open(path, "rb", buffering=0) as f:
            for offset in range(0, size, chunk):
                f.readinto(view[offset : offset + chunk])

    chunked.results["sync readinto loop"] = size / best(sync_chunks, repeat) / 1e9
    if aiofiles:

        async def aio_chunks() -> None:
            async with aiofiles.open(path, "rb", buffering=0) as f:
                for offset in range(0, size, chunk):
                    await f.readinto(view[offset : offset + chunk])

        chunked.results["aiofiles"] = size / best_async(aio_chunks, repeat) / 1e9

    async def asyncfs_chunks() -> None:
        async with await env.new_random_access_file(path) as f:
            for offset in range(0, size, chunk):
                await f.read_into(offset, view[offset : offset + chunk])

    chunked.results["asyncfs read_into loop"] = size / best_async(asyncfs_chunks, repeat) / 1e9
    env.close()
    chunked.target = "≥ 0.8× sync"
    chunked.ratio = chunked.results["asyncfs read_into loop"] / chunked.results["sync readinto loop"]
    chunked.verdict = f"{chunked.ratio:.2f}× sync"
    return whole, chunked


# ---- 3. glob and exists ---------------------------------------------------------------


def bench_glob(root: Path, dirs: int, files: int, repeat: int) -> Row:
    pattern = str(root / "d0*/f*.txt")
    expected = sum(1 for d in range(dirs) if f"d{d:04d}".startswith("d0")) * files
    row = Row(f"glob d0*/f*.txt over {dirs} dirs × {files} files ({expected} matches)", "globs/s")

    def sync_glob() -> None:
        assert len(stdlib_glob.glob(pattern)) == expected

    row.results["glob.glob"] = 1 / best(sync_glob, repeat)
    fsspec = optional("fsspec")
    if fsspec:
        local = fsspec.filesystem("file")
        row.results["fsspec"] = 1 / best(lambda: local.glob(pattern), repeat)
    anyio = optional("anyio")
    if anyio and repeat > 1:  # very slow; once is enough to place it

        async def anyio_glob() -> None:
            [p async for p in anyio.Path(root).glob("d0*/f*.txt")]

        row.results["anyio.Path.glob"] = 1 / best_async(anyio_glob, 1)

    env = started_env()

    async def asyncfs_glob() -> None:
        assert len(await env.glob(pattern)) == expected

    row.results["asyncfs"] = 1 / best_async(asyncfs_glob, repeat)
    env.close()
    c_glob = c_limit("glob", [pattern])
    row.notes.append(describe({"C glob(3)": c_glob}))
    per_path = 1e6 / row.results["asyncfs"] / expected
    row.target = "≥ 1.0× glob.glob, ≤ 3× C glob(3) per path"
    row.ratio = row.results["asyncfs"] / row.results["glob.glob"]
    row.verdict = f"{row.ratio:.2f}× glob.glob; {per_path:.2f} µs a path" + (
        "" if c_glob is None else f", {per_path / c_glob:.2f}× C's"
    )
    return row


def bench_exists(root: Path, dirs: int, files: int, count: int, repeat: int) -> Row:
    half = count // 2
    present = [str(root / f"d{(i // files) % dirs:04d}" / f"f{i % files:03d}.txt") for i in range(half)]
    missing = [str(root / f"d{i % dirs:04d}" / f"missing{i}.txt") for i in range(count - half)]
    paths = [p for pair in zip(present, missing, strict=True) for p in pair]
    row = Row(f"files_exist on {count} paths, half missing", "paths/s")

    def sync_loop() -> None:
        assert sum(os.path.exists(p) for p in paths) == half

    row.results["sync os.path.exists loop"] = count / best(sync_loop, repeat)
    fsspec = optional("fsspec")
    if fsspec:
        local = fsspec.filesystem("file")
        row.results["fsspec exists loop"] = count / best(lambda: [local.exists(p) for p in paths], repeat)
    aiofiles = optional("aiofiles")
    if aiofiles:
        import aiofiles.os

        row.results["aiofiles.os.path.exists"] = count / best_async(
            lambda: bounded(aiofiles.os.path.exists, paths), repeat
        )

    env = started_env()

    async def asyncfs_exists() -> None:
        assert sum(await env.files_exist(paths)) == half

    row.results["asyncfs files_exist"] = count / best_async(asyncfs_exists, repeat)
    env.close()
    c_access = c_limit("exists", paths)
    row.notes.append(describe({"C access(2) loop": c_access}))
    per_path = 1e6 / row.results["asyncfs files_exist"]
    ratio = row.ratio = row.results["sync os.path.exists loop"] / row.results["asyncfs files_exist"]
    row.target = "time ≤ 1.5× the sync loop's, ≤ 3× C access(2) per path"
    row.verdict = f"{ratio:.2f}× the sync loop's time; {per_path:.2f} µs a path" + (
        "" if c_access is None else f", {per_path / c_access:.2f}× C's"
    )
    return row


def bench_stat(root: Path, dirs: int, files: int, count: int, repeat: int) -> Row:
    """stat of count files, a task each (gather) and all in one call
    (stat_files), beside the C stat(2) loop."""
    paths = [str(root / f"d{(i // files) % dirs:04d}" / f"f{i % files:03d}.txt") for i in range(count)]
    row = Row(f"stat on {count} paths, a task each (gather) and all at once", "paths/s")
    row.results["sync os.stat loop"] = count / best(lambda: [os.stat(p) for p in paths], repeat)
    aiofiles = optional("aiofiles")
    if aiofiles:
        import aiofiles.os

        row.results["aiofiles.os.stat"] = count / best_async(
            lambda: asyncio.gather(*(aiofiles.os.stat(p) for p in paths)), repeat
        )
    from asyncfs.aiofiles import os as our_os

    row.results["asyncfs.aiofiles.os.stat"] = count / best_async(
        lambda: asyncio.gather(*(our_os.stat(p) for p in paths)), repeat
    )
    env = started_env()
    row.results["asyncfs env.stat"] = count / best_async(lambda: asyncio.gather(*(env.stat(p) for p in paths)), repeat)
    row.results["asyncfs env.stat_files"] = count / best_async(lambda: env.stat_files(paths), repeat)
    env.close()
    c_stat = c_limit("stat", paths)
    row.notes.append(describe({"C stat(2) loop": c_stat}))
    per_path = {name: 1e6 / rate for name, rate in row.results.items() if name.startswith("asyncfs")}
    row.target = "stat_files ≤ 3× C stat(2) per path (a task each: reported)"
    row.ratio = None if c_stat is None else per_path["asyncfs env.stat_files"] / c_stat
    row.verdict = "; ".join(
        f"{name}: {us:.2f} µs a path" + ("" if c_stat is None else f", {us / c_stat:.2f}× C's")
        for name, us in per_path.items()
    )
    return row
