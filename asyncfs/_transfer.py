"""Copies between filesystems: one file streamed in chunks, and whole trees
with their files copied concurrently."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _uri
from .async_filesystem import staging_name
from .errors import FailedPreconditionError
from .filesystem import ModularFileSystem

if TYPE_CHECKING:
    from .async_filesystem import AsyncModularFileSystem

__all__ = ["stream_copy", "copy_tree"]


def stream_copy(source: ModularFileSystem, src: str, target: ModularFileSystem, dst: str, chunk: int) -> None:
    """Copy src to dst chunk by chunk (never the whole file in memory) into
    a temporary sibling that is renamed over dst, so a failed copy leaves
    dst as it was."""
    if target.isdir(dst):
        raise FailedPreconditionError("target path is a directory", op="copy", path=dst)
    staged = staging_name(dst) if target.offers("rename_file") else dst
    buffer = bytearray(chunk)
    view = memoryview(buffer)
    with source.new_random_access_file(src) as reader:
        try:
            with target.new_writable_file(staged) as writer:
                offset = 0
                while True:
                    count = reader.read_into(offset, buffer)
                    if count:
                        writer.append(view[:count])
                        offset += count
                    if count < chunk:
                        break
            if staged != dst:
                target.rename_file(staged, dst)
        except BaseException:
            if staged != dst and target.exists(staged):
                target.delete_file(staged)
            raise


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
