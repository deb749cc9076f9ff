"""What a network store's requests did: :class:`StoreTraffic`, as the
object-store engine counts it (plugins/objstore, the read-only option
``traffic`` of s3, gs and az)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import StatusError

if TYPE_CHECKING:
    from .filesystem import ModularFileSystem

__all__ = ["StoreTraffic", "traffic_of"]


@dataclass(frozen=True)
class StoreTraffic:
    """A store's ``requests`` sent (each try of each, retries included),
    tries ``retried`` (their answer, 408, 429, 5xx or a reset connection,
    was worth another), requests that ``failed`` for good, ``connections``
    opened, and the bytes sent and received, since its filesystem started."""

    requests: int
    retried: int
    failed: int
    connections: int
    bytes_sent: int
    bytes_received: int


def traffic_of(fs: ModularFileSystem) -> StoreTraffic | None:
    """What fs's engine counted, or None when its plugin counts nothing (a
    local filesystem, a plugin not built on the engine). A quick call into
    C (counters read, no request): safe on the event loop's thread."""
    if not fs.metadata.network:
        return None
    try:
        values = fs.get_option("traffic").values
    except StatusError:  # not an option of this plugin
        return None
    if len(values) < 6 or not all(isinstance(v, int) for v in values):
        return None
    requests, retried, failed, connections, sent, received = (int(v) for v in values[:6])
    return StoreTraffic(requests, retried, failed, connections, sent, received)
