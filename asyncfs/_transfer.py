"""Copies between filesystems: one file streamed in chunks, and whole trees
with their files copied concurrently."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _uri
from ._fallbacks import stream_copy
from .filesystem import ModularFileSystem

if TYPE_CHECKING:
    from .async_filesystem import AsyncModularFileSystem

__all__ = ["copy_tree", "stream_copy"]


def _copy_one(source: ModularFileSystem, src: str, target: ModularFileSystem, dst: str, chunk: int) -> None:
    if source is target:
        source.copy_file(src, dst)
    else:
        stream_copy(source, src, target, dst, chunk)


async def copy_tree(
    source: AsyncModularFileSystem, src: str, target: AsyncModularFileSystem, dst: str, chunk: int
) -> None:
    """Copy the tree at src to dst: each level of directories is listed
    concurrently, its directories created, and its files copied
    concurrently. Raises the first error after every copy was tried."""
    pool = target.pool
    await target.makedirs(dst)
    async for directory, dirs, files in source.walk(src):
        relative = directory[len(src) :].lstrip("/")
        here = _uri.join(dst, relative) if relative else dst
        made = await pool.run_many(
            target.sync.recursively_create_dir, [(_uri.join(here, d),) for d in dirs], mutating=True
        )
        copied = await pool.run_many(
            _copy_one,
            [(source.sync, _uri.join(directory, f), target.sync, _uri.join(here, f), chunk) for f in files],
            mutating=True,
        )
        for result in (*made, *copied):
            if isinstance(result, Exception):
                raise result
