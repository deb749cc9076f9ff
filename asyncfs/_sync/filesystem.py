"""The synchronous adapter: one :class:`ModularFileSystem` per registered
scheme (TensorFlow's ModularFileSystem), calling the plugin's ops.

Every method takes URIs (or bare paths for the posix plugin), passes the
plugin its translated name, and raises the :mod:`asyncfs.errors` exception
for a failed status. An optional op the plugin leaves NULL falls back to
generic code built on the other ops (see :mod:`asyncfs._sync.fallbacks`); a
required one raises :class:`~asyncfs.errors.UnimplementedError` naming it.
Calls into C release the GIL, so threads run plugin calls in parallel.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _uri
from .._native import (
    CData,
    Option,
    OptionValue,
    cut_files,
    encode,
    ffi,
    free_options,
    made,
    option_from_c,
    option_to_c,
    refuse_text,
    take_string,
    unpack_statistics,
    unpack_strings,
)
from .._native import binding as _ffi
from .._native import translate_name as generic_translate_name
from .._plugins import PluginMetadata, SchemeTables, init_filesystem
from ..errors import AlreadyExistsError, Code, InvalidArgumentError, StatusError
from . import fallbacks as _fallbacks
from . import plans as _plans
from .entries import EntryKind, FileStatistics, by_statistics
from .files import RandomAccessFile, ReadOnlyMemoryRegion, WritableFile

if TYPE_CHECKING:
    from typing_extensions import Buffer
else:
    Buffer = object

__all__ = [
    "EntryKind",
    "FileStatistics",
    "IncompleteWrite",
    "ModularFileSystem",
    "TransactionToken",
    "is_secret",
    "option_values",
]

# Configuration options whose name holds one of these words carry secrets:
# they travel in a pickle only when set with travels=True.
SECRET_WORDS = ("secret", "token", "password", "credential", "access_key")


def is_secret(option: str) -> bool:
    """Whether an option name reads as a secret (see :data:`SECRET_WORDS`)."""
    name = option.lower()
    return any(word in name for word in SECRET_WORDS)


_SCRATCH = 4096
_HEAD = 64 * 1024  # read_file reads this much before asking for the size
_UNAVAILABLE = int(Code.UNAVAILABLE)  # read_file_if_ready's and stat_if_ready's "not at hand"


class _Scratch(threading.local):
    """Per-thread C memory for calls whose results never escape them."""

    def __init__(self) -> None:
        self.buffer = ffi.new("char[]", _SCRATCH)
        self.head = ffi.new("char[]", _HEAD)
        self.size = ffi.new("int64_t*")
        self.handle = ffi.new("TF_RandomAccessFile*")
        self.stats = ffi.new("TF_FileStatistics*")


_scratch = _Scratch()

_FILESYSTEM_OPS: tuple[str, ...] = tuple(name for name, _ in ffi.typeof("TF_FilesystemOps").fields)

# Ops with a generic fallback: a plugin may leave them NULL at no loss.
FALLBACK_OPS = frozenset(
    {
        "paths_exist",
        "get_matching_paths",
        "delete_recursively",
        "recursively_create_dir",
        "is_directory",
        "copy_file",
        "get_file_size",
        "rename_file",
        "rename_dir",
        "get_children_stats",
        "get_children_kinds",
        "translate_name",
        "flush_caches",
    }
)


# The answers of an existence check that say yes or no; any other is an error.
_ABSENT_OR_PRESENT = frozenset({Code.OK, Code.NOT_FOUND, Code.FAILED_PRECONDITION})


@dataclass(frozen=True)
class TransactionToken:
    """A plugin's transaction token (``TF_TransactionToken*``)."""

    raw: CData


def _attribute_arrays(attributes: Mapping[str, str], uri: str) -> tuple[CData, CData, list[CData]]:
    """Names and values as two ``char*`` arrays (and the strings they point
    at, to keep alive for the call)."""
    keep: list[CData] = []
    for name, value in attributes.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"attributes are str to str, not {type(name).__name__} to {type(value).__name__}")
        if "\0" in name or "\0" in value:
            raise InvalidArgumentError(f"attribute {name!r}: a NUL character", op="new_writable_file", path=uri)
        keep += [ffi.new("char[]", name.encode()), ffi.new("char[]", value.encode())]
    return ffi.new("char*[]", keep[0::2]), ffi.new("char*[]", keep[1::2]), keep


@dataclass(frozen=True)
class IncompleteWrite:
    """A write that was started and never finished nor discarded (an object
    store's multipart upload whose writer died): it holds storage and never
    becomes a file. :meth:`ModularFileSystem.incomplete_writes` lists them."""

    uri: str  # the file it would have written
    id: str  # what names it to abort_incomplete_write (an upload id)
    started_nsec: int


T = TypeVar("T")


def _packed(uris: Sequence[str]) -> tuple[bytes, dict[int, StatusError]]:
    """uris joined by NUL bytes, as C takes many (ASYNCFS_TranslateNames),
    and the ones that cannot be a path by index (see :func:`_uri.check_uri`):
    each of those fails alone, sent as "" in its place."""
    try:
        return encode(_uri.check_uris(uris)) + b"\0", {}
    except InvalidArgumentError:
        refused: dict[int, StatusError] = {}
        for i, uri in enumerate(uris):
            try:
                _uri.check_uri(uri)
            except InvalidArgumentError as error:
                refused[i] = error
        return encode("\0".join("" if i in refused else uri for i, uri in enumerate(uris))) + b"\0", refused


def _one_by_one(call: Callable[..., T], *columns: Sequence[Any]) -> list[T | StatusError]:
    """call on each row of columns, one after another: a plugin without a
    bulk op. A StatusError is that row's entry."""
    results: list[T | StatusError] = []
    for row in zip(*columns, strict=True):
        try:
            results.append(call(*row))
        except StatusError as failure:
            results.append(failure)
    return results


def option_values(name: str, values: Iterable[object]) -> tuple[OptionValue, ...]:
    """A configuration option's values as the ABI carries them: a ``bool``
    as 0 or 1, a ``str`` as its UTF-8 bytes; ints, floats and bytes as they
    are. Anything else, no value, or values of different kinds is an
    :class:`~asyncfs.errors.InvalidArgumentError` naming the option."""
    out: list[OptionValue] = []
    for value in values:
        if isinstance(value, bool):
            out.append(int(value))
        elif isinstance(value, str):
            out.append(value.encode())
        elif isinstance(value, int | float | bytes):
            out.append(value)
        else:
            raise InvalidArgumentError(
                f"option {name!r} must be a str, bytes, int, float or bool, not {type(value).__name__}"
            )
    if not out:
        raise InvalidArgumentError(f"option {name!r} needs a value")
    if len({type(v) for v in out}) != 1:
        raise InvalidArgumentError(f"option {name!r}: values must all be numbers of one kind, or all text")
    return tuple(out)


