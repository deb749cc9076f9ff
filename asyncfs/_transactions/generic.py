"""The generic way to stage a transaction, for any plugin: new and changed
files wait in a sibling directory, deletions are remembered, and the commit
writes a journal (the commit point), moves the staged files in, and removes
the journal. After a crash, the next transaction on the root rolls a whole
journal forward and anything else back (docs/transactions.md).

Beside a root ``<parent>/<name>`` it keeps, all named by :class:`Siblings`:
``.<name>.asyncfs-lock.d`` (the lock, with its owner's record),
``.<name>.asyncfs-journal`` (the commit record), ``.<name>.asyncfs-txn.<id>``
(the staging directory) and ``.<name>.asyncfs-intent.d`` (markers of
transactions on folders inside it).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _private, _uri
from .._native import clean_path
from .._sync import ModularFileSystem, write_by_rename
from ..errors import (
    AbortedError,
    AlreadyExistsError,
    FailedPreconditionError,
    NotFoundError,
    PathIsDirectoryError,
    PermissionDeniedError,
    StatusError,
    TransactionConflictError,
)
from .staging import Staging

if TYPE_CHECKING:
    from typing_extensions import Buffer
else:
    Buffer = object

_log = logging.getLogger("asyncfs.transactions")


class Siblings:
    """The names a generic transaction keeps beside its root: built here
    only (a name hashed when the whole would be longer than a directory
    entry may be)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.parent = root.rpartition("/")[0]
        self.lock = self._beside(root, "asyncfs-lock.d")
        self.journal = self._beside(root, "asyncfs-journal")
        self.intents = self._beside(root, "asyncfs-intent.d")

    @staticmethod
    def _beside(path: str, suffix: str) -> str:
        return _uri.short_sibling(path, ".", f".{suffix}")

    def staging(self, txn_id: str) -> str:
        """The staging directory of the transaction txn_id."""
        return self._beside(self.root, f"asyncfs-txn.{txn_id}")

    def debris(self) -> tuple[str, ...]:
        """How the names a crashed transaction may leave in the parent begin:
        staging directories, and temporary files of a journal being written."""
        journal = self.journal.rpartition("/")[2]
        staging = self.staging("").rpartition("/")[2]
        return (staging, f"{journal}.~asyncfs-tmp.", f"{_uri.hashed_name(journal)}.~asyncfs-tmp.")


