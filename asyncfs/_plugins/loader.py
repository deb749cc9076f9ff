"""Opening a plugin library, validating what its TF_InitPlugin reports, and
turning each scheme into ready-to-use, core-owned operation tables.

Validation follows TensorFlow's, in order: both allocators; an ops array
(non-NULL, readable) with 1 to :data:`MAX_SCHEMES` entries; per scheme a
readable scheme that a URI can carry (RFC 3986, or "" for bare paths), each
supplied table readable, its ABI (an API difference warns and
loads), the filesystem table with init and cleanup, cleanup in each file
table, data and length in the memory-region table, no constructor without its
table; then the plugin metadata's core ABI range. Tables are copied as
min(plugin size, core size) into zeroed core memory, so plugins built against
older or newer headers load and entries they lack read as NULL ("not
offered"). Every refusal raises before any filesystem is initialised; a
failing init cleans up the schemes initialised before it.

A plugin's answer is read as untrusted: every pointer is probed with the
kernel before it is dereferenced (an unmapped one is a typed refusal, not a
crash), and what a refused plugin allocated is not freed, since a garbage
pointer must not reach free(); refused plugins leak those few bytes.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .. import _uri
from .._native import CData, ffi
from .._native import binding as _ffi
from .._native import logs as _logs
from ..errors import (
    ABIMismatchError,
    CoreABIRangeError,
    InvalidSchemeError,
    MissingAllocatorError,
    MissingEntryPointError,
    MissingOperationError,
    MissingTableError,
    PluginAPIMismatchWarning,
    PluginInitError,
    PluginOpenError,
)
from . import copies as _plugin_copy

__all__ = [
    "MAX_SCHEMES",
    "LoadedPlugin",
    "PluginMetadata",
    "SchemeTables",
    "core_abi_version",
    "init_filesystem",
    "init_filesystems",
    "open_plugin",
]

# More schemes than this in one plugin is a corrupt count, not a plugin.
MAX_SCHEMES = 64
_MAX_SCHEME_LENGTH = 64

# Libraries are never unloaded: their code backs every table we copied.
_libraries: list[Any] = []


def core_abi_version() -> int:
    """ASYNCFS_CORE_ABI_VERSION of this core, checked against plugin metadata."""
    return int(_ffi.runtime().ASYNCFS_CORE_ABI_VERSION)


@dataclass(frozen=True)
class PluginMetadata:
    """What a plugin says about itself (asyncfs's optional metadata export);
    a TensorFlow plugin without it is named after its library file."""

    name: str
    version: str | None
    author: str | None
    bug_report_url: str | None
    min_core_abi: int | None
    max_core_abi: int | None
    library: str
    has_metadata: bool
    # The content of a writable file appears only at a successful close
    # (ASYNCFS_PLUGIN_ATOMIC_WRITES): no temporary-and-rename is needed.
    atomic_writes: bool = False
    # Calls wait on a network (ASYNCFS_PLUGIN_NETWORK): the Env runs them on
    # its pool for network stores.
    network: bool = False


@dataclass(frozen=True)
class _Table:
    """One of the four ops tables a scheme supplies, with its versions."""

    attr: str  # e.g. "filesystem_ops"
    ctype: str  # e.g. "TF_FilesystemOps"
    abi_const: str
    api_const: str


_TABLES = (
    _Table("filesystem_ops", "TF_FilesystemOps", "TF_FILESYSTEM_OPS_ABI", "TF_FILESYSTEM_OPS_API"),
    _Table(
        "random_access_file_ops",
        "TF_RandomAccessFileOps",
        "TF_RANDOM_ACCESS_FILE_OPS_ABI",
        "TF_RANDOM_ACCESS_FILE_OPS_API",
    ),
    _Table("writable_file_ops", "TF_WritableFileOps", "TF_WRITABLE_FILE_OPS_ABI", "TF_WRITABLE_FILE_OPS_API"),
    _Table(
        "read_only_memory_region_ops",
        "TF_ReadOnlyMemoryRegionOps",
        "TF_READ_ONLY_MEMORY_REGION_OPS_ABI",
        "TF_READ_ONLY_MEMORY_REGION_OPS_API",
    ),
)

# constructor op -> the table it needs
_CONSTRUCTORS = {
    "new_random_access_file": "random_access_file_ops",
    "new_writable_file": "writable_file_ops",
    "new_appendable_file": "writable_file_ops",
    "new_read_only_memory_region_from_file": "read_only_memory_region_ops",
}

_REQUIRED = {
    "filesystem_ops": ("init", "cleanup"),
    "random_access_file_ops": ("cleanup",),
    "writable_file_ops": ("cleanup",),
    "read_only_memory_region_ops": ("cleanup", "data", "length"),
}


@dataclass
class SchemeTables:
    """Core-owned copies of one scheme's tables (None where not supplied)
    and its initialised filesystem."""

    scheme: str
    filesystem_ops: CData
    random_access_file_ops: CData | None
    writable_file_ops: CData | None
    read_only_memory_region_ops: CData | None
    api_versions: dict[str, int]
    filesystem: CData = field(default=None)


@dataclass
class LoadedPlugin:
    metadata: PluginMetadata
    memory_free: CData
    schemes: list[SchemeTables]


def _string(ptr: CData) -> str | None:
    """A metadata string, or None when NULL or unreadable."""
    length = int(_ffi.runtime().ASYNCFS_SafeStrnlen(ptr, 4096)) if ptr != ffi.NULL else -1
    return None if length < 0 else ffi.unpack(ptr, length).decode("utf-8", "replace")


def _symbol(lib: Any, name: str) -> Any:
    """What lib exports as name, or None. (cffi's error for a missing
    symbol differs by mode, and a refusal raised while handling it would
    carry it as its __context__, which no other process can unpickle:
    tblib, as Dask uses it, pickles the context.)"""
    try:
        return getattr(lib, name)
    except (AttributeError, ffi.error):
        return None


def _read_metadata(lib: Any, library: str) -> PluginMetadata:
    getter = _symbol(lib, "ASYNCFS_GetPluginMetadata")
    raw = getter() if getter is not None else ffi.NULL
    if raw != ffi.NULL and not _ffi.runtime().ASYNCFS_Readable(raw, ffi.sizeof("size_t")):
        raise PluginOpenError(
            "ASYNCFS_GetPluginMetadata returned memory that cannot be read", item="metadata", library=library
        )
    if raw == ffi.NULL:
        name = os.path.basename(library)
        return PluginMetadata(name, None, None, None, None, None, library, False)
    core = ffi.new("ASYNCFS_PluginMetadata*")
    size = min(int(raw.struct_size), ffi.sizeof("ASYNCFS_PluginMetadata"))
    if not _ffi.runtime().ASYNCFS_Readable(raw, size):
        raise PluginOpenError("the plugin metadata cannot be read", item="metadata", library=library)
    ffi.memmove(core, raw, size)
    has_range = int(raw.struct_size) >= ffi.offsetof("ASYNCFS_PluginMetadata", "max_core_abi") + ffi.sizeof("int")
    return PluginMetadata(
        name=_string(core.name) or os.path.basename(library),
        version=_string(core.version),
        author=_string(core.author),
        bug_report_url=_string(core.bug_report_url),
        min_core_abi=int(core.min_core_abi) if has_range else None,
        max_core_abi=int(core.max_core_abi) if has_range else None,
        library=library,
        has_metadata=True,
        atomic_writes=bool(int(core.flags) & int(_ffi.runtime().ASYNCFS_PLUGIN_ATOMIC_WRITES)),
        network=bool(int(core.flags) & int(_ffi.runtime().ASYNCFS_PLUGIN_NETWORK)),
    )


def _copy_table(ops: CData, table: _Table, where: dict[str, Any]) -> CData | None:
    plugin_table = getattr(ops, table.attr)
    if plugin_table == ffi.NULL:
        return None
    core_table = ffi.new(f"{table.ctype}*")
    size = min(int(getattr(ops, f"{table.attr}_size")), ffi.sizeof(table.ctype))
    if not _ffi.runtime().ASYNCFS_Readable(plugin_table, size):
        raise MissingTableError(f"{table.attr} points to memory that cannot be read", item=table.attr, **where)
    ffi.memmove(core_table, plugin_table, size)
    return core_table


def _read_scheme(ops: CData, where: dict[str, Any]) -> str:
    if ops.scheme == ffi.NULL:
        raise InvalidSchemeError("scheme is NULL", item="scheme", **where)
    length = int(_ffi.runtime().ASYNCFS_SafeStrnlen(ops.scheme, _MAX_SCHEME_LENGTH + 1))
    if length < 0:
        raise InvalidSchemeError("scheme points to memory that cannot be read", item="scheme", **where)
    scheme: str = ffi.unpack(ops.scheme, length).decode("utf-8", "replace")
    if length > _MAX_SCHEME_LENGTH or not _uri.is_scheme(scheme):
        raise InvalidSchemeError(
            f"scheme {scheme[:_MAX_SCHEME_LENGTH]!r} is not a URI scheme (RFC 3986: a letter, then letters, "
            "digits, '+', '-' or '.'), so no URI could reach it",
            item="scheme",
            **where,
        )
    return scheme


def _validate_scheme(ops: CData, where: dict[str, Any]) -> SchemeTables:
    rt = _ffi.runtime()
    scheme = _read_scheme(ops, where)
    where = {**where, "scheme": scheme}

    api_versions: dict[str, int] = {}
    copies: dict[str, CData | None] = {}
    other_apis: list[str] = []
    for table in _TABLES:
        if getattr(ops, table.attr) == ffi.NULL:
            copies[table.attr] = None
            continue
        abi, core_abi = int(getattr(ops, f"{table.attr}_abi")), getattr(rt, table.abi_const)
        if abi != core_abi:
            raise ABIMismatchError(
                f"{table.attr} is built for ABI {abi}, the core speaks ABI {core_abi}",
                item=f"{table.attr}_abi",
                **where,
            )
        api, core_api = int(getattr(ops, f"{table.attr}_api")), getattr(rt, table.api_const)
        api_versions[table.attr] = api
        if api != core_api:
            other_apis.append(f"{table.attr} is built for API {api}, the core has API {core_api}")
        copies[table.attr] = _copy_table(ops, table, where)
    if other_apis:  # one warning for the scheme (a TensorFlow plugin's tables differ in two)
        warnings.warn(
            f"plugin {where['library']}, scheme {scheme!r}: {'; '.join(other_apis)}; loading it, "
            "with entries past its tables' sizes treated as not offered",
            PluginAPIMismatchWarning,
            stacklevel=4,
        )

    if copies["filesystem_ops"] is None:
        raise MissingTableError("no filesystem ops table", item="filesystem_ops", **where)
    for attr, required in _REQUIRED.items():
        table_copy = copies[attr]
        if table_copy is None:
            continue
        for op in required:
            if getattr(table_copy, op) == ffi.NULL:
                raise MissingOperationError(f"{attr}.{op} is required but NULL", item=f"{attr}.{op}", **where)
    fs_ops = copies["filesystem_ops"]
    for constructor, needed in _CONSTRUCTORS.items():
        if getattr(fs_ops, constructor) != ffi.NULL and copies[needed] is None:
            raise MissingTableError(f"filesystem_ops.{constructor} is offered without {needed}", item=needed, **where)
    return SchemeTables(
        scheme=scheme,
        filesystem_ops=fs_ops,
        random_access_file_ops=copies["random_access_file_ops"],
        writable_file_ops=copies["writable_file_ops"],
        read_only_memory_region_ops=copies["read_only_memory_region_ops"],
        api_versions=api_versions,
    )


def _free_plugin_allocations(info: CData) -> None:
    """Free what TF_InitPlugin allocated for the core to read (each scheme
    string, each table and the ops array), once all of it validated."""
    free = info.plugin_memory_free
    for i in range(int(info.num_schemes)):
        ops = info.ops[i]
        for ptr in (ops.scheme, *(getattr(ops, t.attr) for t in _TABLES)):
            if ptr != ffi.NULL:
                free(ptr)
    free(info.ops)


def _validate_info(info: CData, where: dict[str, Any]) -> list[SchemeTables]:
    for allocator in ("plugin_memory_allocate", "plugin_memory_free"):
        if getattr(info, allocator) == ffi.NULL:
            raise MissingAllocatorError(f"{allocator} is not set", item=allocator, **where)
    count = int(info.num_schemes)
    if count == 0:
        raise InvalidSchemeError("registers no scheme (num_schemes is 0)", item="num_schemes", **where)
    if count > MAX_SCHEMES:
        raise InvalidSchemeError(
            f"num_schemes is {count}, more than the {MAX_SCHEMES} a plugin may register", item="num_schemes", **where
        )
    if info.ops == ffi.NULL:
        raise MissingTableError("ops is NULL", item="ops", **where)
    if not _ffi.runtime().ASYNCFS_Readable(info.ops, count * ffi.sizeof("TF_FilesystemPluginOps")):
        raise MissingTableError(f"ops cannot be read as {count} scheme entries", item="ops", **where)
    return [_validate_scheme(info.ops[i], where) for i in range(count)]


def _check_core_abi(metadata: PluginMetadata, where: dict[str, Any]) -> None:
    low, high = metadata.min_core_abi, metadata.max_core_abi
    if low is None or high is None:
        return
    core = core_abi_version()
    if not low <= core <= high:
        raise CoreABIRangeError(
            f"supports core ABI {low}..{high}, this core is ABI {core}",
            item="min_core_abi/max_core_abi",
            **where,
        )


def _open_flags() -> int:
    """How plugins are opened: resolved now, private, and deep-bound unless
    :func:`_not_deep_because` says why not."""
    flags: int = ffi.RTLD_NOW | ffi.RTLD_LOCAL
    return flags if _not_deep_because() else flags | ffi.RTLD_DEEPBIND


@cache
def _not_deep_because() -> str | None:
    """Why plugins cannot be deep-bound here (glibc's RTLD_DEEPBIND); None
    when they can.

    Deep binding makes a plugin, and each library it brings in, use the
    libraries it was linked against before any the process already exports.
    TensorFlow exports its own BoringSSL, curl and zlib from
    libtensorflow_framework.so.2, loaded RTLD_GLOBAL. Without deep binding, a
    plugin opened after it that links OpenSSL and libcurl calls TensorFlow's
    copies instead, of every function BoringSSL also has.

    It is not safe when the process's malloc is not libc's (jemalloc or
    tcmalloc preloaded, a sanitizer runtime): a deep-bound plugin would
    free() with libc what the runtime allocated with the process's malloc
    (TF_GetTempFileName). Sanitizer runtimes also abort on RTLD_DEEPBIND."""
    if not hasattr(ffi, "RTLD_DEEPBIND"):
        return "this platform has no RTLD_DEEPBIND"
    process, libc = ctypes.CDLL(None), ctypes.CDLL("libc.so.6")
    if hasattr(process, "__sanitizer_set_report_path"):
        return "a sanitizer runtime is loaded"
    if ctypes.cast(process.free, ctypes.c_void_p).value != ctypes.cast(libc.free, ctypes.c_void_p).value:
        return "the process's malloc is not libc's"
    return None


def binding() -> str:
    """How plugins are bound to the libraries they link, in words."""
    why = _not_deep_because()
    if why is None:
        return "deep (RTLD_DEEPBIND): each uses the libraries it links before any the process exports"
    return f"as usual, not deep: {why}"


def _open(path: str) -> Any:
    """Open a library for good (plugins are never unloaded)."""
    lib = ffi.dlopen(path, _open_flags())
    _libraries.append(lib)
    return lib


def open_plugin(library: str) -> LoadedPlugin:
    """Load a plugin library and validate every scheme it provides, without
    initialising any filesystem yet (see :func:`init_filesystems`)."""
    where: dict[str, Any] = {"library": library}
    _logs.forward()  # what the plugin logs, from its init on, reaches Python's logging
    try:
        # a private copy bound to the runtime, globally visible first (copies.py)
        with _plugin_copy.loadable(library, _ffi.runtime_provides(), _open) as path:
            lib = _open(path)
    except _plugin_copy.CopyError as exc:
        raise PluginOpenError(f"cannot bind it to asyncfs's runtime: {exc}", item="library", **where) from None
    except OSError as exc:
        raise PluginOpenError(f"cannot open the library: {exc}", item="library", **where) from exc
    init_plugin = _symbol(lib, "TF_InitPlugin")
    if init_plugin is None:
        raise MissingEntryPointError("does not export TF_InitPlugin", item="TF_InitPlugin", **where)

    metadata = _read_metadata(lib, library)
    if metadata.has_metadata:
        where["plugin"] = metadata.name
    _check_core_abi(metadata, where)

    info = ffi.new("TF_FilesystemPluginInfo*")
    init_plugin(info)
    schemes = _validate_info(info, where)  # a refusal frees nothing (see above)
    _free_plugin_allocations(info)
    return LoadedPlugin(metadata=metadata, memory_free=info.plugin_memory_free, schemes=schemes)


def init_filesystem(tables: SchemeTables, metadata: PluginMetadata) -> CData:
    """Run the scheme's init op on a new ``TF_Filesystem`` and return it;
    raise :class:`PluginInitError` when the plugin refuses."""
    filesystem = ffi.new("TF_Filesystem*")
    status = _ffi.new_status()
    tables.filesystem_ops.init(filesystem, status)
    if status.code != 0:
        error = _ffi.error_from(status, "init")
        where = {"library": metadata.library, "scheme": tables.scheme}
        if metadata.has_metadata:
            where["plugin"] = metadata.name
        raise PluginInitError(f"init failed: {error}", status=error, item="filesystem_ops.init", **where)
    return filesystem


def init_filesystems(plugin: LoadedPlugin) -> None:
    """Run each scheme's init op; on a failure, clean up the filesystems
    already initialised and raise :class:`PluginInitError`."""
    done: list[SchemeTables] = []
    for tables in plugin.schemes:
        try:
            tables.filesystem = init_filesystem(tables, plugin.metadata)
        except PluginInitError:
            for initialised in done:
                initialised.filesystem_ops.cleanup(initialised.filesystem)
            raise
        done.append(tables)
