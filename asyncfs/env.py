"""``asyncfs.Env``: the async entry point. It resolves URIs to filesystems,
owns the worker pool every blocking plugin call runs on, and offers the
whole operation set::

    async with asyncfs.Env() as env:
        await env.write_file("mem://data/a.bin", b"...")
        data = await env.read_file("mem://data/a.bin")
        await env.copy("mem://data", "file:///tmp/data", recursive=True)
"""

from __future__ import annotations

import copyreg
import os
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import anyio

from . import _uri
from ._async import (
    AsyncModularFileSystem,
    AsyncRandomAccessFile,
    AsyncWritableFile,
    EnvMeters,
    Metrics,
    Progress,
    WorkerPool,
    closed_pool,
    follow_meters,
    operation_stats,
    shared_network_pool,
)
from ._async import transfer as _transfer
from ._sync import (
    FileStatistics,
    IncompleteWrite,
    ModularFileSystem,
    PluginInfo,
    Registry,
    RegistryRecipe,
    StoreTraffic,
    default_registry,
    traffic_of,
)
from ._uri import StrPath
from .errors import NotFoundError, StatusError, UnimplementedError

# streams, prefetch and transactions are imported when first used
if TYPE_CHECKING:
    from typing_extensions import Buffer

    from ._native import Option
    from ._streams import (
        AsyncBinaryReader,
        AsyncBinaryWriter,
        AsyncTextReader,
        AsyncTextWriter,
        Prefetch,
        PrefetchRecords,
        Stream,
        StreamOpener,
    )
    from ._transactions import Transaction
else:
    Buffer = object

__all__ = ["Env", "default_env"]

T = TypeVar("T")


