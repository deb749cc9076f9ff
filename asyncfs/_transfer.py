"""Copies between filesystems: one file streamed in chunks, and whole trees
with their files copied concurrently."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _uri
from ._fallbacks import stream_copy
from .filesystem import ModularFileSystem

if TYPE_CHECKING:
    from .async_filesystem import AsyncModularFileSystem

__all__ = ["copy_file", "copy_tree"]


def _copy_one(source: ModularFileSystem, src: str, target: ModularFileSystem, dst: str, chunk: int) -> None:
    if source is target:
        source.copy_file(src, dst)
    else:
        stream_copy(source, src, target, dst, chunk)


def _runner(source: AsyncModularFileSystem, target: AsyncModularFileSystem) -> AsyncModularFileSystem:
    """Whose pool a copy runs on: a network store's, if either is one (its
    calls mostly wait, and its pool has the threads for that)."""
    return target if target.network or not source.network else source


async def copy_file(
    source: AsyncModularFileSystem, src: str, target: AsyncModularFileSystem, dst: str, chunk: int
) -> None:
    """Copy one file: natively within a filesystem, streamed in chunks of
    chunk bytes across two, always landing by rename."""
    fs_from, fs_to = source.wrapped, target.wrapped
    await _runner(source, target).run(_copy_one, fs_from, src, fs_to, dst, chunk, mutating=True)


async def copy_tree(
    source: AsyncModularFileSystem, src: str, target: AsyncModularFileSystem, dst: str, chunk: int
) -> None:
    """Copy the tree at src to dst: each level of directories is listed
    concurrently, its directories created, and its files copied
    concurrently. Raises the first error after every copy was tried."""
    runner = _runner(source, target)
    fs_from, fs_to = source.wrapped, target.wrapped
    await target.makedirs(dst)
    async for directory, dirs, files in source.walk(src):
        relative = directory[len(src) :].lstrip("/")
        here = _uri.join(dst, relative) if relative else dst
        made = await target.run_many(fs_to.recursively_create_dir, [(_uri.join(here, d),) for d in dirs], mutating=True)
        copied = await runner.run_many(
            _copy_one,
            [(fs_from, _uri.join(directory, f), fs_to, _uri.join(here, f), chunk) for f in files],
            mutating=True,
        )
        for result in (*made, *copied):
            if isinstance(result, Exception):
                raise result
