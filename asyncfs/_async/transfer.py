"""Copies between filesystems: one file streamed in chunks, and whole trees
with their files copied concurrently."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from .. import _uri
from .._sync import ModularFileSystem, stream_copy
from .._sync import plans as _plans
from ..errors import InvalidArgumentError
from . import plans as _driver

if TYPE_CHECKING:
    from .filesystem import AsyncModularFileSystem

__all__ = ["Progress", "copy_file", "copy_tree"]

_log = logging.getLogger("asyncfs.copy")

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
    concurrently, progress told the bytes each level's files hold. As
    ``cp -r``: a link (to a folder too) is copied as a link and a FIFO as
    a FIFO, never followed or read, where the target is the source's
    filesystem; a target that cannot hold them (another scheme) leaves them
    out, saying so in the ``asyncfs.copy`` log; and a destination inside
    the source is refused. Raises the first error after every copy was tried."""
    await _refuse_into_itself(source, src, target, dst)
    runner = _runner(source, target)
    fs_from, fs_to = source.wrapped, target.wrapped
    recreate = _same_filesystem(source, target) and fs_from.offers("copy_entry")
    await target.makedirs(dst)
    async for directory, dirs, files, special in _driver.iterate(source, _plans.walk(src, kinds=True)):
        relative = directory[len(src) :].lstrip("/")
        here = _uri.join(dst, relative) if relative else dst
        made = await target.run_many(fs_to.recursively_create_dir, [(_uri.join(here, d),) for d in dirs], mutating=True)
        plain = [f for f in files if f not in special]
        copied = await runner.run_many(
            partial(_copy_one, measure=progress is not None),
            [(fs_from, _uri.join(directory, f), fs_to, _uri.join(here, f), chunk) for f in plain],
            mutating=True,
        )
        recreated: list[object] = []
        if recreate:
            pairs = [(_uri.join(directory, f), _uri.join(here, f)) for f in special]
            recreated = await target.run_many(fs_to.copy_entry, pairs, mutating=True)
        else:
            for name, kind in special.items():
                what = kind.name.lower()
                _log.warning("not copied: %s is a %s, which %s cannot hold", _uri.join(directory, name), what, here)
        for result in (*made, *copied, *recreated):
            if isinstance(result, Exception):
                raise result
        if progress is not None and plain:
            progress(sum(size for size in copied if isinstance(size, int)))


def _same_filesystem(source: AsyncModularFileSystem, target: AsyncModularFileSystem) -> bool:
    """Whether two filesystems are one plugin's (``file://`` and bare paths)."""
    return source.wrapped.metadata.library == target.wrapped.metadata.library


async def _refuse_into_itself(
    source: AsyncModularFileSystem, src: str, target: AsyncModularFileSystem, dst: str
) -> None:
    """InvalidArgumentError when dst is src or inside it, on one plugin: the
    copy would walk into what it writes (cp: "cannot copy a directory into
    itself"). Paths as the plugin names them, a relative one from the
    working directory."""
    if not _same_filesystem(source, target):
        return
    names = []
    for fs, uri in ((source, src), (target, dst)):
        name = await fs.translate_name(uri)
        names.append(name if name.startswith("/") or fs.network else os.path.abspath(name))
    origin, destination = (name.rstrip("/") or "/" for name in names)
    if destination == origin or destination.startswith(origin.rstrip("/") + "/"):
        raise InvalidArgumentError("cannot copy a directory into itself", op="copy", path=f"{src} -> {dst}")