class Env:
    """URIs (``scheme://[host]/path``; bare paths and ``file://`` go to the
    posix plugin) resolved to :class:`AsyncModularFileSystem` instances that
    share one bounded, batching worker pool.

    ``workers`` bounds the pool's threads, each started when work finds the
    others busy (default :func:`asyncfs._async.pool.default_workers`),
    ``max_in_flight`` caps the operations queued or running at once per event
    loop (more wait for room, so memory stays bounded), ``worker_nice`` is the
    workers' CPU priority relative to the event loop's thread (Linux nice;
    higher keeps the loop more responsive while workers copy large buffers,
    lower keeps them from being starved by other busy processes),
    ``copy_chunk`` is the block size of copies across schemes. ``registry`` defaults to the
    process-wide one, which has the built-in plugins. ``close_timeout`` bounds
    how long closing waits for plugin calls that are stuck (a hung network
    peer): after it they are abandoned, with an
    :class:`~asyncfs.errors.AbandonedOperationWarning` naming each.

    Writes (``write_file``, ``append``, ``open`` for writing, ``copy``, and
    so TFRecord writers) create the folders missing above their target, as
    ``open`` on most tools' paths would be expected to; ``create_parents=False``
    keeps the plugins' own rule (TensorFlow's: the parent must exist). Object
    stores need no parents for a write; a copy, whose target folder the s3
    plugin checks as a local filesystem would, gets it made inside the
    bucket. A missing bucket is never created this way.

    Plugins whose calls wait on a network (s3://; the ASYNCFS_PLUGIN_NETWORK
    flag) run on a second pool of at most ``network_workers`` threads
    (default 8; while others are busy, one more starts when a call has
    waited a look of the pool's monitor, 10 to 20 ms),
    so that waiting on a network never crowds the few threads that copy
    local files; that pool is the process's, shared by every Env with the
    same ``network_workers`` and ``max_in_flight``, and its threads leave
    after 30 s without work. A network plugin's requests run on its own engine thread
    (plugins/objstore), and concurrent ``read_file``, ``stat`` and
    ``write_file`` calls go to it together, 16 per worker call: 8
    workers keep 128 requests in flight. Calls that are not combined (opens,
    listings, renames) take a worker each while their request is out: raise
    ``network_workers`` for many such calls at once on a distant store. Each Env
    serves such a scheme with a filesystem of its own, started on first
    use: it reads the environment then, follows the options set on the
    registry's (except those set on it), and its own options, credentials
    and connections are this Env's (:meth:`ModularFileSystem.new_instance`).
    Local filesystems are the registry's, shared by its Envs (``mem://``
    files included), except the schemes named in ``own``, which this Env
    serves as it serves network ones: ``own={"mem"}`` is a ``mem://`` that
    no other Env sees (``""`` names bare paths, ``"file"`` ``file://`` URIs).

    ``metrics`` (on by default, about 0.3 µs a call) counts each call per
    scheme and operation: :meth:`metrics` reads the counts, errors, bytes
    and latencies; with OpenTelemetry set up by the application, calls are
    also spans and measurements there (docs/observability.md).

    Inside a transaction, call the same methods on the
    :class:`~asyncfs.Transaction` instead (``await txn.write_file(...)``):
    it has the reading, writing and stream methods below, with paths
    relative to its root.
    """

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        workers: int | None = None,
        max_in_flight: int = 4096,
        worker_nice: int = 0,
        copy_chunk: int = 8 << 20,
        network_workers: int = 8,
        close_timeout: float = 10.0,
        create_parents: bool = True,
        own: Iterable[str] = (),
        metrics: bool = True,
    ) -> None:
        if isinstance(own, str):
            raise TypeError(f"own is a collection of schemes, such as {{{own!r}}}, not a str")
        # the registry is resolved on first use, so an Env unpickled in a
        # worker loads its plugins only when it is used there
        self._registry: Registry | RegistryRecipe | None = registry
        self._options: dict[str, Any] = {
            "workers": workers,
            "max_in_flight": max_in_flight,
            "worker_nice": worker_nice,
            "copy_chunk": copy_chunk,
            "network_workers": network_workers,
            "close_timeout": close_timeout,
            "create_parents": create_parents,
            "own": tuple(sorted(set(own))),
            "metrics": metrics,
        }
        self.pool = WorkerPool(workers, max_in_flight=max_in_flight, worker_nice=worker_nice)
        # Shared by every Env of the process with these settings (threads
        # start on first use, and leave when idle): ten Envs, or ten fsspec
        # filesystems with options of their own, hold one set.
        self.network_pool = shared_network_pool(network_workers, max_in_flight)
        self.copy_chunk = copy_chunk
        self.close_timeout = close_timeout
        self.create_parents = create_parents
        self._filesystems: dict[str, AsyncModularFileSystem] = {}
        self._meters: EnvMeters | None = follow_meters() if metrics else None
        if self._meters is not None:
            self._meters.follow_stores(partial(_stores_of, self._filesystems))
        # options a pickle of an Env carried for its own filesystems,
        # set when each starts here
        self._carried: dict[str, tuple[Option, ...]] = {}

    @property
    def registry(self) -> Registry:
        """The registry this Env resolves URIs with."""
        source = self._registry
        if not isinstance(source, Registry):
            source = self._registry = default_registry() if source is None else source.build()
        return source

    def __reduce__(self) -> tuple[Any, ...]:
        """An Env pickles as a recipe: its options, and which plugins its
        registry had (the process-wide registry, or its plugin libraries by
        path). It is rebuilt in the receiving process, lazily, with pools of
        its own; plugins configure themselves from that process's
        environment, and ``mem://`` there is that process's own."""
        source = self._registry
        recipe = source.recipe() if isinstance(source, Registry) else source
        carried = dict(self._carried)
        for scheme, fs in list(self._filesystems.items()):
            if self._owns(scheme, fs.wrapped):
                carried[scheme] = fs.wrapped.travelling_options()
        return (_rebuild_env, (recipe, self._options, carried))

    async def __aenter__(self) -> Env:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self, timeout: float | None = None) -> list[str]:
        """Stop the worker threads, after the work already queued, without
        blocking the event loop; see :meth:`close`."""
        abandoned: list[str] = await anyio.to_thread.run_sync(self.close, timeout)
        return abandoned

    def close(self, timeout: float | None = None) -> list[str]:
        """Stop the worker threads after the work already queued (blocks).
        Waits at most timeout seconds (default ``close_timeout``) for calls
        stuck in a plugin; those are abandoned on daemon threads, their
        callers get :class:`~asyncfs.UnavailableError`, and an
        :class:`~asyncfs.errors.AbandonedOperationWarning` and the returned
        list name each call and its URI. Network filesystems it used
        close their idle connections (``flush_caches``)."""
        budget = self.close_timeout if timeout is None else timeout
        abandoned = self.pool.shutdown(timeout=budget)
        # The network pool is the process's: this Env's network filesystems
        # leave it, so that their calls now raise EnvClosedError (calls under
        # way finish on it; files already open keep it until closed).
        self.network_pool = closed_pool()
        for scheme, fs in list(self._filesystems.items()):
            if fs.network:
                self._filesystems[scheme] = self._on_pools(fs.wrapped)
                if fs.wrapped.offers("flush_caches"):
                    fs.wrapped.flush_caches()  # a network plugin's idle connections
        return abandoned

    # ---- plugins ---------------------------------------------------------------

    async def load_plugin(self, library: str | os.PathLike[str], *, replace: bool = False) -> PluginInfo:
        """Load a plugin library (its init runs on the worker pool)."""
        info: PluginInfo = await self.pool.run(self._load, os.fspath(library), replace, mutating=True)
        return info

    def _load(self, library: str, replace: bool) -> PluginInfo:
        info = self.registry.load_plugin(library, replace=replace)
        for scheme in info.schemes:
            self._filesystems.pop(scheme, None)
        return info

    def schemes(self) -> list[str]:
        """The URI schemes this Env serves, sorted (``""`` is bare paths)."""
        return self.registry.schemes()

    def plugins(self) -> list[PluginInfo]:
        """The plugins of this Env's registry, in load order."""
        return self.registry.plugins()

    def filesystem(self, uri: StrPath) -> AsyncModularFileSystem:
        """The filesystem serving uri (a URI, a bare path, or ``scheme://``);
        a URI no plugin may be handed raises :class:`InvalidArgumentError`
        here (see :func:`asyncfs._uri.check_uri`)."""
        scheme = _uri.checked_scheme(os.fspath(uri))
        fs = self._filesystems.get(scheme)
        if fs is None:
            fs = self._filesystems.setdefault(scheme, self._start(scheme))
        return fs

    def _start(self, scheme: str) -> AsyncModularFileSystem:
        """The filesystem this Env serves scheme with. A network store's is
        its own (:meth:`ModularFileSystem.new_instance`): configured from
        the environment now, following the options set on the registry's, and
        holding its own credentials and connections, as each client of
        boto3 or obstore does. Local filesystems are the registry's, unless
        named in ``own``."""
        wrapped = self.registry.get(scheme)
        if self._owns(scheme, wrapped):
            wrapped = wrapped.new_instance()
            for option in self._carried.pop(scheme, ()):
                wrapped.set_option(option.name, *option.values, travels=True)
        return self._on_pools(wrapped)

    def _owns(self, scheme: str, fs: ModularFileSystem) -> bool:
        """Whether this Env serves scheme with a filesystem of its own."""
        return fs.metadata.network or scheme in self._options["own"]

    def _on_pools(self, fs: ModularFileSystem) -> AsyncModularFileSystem:
        """fs run on this Env's pool for its kind: network or local."""
        meter = None if self._meters is None else self._meters[fs.scheme]
        return AsyncModularFileSystem(fs, self.network_pool if fs.metadata.network else self.pool, meter)

    def _at(self, uri: StrPath) -> tuple[AsyncModularFileSystem, str]:
        """The filesystem serving uri, and uri as a string. uri is checked
        once per call, by the filesystem that hands it to C (see
        :func:`asyncfs._uri.check_uri`); only a scheme not served yet takes
        the full check here."""
        text = os.fspath(uri)
        fs = self._filesystems.get(_uri.scheme_part(text)) if type(text) is str else None
        return (self.filesystem(text) if fs is None else fs), text

    # ---- what it did ----------------------------------------------------------------

    def metrics(self) -> Metrics:
        """What this Env measured of its work so far, as plain data: per
        scheme and operation, the calls, their errors, bytes and latency
        (none when made with ``metrics=False``), and its pools' state now
        (docs/observability.md)."""
        meters = [] if self._meters is None else self._meters.items()
        return Metrics(
            operations=operation_stats(meters),
            pool=self.pool.stats(),
            network_pool=self.network_pool.stats(),
            stores=_stores_of(self._filesystems),
        )

    # ---- transactions ------------------------------------------------------------

    def transaction(self, root: StrPath, *, timeout: float = 30.0, native: bool | None = None) -> Transaction:
        """``async with env.transaction(root) as txn``: every change made
        through txn under root becomes visible at once when the block ends,
        or not at all if it raises or is cancelled (docs/transactions.md).
        A transaction on an overlapping root waits up to timeout seconds,
        then raises TransactionConflictError. native picks the plugin's own
        transaction ops (default: when it has them) or the generic path."""
        from ._transactions import Transaction  # noqa: PLC0415 (lazy: see the imports)

        fs, root = self._at(root)
        return Transaction(fs, root, timeout=timeout, native=native)

    async def recover(self, root: StrPath, *, native: bool | None = None) -> None:
        """Finish or undo what a crashed transaction left on root now (the
        next transaction on root would do it anyway). native as for
        :meth:`transaction`: a root is recovered by the path that wrote it."""
        async with self.transaction(root, native=native) as txn:
            await txn.abort()

    # ---- reading -----------------------------------------------------------------

    async def read_file(self, uri: StrPath) -> bytes:
        """The whole file at uri."""
        fs, uri = self._at(uri)
        return await fs.read_file(uri)

    async def read_into(self, uri: StrPath, buffer: Buffer, offset: int = 0) -> int:
        """Read from offset of uri into a caller-owned buffer, no copy;
        returns the byte count (short at end of file)."""
        fs, uri = self._at(uri)
        return await fs.read_into(uri, buffer, offset)

    async def new_random_access_file(self, uri: StrPath) -> AsyncRandomAccessFile:
        """A file opened for positional reads (``await f.read(offset, n)``)."""
        fs, uri = self._at(uri)
        return await fs.new_random_access_file(uri)

    def memory_region(self, uri: StrPath) -> AbstractAsyncContextManager[memoryview]:
        """``async with env.memory_region(uri) as view``: a zero-copy,
        read-only view of the file, valid inside the block."""
        fs, uri = self._at(uri)
        return fs.memory_region(uri)

    # ---- streams ---------------------------------------------------------------------

    @overload
    def open(self, uri: str, mode: Literal["rb"], **options: Any) -> StreamOpener[AsyncBinaryReader]: ...
    @overload
    def open(self, uri: str, mode: Literal["r", "rt"], **options: Any) -> StreamOpener[AsyncTextReader]: ...
    @overload
    def open(self, uri: str, mode: Literal["wb", "ab"], **options: Any) -> StreamOpener[AsyncBinaryWriter]: ...
    @overload
    def open(self, uri: str, mode: Literal["w", "wt", "a", "at"], **options: Any) -> StreamOpener[AsyncTextWriter]: ...
    @overload
    def open(self, uri: str, mode: str = ..., **options: Any) -> StreamOpener[Stream]: ...

    def open(self, uri: StrPath, mode: str = "rb", **options: Any) -> StreamOpener[Any]:
        """A buffered stream on uri: ``async with env.open(uri, "rb") as f``
        (or ``f = await env.open(...)``). Modes r, rb, w, wb, a, ab (t for
        text is the default without b). Options: encoding and errors (text),
        compression ("infer" from the suffix, a codec name, or None),
        block_size (bytes per plugin call: 1 MiB, 128 KiB reading a local
        file as text), readahead (blocks read
        ahead, 2), atomic ("w" modes: a temporary sibling renamed over the
        target on close; True). Inside a transaction, ``txn.open``."""
        from ._streams import StreamOpener, open_stream  # noqa: PLC0415 (lazy: see the imports)

        fs, uri = self._at(uri)
        opening = partial(open_stream, fs, uri, mode, **options)
        return StreamOpener(opening if mode.startswith("r") else partial(self._making_parents, fs, uri, opening))

    # ---- datasets ---------------------------------------------------------------------

    def prefetch(self, uris: Iterable[StrPath], **options: Any) -> Prefetch | PrefetchRecords:
        """``async for path, data in env.prefetch(uris)``: whole files, read
        concurrently under an in-flight and a byte budget (in_flight=32,
        max_bytes=256 MiB, ordered=True, errors="raise"; see
        :mod:`asyncfs._streams.prefetch`). With records=True, the TFRecord records of
        the files, interleaved (cycle_length=4)."""
        from ._streams import prefetch, prefetch_records  # noqa: PLC0415 (lazy: see the imports)

        paths: Iterable[str] = map(os.fspath, uris)  # type: ignore[arg-type]  # (lazily: uris may be a long generator)
        if options.pop("records", False):
            return prefetch_records(self, paths, **options)
        return prefetch(self, paths, **options)

    # ---- queries -------------------------------------------------------------------

    async def exists(self, uri: StrPath) -> bool:
        """Whether uri exists; errors other than NOT_FOUND (a denied
        credential, a gateway down) raise."""
        fs, uri = self._at(uri)
        return await fs.exists(uri)

    async def files_exist(self, uris: Sequence[StrPath]) -> list[bool]:
        """Whether each uri exists: per scheme, chunks of batch-exists calls
        run in parallel; results in the order given."""
        return await self._per_scheme(AsyncModularFileSystem.files_exist, uris)

    async def stat_files(self, uris: Sequence[StrPath]) -> list[FileStatistics | StatusError]:
        """:meth:`stat` of each uri, many per plugin call (per scheme, in
        chunks run in parallel): in the order given, each a
        :class:`FileStatistics` or the error that uri's stat would raise
        (a :class:`NotFoundError` for a missing one), so that one missing
        path does not hide the others' answers."""
        return await self._per_scheme(AsyncModularFileSystem.stat_files, uris)

    async def _per_scheme(
        self, call: Callable[[AsyncModularFileSystem, list[str]], Awaitable[list[T]]], uris: Sequence[StrPath]
    ) -> list[T]:
        """call(fs, paths) for the uris of each scheme; the answers in the
        order of uris."""
        paths = [os.fspath(uri) for uri in uris]
        by_scheme: dict[str, list[int]] = defaultdict(list)
        for i, path in enumerate(paths):
            by_scheme[_uri.scheme_of(path)].append(i)
        result: list[T | None] = [None] * len(paths)
        for indices in by_scheme.values():
            answers = await call(self.filesystem(paths[indices[0]]), [paths[i] for i in indices])
            for i, answer in zip(indices, answers, strict=True):
                result[i] = answer
        return result  # type: ignore[return-value]  # every index was set

    async def stat(self, uri: StrPath) -> FileStatistics:
        """Size, modification time and kind of uri."""
        fs, uri = self._at(uri)
        return await fs.stat(uri)

    async def isdir(self, uri: StrPath) -> bool:
        """Whether uri is a directory (False when it does not exist)."""
        fs, uri = self._at(uri)
        return await fs.isdir(uri)

    async def size(self, uri: StrPath) -> int:
        """The size of the file at uri, in bytes."""
        fs, uri = self._at(uri)
        return await fs.size(uri)

    async def listdir(self, uri: StrPath) -> list[str]:
        """The sorted names of the entries of the directory uri."""
        fs, uri = self._at(uri)
        return await fs.listdir(uri)

    async def scandir(self, uri: StrPath) -> list[tuple[str, FileStatistics]]:
        """The entries of the directory uri with their statistics, sorted by
        name: one plugin call where the plugin lists with statistics
        (``get_children_stats``), else a listing and the stats in parallel."""
        fs, uri = self._at(uri)
        return sorted(await fs.get_children_stats(uri))

    def walk(self, uri: StrPath) -> AsyncIterator[tuple[str, list[str], list[str]]]:
        """``async for folder, dirs, files in env.walk(uri)``: as
        :func:`os.walk`, top-down, names sorted, a level's folders listed
        concurrently."""
        fs, uri = self._at(uri)
        return fs.walk(uri)

    async def glob(self, pattern: StrPath, *, recursive: bool = False) -> list[str]:
        """The sorted paths matching pattern; see
        :meth:`AsyncModularFileSystem.glob` (``**`` with recursive)."""
        fs, pattern = self._at(pattern)
        return await fs.glob(pattern, recursive=recursive)

    async def incomplete_writes(self, uri: StrPath) -> list[IncompleteWrite]:
        """The writes at or below uri that were started and never finished
        nor discarded: on s3://, multipart uploads whose writer died, which
        the store bills for and never shows. Sorted by target."""
        fs, uri = self._at(uri)
        return await fs.incomplete_writes(uri)

    async def abort_incomplete_writes(self, uri: StrPath, *, older_than: float = 0.0) -> list[IncompleteWrite]:
        """Discard the incomplete writes at or below uri started more than
        older_than seconds ago, in parallel, and return them. A write still
        in progress elsewhere is incomplete too: give older_than above the
        longest write that may be running. One that finished or went away
        meanwhile counts as done."""
        fs, uri = self._at(uri)
        cutoff = time.time_ns() - int(older_than * 1e9)
        stale = [w for w in await fs.incomplete_writes(uri) if w.started_nsec <= cutoff]
        results = await fs.run_many(fs.wrapped.abort_incomplete_write, [(w.uri, w.id) for w in stale], mutating=True)
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, NotFoundError):
                raise result
        return stale

    async def translate_name(self, uri: StrPath) -> str:
        """The plugin's own name for uri (the path it is handed)."""
        fs, uri = self._at(uri)
        return await fs.translate_name(uri)

    # ---- writing ---------------------------------------------------------------------

    async def write_file(
        self, uri: StrPath, data: Buffer, *, atomic: bool = True, attributes: Mapping[str, str] | None = None
    ) -> None:
        """Create or replace uri with data; atomically (temporary sibling,
        then rename) unless atomic is false or the plugin cannot rename.
        attributes (s3://: ``content-type`` and user metadata) are written
        with it where the plugin keeps attributes; see :meth:`attributes`."""
        fs, uri = self._at(uri)
        await self._making_parents(fs, uri, lambda: fs.write_file(uri, data, atomic=atomic, attributes=attributes))

    async def attributes(self, uri: StrPath) -> dict[str, str]:
        """The attributes of the file at uri: on s3://, its ``content-type``
        and user metadata (``x-amz-meta-*``, names lowercase). A plugin that
        keeps none raises UnimplementedError."""
        fs, uri = self._at(uri)
        return await fs.attributes(uri)

    async def append(self, uri: StrPath, data: Buffer) -> None:
        """Append data to uri, creating it (and missing folders above it)
        if needed."""
        fs, uri = self._at(uri)
        await self._making_parents(fs, uri, lambda: fs.append(uri, data))

    async def new_writable_file(self, uri: StrPath) -> AsyncWritableFile:
        """A file opened for writing, truncated; it lands at close
        (``async with`` closes it)."""
        fs, uri = self._at(uri)
        return await fs.new_writable_file(uri)

    async def new_appendable_file(self, uri: StrPath) -> AsyncWritableFile:
        """A file opened for appending."""
        fs, uri = self._at(uri)
        return await fs.new_appendable_file(uri)

    async def mkdir(self, uri: StrPath) -> None:
        """Create the directory uri; its parent must exist."""
        fs, uri = self._at(uri)
        await fs.mkdir(uri)

    async def makedirs(self, uri: StrPath, *, exist_ok: bool = True) -> None:
        """Create uri and every missing directory above it; an existing
        uri is an error only with exist_ok false."""
        fs, uri = self._at(uri)
        await fs.makedirs(uri, exist_ok=exist_ok)

    async def rm(self, uri: StrPath) -> None:
        """Delete the file uri."""
        fs, uri = self._at(uri)
        await fs.rm(uri)

    async def rmdir(self, uri: StrPath) -> None:
        """Delete the empty directory uri."""
        fs, uri = self._at(uri)
        await fs.rmdir(uri)

    async def rmtree(self, uri: StrPath) -> tuple[int, int]:
        """Delete uri and all below it; (undeleted files, dirs), (0, 0) when
        all went."""
        fs, uri = self._at(uri)
        return await fs.rmtree(uri)

    async def rename(self, src: StrPath, dst: StrPath) -> None:
        """Rename a file (replacing a file at dst) or a directory (dst must
        not exist: atomic on file:// and mem://, copy then delete on object
        stores). Both must be on one filesystem."""
        (source, src), (target, dst) = self._at(src), self._at(dst)
        if source is not target:
            raise UnimplementedError(
                "renaming across filesystems is not supported; copy, then rm",
                op="rename",
                path=f"{src} -> {dst}",
            )
        await source.rename(src, dst)

    async def copy(
        self, src: StrPath, dst: StrPath, *, recursive: bool = False, progress: Progress | None = None
    ) -> None:
        """Copy a file (natively within one scheme, streamed in chunks
        across schemes, always landing by rename); with recursive, a whole
        tree, its directories listed and files copied concurrently.
        ``progress`` (``tqdm``'s ``update``, say) is called with the bytes
        copied as files land: per file, or per directory level of a tree."""
        (source, src), (target, dst) = self._at(src), self._at(dst)
        if recursive and await source.isdir(src):
            await _transfer.copy_tree(source, src, target, dst, self.copy_chunk, progress=progress)  # makes dst
        else:
            copy = partial(_transfer.copy_file, source, src, target, dst, self.copy_chunk, progress=progress)
            await self._making_parents(target, dst, copy, source=(source, src))

    async def _making_parents(
        self,
        fs: AsyncModularFileSystem,
        uri: str,
        write: Callable[[], Awaitable[T]],
        *,
        source: tuple[AsyncModularFileSystem, str] | None = None,
    ) -> T:
        """write(), and if it failed because a folder above uri is missing,
        those folders made and write() once more (``create_parents``):
        nothing is looked up before a write that succeeds. A missing source
        (of a copy) is not a missing folder; a folder that another task made
        meanwhile is tried again as it is."""
        try:
            return await write()
        except NotFoundError:
            parent = _uri.parent(uri)
            if not self.create_parents or not parent:
                raise
            if source is not None and not await source[0].exists(source[1]):
                raise
            if fs.network and not await self._makes_folders_in(fs, parent):
                raise
        if not await fs.exists(parent):
            await fs.recursively_create_dir(parent)
        return await write()

    @staticmethod
    async def _makes_folders_in(fs: AsyncModularFileSystem, parent: str) -> bool:
        """On a network store, folders are made only inside a bucket (or
        other top) that exists: a missing bucket is never created this way."""
        top = _uri.parse_uri(parent)
        return bool(top.path.strip("/")) and await fs.exists(top.prefix())


