"""The synchronous adapter: one :class:`ModularFileSystem` per scheme over a
plugin's tables (:mod:`.filesystem`, its handles :mod:`.files`), with
TensorFlow's fallbacks for the ops a plugin leaves out (:mod:`.fallbacks`),
atomic writes that land by rename (:mod:`.landing`), the algorithms written
once as plans that a sync and an async driver run (:mod:`.plans`), and the
registry of loaded plugins and their schemes (:mod:`.registry`), and what a
network store's requests did (:mod:`.traffic`).
"""

from . import plans
from .entries import PLAIN, EntryKind, FileStatistics, by_statistics
from .fallbacks import stream_copy, write_by_rename
from .files import AheadRead, RandomAccessFile, ReadOnlyMemoryRegion, WritableFile
from .filesystem import IncompleteWrite, ModularFileSystem, TransactionToken, is_secret, option_values
from .landing import Landing, write_whole
from .registry import (
    PluginInfo,
    Registry,
    RegistryRecipe,
    add_load_listener,
    default_registry,
    get_filesystem,
    load_plugin,
)
from .scratch import scratch
from .traffic import StoreTraffic, traffic_of

__all__ = [
    "PLAIN",
    "AheadRead",
    "EntryKind",
    "FileStatistics",
    "IncompleteWrite",
    "Landing",
    "ModularFileSystem",
    "PluginInfo",
    "RandomAccessFile",
    "ReadOnlyMemoryRegion",
    "Registry",
    "RegistryRecipe",
    "StoreTraffic",
    "TransactionToken",
    "WritableFile",
    "add_load_listener",
    "by_statistics",
    "default_registry",
    "get_filesystem",
    "is_secret",
    "load_plugin",
    "option_values",
    "plans",
    "scratch",
    "stream_copy",
    "traffic_of",
    "write_by_rename",
    "write_whole",
]