class GenericStaging(Staging):
    """Staging through ordinary ops, for any plugin: new and changed files
    in a sibling directory, deletions remembered, a journal at commit."""

    def __init__(self, fs: ModularFileSystem, root: str) -> None:
        super().__init__(fs, root)
        self.names = Siblings(root)
        self.id = uuid.uuid4().hex
        self.staging = self.names.staging(self.id)
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
            beside = Siblings(folder)
            intents = beside.intents
            marker = f"{intents}/{self.id}"
            try:
                for _ in range(8):  # another transaction may remove the empty folder meanwhile
                    self.fs.recursively_create_dir(intents)
                    try:
                        write_by_rename(self.fs, marker, record)  # whole or absent: never an empty marker
                        break
                    except NotFoundError:
                        continue
                else:  # begin() tries again
                    raise AbortedError("intent markers keep being removed", op="transaction", path=self.root)
            except PermissionDeniedError:
                continue  # nobody can lock that folder either: its parent is not writable
            self.markers.append(marker)
            _sweep_markers(self.fs, intents, keep=marker)
            lock = beside.lock
            if self.fs.exists(lock) and not _lock_state(self.fs, lock)[1]:
                raise TransactionConflictError(
                    f"an enclosing folder, {folder}, is in another transaction", op="transaction", path=self.root
                )

    def _check_nested(self) -> None:
        if _sweep_markers(self.fs, self.names.intents):
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
        seal = {"check": _check(body)}
        if not self.fs.metadata.network:
            seal["signed"] = _private.sign(body.encode())  # only this user can make it (see recover_generic)
        record = json.dumps({"plan": plan, **seal}).encode()
        # the commit point: a whole, valid journal (a torn one reads as none)
        write_by_rename(self.fs, self.names.journal, record)
        self.decided = True
        self.plan = plan
        apply_journal(self.fs, self.root, plan)
        self._unlock()

    def abort(self) -> None:
        if self.decided:  # past the commit point: finish it, never undo half
            if self.fs.exists(self.names.journal):
                apply_journal(self.fs, self.root, self.plan)
        elif self.fs.exists(self.staging):
            self.fs.delete_recursively(self.staging)
        self._unlock()

    def _lock(self) -> None:
        """Take the root's lock (see :func:`_lock_state`): a directory made
        with create_dir, which fails if it exists (on an object store, a
        conditional PUT that the server decides). A lock left by a dead
        process is taken over by creating its next claim, which only one of
        several processes that found it stale can do."""
        try:
            self.fs.create_dir(self.names.lock)
            claim = 1
        except AlreadyExistsError:
            claims, stale = _lock_state(self.fs, self.names.lock)
            if not stale:
                raise TransactionConflictError(
                    "the root is in another transaction", op="transaction", path=self.root
                ) from None
            claim = claims + 1
        try:
            self.fs.create_dir(f"{self.names.lock}/claim.{claim}")
        except (AlreadyExistsError, NotFoundError):  # another process took it (or took and freed it) first
            raise TransactionConflictError(
                "another process took over the root's stale lock first", op="transaction", path=self.root
            ) from None
        # whole or absent, never a truncated pid that names another process
        record = _owner_record(os.getpid()).encode()
        write_by_rename(self.fs, f"{self.names.lock}/claim.{claim}/owner", record)

    def _unlock(self) -> None:
        try:
            if self.fs.exists(self.names.lock):
                self.fs.delete_recursively(self.names.lock)
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
        """Where rel's current content lives: staging, or the root."""
        if self.fs.exists(self.staged(rel)):
            return self.staged(rel)
        if self._gone(rel):
            raise NotFoundError("deleted in this transaction", op="read", path=self.at_root(rel))
        return self.at_root(rel)

    def write_file(self, rel: str, data: Buffer) -> None:
        self.make_parent(rel)
        self.fs.write_file(self.staged(rel), data)
        self.deleted.discard(rel)

    def append(self, rel: str, data: Buffer) -> None:
        self.make_parent(rel)
        if not self.fs.exists(self.staged(rel)) and not self._gone(rel) and self.fs.exists(self.at_root(rel)):
            self.fs.copy_file(self.at_root(rel), self.staged(rel))
        with self.fs.new_appendable_file(self.staged(rel)) as file:
            file.append(data)
        self.deleted.discard(rel)

    def rename(self, src: str, dst: str) -> None:
        """A staged copy of src's content under dst, and src removed: the
        root sees one atomic change at commit, as for the native way."""
        self.write_file(dst, self.read_file(src))
        self.rm(src)

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
        self._remove(rel, self.fs.delete_file, "no such file", "rm")

    def rmtree(self, rel: str) -> None:
        self._remove(rel, self.fs.delete_recursively, "no such directory", "rmtree")

    def _remove(self, rel: str, delete: Callable[[str], object], missing: str, op: str) -> None:
        """Delete rel's staged copy, and remember to delete it from the root
        at commit if it is there."""
        in_root = not self._gone(rel) and self.fs.exists(self.at_root(rel))
        if self.fs.exists(self.staged(rel)):
            delete(self.staged(rel))
        elif not in_root:
            raise NotFoundError(missing, op=op, path=self.at_root(rel))
        if in_root:
            self.deleted.add(rel)

    def makedirs(self, rel: str, parents: bool) -> None:
        if not parents and self.exists(rel):
            raise AlreadyExistsError("path already exists", op="mkdir", path=self.at_root(rel))
        self.fs.recursively_create_dir(self.staged(rel))
        self.deleted.discard(rel)


def _sweep_markers(fs: ModularFileSystem, intents: str, keep: str = "") -> bool:
    """Remove the intent markers in intents whose owners are gone (a marker
    that does not read as a record, cut short by a kill, names nobody);
    whether one of a live owner's is left, keep aside."""
    try:
        names = fs.get_children(intents)
    except NotFoundError:
        return False
    alive = False
    for name in names:
        marker = f"{intents}/{name}"
        if marker == keep:
            continue
        if _uri.is_internal_name(name):  # a marker on its way in (write_by_rename), or a kill's leftover
            with contextlib.suppress(NotFoundError):
                if time.time_ns() - fs.stat(marker).mtime_nsec > _OWNERLESS_GRACE_NS:
                    fs.delete_file(marker)
            continue
        try:
            owner = fs.read_file(marker).decode("utf-8", "replace")
        except (NotFoundError, PathIsDirectoryError):
            continue  # withdrawn meanwhile
        if _owner_gone(owner):
            with contextlib.suppress(NotFoundError):
                fs.delete_file(marker)
        else:
            alive = True
    return alive


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


