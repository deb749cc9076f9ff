"""asyncfs: filesystems as native plugins behind one Python API.

The map of the public API:

- async: :class:`Env` (the entry point), :class:`AsyncModularFileSystem`,
  :class:`AsyncRandomAccessFile`, :class:`AsyncWritableFile`,
  :class:`AsyncReadOnlyMemoryRegion`, :class:`Transaction`
- streams, records, prefetch: ``env.open`` (:class:`AsyncBinaryReader`, ...),
  :mod:`asyncfs.tfrecord`, ``env.prefetch`` (:class:`Budget`)
- plugins: :func:`load_plugin`, :class:`Registry`, :func:`get_filesystem`,
  :func:`get_include` (the C header's folder for building plugins)
- the synchronous adapter: :class:`ModularFileSystem`, :class:`FileStatistics`,
  :class:`RandomAccessFile`, :class:`WritableFile`,
  :class:`ReadOnlyMemoryRegion`, :class:`Option`
- errors: :class:`AsyncFSError` and the rest of :mod:`asyncfs.errors`
"""

from __future__ import annotations

from . import tfrecord
from ._libs import get_include
from ._loader import PluginMetadata, core_abi_version
from ._marshal import Option
from .async_filesystem import (
    AsyncModularFileSystem,
    AsyncRandomAccessFile,
    AsyncReadOnlyMemoryRegion,
    AsyncWritableFile,
)
from .env import Env
from .errors import (
    ABIMismatchError,
    AbortedError,
    AlreadyExistsError,
    AsyncFSError,
    CancelledError,
    Code,
    CoreABIRangeError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    InvalidSchemeError,
    MissingAllocatorError,
    MissingEntryPointError,
    MissingOperationError,
    MissingTableError,
    NotFoundError,
    OutOfRangeError,
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
from .files import RandomAccessFile, ReadOnlyMemoryRegion, WritableFile
from .filesystem import FileStatistics, ModularFileSystem
from .prefetch import Budget
from .registry import PluginInfo, Registry, default_registry, get_filesystem, load_plugin
from .streams import AsyncBinaryReader, AsyncBinaryWriter, AsyncTextReader, AsyncTextWriter
from .tfrecord import TFRecordCorruptionError
from .transactions import Transaction

__version__ = "0.1.0"

__all__ = [
    # async
    "Env",
    "AsyncModularFileSystem",
    "AsyncRandomAccessFile",
    "AsyncReadOnlyMemoryRegion",
    "AsyncWritableFile",
    "Transaction",
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
    "FileStatistics",
    "ModularFileSystem",
    "Option",
    "RandomAccessFile",
    "ReadOnlyMemoryRegion",
    "WritableFile",
    # errors
    "AsyncFSError",
    "Code",
    "StatusError",
    "AbortedError",
    "AlreadyExistsError",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
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
    "PluginAPIMismatchWarning",
]
