"""The async layer: the worker pool that runs every plugin call off the
event loop (:mod:`.pool`, its backends for asyncio, uvloop and trio
:mod:`.backends`, fan-out :mod:`.fanout`, calls combined into one plugin
call :mod:`.combined`), and :class:`AsyncModularFileSystem`, the async face
of a scheme (:mod:`.filesystem`), with the async driver of the plans
(:mod:`.plans`) and copies within and across filesystems (:mod:`.transfer`).
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
from .pool import ALONE, Combiner, Pending, Sink, WorkerPool, call_quietly, closed_pool, shared_network_pool
from .transfer import Progress

__all__ = [
    "ALONE",
    "AT_HAND_TURN",
    "AsyncModularFileSystem",
    "AsyncRandomAccessFile",
    "AsyncReadOnlyMemoryRegion",
    "AsyncWritableFile",
    "Combiner",
    "Pending",
    "Progress",
    "Sink",
    "WorkerPool",
    "call_quietly",
    "closed_pool",
    "current_loop",
    "shared_network_pool",
    "transfer",
]
