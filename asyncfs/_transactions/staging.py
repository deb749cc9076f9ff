"""Where a transaction's changes wait for its commit: what both ways of
staging share, and the native way (the plugin's own transaction ops).

A staging is synchronous: the :class:`~asyncfs.Transaction` runs its methods
on the worker pool. Paths given to it are relative to the root.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from .. import _uri
from .._sync import FileStatistics, ModularFileSystem, TransactionToken, write_by_rename
from ..errors import NotFoundError

if TYPE_CHECKING:
    from typing_extensions import Buffer
else:
    Buffer = object


class Staging(ABC):
    """One transaction's staging. Subclasses say where a path is staged and
    where its current content is read from, and how changes land; reads
    through :meth:`source` are the same for both."""

    def __init__(self, fs: ModularFileSystem, root: str) -> None:
        self.fs = fs
        self.root = root

    # ---- lifetime

    @abstractmethod
    def begin(self) -> None:
        """Prepare staging (and hold the root against other transactions)."""

    @abstractmethod
    def commit(self) -> None:
        """Make every staged change visible at once."""

    @abstractmethod
    def abort(self) -> None:
        """Discard what is staged (or finish a commit past its point of no return)."""

    # ---- where things are

    @abstractmethod
    def staged(self, rel: str) -> str:
        """The path rel is staged at."""

    @abstractmethod
    def source(self, rel: str) -> str:
        """Where rel's current content is read from (NotFoundError if it
        was deleted in the transaction)."""

    def at_root(self, rel: str) -> str:
        return _uri.join(self.root, rel) if rel else self.root

    def make_parent(self, rel: str) -> None:
        parent = rel.rpartition("/")[0]
        if parent:
            self.fs.recursively_create_dir(self.staged(parent))

    # ---- reads: the transaction's view

    def read_file(self, rel: str) -> bytes:
        return self.fs.read_file(self.source(rel))

    def stat(self, rel: str) -> FileStatistics:
        return self.fs.stat(self.source(rel))

    def exists(self, rel: str) -> bool:
        try:
            return self.fs.exists(self.source(rel))
        except NotFoundError:
            return False

    def isdir(self, rel: str) -> bool:
        try:
            return self.fs.isdir(self.source(rel))
        except NotFoundError:
            return False

    @abstractmethod
    def listdir(self, rel: str) -> list[str]:
        """Sorted names in the directory rel, as the transaction sees it."""

    # ---- changes

    @abstractmethod
    def write_file(self, rel: str, data: Buffer) -> None: ...

    @abstractmethod
    def append(self, rel: str, data: Buffer) -> None: ...

    @abstractmethod
    def rm(self, rel: str) -> None: ...

    @abstractmethod
    def rmtree(self, rel: str) -> None: ...

    @abstractmethod
    def rename(self, src: str, dst: str) -> None: ...

    @abstractmethod
    def makedirs(self, rel: str, parents: bool) -> None: ...

    # ---- streams

    def prepare_write(self, rel: str) -> str:
        """The staged path a new rel is written to (its parent made)."""
        self.make_parent(rel)
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


class NativeStaging(Staging):
    """The plugin's own transaction: a staging copy of the whole root, one
    atomic swap at commit. Its staging holds the whole new state, so every
    path is read from and written to its staged place."""

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

    def source(self, rel: str) -> str:
        return self.staged(rel)

    def listdir(self, rel: str) -> list[str]:
        return sorted(self.fs.get_children(self.staged(rel)))

    def write_file(self, rel: str, data: Buffer) -> None:
        self.make_parent(rel)
        write_by_rename(self.fs, self.staged(rel), data)

    def append(self, rel: str, data: Buffer) -> None:
        self.make_parent(rel)
        uri = self.staged(rel)
        copy = _uri.staging_name(uri)
        if self.fs.exists(uri):
            self.fs.copy_file(uri, copy)  # a new file: the committed one is untouched
        with self.fs.new_appendable_file(copy) as file:
            file.append(data)
        self.fs.rename_file(copy, uri)

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