def _stores_of(filesystems: Mapping[str, AsyncModularFileSystem]) -> dict[str, StoreTraffic]:
    """What the requests of the network stores among filesystems did, by
    scheme (the stores whose plugin counts them)."""
    found = {}
    for scheme, fs in list(filesystems.items()):
        traffic = traffic_of(fs.wrapped) if fs.network else None
        if traffic is not None:
            found[scheme] = traffic
    return found


def _rebuild_env(
    recipe: RegistryRecipe | None, options: dict[str, Any], carried: dict[str, tuple[Option, ...]] | None = None
) -> Env:
    env = Env(**options)
    env._registry = recipe
    env._carried = dict(carried or {})
    return env


_default_env: Env | None = None


def default_env() -> Env:
    """The process-wide Env (default options, process-wide registry), made
    on first use: what an unpickled :class:`AsyncModularFileSystem` runs on."""
    global _default_env
    if _default_env is None:
        _default_env = Env()
    return _default_env


# ---- pickling: an async filesystem travels as its sync one ------------------------------


def _reduce_async(fs: AsyncModularFileSystem) -> tuple[Any, ...]:
    """An async filesystem pickles as its synchronous filesystem; the
    receiving process runs it on the pools of its process-wide Env
    (:func:`default_env`). Registered here, with the Env the rebuild needs."""
    return (_rebuild_async, (fs.wrapped,))


def _rebuild_async(sync: ModularFileSystem) -> AsyncModularFileSystem:
    return default_env()._on_pools(sync)


copyreg.pickle(AsyncModularFileSystem, _reduce_async)
