"""The async layer: the worker pool that runs every plugin call off the
event loop (:mod:`.pool`, its backends for asyncio, uvloop and trio
:mod:`.backends`, fan-out :mod:`.fanout`, calls combined into one plugin
call :mod:`.combined`), and :class:`AsyncModularFileSystem`, the async face
of a scheme (:mod:`.filesystem`), with the async driver of the plans
(:mod:`.plans`) and copies within and across filesystems (:mod:`.transfer`);
what each call costs, counted (:mod:`.metrics`) and traced with
OpenTelemetry when the application uses it (:mod:`.telemetry`).
"""

from . import transfer
from .backends import current_loop
from .filesystem import (
    AT_HAND_TURN,
    AsyncModularFileSystem,
    AsyncRandomAccessFile,
    AsyncReadOnlyMemoryRegion,
    AsyncWritableFile,
)
from .metrics import LatencyHistogram, Metrics, OperationStats, operation_stats
from .pool import (
    ALONE,
    Combiner,
    Pending,
    PoolStats,
    Sink,
    WorkerPool,
    call_quietly,
    closed_pool,
    shared_network_pool,
)
from .telemetry import EnvMeters, follow_meters
from .transfer import Progress

__all__ = [
    "ALONE",
    "AT_HAND_TURN",
    "AsyncModularFileSystem",
    "AsyncRandomAccessFile",
    "AsyncReadOnlyMemoryRegion",
    "AsyncWritableFile",
    "Combiner",
    "EnvMeters",
    "LatencyHistogram",
    "Metrics",
    "OperationStats",
    "Pending",
    "PoolStats",
    "Progress",
    "Sink",
    "WorkerPool",
    "call_quietly",
    "closed_pool",
    "current_loop",
    "follow_meters",
    "operation_stats",
    "shared_network_pool",
    "transfer",
]
