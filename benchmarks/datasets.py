"""The data sets the benchmarks read, made once under --data and kept."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncfs

from .harness import started_env


def make_small_files(root: Path, count: int, size: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = root / f"f{i:05d}.bin"
        if not path.exists():
            path.write_bytes(os.urandom(size))
        paths.append(str(path))
    return paths


def make_big_file(path: Path, size: int) -> str:
    if not path.exists() or path.stat().st_size != size:
        block = os.urandom(1 << 20)
        with open(path, "wb") as f:
            for _ in range(size >> 20):
                f.write(block)
    with open(path, "rb") as f:  # warm the page cache
        while f.read(64 << 20):
            pass
    return str(path)


def make_tree(root: Path, dirs: int, files: int) -> None:
    marker = root / ".complete"
    if marker.exists():
        return
    for d in range(dirs):
        directory = root / f"d{d:04d}"
        directory.mkdir(parents=True, exist_ok=True)
        for f in range(files):
            os.close(os.open(directory / f"f{f:03d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    marker.touch()


def make_lines(path: Path, count: int) -> str:
    if not path.exists():
        path.write_text("".join(f"{i},user{i % 977},{'payload' * (i % 7)},ok\n" for i in range(count)))
    return str(path)


def make_tfrecords(path: Path, count: int, size: int) -> str:
    if not path.exists():
        env = started_env()

        async def write() -> None:
            out = await asyncfs.tfrecord.writer(env, str(path))
            async with out:
                for i in range(count):
                    await out.write(i.to_bytes(4, "little") * (size // 4))

        asyncio.run(write())
        env.close()
    return str(path)
