"""Transactions: a directory (the root) that changes all at once or not at all.

    async with env.transaction("file:///ckpt/step-100") as txn:
        await txn.write_file("weights.bin", data)        # relative to the root
        await txn.write_file("file:///ckpt/step-100/meta.json", meta)
        await txn.rm("stale.tmp")
    # committed here; an exception or a cancellation rolls back instead

Two ways to stage, one behaviour (see docs/transactions.md):

- *native*, when the plugin implements the ABI's transaction ops (both
  built-in plugins do): the plugin keeps a staging copy of the root, the
  core stages changes in it through ordinary ops, and the commit is one
  atomic swap by the plugin. Readers never see a mix, even mid-commit.
- *generic*, for any plugin: changes are staged in a sibling directory; the
  commit writes a journal (the commit point), moves the staged files in,
  and removes the journal. After a crash, the next transaction on that root
  rolls a complete journal forward and otherwise rolls back, so the root
  holds the old or the new state, never a mix; only during the moves
  themselves can a reader that is not in the transaction see part of it.

Overlapping roots conflict: the second transaction waits for the first, up
to ``timeout`` seconds, then raises :class:`TransactionConflictError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from . import _uri
from ._fallbacks import write_by_rename
from .errors import (
    AbortedError,
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    StatusError,
    TransactionConflictError,
    TransactionStateError,
)
from .filesystem import FileStatistics, ModularFileSystem, TransactionToken
from .streams import AsyncBinaryWriter, AsyncTextWriter, Stream, StreamOpener, open_stream

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .async_filesystem import AsyncModularFileSystem
else:
    Buffer = object

__all__ = ["Transaction"]


def _sibling(root: str, suffix: str) -> str:
    """``<parent>/.<name>.<suffix>`` beside root (the name hashed when the
    whole would be longer than a directory entry may be)."""
    return _uri.short_sibling(root, ".", f".{suffix}")


def _check_root(fs: ModularFileSystem, root: str, translated: str) -> None:
    """Refuse a root that has no parent in its filesystem: a filesystem's
    top (``/``, ``file://``, ``mem:///``) or an object store's bucket. The
    staging, journal and locks live beside the root, and a top has no
    beside; committing it would replace everything."""
    segments = [part for part in translated.split("/") if part not in ("", ".")]
    if not segments or (fs.metadata.network and len(segments) == 1):
        what = "a bucket" if segments else "the top of its filesystem"
        raise InvalidArgumentError(
            f"a transaction root must be a folder inside a filesystem, not {what}; "
            f"use a folder below it (e.g. {root.rstrip('/')}/ckpt)",
            op="transaction",
            path=root,
        )


class Transaction:
    """One transaction on one root. Use it as an async context manager, or
    call :meth:`begin` and then :meth:`commit` or :meth:`abort`.

    Paths given to its methods are relative to the root, or URIs inside it.
    Reads see the transaction's own writes."""

    def __init__(self, afs: AsyncModularFileSystem, root: str, *, timeout: float, native: bool | None) -> None:
        parsed = _uri.parse_uri(root)  # "file:///" is file:// with path "", not "file:"
        self.root = parsed.prefix() + parsed.path.rstrip("/")
        self.timeout = timeout
        self._afs = afs
        self._fs = afs.sync
        use_native = self._fs.offers_transactions() if native is None else native
        self._stage: _Staging = (
            _NativeStaging(self._fs, self.root) if use_native else _GenericStaging(self._fs, self.root)
        )
        self.state = "new"
        self._key = ""
        self._staged = False  # the staging's begin() completed

    @property
    def native(self) -> bool:
        return isinstance(self._stage, _NativeStaging)

    def __repr__(self) -> str:
        kind = "native" if self.native else "generic"
        return f"<Transaction {self.root!r} {kind} {self.state}>"

    # ---- lifetime ------------------------------------------------------------------

    @property
    def committed(self) -> bool:
        """Whether the commit completed. A commit is shielded: a caller
        cancelled during it waits for it to finish and then sees the
        cancellation, so after ``CancelledError`` this tells what happened."""
        return self.state == "committed"

    async def begin(self) -> Transaction:
        """Start: wait (up to the timeout) for conflicting transactions, recover
        what a crashed one left on this root, and prepare staging. Cancelled
        (or timed out) while staging is prepared, it undoes what was prepared:
        no lock or staging outlives a begin() that did not return."""
        if self.state != "new":
            raise TransactionStateError(f"transaction on {self.root} is {self.state}, it cannot begin again")
        translated = await self._afs.translate_name(self.root)
        _check_root(self._fs, self.root, translated)
        # one key per plugin, whichever scheme spelled the root ("" and "file"
        # are both the posix plugin)
        key = f"{self._fs.metadata.library}:{translated}"
        deadline = anyio.current_time() + self.timeout
        delay = 0.005
        while True:
            try:
                _claim_root(key)  # each Transaction owns its root in this process
                try:
                    await self._mutate(self._begin_staging)
                except BaseException:
                    if self._staged:  # staging was prepared before the caller left: undo it
                        self._staged = False
                        with anyio.CancelScope(shield=True):
                            await self._mutate(self._stage.abort)
                    _release_root(key)
                    raise
                break
            except AbortedError:  # a conflicting transaction holds the root
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    raise TransactionConflictError(
                        f"another transaction kept an overlapping root busy for {self.timeout:g} s",
                        op="transaction",
                        path=self.root,
                    ) from None
                await anyio.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.2)
        self._key = key
        self.state = "active"
        return self

    def _begin_staging(self) -> None:
        self._stage.begin()
        self._staged = True

    def _commit_staging(self) -> None:
        self._stage.commit()
        self.state = "committed"

    async def commit(self) -> None:
        """Make every staged change visible at once. If the caller is
        cancelled meanwhile, the commit still finishes (or fails and rolls
        back) before the cancellation is raised: :attr:`committed` tells."""
        self._check_active()
        self.state = "committing"
        try:
            await self._mutate(self._commit_staging)
        except BaseException:
            if self.state != "committed":  # the commit itself failed: roll back
                self.state = "failed"
                with anyio.CancelScope(shield=True):
                    await self._mutate(self._stage.abort)
            raise
        finally:
            _release_root(self._key)

    async def abort(self) -> None:
        """Discard every staged change; the root stays as it was."""
        if self.state in ("aborted", "committed"):
            return
        self._check_active()
        self.state = "aborted"
        try:
            await self._mutate(self._stage.abort)
        finally:
            _release_root(self._key)

    async def __aenter__(self) -> Transaction:
        return await self.begin()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.state != "active":
            return
        if exc_type is None:
            await self.commit()
        else:
            with anyio.CancelScope(shield=True):  # roll back even when cancelled
                await self.abort()

    # ---- operations inside the transaction -----------------------------------------

    async def write_file(self, path: str, data: Buffer) -> None:
        await self._mutate(self._stage.write_file, self._relative(path), data)

    async def append(self, path: str, data: Buffer) -> None:
        await self._mutate(self._stage.append, self._relative(path), data)

    async def read_file(self, path: str) -> bytes:
        result: bytes = await self._read(self._stage.read_file, self._relative(path))
        return result

    async def exists(self, path: str) -> bool:
        result: bool = await self._read(self._stage.exists, self._relative(path))
        return result

    async def stat(self, path: str) -> FileStatistics:
        result: FileStatistics = await self._read(self._stage.stat, self._relative(path))
        return result

    async def isdir(self, path: str) -> bool:
        result: bool = await self._read(self._stage.isdir, self._relative(path))
        return result

    async def listdir(self, path: str = "") -> list[str]:
        result: list[str] = await self._read(self._stage.listdir, self._relative(path))
        return result

    async def rm(self, path: str) -> None:
        await self._mutate(self._stage.rm, self._relative(path))

    async def rmtree(self, path: str) -> None:
        await self._mutate(self._stage.rmtree, self._relative(path))

    async def rename(self, src: str, dst: str) -> None:
        await self._mutate(self._stage.rename, self._relative(src), self._relative(dst))

    async def mkdir(self, path: str) -> None:
        await self._mutate(self._stage.makedirs, self._relative(path), False)

    async def makedirs(self, path: str) -> None:
        await self._mutate(self._stage.makedirs, self._relative(path), True)

    def open(self, path: str, mode: str = "rb", **options: Any) -> StreamOpener[Any]:
        """A stream inside the transaction, as :meth:`asyncfs.Env.open`:
        reads see the transaction's writes; a written file is staged (and
        lands in the transaction on close; an aborted writer leaves nothing)."""
        rel = self._relative(path)
        return StreamOpener(lambda: self._open(rel, mode, **options))

    async def _open(self, rel: str, mode: str, **options: Any) -> Stream:
        pool, fs = self._afs.pool, self._fs
        if mode.startswith("r"):
            return await open_stream(pool, fs, await self._read(self._stage.source, rel), mode, **options)
        options.pop("atomic", None)  # staged files always land by rename
        if mode.startswith("w"):
            target = await self._mutate(self._stage.prepare_write, rel)
            return await open_stream(pool, fs, target, mode, atomic=True, **options)
        target = await self._mutate(self._stage.prepare_write, rel)
        temp = await self._mutate(self._stage.copy_for_append, rel)
        stream = await open_stream(pool, fs, temp, mode, **options)
        binary = stream.binary if isinstance(stream, AsyncTextWriter) else stream
        assert isinstance(binary, AsyncBinaryWriter)
        binary.land_as(target, temp)
        return stream

    # ---- plumbing ------------------------------------------------------------------------

    def _check_active(self) -> None:
        if self.state != "active":
            raise TransactionStateError(f"transaction on {self.root} is {self.state}")

    def _relative(self, path: str) -> str:
        self._check_active()
        if "://" in path or path.startswith("/"):
            if path.rstrip("/") == self.root:
                return ""
            if not path.startswith(self.root + "/"):
                raise TransactionStateError(f"{path} is outside the transaction's root {self.root}")
            path = path[len(self.root) + 1 :]
        cleaned = _uri.clean_path(path) if path else ""
        if cleaned == ".":
            return ""
        if cleaned.startswith(".."):
            raise TransactionStateError(f"{path} leaves the transaction's root {self.root}")
        return cleaned

    async def _mutate(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._afs.pool.run(fn, *args, mutating=True)

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._afs.pool.run(fn, *args, mutating=False)


# ---- staging strategies (synchronous: they run on the worker pool) ---------------------


class _Staging:
    """What both ways of staging offer; paths are relative to the root."""

    def __init__(self, fs: ModularFileSystem, root: str) -> None:
        self.fs = fs
        self.root = root

    def at_root(self, rel: str) -> str:
        return _uri.join(self.root, rel) if rel else self.root

    def staged(self, rel: str) -> str:
        raise NotImplementedError

    def _make_parent(self, rel: str) -> None:
        parent = rel.rpartition("/")[0]
        if parent:
            self.fs.recursively_create_dir(self.staged(parent))

    def begin(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def write_file(self, rel: str, data: Buffer) -> None:
        raise NotImplementedError

    def append(self, rel: str, data: Buffer) -> None:
        raise NotImplementedError

    def read_file(self, rel: str) -> bytes:
        raise NotImplementedError

    def exists(self, rel: str) -> bool:
        raise NotImplementedError

    def stat(self, rel: str) -> FileStatistics:
        raise NotImplementedError

    def isdir(self, rel: str) -> bool:
        raise NotImplementedError

    def listdir(self, rel: str) -> list[str]:
        raise NotImplementedError

    def rm(self, rel: str) -> None:
        raise NotImplementedError

    def rmtree(self, rel: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        data = self.read_file(src)
        self.write_file(dst, data)
        self.rm(src)

    def makedirs(self, rel: str, parents: bool) -> None:
        raise NotImplementedError

    def source(self, rel: str) -> str:
        """Where rel's current content is read from."""
        raise NotImplementedError

    def prepare_write(self, rel: str) -> str:
        """The staged path a new rel is written to (its parent made)."""
        self._make_parent(rel)
        return self.staged(rel)

    def copy_for_append(self, rel: str) -> str:
        """A temporary copy of rel's current content (empty when it has
        none) beside its staged path, to append to and rename into place."""
        target = self.prepare_write(rel)
        temp = _uri.staging_name(target)
        try:
            self.fs.copy_file(self.source(rel), temp)
        except NotFoundError:
            self.fs.write_file(temp, b"")
        return temp


class _NativeStaging(_Staging):
    """The plugin's own transaction: a staging copy of the whole root, one
    atomic swap at commit."""

    token: TransactionToken | None = None
    staging = ""

    def begin(self) -> None:
        self.token = self.fs.get_or_start_transaction_for_path(self.root)
        self.staging = self.fs.to_uri(self.fs.decode_transaction_token(self.token), self.root)

    def commit(self) -> None:
        assert self.token is not None
        token, self.token = self.token, None
        self.fs.end_transaction(token)

    def abort(self) -> None:
        if self.token is not None:
            token, self.token = self.token, None
            self.fs.abort_transaction(token)

    def staged(self, rel: str) -> str:
        return _uri.join(self.staging, rel) if rel else self.staging

    def write_file(self, rel: str, data: Buffer) -> None:
        self._make_parent(rel)
        write_by_rename(self.fs, self.staged(rel), data)

    def append(self, rel: str, data: Buffer) -> None:
        self._make_parent(rel)
        uri = self.staged(rel)
        copy = _uri.staging_name(uri)
        if self.fs.exists(uri):
            self.fs.copy_file(uri, copy)  # a new file: the committed one is untouched
        with self.fs.new_appendable_file(copy) as file:
            file.append(data)
        self.fs.rename_file(copy, uri)

    def read_file(self, rel: str) -> bytes:
        return self.fs.read_file(self.staged(rel))

    def source(self, rel: str) -> str:
        return self.staged(rel)

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.staged(rel))

    def stat(self, rel: str) -> FileStatistics:
        return self.fs.stat(self.staged(rel))

    def isdir(self, rel: str) -> bool:
        return self.fs.isdir(self.staged(rel))

    def listdir(self, rel: str) -> list[str]:
        return sorted(self.fs.get_children(self.staged(rel)))

    def rm(self, rel: str) -> None:
        self.fs.delete_file(self.staged(rel))

    def rmtree(self, rel: str) -> None:
        self.fs.delete_recursively(self.staged(rel))

    def rename(self, src: str, dst: str) -> None:
        self.fs.rename_file(self.staged(src), self.staged(dst))

    def makedirs(self, rel: str, parents: bool) -> None:
        if parents:
            self.fs.recursively_create_dir(self.staged(rel))
        else:
            self.fs.create_dir(self.staged(rel))


class _GenericStaging(_Staging):
    """Staging through ordinary ops, for any plugin: new and changed files
    in a sibling directory, deletions remembered, a journal at commit."""

    def __init__(self, fs: ModularFileSystem, root: str) -> None:
        super().__init__(fs, root)
        self.lock = _sibling(root, "asyncfs-lock.d")
        self.journal = _sibling(root, "asyncfs-journal")
        self.id = uuid.uuid4().hex
        self.staging = _sibling(root, f"asyncfs-txn.{self.id}")
        self.markers: list[str] = []  # intent markers beside enclosing folders
        self.deleted: set[str] = set()
        self.decided = False  # the journal is written: the outcome is commit

    # -- lifetime

    def begin(self) -> None:
        self.fs.recursively_create_dir(self.root.rpartition("/")[0])
        try:
            self._announce()
            self._lock()
        except BaseException:
            self._withdraw()
            raise
        try:
            self._check_nested()
            recover_generic(self.fs, self.root)
            self.fs.create_dir(self.staging)
        except BaseException:
            self._unlock()
            raise

    # -- nested roots across processes. A transaction announces itself beside
    # every enclosing folder (an intent marker), then checks that folder's
    # lock; one on an enclosing folder takes its lock, then checks for
    # markers. Each writes before it reads, so of two overlapping
    # transactions at least one sees the other and backs off (ABORTED, and
    # begin() retries): never both run.

    def _enclosing(self) -> list[str]:
        """The folders enclosing the root, outermost first, below the
        filesystem's top (and below a bucket or host)."""
        parsed = _uri.parse_uri(self.root)
        parts = [part for part in parsed.path.split("/") if part]
        lead = "/" if parsed.path.startswith("/") else ""
        return [parsed.prefix() + lead + "/".join(parts[:i]) for i in range(1, len(parts))]

    def _announce(self) -> None:
        record = _owner_record(os.getpid()).encode()
        for folder in self._enclosing():
            intents = _sibling(folder, "asyncfs-intent.d")
            marker = f"{intents}/{self.id}"
            try:
                for _ in range(8):  # another transaction may remove the empty folder meanwhile
                    self.fs.recursively_create_dir(intents)
                    try:
                        self.fs.write_file(marker, record)
                        break
                    except NotFoundError:
                        continue
                else:  # begin() tries again
                    raise AbortedError("intent markers keep being removed", op="transaction", path=self.root)
            except PermissionDeniedError:
                continue  # nobody can lock that folder either: its parent is not writable
            self.markers.append(marker)
            lock = _sibling(folder, "asyncfs-lock.d")
            if self.fs.exists(lock) and not _stale_lock(self.fs, lock):
                raise TransactionConflictError(
                    f"an enclosing folder, {folder}, is in another transaction", op="transaction", path=self.root
                )

    def _check_nested(self) -> None:
        intents = _sibling(self.root, "asyncfs-intent.d")
        try:
            names = self.fs.get_children(intents)
        except NotFoundError:
            return
        for name in names:
            marker = f"{intents}/{name}"
            try:
                owner = self.fs.read_file(marker).decode()
            except NotFoundError:
                continue  # withdrawn meanwhile
            if _owner_gone(owner):
                self.fs.delete_file(marker)
                continue
            raise TransactionConflictError(
                "a transaction on a folder inside the root is in progress", op="transaction", path=self.root
            )

    def _withdraw(self) -> None:
        markers, self.markers = self.markers, []
        for marker in reversed(markers):
            with contextlib.suppress(NotFoundError):
                self.fs.delete_file(marker)
            with contextlib.suppress(StatusError):  # not empty: another transaction's marker is in it
                self.fs.delete_dir(marker.rpartition("/")[0])

    def commit(self) -> None:
        dirs, files = [], []
        for top, _, names in self.fs.walk(self.staging):
            rel_top = top[len(self.staging) :].lstrip("/")
            if rel_top:
                dirs.append(rel_top)
            files += [f"{rel_top}/{name}" if rel_top else name for name in names]
        plan = {
            "staging": self.staging.rpartition("/")[2],
            "deletes": sorted(self.deleted),
            "mkdirs": dirs,
            "moves": files,
        }
        body = json.dumps(plan, sort_keys=True)
        record = json.dumps({"plan": plan, "check": _check(body)}).encode()
        # the commit point: a whole, valid journal (a torn one reads as none)
        write_by_rename(self.fs, self.journal, record)
        self.decided = True
        self.plan = plan
        apply_journal(self.fs, self.root, plan)
        self._unlock()

    def abort(self) -> None:
        if self.decided:  # past the commit point: finish it, never undo half
            if self.fs.exists(self.journal):
                apply_journal(self.fs, self.root, self.plan)
        elif self.fs.exists(self.staging):
            self.fs.delete_recursively(self.staging)
        self._unlock()

    def _lock(self) -> None:
        """A directory made with create_dir, which fails if it exists, is the
        lock; one left by a dead process on this host is taken over."""
        try:
            self.fs.create_dir(self.lock)
        except AlreadyExistsError:
            if not _stale_lock(self.fs, self.lock):
                raise TransactionConflictError(
                    "the root is in another transaction", op="transaction", path=self.root
                ) from None
            self.fs.delete_recursively(self.lock)
            self.fs.create_dir(self.lock)
        # whole or absent, never a truncated pid that names another process
        write_by_rename(self.fs, f"{self.lock}/owner", _owner_record(os.getpid()).encode())

    def _unlock(self) -> None:
        try:
            if self.fs.exists(self.lock):
                self.fs.delete_recursively(self.lock)
        finally:
            self._withdraw()

    # -- the overlay

    def staged(self, rel: str) -> str:
        return _uri.join(self.staging, rel) if rel else self.staging

    def _gone(self, rel: str) -> bool:
        return any(rel == d or rel.startswith(d + "/") for d in self.deleted)

    def prepare_write(self, rel: str) -> str:
        self.deleted.discard(rel)
        return super().prepare_write(rel)

    def source(self, rel: str) -> str:
        return self._source(rel)

    def _source(self, rel: str) -> str:
        """Where rel's current content lives: staging, or the root."""
        if self.fs.exists(self.staged(rel)):
            return self.staged(rel)
        if self._gone(rel):
            raise NotFoundError("deleted in this transaction", op="read", path=self.at_root(rel))
        return self.at_root(rel)

    def write_file(self, rel: str, data: Buffer) -> None:
        self._make_parent(rel)
        self.fs.write_file(self.staged(rel), data)
        self.deleted.discard(rel)

    def append(self, rel: str, data: Buffer) -> None:
        self._make_parent(rel)
        if not self.fs.exists(self.staged(rel)) and not self._gone(rel) and self.fs.exists(self.at_root(rel)):
            self.fs.copy_file(self.at_root(rel), self.staged(rel))
        with self.fs.new_appendable_file(self.staged(rel)) as file:
            file.append(data)
        self.deleted.discard(rel)

    def read_file(self, rel: str) -> bytes:
        return self.fs.read_file(self._source(rel))

    def exists(self, rel: str) -> bool:
        try:
            return self.fs.exists(self._source(rel))
        except NotFoundError:
            return False

    def stat(self, rel: str) -> FileStatistics:
        return self.fs.stat(self._source(rel))

    def isdir(self, rel: str) -> bool:
        try:
            return self.fs.isdir(self._source(rel))
        except NotFoundError:
            return False

    def listdir(self, rel: str) -> list[str]:
        names: set[str] = set()
        found = False
        sources = [self.staged(rel)] if self._gone(rel) else [self.at_root(rel), self.staged(rel)]
        for source in sources:
            try:
                names.update(self.fs.get_children(source))
                found = True
            except NotFoundError:
                pass
        if not found:
            raise NotFoundError("no such directory", op="listdir", path=self.at_root(rel))
        prefix = f"{rel}/" if rel else ""
        return sorted(n for n in names if not self._gone(prefix + n))

    def rm(self, rel: str) -> None:
        in_root = not self._gone(rel) and self.fs.exists(self.at_root(rel))
        if self.fs.exists(self.staged(rel)):
            self.fs.delete_file(self.staged(rel))
        elif not in_root:
            raise NotFoundError("no such file", op="rm", path=self.at_root(rel))
        if in_root:
            self.deleted.add(rel)

    def rmtree(self, rel: str) -> None:
        in_root = not self._gone(rel) and self.fs.exists(self.at_root(rel))
        if self.fs.exists(self.staged(rel)):
            self.fs.delete_recursively(self.staged(rel))
        elif not in_root:
            raise NotFoundError("no such directory", op="rmtree", path=self.at_root(rel))
        if in_root:
            self.deleted.add(rel)

    def makedirs(self, rel: str, parents: bool) -> None:
        if not parents and self.exists(rel):
            raise AlreadyExistsError("path already exists", op="mkdir", path=self.at_root(rel))
        self.fs.recursively_create_dir(self.staged(rel))
        self.deleted.discard(rel)


# Roots of this process's transactions ("scheme://" + the plugin's name for
# the root): overlapping ones conflict. Across processes, the plugins' own
# locks (native) or the lock directory (generic) keep transactions apart.
_active_roots: set[str] = set()
_active_lock = threading.Lock()


def _forget_roots_in_child() -> None:
    """A forked child holds none of its parent's transactions."""
    global _active_lock
    _active_lock = threading.Lock()
    _active_roots.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_roots_in_child)


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _claim_root(root: str) -> None:
    with _active_lock:
        for other in _active_roots:
            if _overlap(root, other):
                raise AbortedError(f"conflicts with a transaction in progress on {other}", op="transaction", path=root)
        _active_roots.add(root)


def _release_root(root: str) -> None:
    with _active_lock:
        _active_roots.discard(root)


def _check(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


_OWNERLESS_GRACE_NS = 5_000_000_000  # a live owner writes its record well within this


def _start_time(pid: int) -> str:
    """When process pid started (Linux: /proc/<pid>/stat), or "" elsewhere;
    with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _owner_record(pid: int) -> str:
    return f"{pid} {_start_time(pid)} {socket.gethostname()}"


def _stale_lock(fs: ModularFileSystem, lock: str) -> bool:
    """Whether a lock directory was left by a process of this host that is
    gone (its pid is free, or names a process started at another time), or
    by one killed before it recorded itself, some seconds ago."""
    try:
        record = fs.read_file(f"{lock}/owner").decode()
    except NotFoundError:
        try:
            age = time.time_ns() - fs.stat(lock).mtime_nsec
        except NotFoundError:
            return True
        return age > _OWNERLESS_GRACE_NS
    return _owner_gone(record)


def _owner_gone(record: str) -> bool:
    """Whether the process an owner record names (pid, start time, host) is
    gone: its pid free, or naming a process started at another time. Another
    host's process is taken as alive: only that host can tell."""
    pid_text, _, rest = record.partition(" ")
    if rest.rpartition(" ")[2] != socket.gethostname():
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    return _owner_record(pid) != record


def apply_journal(fs: ModularFileSystem, root: str, plan: dict[str, Any]) -> None:
    """Carry out a committed plan; every step may be repeated, so a crash
    at any point is finished by running it again."""
    staging = f"{root.rpartition('/')[0]}/{plan['staging']}"
    for rel in plan["deletes"]:
        target = _uri.join(root, rel)
        if fs.exists(target):
            fs.delete_recursively(target)
    fs.recursively_create_dir(root)
    for rel in plan["mkdirs"]:
        fs.recursively_create_dir(_uri.join(root, rel))
    for rel in plan["moves"]:
        src = _uri.join(staging, rel)
        if fs.exists(src):
            fs.rename_file(src, _uri.join(root, rel))
    journal = _sibling(root, "asyncfs-journal")
    fs.delete_file(journal)  # done: the transaction is over
    if fs.exists(staging):
        fs.delete_recursively(staging)


def recover_generic(fs: ModularFileSystem, root: str) -> None:
    """Finish or undo what a crashed generic transaction left on root: a
    whole journal is rolled forward, anything else rolled back (staging
    directories and temporary files beside the root removed). Call with the
    root's lock held."""
    journal = _sibling(root, "asyncfs-journal")
    if fs.exists(journal):
        try:
            record = json.loads(fs.read_file(journal))
            plan = record["plan"]
            whole = record["check"] == _check(json.dumps(plan, sort_keys=True))
        except (ValueError, KeyError, TypeError):
            whole = False
        if whole:
            apply_journal(fs, root, plan)
        else:
            fs.delete_file(journal)
    parent = root.rpartition("/")[0]
    if not fs.isdir(parent):
        return
    staging = _sibling(root, "asyncfs-txn." + "0" * 32).rpartition("/")[2][:-32]
    journal_name = journal.rpartition("/")[2]
    debris = (staging, f"{journal_name}.~asyncfs-tmp.", f"{_uri.hashed_name(journal_name)}.~asyncfs-tmp.")
    for entry in fs.get_children(parent):
        if entry.startswith(debris):
            fs.delete_recursively(_uri.join(parent, entry))
