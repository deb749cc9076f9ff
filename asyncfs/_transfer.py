"""Copies between filesystems: one file streamed in chunks, and whole trees
with their files copied concurrently."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from . import _uri
from ._fallbacks import stream_copy
from .filesystem import ModularFileSystem

if TYPE_CHECKING:
    from .async_filesystem import AsyncModularFileSystem

__all__ = ["Progress", "copy_file", "copy_tree"]

# Told the bytes of each file as it lands (tqdm's ``update`` is one).
Progress = Callable[[int], object]


def _copy_one(
    source: ModularFileSystem, src: str, target: ModularFileSystem, dst: str, chunk: int, *, measure: bool
) -> int:
    """Copy one file; with measure, return the bytes it holds (else 0)."""
    if source is target:
        source.copy_file(src, dst)
    else:
        stream_copy(source, src, target, dst, chunk)
    return target.get_file_size(dst) if measure else 0


def _runner(source: AsyncModularFileSystem, target: AsyncModularFileSystem) -> AsyncModularFileSystem:
    """Whose pool a copy runs on: a network store's, if either is one (its
    calls mostly wait, and its pool has the threads for that)."""
    return target if target.network or not source.network else source


async def copy_file(
    source: AsyncModularFileSystem,
    src: str,
    target: AsyncModularFileSystem,
    dst: str,
    chunk: int,
    *,
    progress: Progress | None = None,
) -> None:
    """Copy one file: natively within a filesystem, streamed in chunks of
    chunk bytes across two, always landing by rename; then progress(its size)."""
    fs_from, fs_to = source.wrapped, target.wrapped
    copy = partial(_copy_one, measure=progress is not None)
    size = await _runner(source, target).run(copy, fs_from, src, fs_to, dst, chunk, mutating=True)
    if progress is not None:
        progress(size)


async def copy_tree(
    source: AsyncModularFileSystem,
    src: str,
    target: AsyncModularFileSystem,
    dst: str,
    chunk: int,
    *,
    progress: Progress | None = None,
) -> None:
    """Copy the tree at src to dst: each level of directories is listed
    concurrently, its directories created, and its files copied
    concurrently, progress told the bytes each level's files hold. Raises
    the first error after every copy was tried."""
    runner = _runner(source, target)
    fs_from, fs_to = source.wrapped, target.wrapped
    await target.makedirs(dst)
    async for directory, dirs, files in source.walk(src):
        relative = directory[len(src) :].lstrip("/")
        here = _uri.join(dst, relative) if relative else dst
        made = await target.run_many(fs_to.recursively_create_dir, [(_uri.join(here, d),) for d in dirs], mutating=True)
        copied = await runner.run_many(
            partial(_copy_one, measure=progress is not None),
            [(fs_from, _uri.join(directory, f), fs_to, _uri.join(here, f), chunk) for f in files],
            mutating=True,
        )
        for result in (*made, *copied):
            if isinstance(result, Exception):
                raise result
        if progress is not None and files:
            progress(sum(size for size in copied if isinstance(size, int)))