class ModularFileSystem:
    """The filesystem a plugin provides for one scheme."""

    def __init__(self, tables: SchemeTables, metadata: PluginMetadata, memory_free: CData) -> None:
        self.scheme = tables.scheme
        self.metadata = metadata
        self.api_versions = dict(tables.api_versions)
        self._tables = tables
        self._fs = tables.filesystem
        self._free = memory_free
        ops = tables.filesystem_ops
        self._fs_ops = ops
        self._ops: dict[str, Any] = {
            name: getattr(ops, name) for name in _FILESYSTEM_OPS if getattr(ops, name) != ffi.NULL
        }
        # every option set here, in the order set, and whether a pickle carries it
        self._set: dict[str, tuple[Option, bool]] = {}
        self._inherited: set[str] = set()  # those of them set on the filesystem this one was made from
        self._heirs: weakref.WeakSet[ModularFileSystem] = weakref.WeakSet()  # made from this one
        self._options_lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<ModularFileSystem {self.scheme!r} from {self.metadata.name}>"

    def new_instance(self) -> ModularFileSystem:
        """Another filesystem of this plugin and scheme, independent of
        this one: the plugin's init runs again (the s3 plugin reads the
        environment and the AWS files then), so it has its own state
        (options, credentials, connections; ``mem://``'s files). It follows
        the options set on this one, now and later, each travelling as it
        does here, except those set on it: its own value stands.
        The plugin's cleanup op runs when it is garbage-collected, which is
        after the last of its open files (not at interpreter exit, where a
        call may still be running on a daemon thread). Every
        :class:`~asyncfs.Env` serves a network scheme with one of its own."""
        tables = dataclasses.replace(self._tables, filesystem=init_filesystem(self._tables, self.metadata))
        fresh = ModularFileSystem(tables, self.metadata, self._free)
        weakref.finalize(fresh, tables.filesystem_ops.cleanup, tables.filesystem).atexit = False
        with self._options_lock:
            for option, travels in self._set.values():
                fresh._inherit(option, travels)
            self._heirs.add(fresh)
        return fresh

    def _fresh_locks_in_child(self) -> None:
        """After a fork: a lock that another thread of the parent held would
        never be released in the child (the registry calls this)."""
        self._options_lock = threading.RLock()
        for heir in list(self._heirs):
            heir._fresh_locks_in_child()

    def _inherit(self, option: Option, travels: bool) -> None:
        """An option set on the filesystem this one was made from."""
        with self._options_lock:
            if option.name in self._set and option.name not in self._inherited:
                return  # set here: this one's value stands
            self._apply([option], together=not self.offers("set_filesystem_configuration_option"))
            self._remember([option], travels)
            self._inherited.add(option.name)
            self._pass_on([option])

    def _pass_on(self, options: list[Option]) -> None:
        """Options just set here reach the filesystems made from this one."""
        for heir in list(self._heirs):
            for option in options:
                heir._inherit(option, self._set[option.name][1])

    # ---- what is offered ---------------------------------------------------

    def stages_atomic_writes(self) -> bool:
        """Whether an atomic write needs a temporary sibling and a rename:
        not when the plugin's files appear only at a successful close (object
        stores), nor when it cannot rename."""
        return not self.metadata.atomic_writes and self.offers("rename_file")

    def offers(self, op: str) -> bool:
        """Whether the plugin itself implements op (an entry of
        TF_FilesystemOps, or ``read``/``append``/... of the file tables)."""
        if op in _FILESYSTEM_OPS:
            return op in self._ops
        for table in (
            self._tables.random_access_file_ops,
            self._tables.writable_file_ops,
            self._tables.read_only_memory_region_ops,
        ):
            if table is not None and op in dict(ffi.typeof(table).item.fields):
                return bool(getattr(table, op) != ffi.NULL)
        return False

    @staticmethod
    def abi_ops() -> tuple[str, ...]:
        """Every operation of the ABI's filesystem table, in its order."""
        return _FILESYSTEM_OPS

    def offered_ops(self) -> list[str]:
        """The filesystem ops the plugin itself implements, in table order."""
        return [name for name in _FILESYSTEM_OPS if name in self._ops]

    def available(self, op: str) -> bool:
        """Whether op works here, natively or through a generic fallback."""
        return op in self._ops or op in FALLBACK_OPS

    # ---- plumbing ----------------------------------------------------------

    def _op(self, name: str, uri: str | None = None) -> Any:
        fn = self._ops.get(name)
        if fn is None:
            _ffi.raise_status(
                Code.UNIMPLEMENTED,
                f"the {self.metadata.name} plugin does not offer {name}",
                name,
                uri,
            )
        return fn

    def _path(self, uri: str) -> bytes:
        """The plugin's name for uri (validated first), in one call into C."""
        _uri.check_uri(uri)
        out = _scratch.buffer
        n = _ffi.runtime().ASYNCFS_TranslateName(self._fs_ops, self._fs, self._free, encode(uri), out, _SCRATCH)
        if n >= 0:
            return ffi.unpack(out, n)  # type: ignore[no-any-return]
        if n == -2:
            return encode(generic_translate_name(uri))
        return encode(self.translate_name(uri))  # longer than the scratch buffer

    def _path_call(self, name: str, uri: str, *extra: Any) -> Any:
        fn = self._op(name, uri)
        status = _ffi.thread_status()
        result = fn(self._fs, self._path(uri), *extra, status)
        _ffi.check(status, name, uri)
        return result

    def to_uri(self, path: str, like: str) -> str:
        """Turn a path a plugin returned into a URI shaped like ``like``:
        ``scheme://`` + path when like has a scheme, the path otherwise."""
        if "://" in path:
            return path
        scheme = _uri.scheme_of(like)
        return f"{scheme}://{path}" if scheme else path

    # ---- names ---------------------------------------------------------------

    def translate_name(self, uri: str) -> str:
        """The plugin's own name for uri (TensorFlow's generic cleaning when
        the plugin does not translate)."""
        _uri.check_uri(uri)
        fn = self._ops.get("translate_name")
        if fn is None:
            return generic_translate_name(uri)
        translated = take_string(fn(self._fs, encode(uri)), self._free)
        return translated if translated is not None else generic_translate_name(uri)

    # ---- files ----------------------------------------------------------------

    def new_random_access_file(self, uri: str) -> RandomAccessFile:
        """Open uri for positional reads; NOT_FOUND when missing,
        FAILED_PRECONDITION for a directory."""
        handle = ffi.new("TF_RandomAccessFile*")
        self._path_call("new_random_access_file", uri, handle)
        return RandomAccessFile(self._tables.random_access_file_ops, handle, uri, self.metadata.name, owner=self)

    def new_random_access_file_if_ready(self, uri: str) -> tuple[RandomAccessFile, int] | None:
        """:meth:`new_random_access_file` and the file's size, made only
        from what the plugin holds at hand (cached directory entries,
        memory), without waiting on a device, a network or a lock, so it
        may run on an event loop's thread. None when the plugin does not
        offer it (``new_random_access_file_if_ready``, API 7) or the open is
        not at hand: :meth:`new_random_access_file` opens it, on a worker.
        An error known at hand (NOT_FOUND) raises as that would, named for
        the open it stands in for."""
        fn = self._ops.get("new_random_access_file_if_ready")
        if fn is None:
            return None
        handle = ffi.new("TF_RandomAccessFile*")
        status = _ffi.thread_status()
        size = int(fn(self._fs, self._path(uri), handle, status))
        if status.code == Code.UNAVAILABLE:
            return None
        _ffi.check(status, "new_random_access_file", uri)
        return RandomAccessFile(self._tables.random_access_file_ops, handle, uri, self.metadata.name, owner=self), size

    def new_writable_file(self, uri: str, *, attributes: Mapping[str, str] | None = None) -> WritableFile:
        """Create or truncate uri for writing; with attributes (name to
        value: an object store's user metadata, and ``content-type``), the
        file is created carrying them, where the plugin offers
        ``new_writable_file_with_attributes`` (UnimplementedError
        otherwise). The plugin refuses what it cannot keep as given, before
        anything is written."""
        handle = ffi.new("TF_WritableFile*")
        if not attributes:
            self._path_call("new_writable_file", uri, handle)
        else:
            names, values, _keep = _attribute_arrays(attributes, uri)
            self._path_call("new_writable_file_with_attributes", uri, names, values, len(attributes), handle)
        return WritableFile(self._tables.writable_file_ops, handle, uri, owner=self)

    def attributes(self, uri: str) -> dict[str, str]:
        """The attributes of the file at uri (on s3://, ``content-type`` and
        the user metadata), where the plugin offers ``get_file_attributes``."""
        names = ffi.new("char***")
        values = ffi.new("char***")
        count = int(self._path_call("get_file_attributes", uri, names, values))
        keys = unpack_strings(names[0], count, self._free)
        found = unpack_strings(values[0], count, self._free)
        return dict(zip(keys, found, strict=True))

    def new_appendable_file(self, uri: str) -> WritableFile:
        """Open uri for appending, creating it when missing."""
        handle = ffi.new("TF_WritableFile*")
        self._path_call("new_appendable_file", uri, handle)
        return WritableFile(self._tables.writable_file_ops, handle, uri, owner=self)

    def new_read_only_memory_region_from_file(self, uri: str) -> ReadOnlyMemoryRegion:
        """Map the whole file at uri into memory (read-only)."""
        handle = ffi.new("TF_ReadOnlyMemoryRegion*")
        self._path_call("new_read_only_memory_region_from_file", uri, handle)
        return ReadOnlyMemoryRegion(self._tables.read_only_memory_region_ops, handle, uri, owner=self)

    # ---- namespace changes ------------------------------------------------------

    def create_dir(self, uri: str) -> None:
        """Create the directory uri; its parent must exist (ALREADY_EXISTS
        when uri does)."""
        self._path_call("create_dir", uri)

    def recursively_create_dir(self, uri: str) -> None:
        """Create uri and every missing directory above it; an
        existing directory is fine."""
        if "recursively_create_dir" in self._ops:
            self._path_call("recursively_create_dir", uri)
        else:
            _fallbacks.recursively_create_dir(self, uri)

    def makedirs(self, uri: str, *, exist_ok: bool = True) -> None:
        """Create uri and every missing directory above it; an existing
        uri is an error only with exist_ok false."""
        if not exist_ok and self.exists(uri):
            raise AlreadyExistsError("path already exists", op="makedirs", path=uri)
        self.recursively_create_dir(uri)

    def delete_file(self, uri: str) -> None:
        """Delete the file uri (FAILED_PRECONDITION for a directory)."""
        self._path_call("delete_file", uri)

    def delete_dir(self, uri: str) -> None:
        """Delete the empty directory uri."""
        self._path_call("delete_dir", uri)

    def delete_recursively(self, uri: str) -> tuple[int, int]:
        """Delete uri and everything below it; returns (undeleted files,
        undeleted dirs), which are (0, 0) on success. Raises on failure, with
        the counts in the exception's ``undeleted`` attribute."""
        if "delete_recursively" not in self._ops:
            return _plans.run(self, _plans.delete_tree(uri))
        files = ffi.new("uint64_t*")
        dirs = ffi.new("uint64_t*")
        fn = self._ops["delete_recursively"]
        status = _ffi.thread_status()
        fn(self._fs, self._path(uri), files, dirs, status)
        counts = (int(files[0]), int(dirs[0]))
        if status.code != Code.OK:
            error = _ffi.error_from(status, "delete_recursively", uri)
            error.undeleted = counts
            raise error
        return counts

    def rename_file(self, src: str, dst: str) -> None:
        """Rename a file, replacing dst if it is a file."""
        if "rename_file" not in self._ops:
            _fallbacks.rename_file(self, src, dst)
            return
        status = _ffi.thread_status()
        self._ops["rename_file"](self._fs, self._path(src), self._path(dst), status)
        _ffi.check(status, "rename_file", f"{src} -> {dst}")

    def rename_dir(self, src: str, dst: str) -> None:
        """Rename the directory src to dst, which must not exist: in one
        atomic step where the plugin offers it (posix, memory), otherwise
        by copying the tree and deleting the source (object stores; not
        atomic)."""
        if "rename_dir" not in self._ops:
            _plans.run(self, _plans.move_tree(src, dst))
            return
        status = _ffi.thread_status()
        self._ops["rename_dir"](self._fs, self._path(src), self._path(dst), status)
        _ffi.check(status, "rename_dir", f"{src} -> {dst}")

    def landing_path(self, uri: str) -> str | None:
        """Where a write of uri that goes to a temporary sibling and is
        renamed over its target must land, to write what a plain write of
        uri writes: through the symbolic links uri names, to the file they
        lead to (the plugin's ``landing_path``; uri itself on a plugin
        without it, or where uri names no link). None when such a write
        must go in place instead: uri is a device, a FIFO or a socket,
        which a rename would replace."""
        fn = self._ops.get("landing_path")
        if fn is None:
            return uri
        path = self._path(uri)
        status = _ffi.thread_status()
        landed = take_string(fn(self._fs, path, status), self._free)
        _ffi.check(status, "landing_path", uri)
        if landed is None:
            return None
        return uri if encode(landed) == path else self.to_uri(landed, uri)

    def copy_file(self, src: str, dst: str) -> None:
        """Copy a file, replacing dst if it is a file."""
        if "copy_file" not in self._ops:
            _fallbacks.copy_file(self, src, dst)
            return
        status = _ffi.thread_status()
        self._ops["copy_file"](self._fs, self._path(src), self._path(dst), status)
        _ffi.check(status, "copy_file", f"{src} -> {dst}")

    def copy_entry(self, src: str, dst: str) -> None:
        """Make dst what the entry src is itself, a link or a FIFO, as
        ``cp -R`` does (the plugin's ``copy_entry``; UnimplementedError for
        a plugin without links or special files)."""
        fn = self._op("copy_entry", src)
        status = _ffi.thread_status()
        fn(self._fs, self._path(src), self._path(dst), status)
        _ffi.check(status, "copy_entry", f"{src} -> {dst}")

    def new_temporary_file(self, uri: str) -> WritableFile:
        """A file for the temporary sibling of an atomic write, which
        :meth:`replace_file` lands: created new, never through a link, and
        readable by its owner only until it lands (the plugin's
        ``new_temporary_file``; :meth:`new_writable_file` without it)."""
        if "new_temporary_file" not in self._ops:
            return self.new_writable_file(uri)
        handle = ffi.new("TF_WritableFile*")
        self._path_call("new_temporary_file", uri, handle)
        return WritableFile(self._tables.writable_file_ops, handle, uri, owner=self)

    def replace_file(self, src: str, dst: str) -> None:
        """Land an atomic write: src (from :meth:`new_temporary_file`) is
        renamed over dst and takes dst's permissions (and group, where the
        process may), or a new file's where dst does not exist (the
        plugin's ``replace_file``; :meth:`rename_file` without it)."""
        if "replace_file" not in self._ops:
            self.rename_file(src, dst)
            return
        status = _ffi.thread_status()
        self._ops["replace_file"](self._fs, self._path(src), self._path(dst), status)
        _ffi.check(status, "replace_file", f"{src} -> {dst}")

    # ---- queries -------------------------------------------------------------

    def path_exists(self, uri: str) -> None:
        """Return if uri exists; raise NotFoundError (or another status
        error, e.g. FailedPreconditionError below a file) otherwise."""
        self._path_call("path_exists", uri)

    def exists(self, uri: str) -> bool:
        """Whether uri exists; False also when a parent is a file."""
        try:
            self.path_exists(uri)
        except StatusError as exc:
            if exc.code in (Code.NOT_FOUND, Code.FAILED_PRECONDITION):
                return False
            raise
        return True

    def paths_exist(self, uris: Sequence[str]) -> list[StatusError | None]:
        """One status per uri (None where it exists), in one plugin call."""
        if not uris:
            return []
        codes, statuses = self._paths_exist_codes(uris)
        try:
            return [
                None if code == Code.OK else _ffi.error_from(statuses[i], "paths_exist", uris[i])
                for i, code in enumerate(codes)
            ]
        finally:
            _ffi.runtime().ASYNCFS_DeleteStatusArray(statuses, len(uris))

    def files_exist(self, uris: Sequence[str]) -> list[bool]:
        """Whether each uri exists, in one plugin call: False where it is
        missing or below a file (as :meth:`exists`). Any other failure (a
        refused credential, a store that is down, no descriptors left) is
        raised, never reported as a missing file."""
        if not uris:
            return []
        codes, statuses = self._paths_exist_codes(uris)
        try:
            for i, code in enumerate(codes):
                if code not in _ABSENT_OR_PRESENT:
                    raise _ffi.error_from(statuses[i], "files_exist", uris[i])
        finally:
            _ffi.runtime().ASYNCFS_DeleteStatusArray(statuses, len(uris))
        return [code == Code.OK for code in codes]

    def _paths_exist_codes(self, uris: Sequence[str]) -> tuple[list[int], CData]:
        joined = _uri.check_uris(uris)  # a NUL would also split the packed buffer below
        rt = _ffi.runtime()
        n = len(uris)
        statuses = rt.ASYNCFS_NewStatusArray(n)
        if statuses == ffi.NULL:
            raise MemoryError(f"no memory for {n} statuses")
        # translation and the batch call (or path_exists one by one) in C,
        # the URIs passed as one NUL-separated buffer
        packed = encode(joined) + b"\0"
        if rt.ASYNCFS_PathsExist(self._fs_ops, self._fs, self._free, packed, n, statuses) != 0:
            rt.ASYNCFS_DeleteStatusArray(statuses, n)
            self._op("path_exists")  # raises if the plugin offers no way to ask
            raise MemoryError(f"no memory to check {n} paths")
        codes = ffi.new("int[]", n)
        rt.ASYNCFS_StatusArrayCodes(statuses, n, codes)
        return list(codes), statuses

    def stat(self, uri: str) -> FileStatistics:
        """Length, modification time (ns) and kind of uri."""
        stats = ffi.new("TF_FileStatistics*")
        self._path_call("stat", uri, stats)
        return self._statistics(stats, uri)

    def stat_if_ready(self, uri: str) -> FileStatistics | None:
        """:meth:`stat`, made only from what the plugin holds at hand (its
        ``stat_if_ready``, API 9: cached directory entries, ``mem://``),
        without waiting on a device, a network or a lock, so it may run on
        an event loop's thread. None when it is not at hand or the plugin
        does not offer the op: :meth:`stat` answers, on a worker. An error
        known at hand (NOT_FOUND) raises as stat's would."""
        _uri.check_uri(uri)
        stats = _scratch.stats
        status = _ffi.thread_status()
        _ffi.runtime().ASYNCFS_StatIfReady(self._fs_ops, self._fs, self._free, encode(uri), stats, status)
        if status.code:  # an event loop's hot path: ints compared, no enum looked up
            if status.code == _UNAVAILABLE:
                return None
            _ffi.check(status, "stat", uri)
        return self._statistics(stats, uri)

    def exists_if_ready(self, uri: str) -> bool | None:
        """:meth:`exists` from :meth:`stat_if_ready`: None when that is not
        at hand, or knew an error other than a missing path (then exists
        says what it is)."""
        return self._known_if_ready(uri, lambda stats: True)

    def isdir_if_ready(self, uri: str) -> bool | None:
        """:meth:`isdir` from :meth:`stat_if_ready`, as :meth:`exists_if_ready`."""
        return self._known_if_ready(uri, lambda stats: stats.is_directory)

    def size_if_ready(self, uri: str) -> int | None:
        """:meth:`get_file_size` from :meth:`stat_if_ready`: None when that is
        not at hand, knew an error (get_file_size says it, in its own
        words), or found a folder (whose size is the plugin's to answer or
        refuse)."""
        try:
            stats = self.stat_if_ready(uri)
        except StatusError:
            return None
        return None if stats is None or stats.is_directory else stats.length

    def _known_if_ready(self, uri: str, answer: Callable[[FileStatistics], bool]) -> bool | None:
        try:
            stats = self.stat_if_ready(uri)
        except StatusError as exc:
            return False if exc.code in (Code.NOT_FOUND, Code.FAILED_PRECONDITION) else None
        return None if stats is None else answer(stats)

    def _statistics(self, stats: CData, uri: str) -> FileStatistics:
        """A plugin's TF_FileStatistics (or a pointer to one), its length
        checked (an int64 is never above the bound: only a negative one
        takes the call that raises)."""
        length = int(stats.length)
        if length < 0:
            _ffi.check_count(length, _ffi.UNBOUNDED, plugin=self.metadata.name, op="stat", path=uri, what="as length")
        return FileStatistics(length, int(stats.mtime_nsec), bool(stats.is_directory))

    def is_directory(self, uri: str) -> bool:
        """True for a directory; raises FailedPreconditionError for a file
        and NotFoundError when missing (TensorFlow's semantics)."""
        if "is_directory" not in self._ops:
            return _fallbacks.is_directory(self, uri)
        return bool(self._path_call("is_directory", uri))

    def isdir(self, uri: str) -> bool:
        """Whether uri is a directory; False when missing or not one."""
        try:
            return self.is_directory(uri)
        except StatusError as exc:
            if exc.code in (Code.NOT_FOUND, Code.FAILED_PRECONDITION):
                return False
            raise

    def get_file_size(self, uri: str) -> int:
        """The size of the file at uri, in bytes (``stat`` when the plugin
        has no such op)."""
        if "get_file_size" not in self._ops:
            return _fallbacks.get_file_size(self, uri)
        size = int(self._path_call("get_file_size", uri))
        return _ffi.check_count(size, _ffi.UNBOUNDED, plugin=self.metadata.name, op="get_file_size", path=uri)

    def get_children(self, uri: str) -> list[str]:
        """The names (not paths) of the entries of a directory, any order."""
        entries = ffi.new("char***")
        count = int(self._path_call("get_children", uri, entries))
        return unpack_strings(entries[0], count, self._free)

    def get_children_stats(self, uri: str) -> list[tuple[str, FileStatistics]]:
        """Each entry of a directory with its statistics (as :meth:`stat`
        gives them), any order: one plugin call where the plugin offers
        ``get_children_stats``, else :meth:`get_children` and a ``stat`` per
        child. A child removed during the listing is left out."""
        if "get_children_stats" not in self._ops:
            return _plans.run(self, _plans.children_stats(uri))
        return [(name, stats) for name, stats, _ in self._listing("get_children_stats", uri)]

    def get_children_kinds(self, uri: str) -> list[tuple[str, FileStatistics, EntryKind]]:
        """:meth:`get_children_stats`, and what each entry is itself
        (:class:`EntryKind`): a link to a folder is a LINK, though its
        statistics, as `stat` gives them, describe the folder. A plugin
        without the op has no links: each entry is a FILE or a DIRECTORY
        by its statistics."""
        if "get_children_kinds" not in self._ops:
            return by_statistics(self.get_children_stats(uri))
        return self._listing("get_children_kinds", uri)

    def _listing(self, op: str, uri: str) -> list[tuple[str, FileStatistics, EntryKind]]:
        """The entries of uri by op, get_children_stats (whose kinds follow
        from the statistics) or get_children_kinds: the plugin's arrays
        unpacked and freed, and every length checked."""
        entries = ffi.new("char***")
        stats = ffi.new("TF_FileStatistics**")
        kinds = ffi.new("int**") if op == "get_children_kinds" else None
        count = int(self._path_call(op, uri, entries, stats, *([kinds] if kinds is not None else [])))
        try:
            names = unpack_strings(entries[0], count, self._free)
            raw = unpack_statistics(stats[0], len(names))
            codes = list(ffi.unpack(kinds[0], len(names))) if kinds is not None and names else None
        finally:
            for block in (stats[0], kinds[0] if kinds is not None else ffi.NULL):
                if block != ffi.NULL:
                    self._free(block)
        shortest = min((length for length, _, _ in raw), default=0)
        _ffi.check_count(shortest, _ffi.UNBOUNDED, plugin=self.metadata.name, op=op, path=uri, what="as length")
        found = list(zip(names, made(FileStatistics, raw), strict=True))
        if codes is None:
            return by_statistics(found)
        known = {kind.value: kind for kind in EntryKind}
        return [
            (name, stats, known.get(code, EntryKind.OTHER)) for (name, stats), code in zip(found, codes, strict=True)
        ]

    def incomplete_writes(self, uri: str) -> list[IncompleteWrite]:
        """The incomplete writes at or below uri, sorted by target and start
        (the plugin's ``get_incomplete_writes``; UnimplementedError for a
        plugin that keeps none, such as a local disk's)."""
        paths = ffi.new("char***")
        ids = ffi.new("char***")
        started = ffi.new("int64_t**")
        count = int(self._path_call("get_incomplete_writes", uri, paths, ids, started))
        try:
            relative = unpack_strings(paths[0], count, self._free)
            names = unpack_strings(ids[0], count, self._free)
            times = list(ffi.unpack(started[0], len(relative))) if relative else []
        finally:
            if started[0] != ffi.NULL:
                self._free(started[0])
        if len(names) != len(relative):
            _ffi.raise_status(
                Code.INTERNAL,
                f"the {self.metadata.name} plugin named {len(relative)} incomplete writes but gave {len(names)} ids",
                "get_incomplete_writes",
                uri,
            )
        base = uri.rstrip("/")
        found = [
            IncompleteWrite(f"{base}/{rel}" if rel else uri, name, int(when))
            for rel, name, when in zip(relative, names, times, strict=True)
        ]
        return sorted(found, key=lambda w: (w.uri, w.started_nsec, w.id))

    def abort_incomplete_write(self, uri: str, id: str) -> None:
        """Discard the incomplete write id whose target is uri, freeing what
        it holds; NotFoundError when it is gone already."""
        self._path_call("abort_incomplete_write", uri, encode(id))

    def get_matching_paths(self, pattern: str) -> list[str]:
        """The paths matching a glob pattern (``*``, ``?``, ``[...]`` within
        one path component), sorted, shaped like the pattern (a URI when it
        is one)."""
        _uri.check_uri(pattern, "pattern")
        if "get_matching_paths" not in self._ops:
            return _plans.run(self, _plans.glob(pattern, native=False))
        # TensorFlow hands plugins the pattern untranslated and expects URIs
        # back; a plugin that returns bare paths gets them made into URIs.
        entries = ffi.new("char***")
        status = _ffi.thread_status()
        count = int(self._ops["get_matching_paths"](self._fs, encode(pattern), entries, status))
        _ffi.check(status, "get_matching_paths", pattern)
        paths = unpack_strings(entries[0], count, self._free)
        if paths and "://" not in paths[0] and "://" in pattern:
            paths = [self.to_uri(path, pattern) for path in paths]
        paths.sort()
        return paths

    def scan_dir(self, uri: str) -> tuple[list[str], list[str]]:
        """(directory names, other names) of a directory, each sorted: a
        link to a directory is among the others (a walk does not enter it)."""
        dirs: list[str] = []
        files: list[str] = []
        if "get_children_kinds" in self._ops or "get_children_stats" in self._ops:
            for name, _, kind in sorted(self.get_children_kinds(uri)):
                (dirs if kind == EntryKind.DIRECTORY else files).append(name)
        else:
            for name in sorted(self.get_children(uri)):
                (dirs if self.isdir(_uri.join(uri, name)) else files).append(name)
        return dirs, files

    def walk(self, top: str) -> Iterator[tuple[str, list[str], list[str]]]:
        """Yield (directory, dir names, file names) for top and every
        directory below it, level by level, names sorted. Changing dir names
        in place prunes the walk; unreadable directories are skipped."""
        return _plans.iterate(self, _plans.walk(top))

    def flush_caches(self) -> None:
        """Ask the plugin to drop what it caches (the s3 plugin closes
        idle connections)."""
        fn = self._ops.get("flush_caches")
        if fn is not None:
            fn(self._fs)

    # ---- transactions ------------------------------------------------------------

    def offers_transactions(self) -> bool:
        """Whether the plugin implements the transaction ops asyncfs needs."""
        return all(
            op in self._ops
            for op in ("get_or_start_transaction_for_path", "decode_transaction_token", "end_transaction")
        ) and ("abort_transaction" in self._ops)

    def _token_call(self, name: str, uri: str | None, *args: Any) -> TransactionToken:
        token = ffi.new("TF_TransactionToken**")
        status = _ffi.thread_status()
        self._op(name, uri)(self._fs, *args, token, status)
        _ffi.check(status, name, uri)
        return TransactionToken(token[0])

    def start_transaction(self) -> TransactionToken:
        """Begin a native transaction; the token names it in the
        other transaction ops (``Env.transaction`` is the usual way)."""
        return self._token_call("start_transaction", None)

    def get_or_start_transaction_for_path(self, uri: str) -> TransactionToken:
        """The transaction rooted at uri, started (with the plugin's crash
        recovery for that root) when there is none."""
        return self._token_call("get_or_start_transaction_for_path", uri, self._path(uri))

    def get_transaction_for_path(self, uri: str) -> TransactionToken:
        """The token of the transaction uri belongs to, or None."""
        return self._token_call("get_transaction_for_path", uri, self._path(uri))

    def add_to_transaction(self, uri: str, token: TransactionToken) -> None:
        """Make uri part of the transaction named by token."""
        self._path_call("add_to_transaction", uri, token.raw)

    def decode_transaction_token(self, token: TransactionToken) -> str:
        """What the plugin says about a token; for asyncfs's built-in plugins,
        the path of the transaction's staging directory."""
        return take_string(self._op("decode_transaction_token")(self._fs, token.raw), self._free) or ""

    def end_transaction(self, token: TransactionToken) -> None:
        """Commit; the token is released."""
        status = _ffi.thread_status()
        self._op("end_transaction")(self._fs, token.raw, status)
        _ffi.check(status, "end_transaction")

    def abort_transaction(self, token: TransactionToken) -> None:
        """Discard what was staged; the token is released."""
        status = _ffi.thread_status()
        self._op("abort_transaction")(self._fs, token.raw, status)
        _ffi.check(status, "abort_transaction")

    # ---- whole-file conveniences ---------------------------------------------

    def read_file(self, uri: str) -> bytes:
        """The whole content of a file. One call into C opens it and reads
        its head: a file that fits is done, with no size asked for (an object
        store answers in one request). A bigger one is read straight into
        the bytes returned (``bytes(n)`` with n > 0 is always a new, unshared
        object, so filling it before anyone can see it is safe)."""
        _uri.check_uri(uri)
        rt = _ffi.runtime()
        file_ops = self._tables.random_access_file_ops
        if file_ops is None:
            self._op("new_random_access_file", uri)  # raises: nothing can be opened
        assert file_ops is not None
        scratch = _scratch
        handle, head = scratch.handle, scratch.head  # never escape: closed before returning
        status = _ffi.thread_status()
        count = int(
            rt.ASYNCFS_OpenForRead(
                self._fs_ops, file_ops, self._fs, self._free, encode(uri), handle, head, _HEAD, scratch.size, status
            )
        )
        _ffi.check(status, "read_file", uri)
        plugin = self.metadata.name
        if count < _HEAD:  # the file is closed: whole, or the plugin's nonsense
            count = _ffi.check_count(count, _HEAD, plugin=plugin, op="read", path=uri)
            return ffi.unpack(head, count)  # type: ignore[no-any-return]
        try:  # the file is open
            _ffi.check_count(count, _HEAD, plugin=plugin, op="read", path=uri)
            reported = int(scratch.size[0])
            size = _ffi.check_count(reported, _ffi.UNBOUNDED, plugin=plugin, op="file size", path=uri)
        except BaseException:
            file_ops.cleanup(handle)
            raise
        if size < _HEAD:  # smaller than what was read: a size that says nothing (a pipe's, a terminal's)
            with RandomAccessFile(file_ops, handle, uri, plugin, owner=self) as rest:
                return ffi.unpack(head, _HEAD) + rest.read_all(_HEAD, first=_HEAD)  # type: ignore[no-any-return]
        data = bytes(size)  # a file shrinking meanwhile reads short
        target = ffi.from_buffer(data)
        ffi.memmove(target, head, _HEAD)
        count = int(rt.ASYNCFS_ReadAndClose(file_ops, handle, _HEAD, size - _HEAD, target + _HEAD, status))
        _ffi.check(status, "read_file", uri)
        count = _ffi.check_count(count, size - _HEAD, plugin=plugin, op="read", path=uri)
        return data if count == size - _HEAD else data[: _HEAD + count]

    def read_file_if_ready(self, uri: str) -> bytes | None:
        """:meth:`read_file` of a file smaller than 64 KiB, made only from
        what the plugin holds at hand (its ``new_random_access_file_if_ready``
        and ``read_if_ready``: a cached local file, ``mem://``), without
        waiting on a device, a network or a lock, so it may run on an event
        loop's thread. None when it is not all at hand, bigger, or the plugin
        offers neither op: :meth:`read_file` reads it, on a worker. An error
        known at hand (NOT_FOUND) raises as read_file's would."""
        file_ops = self._tables.random_access_file_ops
        if file_ops is None:
            return None
        _uri.check_uri(uri)
        head = _scratch.head
        status = _ffi.thread_status()
        count: int = _ffi.runtime().ASYNCFS_ReadIfReady(
            self._fs_ops, file_ops, self._fs, self._free, encode(uri), head, _HEAD, status
        )
        if status.code:  # an event loop's hot path: ints compared, no enum looked up
            if status.code == _UNAVAILABLE:
                return None
            _ffi.check(status, "read_file", uri)
        count = _ffi.check_count(count, _HEAD, plugin=self.metadata.name, op="read", path=uri)
        return ffi.unpack(head, count)  # type: ignore[no-any-return]

    def read_files(
        self, uris: Sequence[str], buffer: bytearray | memoryview
    ) -> tuple[list[bytes | StatusError | None], float]:
        """Whole files, many per call into C (the bulk path of dataset
        prefetch), copied out of buffer; a failure is that file's entry, as
        a StatusError, and a file that did not fit is None: the caller reads
        it another way. A network store's plugin with ``read_files`` reads
        them all at once (concurrent requests), each into an equal share of
        buffer. Otherwise they are read one after another, each right after
        the one before (through the plugin's ``read_files`` where it has
        one), and the list ends at the first that does not fit in what is
        left (None): the caller reads it, and those after it, another way.
        Also returns the seconds spent in C (waits on the GIL excluded, for
        the latter)."""
        if not uris:
            return [], 0.0
        if "read_files" in self._ops and self.metadata.network:
            return self._read_files_natively(uris, buffer)
        joined = _uri.check_uris(uris)  # a NUL would also split the packed buffer below
        file_ops = self._tables.random_access_file_ops
        if file_ops is None:
            self._op("new_random_access_file", uris[0])  # raises: nothing can be opened
        rt = _ffi.runtime()
        n = len(uris)
        statuses = rt.ASYNCFS_NewStatusArray(n)
        if statuses == ffi.NULL:
            raise MemoryError(f"no memory for {n} statuses")
        sizes = ffi.new("int64_t[]", n)
        elapsed = ffi.new("uint64_t*")
        out = ffi.from_buffer(buffer)
        try:
            done = int(
                rt.ASYNCFS_ReadFiles(
                    self._fs_ops, file_ops, self._fs, self._free, encode(joined) + b"\0", n,
                    out, len(buffer), sizes, statuses, elapsed,
                )
            )  # fmt: skip
            read = min(done, n)
            results: list[bytes | StatusError | None] = [*cut_files(out, sizes, read)]
            if 0 in ffi.unpack(sizes, read):
                for i in range(read):
                    if sizes[i] == 0 and statuses[i].code != Code.OK:  # a failed file's size is 0
                        results[i] = _ffi.error_from(statuses[i], "read_file", uris[i])
            if done < n:
                results.append(None)
            return results, int(elapsed[0]) / 1e9
        finally:
            rt.ASYNCFS_DeleteStatusArray(statuses, n)

    def _errors_per_path(self, op: str, single: str, uris: Sequence[str], *args: Any) -> list[StatusError | None]:
        """Call a plugin op that takes many paths (``op(fs, paths, n, *args,
        statuses)``) and return each URI's error (None when OK), named as
        the op for one path (single) would name it. A URI that cannot be a
        path fails alone, without being sent."""
        n = len(uris)
        packed, refused = _packed(uris)
        rt = _ffi.runtime()
        paths = rt.ASYNCFS_TranslateNames(self._fs_ops, self._fs, self._free, packed, n)
        if paths == ffi.NULL:
            raise MemoryError(f"no memory for the names of {n} paths")
        statuses = rt.ASYNCFS_NewStatusArray(n)
        if statuses == ffi.NULL:
            rt.ASYNCFS_FreeNames(paths, n)
            raise MemoryError(f"no memory for {n} statuses")
        try:
            self._ops[op](self._fs, paths, n, *args, statuses)
            codes = ffi.new("int[]", n)
            rt.ASYNCFS_StatusArrayCodes(statuses, n, codes)
            errors: list[StatusError | None] = [None] * n
            failed = ffi.unpack(codes, n)  # (a list of ints at C speed: most calls fail nowhere)
            if any(failed):
                for i, code in enumerate(failed):
                    if code:
                        errors[i] = _ffi.error_from(statuses[i], single, uris[i])
            for i, error in refused.items():
                errors[i] = error
            return errors
        finally:
            rt.ASYNCFS_DeleteStatusArray(statuses, n)
            rt.ASYNCFS_FreeNames(paths, n)

    def _read_files_natively(
        self, uris: Sequence[str], buffer: bytearray | memoryview
    ) -> tuple[list[bytes | StatusError | None], float]:
        started = time.perf_counter()
        n = len(uris)
        share = len(buffer) // n
        base = ffi.from_buffer(buffer)
        buffers = ffi.new("char*[]", [base + i * share for i in range(n)])
        caps = ffi.new("size_t[]", [share] * n)
        sizes = ffi.new("int64_t[]", n)
        view = memoryview(buffer)
        results: list[bytes | StatusError | None] = []
        errors = self._errors_per_path("read_files", "read_file", uris, buffers, caps, sizes)
        for i, (uri, error) in enumerate(zip(uris, errors, strict=True)):
            if error is not None:
                results.append(error)
                continue
            try:
                size = _ffi.check_count(
                    int(sizes[i]), _ffi.UNBOUNDED, plugin=self.metadata.name, op="read_files", path=uri
                )
            except StatusError as nonsense:
                results.append(nonsense)
                continue
            results.append(bytes(view[i * share : i * share + size]) if size <= share else None)
        return results, time.perf_counter() - started

    def stat_files(self, uris: Sequence[str]) -> list[FileStatistics | StatusError]:
        """:meth:`stat` of each URI, a failure as that URI's entry: many at
        once where the plugin offers ``stat_files`` (an object store:
        concurrent requests from one thread), else one after another."""
        if not uris:
            return []
        if "stat_files" not in self._ops:
            return _one_by_one(self.stat, uris)
        stats = ffi.new("TF_FileStatistics[]", len(uris))
        errors = self._errors_per_path("stat_files", "stat", uris, stats)
        fields = unpack_statistics(stats, len(uris))  # each one's, in one pass: no cdata per field
        results: list[FileStatistics | StatusError] = [*made(FileStatistics, fields)]
        if any(errors) or min(fields)[0] < 0:  # (the least tuple holds the least length)
            for i, (uri, error) in enumerate(zip(uris, errors, strict=True)):
                if error is not None:
                    results[i] = error
                elif fields[i][0] < 0:
                    try:
                        self._statistics(stats[i], uri)  # raises: the plugin's nonsense, named
                    except StatusError as nonsense:
                        results[i] = nonsense
        return results

    def read_small_first(
        self, uri: str, scratch: bytearray | memoryview, reserve: Callable[[int, bool], bool] | None = None
    ) -> bytes | None:
        """The whole file, in one read request when it fits in scratch (the
        size is asked for only when it does not). ``reserve(size, False)``
        is asked before a file's bytes are kept; when it says no, the file
        is closed unread and None returned. A file whose size says nothing
        (a pipe's) cannot be read again: it is read to its end, and kept
        with ``reserve(size, True)``."""
        with self.new_random_access_file(uri) as file:
            count = file.read_into(0, scratch)
            if count < len(scratch):
                if reserve is not None and not reserve(count, False):
                    return None
                return bytes(memoryview(scratch)[:count])
            size = self.get_file_size(uri)
            if size < count:  # what was read is gone from the file: the rest too, then all of it kept
                data = bytes(scratch) + file.read_all(count, first=count)
                if reserve is not None:
                    reserve(len(data), True)
                return data
            if reserve is not None and not reserve(size, False):
                return None
            data = file.read(0, size)
            return data

    def read_into(self, uri: str, buffer: Buffer, offset: int = 0) -> int:
        """Read from offset of uri into a caller-owned buffer, with no copy;
        returns the byte count (short at end of file)."""
        with self.new_random_access_file(uri) as file:
            return file.read_into(offset, buffer)

    def write_file(self, uri: str, data: Buffer, *, attributes: Mapping[str, str] | None = None) -> None:
        """Create or replace uri with data (written in place; the async Env
        adds the atomic temporary-and-rename variant), with attributes as
        :meth:`new_writable_file` takes them."""
        refuse_text(data, "write_file", uri)  # before the file is created or truncated
        with self.new_writable_file(uri, attributes=attributes) as file:
            file.append(data)

    def write_files(self, uris: Sequence[str], datas: Sequence[Buffer]) -> list[StatusError | None]:
        """:meth:`write_file` of each URI with its data, in place; each
        entry None, or that file's error. Many at once where the plugin
        offers ``write_files`` (an object store: concurrent PUTs from one
        thread), else one after another."""
        if not uris:
            return []
        if "write_files" not in self._ops:
            return _one_by_one(self.write_file, uris, datas)
        for uri, data in zip(uris, datas, strict=True):
            refuse_text(data, "write_file", uri)
        keep = [ffi.from_buffer(data) for data in datas]
        try:
            lengths = ffi.new("size_t[]", [len(view) for view in keep])
            pointers = ffi.new("char*[]", [ffi.cast("char*", view) for view in keep])
            return self._errors_per_path("write_files", "write_file", uris, pointers, lengths)
        finally:  # the callers' buffers are theirs again, raised or not (see RandomAccessFile.read_into)
            for view in keep:
                ffi.release(view)

    # ---- configuration ----------------------------------------------------------

    def configuration(self) -> list[Option]:
        """Every configuration option with its current value."""
        options = ffi.new("TF_Filesystem_Option**")
        count = ffi.new("int*")
        status = _ffi.thread_status()
        self._op("get_filesystem_configuration")(self._fs, options, count, status)
        _ffi.check(status, "get_filesystem_configuration")
        if options[0] == ffi.NULL:
            return []
        try:
            return [option_from_c(options[0][i]) for i in range(int(count[0]))]
        finally:
            free_options(options[0], int(count[0]), self._free)

    def configuration_keys(self) -> list[str]:
        """The names of the plugin's configuration options."""
        fn = self._op("get_filesystem_configuration_keys")
        count = ffi.new("int*")
        status = _ffi.thread_status()
        fn(self._fs, ffi.NULL, count, status)
        _ffi.check(status, "get_filesystem_configuration_keys")
        keys = ffi.new("char*[]", max(int(count[0]), 1))
        fn(self._fs, keys, count, status)
        _ffi.check(status, "get_filesystem_configuration_keys")
        return [take_string(keys[i], self._free) or "" for i in range(int(count[0]))]

    def get_option(self, key: str) -> Option:
        """One configuration option and its current value."""
        option = ffi.new("TF_Filesystem_Option**")
        status = _ffi.thread_status()
        self._op("get_filesystem_configuration_option")(self._fs, encode(key), option, status)
        _ffi.check(status, "get_filesystem_configuration_option", key)
        try:
            return option_from_c(option[0])
        finally:
            free_options(option[0], 1, self._free)

    def set_option(self, name: str, *values: OptionValue | str, travels: bool | None = None) -> None:
        """Set a configuration option, e.g. ``set_option("latency_us", 5000)``
        or ``set_option("endpoint", "http://127.0.0.1:7480")`` (a ``str`` is
        its UTF-8 bytes, a ``bool`` is 0 or 1: :func:`option_values`).

        The value travels with a pickle of this filesystem (or of an Env or
        registry serving it) unless the name reads as a secret
        (:func:`is_secret`: S3's ``secret_access_key``, ``session_token``,
        ``access_key_id``): a worker then resolves those from its own
        environment. ``travels`` overrides that either way. The filesystems
        made from this one (:meth:`new_instance`) follow, except those that
        set that option themselves."""
        self._set_own([Option(name=name, values=option_values(name, values))], travels, together=False)

    def _set_own(self, options: list[Option], travels: bool | None, *, together: bool) -> None:
        with self._options_lock:
            self._apply(options, together=together)
            self._remember(options, travels)
            self._inherited.difference_update(option.name for option in options)
            self._pass_on(options)

    def _apply(self, options: list[Option], *, together: bool) -> None:
        """Set options in the plugin: one after another by the op for one,
        or together (all or none) by the op for several."""
        status = _ffi.thread_status()
        if not together:
            for option in options:
                raw, keep = option_to_c(option)
                self._op("set_filesystem_configuration_option")(self._fs, raw, status)
                del keep
                _ffi.check(status, "set_filesystem_configuration_option", option.name)
            return
        array = ffi.new("TF_Filesystem_Option[]", max(len(options), 1))
        held = []
        for i, option in enumerate(options):
            raw, keep = option_to_c(option)
            array[i] = raw[0]
            held.append((raw, keep))
        self._op("set_filesystem_configuration")(self._fs, array, len(options), status)
        _ffi.check(status, "set_filesystem_configuration")

    def travelling_options(self) -> tuple[Option, ...]:
        """The options set here that a pickle carries, in the order set."""
        return tuple(option for option, travels in self._set.values() if travels)

    def _remember(self, options: list[Option], travels: bool | None) -> None:
        for option in options:
            self._set.pop(option.name, None)
            carried = travels or (travels is None and not is_secret(option.name))
            self._set[option.name] = (Option(name=option.name, values=tuple(option.values)), bool(carried))

    def set_configuration(self, options: Iterable[Option], *, travels: bool | None = None) -> None:
        """Set several options at once, all or none; ``travels`` as in
        :meth:`set_option`."""
        given = [dataclasses.replace(o, values=option_values(o.name, o.values)) for o in options]
        self._set_own(given, travels, together=True)
