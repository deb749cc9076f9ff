"""Calls made together, sent together: on a network store whose plugin
reads or stats many paths in one call (``read_files``, ``stat_files``: s3
keeps all of a call's requests in flight from one thread), the pool hands
the ``read_file``, ``stat`` and ``write_file`` calls of one loop iteration to these
combiners in groups (see ``pool.Combiner``), so that 64 concurrent
``env.read_file`` calls cost four worker threads, not 64. A lone call runs
as it is; each caller gets its own result or its own error."""

from __future__ import annotations

from typing import Any

from .._sync import ModularFileSystem, scratch
from ..errors import StatusError

__all__ = ["Combiners", "Stats", "WholeReads", "Writes"]

LIMIT = 16  # calls per plugin call: four of them overlap at 64 in flight
# Each file of a combined read gets a SHARE of the buffer; one bigger than
# that is read again on its own, and the next PAUSE read_file calls are
# not combined (a store of big objects pays one wasted request per window).
SHARE = 64 << 10
PAUSE = 256

Outcomes = list[tuple[Any, BaseException | None]]


def _outcomes(items: list[Any]) -> Outcomes:
    return [(None, item) if isinstance(item, StatusError) else (item, None) for item in items]


class WholeReads:
    """Combines ``ModularFileSystem.read_file(uri)`` calls."""

    limit = LIMIT

    def __init__(self, fs: ModularFileSystem) -> None:
        self._fs = fs
        self.paused = 0  # read_file calls left that go alone

    def __call__(self, calls: list[tuple[Any, ...]]) -> Outcomes:
        uris = [str(uri) for (uri,) in calls]
        read, _ = self._fs.read_files(uris, scratch(len(uris) * SHARE))
        return _outcomes([self._alone(uri) if item is None else item for uri, item in zip(uris, read, strict=True)])

    def _alone(self, uri: str) -> bytes | StatusError:
        """A file bigger than its share."""
        self.paused = PAUSE
        try:
            return self._fs.read_file(uri)
        except StatusError as error:
            return error


class Stats:
    """Combines ``ModularFileSystem.stat(uri)`` calls."""

    limit = LIMIT

    def __init__(self, fs: ModularFileSystem) -> None:
        self._fs = fs

    def __call__(self, calls: list[tuple[Any, ...]]) -> Outcomes:
        return _outcomes(list(self._fs.stat_files([str(uri) for (uri,) in calls])))


class Writes:
    """Combines ``partial(write_whole, fs)(uri, data, atomic, attributes)`` calls
    without attributes on a store whose files appear only whole (no
    temporary file and rename to stage): each is written in place."""

    limit = LIMIT

    def __init__(self, fs: ModularFileSystem) -> None:
        self._fs = fs

    def __call__(self, calls: list[tuple[Any, ...]]) -> Outcomes:
        errors = self._fs.write_files([str(call[0]) for call in calls], [call[1] for call in calls])
        return [(None, error) for error in errors]


class Combiners:
    """A filesystem's combiners, where combining pays: a network store
    whose plugin offers the op (elsewhere a call is microseconds, and one
    thread hop per loop iteration already carries them all). None for an
    op that is not combined."""

    def __init__(self, fs: ModularFileSystem) -> None:
        network = fs.metadata.network
        self.read_file = WholeReads(fs) if network and fs.offers("read_files") else None
        self.stat = Stats(fs) if network and fs.offers("stat_files") else None
        in_place = not fs.stages_atomic_writes()
        self.write_file = Writes(fs) if network and in_place and fs.offers("write_files") else None
