"""asyncfs: filesystems as native plugins behind one Python API.

The map of the public API:

- async: :class:`Env` (the entry point), :class:`AsyncModularFileSystem`,
  :class:`AsyncRandomAccessFile`, :class:`AsyncWritableFile`,
  :class:`AsyncReadOnlyMemoryRegion`, :class:`Transaction`
- what an Env measured: ``env.metrics()`` (:class:`Metrics`,
  :class:`OperationStats`, :class:`LatencyHistogram`, :class:`PoolStats`,
  :class:`StoreTraffic`);
  OpenTelemetry spans and metrics when the application sets a provider
- streams, records, prefetch: ``env.open`` (:class:`AsyncBinaryReader`, ...),
  :mod:`asyncfs.tfrecord`, ``env.prefetch`` (:class:`Budget`)
- plugins: :func:`load_plugin`, :class:`Registry`, :func:`get_filesystem`,
  :func:`get_include` (the C header's folder for building plugins)
- the synchronous adapter: :class:`ModularFileSystem`, :class:`FileStatistics`, :class:`EntryKind`,
  :class:`IncompleteWrite`,
  :class:`RandomAccessFile`, :class:`WritableFile`,
  :class:`ReadOnlyMemoryRegion`, :class:`Option`
- errors: :class:`AsyncFSError` and the rest of :mod:`asyncfs.errors`
- the data stack: :mod:`asyncfs.fsspec` (fsspec protocols ``asyncfs+<scheme>``
  for pandas, pyarrow, Dask; needs ``asyncfs[fsspec]``) and
  :mod:`asyncfs.upath` (universal-pathlib)
- aiofiles's API, as a drop-in: :mod:`asyncfs.aiofiles` (``from asyncfs
  import aiofiles``: ``open``, ``os``, ``ospath``, ``tempfile``)
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from .errors import (
    AbandonedOperationWarning,
    ABIMismatchError,
    AbortedError,
    AlreadyExistsError,
    AsyncFSError,
    Code,
    CoreABIRangeError,
    DataLossError,
    DeadlineExceededError,
    DirectoryNotEmptyError,
    EnvClosedError,
    FailedPreconditionError,
    IgnoredOptionWarning,
    InternalError,
    InvalidArgumentError,
    InvalidSchemeError,
    MissingAllocatorError,
    MissingEntryPointError,
    MissingOperationError,
    MissingTableError,
    NotFoundError,
    OperationCancelledError,
    OutOfRangeError,
    PathIsDirectoryError,
    PathNotDirectoryError,
    PermissionDeniedError,
    PluginAPIMismatchWarning,
    PluginError,
    PluginInitError,
    PluginOpenError,
    ResourceExhaustedError,
    SchemeAlreadyRegisteredError,
    StatusError,
    TransactionConflictError,
    TransactionStateError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    UnknownSchemeError,
)

if TYPE_CHECKING:  # what the lazy attributes below resolve to
    from . import tfrecord
    from ._async import (
        AsyncModularFileSystem,
        AsyncRandomAccessFile,
        AsyncReadOnlyMemoryRegion,
        AsyncWritableFile,
        LatencyHistogram,
        Metrics,
        OperationStats,
        PoolStats,
    )
    from ._native import Option
    from ._native.libraries import get_include
    from ._plugins import PluginMetadata, core_abi_version
    from ._streams import AsyncBinaryReader, AsyncBinaryWriter, AsyncTextReader, AsyncTextWriter, Budget
    from ._streams.tfrecord import TFRecordCorruptionError
    from ._sync import (
        EntryKind,
        FileStatistics,
        IncompleteWrite,
        ModularFileSystem,
        PluginInfo,
        RandomAccessFile,
        ReadOnlyMemoryRegion,
        Registry,
        StoreTraffic,
        WritableFile,
        default_registry,
        get_filesystem,
        load_plugin,
    )
    from ._transactions import Transaction
    from .env import Env

# Everything but the exceptions is imported on first use: ``import asyncfs``
# stays cheap (the C header is parsed, and the runtime loaded, only when a
# filesystem is first needed).
_LAZY = {
    "tfrecord": (".tfrecord", None),
    "get_include": ("._native.libraries", "get_include"),
    "PluginMetadata": ("._plugins.loader", "PluginMetadata"),
    "core_abi_version": ("._plugins.loader", "core_abi_version"),
    "Option": ("._native.marshal", "Option"),
    "AsyncModularFileSystem": ("._async.filesystem", "AsyncModularFileSystem"),
    "AsyncRandomAccessFile": ("._async.filesystem", "AsyncRandomAccessFile"),
    "AsyncReadOnlyMemoryRegion": ("._async.filesystem", "AsyncReadOnlyMemoryRegion"),
    "AsyncWritableFile": ("._async.filesystem", "AsyncWritableFile"),
    "Env": (".env", "Env"),
    "Metrics": ("._async.metrics", "Metrics"),
    "OperationStats": ("._async.metrics", "OperationStats"),
    "LatencyHistogram": ("._async.metrics", "LatencyHistogram"),
    "PoolStats": ("._async.pool", "PoolStats"),
    "StoreTraffic": ("._sync.traffic", "StoreTraffic"),
    "RandomAccessFile": ("._sync.files", "RandomAccessFile"),
    "ReadOnlyMemoryRegion": ("._sync.files", "ReadOnlyMemoryRegion"),
    "WritableFile": ("._sync.files", "WritableFile"),
    "EntryKind": ("._sync.filesystem", "EntryKind"),
    "FileStatistics": ("._sync.filesystem", "FileStatistics"),
    "IncompleteWrite": ("._sync.filesystem", "IncompleteWrite"),
    "ModularFileSystem": ("._sync.filesystem", "ModularFileSystem"),
    "Budget": ("._streams.prefetch", "Budget"),
    "PluginInfo": ("._sync.registry", "PluginInfo"),
    "Registry": ("._sync.registry", "Registry"),
    "default_registry": ("._sync.registry", "default_registry"),
    "get_filesystem": ("._sync.registry", "get_filesystem"),
    "load_plugin": ("._sync.registry", "load_plugin"),
    "AsyncBinaryReader": ("._streams.streams", "AsyncBinaryReader"),
    "AsyncBinaryWriter": ("._streams.streams", "AsyncBinaryWriter"),
    "AsyncTextReader": ("._streams.streams", "AsyncTextReader"),
    "AsyncTextWriter": ("._streams.streams", "AsyncTextWriter"),
    "TFRecordCorruptionError": ("._streams.tfrecord", "TFRecordCorruptionError"),
    "Transaction": ("._transactions.transaction", "Transaction"),
}


def __getattr__(name: str) -> Any:
    if name == "CancelledError":  # the old name, deprecated: it is not asyncio's
        return getattr(importlib.import_module(".errors", __name__), name)
    try:
        module_name, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'asyncfs' has no attribute {name!r}") from None
    module = importlib.import_module(module_name, __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    # async
    "Env",
    "AsyncModularFileSystem",
    "AsyncRandomAccessFile",
    "AsyncReadOnlyMemoryRegion",
    "AsyncWritableFile",
    "Transaction",
    # what an Env measured (Env.metrics)
    "Metrics",
    "OperationStats",
    "LatencyHistogram",
    "PoolStats",
    "StoreTraffic",
    # streams, records, prefetch
    "AsyncBinaryReader",
    "AsyncBinaryWriter",
    "AsyncTextReader",
    "AsyncTextWriter",
    "Budget",
    "TFRecordCorruptionError",
    "tfrecord",
    # plugins
    "PluginInfo",
    "PluginMetadata",
    "Registry",
    "core_abi_version",
    "default_registry",
    "get_filesystem",
    "get_include",
    "load_plugin",
    # the synchronous adapter
    "EntryKind",
    "FileStatistics",
    "IncompleteWrite",
    "ModularFileSystem",
    "Option",
    "RandomAccessFile",
    "ReadOnlyMemoryRegion",
    "WritableFile",
    # errors
    "AsyncFSError",
    "AbandonedOperationWarning",
    "Code",
    "StatusError",
    "AbortedError",
    "AlreadyExistsError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "PathIsDirectoryError",
    "PathNotDirectoryError",
    "DirectoryNotEmptyError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OperationCancelledError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "UnknownSchemeError",
    "TransactionConflictError",
    "TransactionStateError",
    "EnvClosedError",
    "PluginError",
    "PluginOpenError",
    "MissingEntryPointError",
    "MissingAllocatorError",
    "InvalidSchemeError",
    "ABIMismatchError",
    "MissingOperationError",
    "MissingTableError",
    "PluginInitError",
    "CoreABIRangeError",
    "SchemeAlreadyRegisteredError",
    "IgnoredOptionWarning",
    "PluginAPIMismatchWarning",
]

# A library's loggers stay silent until the application configures logging
# (docs/observability.md): asyncfs, and a child per area (asyncfs.pool,
# asyncfs.plugins, asyncfs.transactions, asyncfs.s3, asyncfs.az, ...).
logging.getLogger(__name__).addHandler(logging.NullHandler())
