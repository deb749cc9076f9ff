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

import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .. import _uri
from .._native import clean_path
from .._streams import AsyncBinaryWriter, AsyncTextWriter, Stream, StreamOpener, open_stream
from .._sync import FileStatistics, ModularFileSystem
from .._uri import StrPath
from ..errors import AbortedError, InvalidArgumentError, TransactionConflictError, TransactionStateError
from .generic import GenericStaging
from .staging import NativeStaging, Staging

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .._async import AsyncModularFileSystem
else:
    Buffer = object

__all__ = ["Transaction"]

T = TypeVar("T")


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
        self._fs = afs.wrapped
        use_native = self._fs.offers_transactions() if native is None else native
        kind = NativeStaging if use_native else GenericStaging
        self._stage: Staging = kind(self._fs, self.root)
        self.state = "new"
        self._key = ""
        self._staged = False  # the staging's begin() completed

    @property
    def native(self) -> bool:
        """Whether the plugin's own transaction ops run it (else the
        generic journal and staging siblings)."""
        return isinstance(self._stage, NativeStaging)

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

    async def write_file(self, path: StrPath, data: Buffer) -> None:
        """Stage a file with data; it appears at commit."""
        await self._mutate(self._stage.write_file, self._relative(path), data)

    async def append(self, path: StrPath, data: Buffer) -> None:
        """Stage data appended to a file (a copy of it, if it exists)."""
        await self._mutate(self._stage.append, self._relative(path), data)

    async def read_file(self, path: StrPath) -> bytes:
        """The file as this transaction sees it (its own writes included)."""
        return await self._read(self._stage.read_file, self._relative(path))

    async def exists(self, path: StrPath) -> bool:
        """Whether path exists as this transaction sees it."""
        return await self._read(self._stage.exists, self._relative(path))

    async def stat(self, path: StrPath) -> FileStatistics:
        """The statistics of path as this transaction sees it."""
        return await self._read(self._stage.stat, self._relative(path))

    async def isdir(self, path: StrPath) -> bool:
        """Whether path is a directory as this transaction sees it."""
        return await self._read(self._stage.isdir, self._relative(path))

    async def listdir(self, path: StrPath = "") -> list[str]:
        """The sorted names in a directory as this transaction sees it
        (the root by default)."""
        return await self._read(self._stage.listdir, self._relative(path))

    async def rm(self, path: StrPath) -> None:
        """Stage the deletion of a file."""
        await self._mutate(self._stage.rm, self._relative(path))

    async def rmtree(self, path: StrPath) -> None:
        """Stage the deletion of a directory and everything below it."""
        await self._mutate(self._stage.rmtree, self._relative(path))

    async def rename(self, src: StrPath, dst: StrPath) -> None:
        """Stage a rename within the root."""
        await self._mutate(self._stage.rename, self._relative(src), self._relative(dst))

    async def mkdir(self, path: StrPath) -> None:
        """Stage a new directory (its parent must exist)."""
        await self._mutate(self._stage.makedirs, self._relative(path), False)

    async def makedirs(self, path: StrPath) -> None:
        """Stage a directory and every missing one above it."""
        await self._mutate(self._stage.makedirs, self._relative(path), True)

    def open(self, path: StrPath, mode: str = "rb", **options: Any) -> StreamOpener[Any]:
        """A stream inside the transaction, as :meth:`asyncfs.Env.open`:
        reads see the transaction's writes; a written file is staged (and
        lands in the transaction on close; an aborted writer leaves nothing)."""
        rel = self._relative(path)
        return StreamOpener(lambda: self._open(rel, mode, **options))

    async def _open(self, rel: str, mode: str, **options: Any) -> Stream:
        afs = self._afs
        if mode.startswith("r"):
            return await open_stream(afs, await self._read(self._stage.source, rel), mode, **options)
        options.pop("atomic", None)  # staged files always land by rename
        if mode.startswith("w"):
            target = await self._mutate(self._stage.prepare_write, rel)
            return await open_stream(afs, target, mode, atomic=True, **options)
        target = await self._mutate(self._stage.prepare_write, rel)
        temp = await self._mutate(self._stage.copy_for_append, rel)
        stream = await open_stream(afs, temp, mode, **options)
        binary = stream.binary if isinstance(stream, AsyncTextWriter) else stream
        assert isinstance(binary, AsyncBinaryWriter)
        binary.land_as(target, temp)
        return stream

    # ---- plumbing ------------------------------------------------------------------------

    def _check_active(self) -> None:
        if self.state != "active":
            raise TransactionStateError(f"transaction on {self.root} is {self.state}")

    def _relative(self, given: StrPath) -> str:
        self._check_active()
        path = os.fspath(given)
        if "://" in path or path.startswith("/"):
            if path.rstrip("/") == self.root:
                return ""
            if not path.startswith(self.root + "/"):
                raise TransactionStateError(f"{path} is outside the transaction's root {self.root}")
            path = path[len(self.root) + 1 :]
        cleaned = clean_path(path) if path else ""
        if cleaned == ".":
            return ""
        if cleaned.startswith(".."):
            raise TransactionStateError(f"{path} leaves the transaction's root {self.root}")
        return cleaned

    async def _mutate(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._afs.run(fn, *args, mutating=True)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._afs.run(fn, *args, mutating=False)


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