def _lock_state(fs: ModularFileSystem, lock: str) -> tuple[int, bool]:
    """(claims, stale) of a lock directory. Its holder is the latest of its
    claims: ``claim.<n>`` directories, each made with create_dir (so one
    process makes each) with its claimer's owner record inside. The lock is
    stale when that holder is a process of this host that is gone (its pid
    free, or naming a process started at another time), or when the latest
    claim (or the lock, before any) has had no owner record for some
    seconds: its claimer was killed before it wrote one. A lock released
    meanwhile is stale too: create_dir decides who has it next."""
    try:
        names = fs.get_children(lock)
    except NotFoundError:
        return 0, True
    claims = max((int(name[6:]) for name in names if name.startswith("claim.") and name[6:].isdigit()), default=0)
    latest = f"{lock}/claim.{claims}" if claims else lock
    if claims:
        try:
            return claims, _owner_gone(fs.read_file(f"{latest}/owner").decode())
        except NotFoundError:
            pass  # claimed, and not yet recorded
    try:
        age = time.time_ns() - fs.stat(latest).mtime_nsec
    except NotFoundError:
        return claims, True
    return claims, age > _OWNERLESS_GRACE_NS


def _owner_gone(record: str) -> bool:
    """Whether the process an owner record names (pid, start time, host) is
    gone: its pid free, or naming a process started at another time. A
    record that does not read as one (empty, cut short: never written whole
    by a live owner) names nobody. Another host's process is taken as
    alive: only that host can tell."""
    pid_text, _, rest = record.partition(" ")
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    if not rest or rest.rpartition(" ")[2] != socket.gethostname():
        return not rest
    return _owner_record(pid) != record


def apply_journal(fs: ModularFileSystem, root: str, plan: dict[str, Any]) -> None:
    """Carry out a committed plan; every step may be repeated, so a crash
    at any point is finished by running it again."""
    names = Siblings(root)
    staging = f"{names.parent}/{plan['staging']}"
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
            fs.replace_file(src, _uri.join(root, rel))  # a rewritten file keeps its permissions
    fs.delete_file(names.journal)  # done: the transaction is over
    if fs.exists(staging):
        fs.delete_recursively(staging)


def _plan_inside(names: Siblings, plan: Any) -> bool:
    """Whether a plan names only what a transaction on names.root may touch:
    a staging directory of that root's, and paths below the root (clean,
    relative, never the root itself nor climbing out with ``..``)."""
    if not isinstance(plan, dict) or set(plan) != {"staging", "deletes", "mkdirs", "moves"}:
        return False
    staging = plan["staging"]
    prefix = names.staging("").rpartition("/")[2]
    if not isinstance(staging, str) or "/" in staging or not staging.startswith(prefix) or staging == prefix:
        return False
    paths = (
        [*plan["deletes"], *plan["mkdirs"], *plan["moves"]]
        if all(isinstance(plan[key], list) for key in ("deletes", "mkdirs", "moves"))
        else [None]
    )
    return all(
        isinstance(rel, str)
        and rel not in ("", ".")  # the root itself is never a plan's entry
        and "\0" not in rel
        and clean_path(rel) == rel
        and not rel.startswith(("/", ".."))
        for rel in paths
    )


def recover_generic(fs: ModularFileSystem, root: str) -> None:
    """Finish or undo what a crashed generic transaction left on root: a
    whole journal is rolled forward, anything else rolled back (staging
    directories and temporary files beside the root removed). Call with the
    root's lock held.

    A journal is carried out only when it is one this user's transaction
    wrote for this root: its plan names nothing outside the root, and on a
    store whose folders have owners (any but a network store, whose writers
    share one set of rights) it carries this user's signature. Another
    journal is never rolled back either (its transaction may have committed):
    FailedPreconditionError says whose it may be and what to do."""
    names = Siblings(root)
    journal = names.journal
    if fs.exists(journal):
        try:
            record = json.loads(fs.read_file(journal))
            plan = record["plan"]
            body = json.dumps(plan, sort_keys=True)
            whole = record["check"] == _check(body)
        except (ValueError, KeyError, TypeError):
            whole = False  # torn: a journal is written whole (by rename), so it never was one
        if not whole:
            _log.warning("transaction on %s: a torn journal (never whole) is discarded", root)
            fs.delete_file(journal)
        elif not _plan_inside(names, plan) or (
            not fs.metadata.network
            and not hmac.compare_digest(str(record.get("signed", "")), _private.sign(body.encode()))
        ):
            raise FailedPreconditionError(
                "a transaction journal beside the root was not written by this user's transaction on it "
                "(another user's, or planted): it is neither carried out nor rolled back. Recover the root as "
                "the user who wrote it, or remove the journal to discard that transaction",
                op="transaction",
                path=journal,
            )
        else:
            _log.warning("transaction on %s: a committed transaction's journal is carried out (rolled forward)", root)
            apply_journal(fs, root, plan)
    parent = names.parent
    if not fs.isdir(parent):
        return
    debris = names.debris()
    for entry in fs.get_children(parent):
        if entry.startswith(debris):
            _log.warning("transaction on %s: what an unfinished transaction left (%s) is removed", root, entry)
            fs.delete_recursively(_uri.join(parent, entry))
