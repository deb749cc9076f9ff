"""asyncfs as an fsspec filesystem: pandas, pyarrow, Dask, xarray, zarr and
universal-pathlib reach every asyncfs plugin through it.

Each asyncfs scheme is the fsspec protocol ``asyncfs+<scheme>``
(``asyncfs+file:///data/a.csv``, ``asyncfs+mem://bucket/x``,
``asyncfs+s3://bucket/key``), so fsspec's own ``file``, ``memory`` and
``s3`` stay as they are. The built-in schemes are registered through the
``fsspec.specs`` entry point (no import needed: ``fsspec.open("asyncfs+s3://...")``);
importing this module registers every scheme the process-wide registry has,
and plugins it loads later (TensorFlow-built ones too).

:class:`AsyncfsFileSystem` is an ``fsspec.asyn.AsyncFileSystem`` over an
:class:`~asyncfs.Env`: the coroutines are asyncfs's, and fsspec's sync
methods run them on fsspec's own loop. Options that are not fsspec's are the
plugin's configuration (``endpoint=``, ``region=``, ... for s3; s3fs's
names too, :mod:`asyncfs.fsspec.names`): with options, the filesystem
gets an Env of its own, which serves its scheme with a filesystem of its
own, so they never change another user's plugin. The file objects
``fs.open`` returns are in :mod:`asyncfs.fsspec.files`. See
``docs/fsspec.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import posixpath
import threading
import warnings
from collections.abc import Iterable, Mapping
from glob import has_magic
from typing import Any, ClassVar

import fsspec
from fsspec.asyn import AsyncFileSystem, sync, sync_wrapper
from fsspec.transaction import Transaction as _FsspecTransaction
from fsspec.utils import stringify_path

from .._async import current_loop
from .._sync import (
    EntryKind,
    FileStatistics,
    ModularFileSystem,
    PluginInfo,
    RegistryRecipe,
    add_load_listener,
    default_registry,
    option_values,
    write_whole,
)
from .._uri import is_internal_name
from ..env import Env, default_env
from ..errors import (
    FailedPreconditionError,
    IgnoredOptionWarning,
    InvalidArgumentError,
    NotFoundError,
    PathIsDirectoryError,
    StatusError,
)
from .files import BridgeFile, DirectFile, DirectWriter, RangeFile, StagedFile
from .names import FOREIGN_NAMES, plugin_options

__all__ = ["AsyncfsFileSystem", "PREFIX", "filesystem_class", "protocol_for", "register"]

PREFIX = "asyncfs+"

# Keyword arguments fsspec itself passes or understands; the rest are plugin options.
_LISTINGS_OPTIONS = ("use_listings_cache", "listings_expiry_time", "max_paths")  # fsspec's DirCache's
_FSSPEC_OPTIONS = frozenset({"skip_instance_cache", "auto_mkdir", *_LISTINGS_OPTIONS})
# Schemes whose fsspec paths are local absolute paths (``/data/x``); the
# others are ``host/path`` as in the URI (``bucket/key``).
_LOCAL = frozenset({"file"})
# Other names a scheme goes by (gcsfs answers to both gs:// and gcs://).
_ALIASES = {"gs": ("gcs",)}


OptionValue = int | float | bytes

# The Envs of bridge filesystems with options, by (scheme, options).
_own_envs: dict[tuple[str, tuple[tuple[str, OptionValue], ...]], Env] = {}
_own_envs_lock = threading.Lock()


def protocol_for(scheme: str) -> str:
    """The fsspec protocol of an asyncfs scheme (``"s3"`` -> ``"asyncfs+s3"``)."""
    return PREFIX + (scheme or "file")


def _plugin_keys(scheme: str) -> frozenset[str] | None:
    """The configuration options of the process-wide registry's plugin for
    scheme; None when it cannot say (no such plugin: the Env's error tells)."""
    try:
        fs = default_registry().get(scheme)
    except (LookupError, StatusError):
        return None
    return frozenset(fs.configuration_keys()) if fs.offers("get_filesystem_configuration_keys") else frozenset()


def _plugin_options(cls: type[AsyncfsFileSystem], given: Mapping[str, Any]) -> dict[str, OptionValue]:
    """The keyword arguments of a bridge filesystem that are its plugin's
    options, as the plugin takes them. fsspec's own keys are fsspec's; a
    None is "the default", as in fsspec and s3fs; the rest, which no other
    fsspec filesystem would refuse either (``datasets`` passes ``encoding``,
    ``errors`` and ``hf``), are left out with one warning naming them."""
    options = plugin_options(cls.scheme, {k: v for k, v in given.items() if k not in _FSSPEC_OPTIONS and v is not None})
    known = _plugin_keys(cls._asyncfs_scheme())
    if known is not None and (ignored := sorted(set(options) - known)):
        library, names = FOREIGN_NAMES.get(cls.scheme, ("", ()))
        also = f" (and {library}'s {', '.join(names)})" if names else ""
        warnings.warn(
            f"{protocol_for(cls.scheme)} ignores {', '.join(map(repr, ignored))}: "
            "not options of its plugin, which takes "
            f"{', '.join(sorted(known)) or 'none'}{also}",
            IgnoredOptionWarning,
            stacklevel=4,
        )
        options = {k: v for k, v in options.items() if k not in ignored}
    return {key: option_values(key, (value,))[0] for key, value in options.items()}


# ---- helpers ------------------------------------------------------------------------


def _needs_size(start: int | None, end: int | None) -> bool:
    """Whether the byte range [start, end) of fsspec's cat_file counts
    from the end of the file (a negative bound, or no end)."""
    return (start or 0) < 0 or end is None or end < 0


def _span(start: int | None, end: int | None, size: int) -> tuple[int, int]:
    """The range [start, end) as offsets from the start of a file of size
    bytes (size is only looked at when _needs_size says so)."""
    first = start or 0
    if not _needs_size(start, end):
        assert end is not None
        return first, end
    first = max(0, size + first) if first < 0 else first
    return first, size if end is None else max(0, size + end) if end < 0 else end


def _url_path(rest: str) -> str:
    """The local path of a ``file`` URL whose path does not start with a
    slash: ``asyncfs+file://localhost/d/x`` is ``/d/x`` (RFC 8089), and
    ``asyncfs+file://d/x`` is ``/d/x`` too, the URL of ``/d/x`` with its
    ``///`` collapsed to ``//`` (as pathlib, and so ``datasets``, collapse
    it). A URL never names a path relative to the working directory."""
    host, slash, below = rest.partition("/")
    return "/" + below if host == "localhost" and slash else "/" + rest


def _plugin_here(fs: AsyncfsFileSystem, uri: str) -> ModularFileSystem | None:
    """The plugin a call on uri runs on, on the caller's thread: a local
    store's, when no event loop (asyncio or trio) runs on this thread, which
    must not block; else None (the call goes through fsspec's loop)."""
    try:
        current_loop()
    except RuntimeError:
        store = fs.env.filesystem(uri)
        return None if store.network else store.wrapped
    return None


# ---- transactions -----------------------------------------------------------------------


class AsyncfsTransaction(_FsspecTransaction):  # type: ignore[misc]  # fsspec is untyped
    """``with fs.transaction:`` on an asyncfs filesystem: files written in
    the block are staged beside their targets and land together at the end,
    in one asyncfs transaction on the deepest folder holding them all (see
    :meth:`AsyncfsFileSystem._commit`); an exception discards them all."""

    def complete(self, commit: bool = True) -> None:
        fs: AsyncfsFileSystem = self.fs
        files = list(self.files)
        self.files.clear()
        try:
            if not commit:
                _discard(files)
                return
            for f in files:
                if isinstance(f, BridgeFile):
                    f.close()  # written out, still under its staging name
            sync(fs.loop, fs._commit, [f._staged if isinstance(f, BridgeFile) else f for f in files])
        except BaseException:
            _discard(files)
            raise
        finally:
            fs._intrans = False


def _discard(files: list[Any]) -> None:
    """Drop staged files, those already landed or gone included."""
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            f.discard()


# ---- the filesystem ---------------------------------------------------------------


class AsyncfsFileSystem(AsyncFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """fsspec's view of one asyncfs scheme (use :func:`filesystem_class` or
    the ``asyncfs+<scheme>`` protocol; this base serves ``file``).

    ``env`` is the :class:`~asyncfs.Env` to run on (default: the
    process-wide one, :func:`asyncfs.env.default_env`); other keyword
    arguments are the plugin's configuration options, set on a filesystem of
    this one's own (a new instance of the process-wide registry's, which
    follows the options set there except these: ``Env(own=...)``). Options
    and ``env`` do not go together: an Env's filesystems are configured on
    the Env. ``asynchronous=True`` is for use from a running
    asyncio loop (``await fs._cat_file(...)``), as with every fsspec
    AsyncFileSystem.
    """

    scheme: ClassVar[str] = "file"
    protocol: ClassVar[str | tuple[str, ...]] = "asyncfs+file"
    root_marker = "/"
    local_paths: ClassVar[bool] = True
    # what _strip_protocol takes off (``file:/d/x`` is a URL too)
    _prefixes: ClassVar[tuple[str, ...]] = ("asyncfs+file://", "file://", "asyncfs+file:", "file:")
    transaction_type = AsyncfsTransaction

    def __init__(
        self,
        *,
        env: Env | None = None,
        asynchronous: bool = False,
        loop: Any = None,
        batch_size: int | None = None,
        **options: Any,
    ) -> None:
        listings = {k: options[k] for k in _LISTINGS_OPTIONS if k in options}
        super().__init__(asynchronous=asynchronous, loop=loop, batch_size=batch_size, **listings)
        self._options = _plugin_options(type(self), options)
        if env is not None and self._options:
            raise InvalidArgumentError(
                f"{protocol_for(self.scheme)}: options ({', '.join(sorted(self._options))}) "
                "and env= do not go together; "
                f"set them on the Env's filesystem (env.filesystem(...).wrapped.set_option) or leave env= out"
            )
        self._given_env = env
        self._env: Env | None = env
        self._remote: bool | None = None  # whether its store is a network store (_caches_listings)
        self._env_lock = threading.Lock()

    # ---- where calls go ---------------------------------------------------------

    @property
    def env(self) -> Env:
        """The Env this filesystem runs on (made on first use)."""
        if self._env is None:
            with self._env_lock:
                if self._env is None:
                    self._env = self._own_env() if self._options else default_env()
        return self._env

    def _own_env(self) -> Env:
        """The Env serving this scheme with a filesystem that takes the
        options: one per scheme and option set in the process, shared by
        every bridge filesystem with those options (on the process-wide
        registry, so plugins loaded at run time have them too)."""
        key = (self.scheme, tuple(sorted(self._options.items())))
        with _own_envs_lock:
            env = _own_envs.get(key)
            if env is None:
                scheme = self._asyncfs_scheme()
                env = Env(own={scheme})
                fs = env.filesystem(f"{scheme}://" if scheme else "/").wrapped
                for name, value in self._options.items():
                    fs.set_option(name, value)
                _own_envs[key] = env
        return env

    @classmethod
    def _asyncfs_scheme(cls) -> str:
        return "" if cls.scheme == "file" else cls.scheme

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as (scheme, options, env); a worker process rebuilds it,
        loading the plugins this process's registry had loaded (a given Env
        travels as :class:`~asyncfs.Env` does: as a recipe)."""
        options = {k: v for k, v in self.storage_options.items() if k not in ("env", "loop")}
        recipe = default_registry().recipe() if self._given_env is None else None
        return (_rebuild, (self.scheme, options, self._given_env, recipe))

    # ---- paths --------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        text: str = stringify_path(path)
        url = False
        for prefix in cls._prefixes:
            if text.startswith(prefix):
                text, url = text[len(prefix) :], True
                break
        if cls.local_paths:
            if url and not text.startswith("/"):
                text = _url_path(text)
            elif not text.startswith("/"):
                text = os.path.abspath(text)
            return text.rstrip("/") or "/"
        return text.rstrip("/")

    @classmethod
    def _parent(cls, path: Any) -> str:
        path = cls._strip_protocol(path)
        parent = posixpath.dirname(path)
        return parent or cls.root_marker

    def _uri(self, path: str) -> str:
        """The asyncfs URI of an fsspec path."""
        path = self._strip_protocol(path)
        return path if self.local_paths else f"{self.scheme}://{path}"

    def _join(self, path: str, name: str) -> str:
        if not path or path == "/":
            return f"{path}{name}"
        return f"{path}/{name}"

    @staticmethod
    def _entry(name: str, stats: FileStatistics, kind: EntryKind | None = None) -> dict[str, Any]:
        """fsspec's info of an entry, as its local filesystem gives it: a
        link is ``islink`` with the type of what it leads to; a FIFO, a
        socket or a device is of type "other"."""
        entry = {
            "name": name,
            "size": stats.length,
            "type": "directory" if stats.is_directory else "other" if kind == EntryKind.OTHER else "file",
            "mtime": stats.mtime_nsec / 1e9,
        }
        if kind == EntryKind.LINK:
            entry["islink"] = True
        return entry

    # ---- queries --------------------------------------------------------------------

    def _top(self, path: str) -> dict[str, Any] | None:
        """The top of a store whose paths are host/path (mem://, s3://): a
        directory that needs no call. None for any other path."""
        if not self.local_paths and path in ("", "/"):
            return {"name": path, "size": 0, "type": "directory"}
        return None

    def _listing(self, path: str, entries: list[tuple[str, FileStatistics, EntryKind]], detail: bool) -> list[Any]:
        """ls's answer: asyncfs's own transient names (temporary siblings of
        atomic writes, a transaction's staging) left out, as a copy or a
        find must never meet one that vanishes under it."""
        entries = sorted(entry for entry in entries if not is_internal_name(entry[0]))
        if not detail:
            return [self._join(path, name) for name, _, _ in entries]
        return [self._entry(self._join(path, name), stats, kind) for name, stats, kind in entries]

    # ---- the listings cache ---------------------------------------------------------
    # fsspec's dircache, as s3fs keeps it: every listing of a network store
    # (ls, find, glob, walk) is kept, and info, size, modified, exists,
    # isdir and isfile on what it lists are answered from it, asking the
    # store nothing; a name missing from its folder's kept listing does not
    # exist. Writes, copies, moves and deletes through this filesystem drop
    # the listings they change (invalidate_cache); changes made elsewhere
    # show after listings_expiry_time (default: never) or invalidate_cache().
    # A local store (file, mem) answers faster than a cache would and keeps
    # none. This is the bridge's one cache: its Envs leave the plugin's own
    # stat cache (stat_cache_ms) as configured, off unless asked for.

    def _caches_listings(self) -> bool:
        if self._remote is None:
            self._remote = self.env.filesystem(self._uri(self.root_marker)).network
        return bool(self._remote and self.dircache.use_listings_cache)

    def _cached_listing(self, path: str) -> list[dict[str, Any]] | None:
        if not self._caches_listings():
            return None
        try:
            listing: list[dict[str, Any]] = self.dircache[path]
        except KeyError:
            return None
        return listing

    def _cached_info(self, path: str) -> dict[str, Any] | None:
        """path's info from a kept listing of its folder (or of itself, a
        folder); None when none is kept. FileNotFoundError when its folder's
        listing is kept and does not have it."""
        if not self._caches_listings() or not path:
            return None
        listing = self._cached_listing(self._parent(path))
        if listing is not None:
            for entry in listing:
                if entry["name"] == path:
                    return entry
            raise FileNotFoundError(f"{self.unstrip_protocol(path)} is not in its folder's listing")
        if self._cached_listing(path) is not None:
            return {"name": path, "size": 0, "type": "directory", "mtime": 0.0}
        return None

    def invalidate_cache(self, path: str | None = None) -> None:
        """Forget the kept listings of path, of every folder below it and of
        every folder above it (all of them without path)."""
        if path is None:
            self.dircache.clear()
            return
        path = self._strip_protocol(path)
        if path in ("", "/"):
            self.dircache.clear()
            return
        below = path + "/"
        for key in [k for k in self.dircache if k == path or k.startswith(below)]:
            self.dircache.pop(key, None)
        while path not in ("", "/"):
            path = self._parent(path)
            self.dircache.pop(path, None)

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        top = self._top(path)
        if top is not None:
            return top
        cached = self._cached_info(path)
        return cached if cached is not None else self._entry(path, await self.env.stat(self._uri(path)))

    async def _ls(self, path: str, detail: bool = True, refresh: bool = False, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        kept = self._kept_ls(path, detail, refresh)
        if kept is not None:
            return kept
        uri = self._uri(path)
        try:
            entries = await self.env.filesystem(uri).get_children_kinds(uri)
        except FailedPreconditionError:  # a file lists as itself
            info = await self._info(path)
            return [info] if detail else [path]
        listing = self._listing(path, entries, True)
        if self._caches_listings():
            self.dircache[path] = listing
        return listing if detail else [entry["name"] for entry in listing]

    async def _listing_or_empty(self, path: str) -> list[dict[str, Any]]:
        try:
            return await self._ls(path, detail=True)
        except (NotFoundError, PermissionError):
            return []  # vanished or unreadable, as os.walk skips it

    async def _find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, **kwargs: Any
    ) -> list[str] | dict[str, Any]:
        """Every file below path (and directory, with withdirs), a whole
        directory level listed at once."""
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        detail = kwargs.pop("detail", False)
        path = self._strip_protocol(path)
        found: dict[str, Any] = {}
        try:
            top = await self._info(path)
        except FileNotFoundError:
            top = None
        if top is not None and top["type"] != "directory":
            found[path] = top
        elif top is not None:
            if withdirs and path not in ("", "/"):
                found[path] = top
            level, depth = [path], 1
            while level:
                listings = await asyncio.gather(*(self._listing_or_empty(d) for d in level))
                level = []
                for info in (info for listing in listings for info in listing):
                    if info["type"] != "directory" or info.get("islink"):  # a linked folder is not walked into
                        found[info["name"]] = info
                        continue
                    if withdirs:
                        found[info["name"]] = info
                    if maxdepth is None or depth < maxdepth:
                        level.append(info["name"])
                depth += 1
        names = sorted(found)
        return {name: found[name] for name in names} if detail else names

    def _kept_ls(self, path: str, detail: bool, refresh: bool) -> list[Any] | None:
        """ls's answer from the kept listing of path; None when none is kept."""
        kept = None if refresh else self._cached_listing(path)
        if kept is None:
            return None
        return list(kept) if detail else [entry["name"] for entry in kept]

    def _kept_kind(self, path: str) -> str | None:
        """What the kept listings say path is: its info's type, "" when
        they say it is absent, None when they do not say."""
        try:
            info = self._cached_info(path)
        except FileNotFoundError:
            return ""
        return None if info is None else str(info["type"])

    async def _exists(self, path: str, **kwargs: Any) -> bool:
        path = self._strip_protocol(path)
        if path in ("", "/"):
            return True
        kind = self._kept_kind(path)
        return bool(kind) if kind is not None else await self.env.exists(self._uri(path))

    async def _isdir(self, path: str) -> bool:
        path = self._strip_protocol(path)
        if path in ("", "/"):
            return True
        kind = self._kept_kind(path)
        return kind == "directory" if kind is not None else await self.env.isdir(self._uri(path))

    async def _isfile(self, path: str) -> bool:
        try:
            return bool((await self._info(path))["type"] == "file")
        except FileNotFoundError:
            return False

    async def _size(self, path: str) -> int:
        return int((await self._info(path))["size"])

    # ---- reading ------------------------------------------------------------------

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        uri = self._uri(path)
        if start is None and end is None:
            return await self.env.read_file(uri)
        first, stop = _span(start, end, await self.env.size(uri) if _needs_size(start, end) else 0)
        buffer = bytearray(max(0, stop - first))
        if buffer:
            del buffer[await self.env.read_into(uri, buffer, first) :]
        return bytes(buffer)

    # ---- the same queries, sync, on a local store -------------------------------------
    # fsspec's sync methods run the coroutines above on its own loop's thread:
    # two thread hops and a trip through the pool, 115-165 µs a call where
    # fsspec's local filesystem takes 4-5 µs (info, exists, size). On a local
    # store, called from a thread with no event loop (pandas, pyarrow, Dask
    # workers), these ask the plugin on the calling thread instead; anywhere
    # else they are fsspec's sync wrappers, as before.

    def _here(self, path: str) -> tuple[ModularFileSystem, str, str] | None:
        """The plugin, the stripped path and its URI, when a sync call on
        path may run on this thread (see _plugin_here); else None."""
        path = self._strip_protocol(path)
        uri = self._uri(path)
        plugin = _plugin_here(self, uri)
        return None if plugin is None else (plugin, path, uri)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        here = self._here(path)
        if here is None:
            cached = self._cached_info(self._strip_protocol(path))  # kept: no hop to fsspec's loop
            if cached is not None:
                return cached
            return sync(self.loop, self._info, path, **kwargs)  # type: ignore[no-any-return]
        plugin, path, uri = here
        return self._top(path) or self._entry(path, plugin.stat(uri))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        here = self._here(path)
        if here is None:
            kept = self._kept_ls(self._strip_protocol(path), detail, bool(kwargs.get("refresh")))
            if kept is not None:
                return kept
            return sync(self.loop, self._ls, path, detail=detail, **kwargs)  # type: ignore[no-any-return]
        plugin, path, uri = here
        try:
            entries = plugin.get_children_kinds(uri)
        except FailedPreconditionError:  # a file lists as itself
            return [self.info(path)] if detail else [path]
        return self._listing(path, entries, detail)

    def exists(self, path: str, **kwargs: Any) -> bool:
        here = self._here(path)
        if here is None:
            kind = self._kept_kind(self._strip_protocol(path))
            if kind is not None:
                return bool(kind)
            return sync(self.loop, self._exists, path, **kwargs)  # type: ignore[no-any-return]
        plugin, path, uri = here
        return path in ("", "/") or plugin.exists(uri)

    def isdir(self, path: str) -> bool:
        here = self._here(path)
        if here is None:
            kind = self._kept_kind(self._strip_protocol(path))
            if kind is not None:
                return kind == "directory"
            return sync(self.loop, self._isdir, path)  # type: ignore[no-any-return]
        plugin, path, uri = here
        return path in ("", "/") or plugin.isdir(uri)

    def isfile(self, path: str) -> bool:
        try:
            return bool(self.info(path)["type"] == "file")
        except FileNotFoundError:
            return False

    def size(self, path: str) -> int:
        return int(self.info(path)["size"])

    def modified(self, path: str) -> datetime.datetime:
        """When the file last changed, in UTC (as fsspec's ``LocalFileSystem``
        says it). A directory of a store that keeps no time for it (an
        object store's prefix, a store's top) is an ``IsADirectoryError``,
        as with s3fs."""
        info = self.info(path)
        if not info.get("mtime") and info["type"] == "directory":
            raise PathIsDirectoryError("a directory of this store has no modification time", op="modified", path=path)
        return datetime.datetime.fromtimestamp(info["mtime"], tz=datetime.timezone.utc)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        here = self._here(path)
        if here is None:
            return sync(self.loop, self._cat_file, path, start=start, end=end, **kwargs)  # type: ignore[no-any-return]
        plugin, _, uri = here
        if start is None and end is None:
            return plugin.read_file(uri)
        first, stop = _span(start, end, plugin.get_file_size(uri) if _needs_size(start, end) else 0)
        buffer = bytearray(max(0, stop - first))
        if buffer:
            del buffer[plugin.read_into(uri, buffer, first) :]
        return bytes(buffer)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        here = self._here(path)
        if here is None or self._intrans:
            sync(self.loop, self._pipe_file, path, value, mode=mode, **kwargs)
            return
        plugin, path, uri = here
        if mode == "create" and plugin.exists(uri):
            raise FileExistsError(f"{self.unstrip_protocol(path)} exists")
        try:
            write_whole(plugin, uri, value, atomic=True, attributes=None)
        except NotFoundError:  # a folder above it is missing: the Env's create_parents decides
            sync(self.loop, self._pipe_file, path, value, mode=mode, **kwargs)

    async def _cat(
        self, path: Any, recursive: bool = False, on_error: str = "raise", batch_size: int | None = None, **kwargs: Any
    ) -> Any:
        """fsspec's cat, the files read as a dataset prefetch reads them
        (many per call into C on a local filesystem, many requests per call
        on a store that reads in bulk): bytes for one path, else {path:
        bytes}; on_error "raise", "omit" or "return" (the exception as the
        value)."""
        paths = await self._expand_path(path, recursive=recursive)
        read = self.env.prefetch([self._uri(p) for p in paths], in_flight=64, errors="deliver", max_bytes=1 << 62)
        results: list[Any] = [data async for _, data in read]
        if on_error == "raise":
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        if len(paths) > 1 or isinstance(path, list) or paths[0] != self._strip_protocol(path):
            return {
                p: r for p, r in zip(paths, results, strict=True) if on_error != "omit" or not isinstance(r, Exception)
            }
        return results[0]

    # ---- writing ------------------------------------------------------------------

    async def _pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        uri = self._uri(path)
        if mode == "create" and await self.env.exists(uri):
            raise FileExistsError(f"{self.unstrip_protocol(path)} exists")
        if self._intrans:
            staged = StagedFile(self, path)
            await self.env.write_file(staged.uri, value, atomic=False)
            self.transaction.files.append(staged)
            return
        try:
            await self.env.write_file(uri, value)
        finally:
            self.invalidate_cache(path)

    async def _put_file(
        self, lpath: str, rpath: str, mode: str = "overwrite", callback: Any = None, **kwargs: Any
    ) -> None:
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            await self._makedirs(rpath, exist_ok=True)
            return
        if mode == "create" and await self.env.exists(self._uri(rpath)):
            raise FileExistsError(f"{self.unstrip_protocol(rpath)} exists")
        try:
            await self.env.copy(os.path.abspath(lpath), self._uri(rpath), progress=_progress(callback, lpath))
        finally:
            self.invalidate_cache(rpath)

    async def _get_file(self, rpath: str, lpath: str, callback: Any = None, **kwargs: Any) -> None:
        rpath = self._strip_protocol(rpath)
        if await self._isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        await self.env.copy(self._uri(rpath), os.path.abspath(lpath), progress=_progress(callback, None))

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        if await self._isdir(path1):
            await self._makedirs(path2, exist_ok=True)
            return
        try:
            await self.env.copy(self._uri(path1), self._uri(path2))
        finally:
            self.invalidate_cache(path2)

    async def _mv(
        self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        """One rename where both sides are single paths (atomic for a file,
        and for a directory where the plugin has ``rename_dir``); fsspec's
        copy-then-delete for globs and lists."""
        single = isinstance(path1, str) and isinstance(path2, str) and not has_magic(path1)
        if single and (recursive or not await self._isdir(path1)) and maxdepth is None:
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            if src == dst:
                return
            if await self._isdir(dst):
                dst = self._join(dst, posixpath.basename(src))
            try:
                await self.env.rename(self._uri(src), self._uri(dst))
            finally:
                self.invalidate_cache(src)
                self.invalidate_cache(dst)
            return
        await self._copy(path1, path2, recursive=recursive, maxdepth=maxdepth, on_error="raise")
        await self._rm(path1, recursive=recursive)

    mv = sync_wrapper(_mv)

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        await self._remove(path, tree=False)

    async def _remove(self, path: str, *, tree: bool) -> None:
        """Delete a file, or a directory: empty, or (tree) with all below it."""
        uri = self._uri(path)
        try:
            if not await self.env.isdir(uri):
                await self.env.rm(uri)
            elif tree:
                await self.env.rmtree(uri)
            else:
                await self.env.rmdir(uri)
        finally:
            self.invalidate_cache(path)

    async def _rm(
        self,
        path: Any,
        recursive: bool = False,
        batch_size: int | None = None,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Delete files; with recursive, a directory and all below it (one
        recursive delete per directory)."""
        if recursive and maxdepth is None:
            tops = await self._expand_path(path, recursive=False)
            await asyncio.gather(*(self._remove(p, tree=True) for p in tops))
            return
        await super()._rm(path, recursive=recursive, batch_size=batch_size, maxdepth=maxdepth)

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.invalidate_cache(path)
        uri = self._uri(path)
        if create_parents:
            await self.env.makedirs(uri, exist_ok=True)
        else:
            await self.env.mkdir(uri)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        here = self._here(path)
        if here is None:
            sync(self.loop, self._mkdir, path, create_parents=create_parents, **kwargs)
            return
        plugin, _, uri = here
        if create_parents:
            plugin.makedirs(uri, exist_ok=True)
        else:
            plugin.create_dir(uri)

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.invalidate_cache(path)
        await self.env.makedirs(self._uri(path), exist_ok=exist_ok)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        here = self._here(path)
        if here is None:
            sync(self.loop, self._makedirs, path, exist_ok=exist_ok)
            return
        plugin, _, uri = here
        plugin.makedirs(uri, exist_ok=exist_ok)

    async def _rmdir(self, path: str) -> None:
        try:
            await self.env.rmdir(self._uri(path))
        finally:
            self.invalidate_cache(path)

    rmdir = sync_wrapper(_rmdir)

    # ---- files ----------------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: Any = None,
        **kwargs: Any,
    ) -> BridgeFile | DirectFile | DirectWriter | RangeFile:
        path = self._strip_protocol(path)
        if mode == "rb" and "cache_type" in kwargs:  # fsspec's cache asked for by name
            block = block_size or "default"
            return RangeFile(self, path, mode, block, autocommit, cache_options=cache_options, **kwargs)
        uri = self._uri(path)
        direct = mode == "rb" or (mode in ("wb", "xb") and autocommit and not self._intrans)
        plugin = _plugin_here(self, uri) if direct else None
        if plugin is None:
            return BridgeFile(self, path, mode, block_size=block_size, autocommit=autocommit)
        if mode == "rb":
            return DirectFile(self, plugin, path, uri, block_size)
        if mode == "xb" and plugin.exists(uri):
            raise FileExistsError(f"{self.unstrip_protocol(path)} exists")
        try:
            return DirectWriter(self, plugin, path, uri, block_size)
        except NotFoundError:  # a folder above it is missing: the Env's create_parents decides
            return BridgeFile(self, path, mode, block_size=block_size, autocommit=autocommit)

    async def open_async(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        """An asyncfs stream (``await f.read()``, ``await f.write(...)``,
        ``await f.close()``) on path, for code on a running loop."""
        if "b" not in mode or kwargs.get("compression"):
            raise ValueError("open_async takes binary modes without compression")
        if mode != "rb":
            self.invalidate_cache(path)  # its listings change when the stream lands
        return await self.env.open(self._uri(path), mode, compression=None, **kwargs)

    async def _commit(self, staged: list[StagedFile]) -> None:
        """Land staged files on their targets: in one asyncfs transaction on
        the deepest folder holding them all, so readers see all or none;
        where that folder cannot be a transaction root (a bucket, ``/``),
        file by file, each rename atomic."""
        if not staged:
            return
        for item in staged:
            self.invalidate_cache(item.path)
        root = posixpath.commonpath([posixpath.dirname(s.path) for s in staged])
        try:
            transaction = await self.env.transaction(self._uri(root)).begin()
        except InvalidArgumentError:  # a top cannot be a transaction root
            for item in staged:
                await self.env.rename(item.uri, self._uri(item.path))
            return
        try:
            for item in staged:
                await transaction.rename(posixpath.relpath(item.staged_path, root), posixpath.relpath(item.path, root))
        except BaseException:
            await transaction.abort()
            raise
        await transaction.commit()


def _progress(callback: Any, source: str | None) -> Any:
    if callback is None or not hasattr(callback, "relative_update"):
        return None
    if source is not None and hasattr(callback, "set_size"):
        callback.set_size(os.path.getsize(source))
    return callback.relative_update


def _rebuild(
    scheme: str, options: Mapping[str, Any], env: Env | None, recipe: RegistryRecipe | None
) -> AsyncfsFileSystem:
    if recipe is not None:
        recipe.build()  # the plugins the sending process had loaded, loaded here too
    cls = filesystem_class(scheme)
    # env=None spelled out would change fsspec's cache key: the same options
    # must find the instance already made
    return cls(env=env, **options) if env is not None else cls(**options)


# ---- protocols -------------------------------------------------------------------------

_classes: dict[str, type[AsyncfsFileSystem]] = {"file": AsyncfsFileSystem}
_classes_lock = threading.Lock()


def filesystem_class(scheme: str) -> type[AsyncfsFileSystem]:
    """The :class:`AsyncfsFileSystem` subclass serving an asyncfs scheme
    (``""`` and ``"file"`` are the same)."""
    scheme = scheme or "file"
    with _classes_lock:
        cls = _classes.get(scheme)
        if cls is None:
            names = (scheme, *_ALIASES.get(scheme, ()))
            protocols = tuple(protocol_for(name) for name in names)
            attrs = {
                "scheme": scheme,
                "protocol": protocols if len(protocols) > 1 else protocols[0],
                "root_marker": "/" if scheme in _LOCAL else "",
                "local_paths": scheme in _LOCAL,
                "_prefixes": tuple(f"{name}://" for name in (*protocols, *names))
                + ((f"{protocol_for(scheme)}:", f"{scheme}:") if scheme in _LOCAL else ()),
                "__module__": __name__,
                "__doc__": f"fsspec's view of asyncfs's {scheme}:// (protocol {protocol_for(scheme)}).",
            }
            cls = _classes[scheme] = type(f"AsyncfsFileSystem[{scheme}]", (AsyncfsFileSystem,), attrs)
        return cls


def register(schemes: Iterable[str] | None = None) -> list[str]:
    """Register ``asyncfs+<scheme>`` with fsspec for each scheme (default:
    every scheme the process-wide registry has); returns the protocols."""
    names = default_registry().schemes() if schemes is None else list(schemes)
    protocols = []
    for scheme in dict.fromkeys(s or "file" for s in names):
        fsspec.register_implementation(protocol_for(scheme), filesystem_class(scheme), clobber=True)
        protocols.append(protocol_for(scheme))
    return protocols


# The entry points name these (pyproject.toml, "fsspec.specs").
MemFileSystem = filesystem_class("mem")
S3FileSystem = filesystem_class("s3")
HttpFileSystem = filesystem_class("http")
HttpsFileSystem = filesystem_class("https")
GsFileSystem = filesystem_class("gs")
AzFileSystem = filesystem_class("az")
AbfsFileSystem = filesystem_class("abfs")
AbfssFileSystem = filesystem_class("abfss")

register()


def _register_loaded(info: PluginInfo) -> None:
    register(info.schemes)


add_load_listener(_register_loaded)
