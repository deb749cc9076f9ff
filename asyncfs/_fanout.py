"""Concurrent fan-out for the async layer: glob level by level, walk, tree
deletion and tree copies. Each level's directories are handed to the worker
pool together (one batch, split across the workers), so N directories cost
about N / workers round trips, not N.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import _uri
from .errors import StatusError

if TYPE_CHECKING:
    from .async_filesystem import AsyncModularFileSystem

__all__ = ["chunked", "unwrap", "glob", "walk", "delete_tree"]

T = TypeVar("T")
_META = re.compile(r"[*?\[\\]")


def chunked(items: list[T], parts: int, *, minimum: int = 64) -> list[list[T]]:
    """Split items into about parts contiguous chunks of at least minimum
    items (so small lists stay one plugin call)."""
    size = max(minimum, -(-len(items) // max(parts, 1)))
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def unwrap(results: Sequence[T | Exception]) -> list[T]:
    """Results of run_many, raising the first exception among them."""
    for result in results:
        if isinstance(result, Exception):
            raise result
    return list(results)  # type: ignore[arg-type]


async def glob(afs: AsyncModularFileSystem, pattern: str) -> list[str]:
    """Expand pattern one directory level at a time: the matches of each
    wildcard component are found by one plugin glob per directory, all
    directories of a level at once. Results are sorted, as the sync
    adapter's are."""
    fs = afs.sync
    parsed = _uri.parse_uri(pattern)
    parts = parsed.path.split("/")
    wild = [i for i, part in enumerate(parts) if _META.search(part)]
    if len(wild) <= 1 and (not wild or wild[0] == len(parts) - 1):
        # no directory level to fan out over: one plugin call does it
        matches: list[str] = await afs.pool.run(fs.get_matching_paths, pattern, mutating=False)
        return matches
    first = wild[0]
    base = "/".join(parts[:first])
    if not base and parsed.path.startswith("/"):
        base = "/"
    candidates = [parsed.prefix() + base]
    rest = parts[first:]
    for depth, part in enumerate(rest):
        patterns = [_uri.join(directory, part) for directory in candidates]
        if depth < len(rest) - 1 and not _META.search(part):
            candidates = patterns  # a literal level costs no call
            continue
        found = await afs.pool.run_many(fs.get_matching_paths, [(p,) for p in patterns], mutating=False)
        candidates = [match for result in found if not isinstance(result, Exception) for match in result]
        if not candidates:
            return []
    return sorted(candidates)


async def walk(afs: AsyncModularFileSystem, top: str) -> AsyncIterator[tuple[str, list[str], list[str]]]:
    """Level by level, each level's directories scanned concurrently; the
    order is :meth:`ModularFileSystem.walk`'s. Changing dirnames in place
    prunes the walk, as with :func:`os.walk`."""
    level = [top]
    while level:
        listings: list[Any] = await afs.pool.run_many(
            afs.sync.scan_dir, [(directory,) for directory in level], mutating=False
        )
        following: list[str] = []
        for directory, listing in zip(level, listings, strict=True):
            if isinstance(listing, StatusError):
                continue  # unreadable or vanished, as os.walk skips it
            if isinstance(listing, Exception):
                raise listing
            dirs, files = listing
            yield directory, dirs, files
            following += [_uri.join(directory, name) for name in dirs]
        level = following


async def delete_tree(afs: AsyncModularFileSystem, uri: str) -> tuple[int, int]:
    """Delete a tree concurrently for plugins without a native recursive
    delete: every file at once, then directories from the deepest level
    up. Returns (undeleted files, undeleted dirs); raises the first error,
    carrying those counts, when anything stays."""
    fs, pool = afs.sync, afs.pool
    try:
        await pool.run(fs.path_exists, uri, mutating=False)
    except StatusError as exc:
        exc.undeleted = (0, 1)  # type: ignore[attr-defined]
        raise
    if not await pool.run(fs.isdir, uri, mutating=False):
        await pool.run(fs.delete_file, uri, mutating=True)
        return (0, 0)
    levels: list[list[str]] = []
    files: list[str] = []
    async for directory, _, names in walk(afs, uri):
        depth = directory.count("/")
        while len(levels) <= depth:
            levels.append([])
        levels[depth].append(directory)
        files += [_uri.join(directory, name) for name in names]
    errors = [r for r in await pool.run_many(fs.delete_file, [(f,) for f in files], mutating=True) if r is not None]
    undeleted_files = len(errors)
    undeleted_dirs = 0
    for level in reversed(levels):
        failed = [r for r in await pool.run_many(fs.delete_dir, [(d,) for d in level], mutating=True) if r is not None]
        undeleted_dirs += len(failed)
        errors += failed
    if errors:
        first = errors[0]
        assert isinstance(first, Exception)
        first.undeleted = (undeleted_files, undeleted_dirs)  # type: ignore[attr-defined]
        raise first
    return (0, 0)
