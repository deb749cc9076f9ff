"""What a directory entry is: its statistics, as ``stat`` gives them, and
its kind, its link not followed, as a plugin's ``get_children_kinds``
reports it (the ABI's ``ASYNCFS_ENTRY_*``). Below both the adapter and the
plans that walk trees, which need them."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["PLAIN", "EntryKind", "FileStatistics", "by_statistics"]


@dataclass(frozen=True)
class FileStatistics:
    """What :meth:`~asyncfs.ModularFileSystem.stat` reports."""

    length: int
    mtime_nsec: int
    is_directory: bool


S = TypeVar("S", bound=FileStatistics)


class EntryKind(enum.IntEnum):
    """What a directory entry is itself, its link not followed
    (:meth:`~asyncfs.ModularFileSystem.get_children_kinds`)."""

    FILE = 0
    DIRECTORY = 1
    LINK = 2  # a symbolic link, to anything or nothing
    OTHER = 3  # a FIFO, a socket, a device


# The kinds a tree copy copies by content (the others it recreates).
PLAIN = frozenset({EntryKind.FILE, EntryKind.DIRECTORY})


def by_statistics(entries: Iterable[tuple[str, S]]) -> list[tuple[str, S, EntryKind]]:
    """The kinds of entries from a plugin that keeps no links or special
    files: a directory or a file, as the statistics say."""
    return [(name, stats, EntryKind.DIRECTORY if stats.is_directory else EntryKind.FILE) for name, stats in entries]
