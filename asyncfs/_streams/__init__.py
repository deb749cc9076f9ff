"""What is built on a file's bytes: buffered async streams with read-ahead
(:mod:`.streams`), codecs that decode a block at a time
(:mod:`.compression`), lines and records handed to ``async for``
(:mod:`.lines`), TFRecord files (:mod:`.tfrecord`), and concurrent prefetch
under a byte budget (:mod:`.prefetch`). They reach plugins only through
the async layer's public surface.
"""

from . import tfrecord
from .prefetch import Budget, Prefetch, PrefetchRecords, Resolver, prefetch, prefetch_records
from .streams import (
    AT_HAND_MOST,
    AsyncBinaryReader,
    AsyncBinaryWriter,
    AsyncTextReader,
    AsyncTextWriter,
    Opener,
    Stream,
    StreamOpener,
    open_stream,
)

__all__ = [
    "AT_HAND_MOST",
    "AsyncBinaryReader",
    "AsyncBinaryWriter",
    "AsyncTextReader",
    "AsyncTextWriter",
    "Budget",
    "Opener",
    "Prefetch",
    "PrefetchRecords",
    "Resolver",
    "Stream",
    "StreamOpener",
    "open_stream",
    "prefetch",
    "prefetch_records",
    "tfrecord",
]
