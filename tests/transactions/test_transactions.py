"""Transactions on file:// and mem://, through the plugins' native
transaction ops and through the generic path, on asyncio and trio."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.txn_holder import Holder, race

import asyncfs
from asyncfs._transactions import generic as _generic_staging

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["file-native", "file-generic", "mem-native", "mem-generic"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, bool]]:
    scheme, kind = str(request.param).split("-")
    base = f"file://{tmp_path}" if scheme == "file" else f"mem:///txn-{uuid.uuid4().hex}"
    yield f"{base}/ckpt", kind == "native"
    mem = asyncfs.get_filesystem("mem://")
    if scheme == "mem" and mem.exists(base):
        mem.delete_recursively(base)


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


async def seed(env: asyncfs.Env, root: str) -> None:
    await env.makedirs(f"{root}/sub")
    await env.write_file(f"{root}/keep.txt", b"keep")
    await env.write_file(f"{root}/old.txt", b"old")
    await env.write_file(f"{root}/sub/inner.txt", b"inner")


async def tree(env: asyncfs.Env, root: str) -> dict[str, bytes]:
    """Every file under root, relative path -> content."""
    files = {}
    async for top, _, names in env.walk(root):
        for name in names:
            uri = f"{top}/{name}"
            files[uri[len(root) + 1 :]] = await env.read_file(uri)
    return files


async def debris(env: asyncfs.Env, root: str) -> list[str]:
    parent, _, name = root.rpartition("/")
    allowed = {name}  # no lock file stays beside the root
    return [entry for entry in await env.listdir(parent) if entry not in allowed]


async def test_commit(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    await seed(env, root)
    async with env.transaction(root, native=native) as txn:
        assert txn.native is native
        await txn.write_file("new/deep/file.bin", b"new")
        await txn.write_file(f"{root}/keep.txt", b"replaced")
        await txn.append("sub/inner.txt", b"+appended")
        await txn.rm("old.txt")
        await txn.rename("sub/inner.txt", "sub/moved.txt")
        await txn.mkdir("empty")
    assert await tree(env, root) == {
        "keep.txt": b"replaced",
        "new/deep/file.bin": b"new",
        "sub/moved.txt": b"inner+appended",
    }
    assert await env.isdir(f"{root}/empty")
    assert txn.state == "committed"
    assert await debris(env, root) == []


async def test_commit_creates_a_missing_root(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    async with env.transaction(root, native=native) as txn:
        await txn.write_file("first.txt", b"1")
    assert await tree(env, root) == {"first.txt": b"1"}


async def test_rollback_on_exception(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    await seed(env, root)
    before = await tree(env, root)
    with pytest.raises(RuntimeError, match="model diverged"):
        async with env.transaction(root, native=native) as txn:
            await txn.write_file("keep.txt", b"half-written")
            await txn.rm("old.txt")
            raise RuntimeError("model diverged")
    assert txn.state == "aborted"
    assert await tree(env, root) == before
    assert await debris(env, root) == []


async def test_rollback_on_cancellation(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    await seed(env, root)
    before = await tree(env, root)
    with anyio.move_on_after(0.2) as scope:
        async with env.transaction(root, native=native) as txn:
            await txn.write_file("keep.txt", b"never")
            await anyio.sleep(10)
    assert scope.cancelled_caught
    assert await tree(env, root) == before
    assert await debris(env, root) == []


async def test_explicit_commit_and_abort(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    txn = await env.transaction(root, native=native).begin()
    await txn.write_file("a.txt", b"a")
    await txn.abort()
    assert not await env.exists(f"{root}/a.txt")
    txn = await env.transaction(root, native=native).begin()
    await txn.write_file(f"{root}/b.txt", b"b")  # a URI inside the root, as the Env takes it
    assert await txn.read_file(f"{root}/b.txt") == b"b"
    await txn.commit()
    assert await env.read_file(f"{root}/b.txt") == b"b"
    with pytest.raises(asyncfs.TransactionStateError):
        await txn.write_file("c.txt", b"c")


async def test_read_your_writes_and_isolation(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    await seed(env, root)
    async with env.transaction(root, native=native) as txn:
        await txn.write_file("keep.txt", b"mine")
        await txn.rm("old.txt")
        await txn.write_file("sub/added.txt", b"added")
        # the transaction sees its own writes ...
        assert await txn.read_file("keep.txt") == b"mine"
        assert not await txn.exists("old.txt")
        assert await txn.listdir("") == ["keep.txt", "sub"]
        assert await txn.listdir("sub") == ["added.txt", "inner.txt"]
        # ... an outside reader sees none of them
        assert await env.read_file(f"{root}/keep.txt") == b"keep"
        assert await env.read_file(f"{root}/old.txt") == b"old"
        assert not await env.exists(f"{root}/sub/added.txt")
    assert await env.read_file(f"{root}/keep.txt") == b"mine"
    assert not await env.exists(f"{root}/old.txt")


async def test_paths_outside_the_root_are_refused(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    async with env.transaction(root, native=native) as txn:
        with pytest.raises(asyncfs.TransactionStateError, match="outside"):
            await txn.write_file(f"{root}-sibling/x", b"x")
        with pytest.raises(asyncfs.TransactionStateError, match="leaves"):
            await txn.write_file("../escape", b"x")


async def test_disjoint_transactions_run_at_once(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    inside: list[str] = []

    async def write(name: str) -> None:
        async with env.transaction(f"{root}/{name}", native=native) as txn:
            inside.append(f"in {name}")
            await anyio.sleep(0.05)  # both are open at the same time
            await txn.write_file("data.txt", name.encode())
            inside.append(f"out {name}")

    async with anyio.create_task_group() as tg:
        for name in ("a", "b", "c"):
            tg.start_soon(write, name)
    assert inside[:3] == ["in a", "in b", "in c"] or sorted(inside[:3]) == ["in a", "in b", "in c"]
    for name in ("a", "b", "c"):
        assert await env.read_file(f"{root}/{name}/data.txt") == name.encode()


async def test_overlapping_transactions_wait_then_time_out(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    root, native = setup
    order: list[str] = []
    first_open = anyio.Event()

    async def first() -> None:
        async with env.transaction(root, native=native) as txn:
            first_open.set()
            await anyio.sleep(0.2)
            await txn.write_file("x.txt", b"first")
            order.append("first committed")

    async def second() -> None:
        await first_open.wait()
        async with env.transaction(f"{root}/nested", native=native, timeout=10) as txn:
            order.append("second began")
            await txn.write_file("y.txt", b"second")

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)
    assert order == ["first committed", "second began"]

    holder = await env.transaction(root, native=native).begin()
    try:
        with pytest.raises(asyncfs.TransactionConflictError, match="overlapping root"):
            await env.transaction(root, native=native, timeout=0.1).begin()
    finally:
        await holder.abort()


async def test_native_commit_is_atomic_for_concurrent_readers(env: asyncfs.Env, setup: tuple[str, bool]) -> None:
    """Each generation replaces the root's files with a new set of names. A
    reader listing the root while generations commit one after another
    (each listing is one snapshot of one directory) only ever sees one
    whole generation: never names of two, never a partial set."""
    root, native = setup
    if not native:
        pytest.skip("the generic path moves files in one by one (docs/transactions.md)")

    def names(generation: int) -> set[str]:
        return {f"g{generation:03d}-{i}" for i in range(6)}

    async with env.transaction(root) as txn:
        for name in names(0):
            await txn.write_file(name, b"0")
    seen: set[int] = set()
    done = False

    async def read_all() -> None:
        while not done:
            listing = set(await env.listdir(root))
            generations = {int(name[1:4]) for name in listing}
            assert len(generations) == 1, f"a reader saw names of several generations: {sorted(listing)}"
            generation = generations.pop()
            assert listing == names(generation), f"a reader saw part of generation {generation}"
            seen.add(generation)

    async def commit_generations() -> None:
        nonlocal done
        for generation in range(1, 30):
            async with env.transaction(root) as txn:
                for name in names(generation - 1):
                    await txn.rm(name)
                for name in names(generation):
                    await txn.write_file(name, str(generation).encode())
        done = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_all)
        tg.start_soon(commit_generations)
    assert len(seen) > 1, "the reader never overlapped a commit"


# ---- the generic path's journal ------------------------------------------------------


def dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def test_generic_recovery_rolls_a_whole_journal_forward(
    env: asyncfs.Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = f"file://{tmp_path}/ckpt"
    await env.makedirs(root)
    await env.write_file(f"{root}/a.txt", b"old a")

    def crash(*args: Any) -> None:
        raise SystemExit("killed between the journal and the moves")

    monkeypatch.setattr(_generic_staging, "apply_journal", crash)
    txn = await env.transaction(root, native=False).begin()
    await txn.write_file("a.txt", b"new a")
    await txn.write_file("b.txt", b"new b")
    with pytest.raises(SystemExit):
        await txn.commit()
    monkeypatch.undo()
    # as a killed process leaves it: its lock names a pid that is gone
    owner = tmp_path / ".ckpt.asyncfs-lock.d" / "claim.1" / "owner"
    owner.write_text(f"{dead_pid()} {socket.gethostname()}")
    assert (tmp_path / ".ckpt.asyncfs-journal").exists()
    await env.recover(root, native=False)
    assert await tree(env, root) == {"a.txt": b"new a", "b.txt": b"new b"}
    assert await debris(env, root) == []


async def test_generic_recovery_rolls_a_torn_journal_back(env: asyncfs.Env, tmp_path: Path) -> None:
    root = f"file://{tmp_path}/ckpt"
    await env.makedirs(root)
    await env.write_file(f"{root}/a.txt", b"old a")
    staging = tmp_path / ".ckpt.asyncfs-txn.dead"
    staging.mkdir()
    (staging / "a.txt").write_bytes(b"new a")
    plan = {"staging": staging.name, "deletes": [], "mkdirs": [], "moves": ["a.txt"]}
    torn = json.dumps({"plan": plan, "check": "0" * 64}).encode()[:-7]
    (tmp_path / ".ckpt.asyncfs-journal").write_bytes(torn)
    await env.recover(root, native=False)
    assert await tree(env, root) == {"a.txt": b"old a"}
    assert await debris(env, root) == []


@pytest.mark.parametrize("scheme", ["file", "mem"])
def test_the_abi_transaction_ops_directly(scheme: str, tmp_path: Path) -> None:
    """start_transaction, then add_to_transaction roots it; the other ops
    answer for paths under the root; end_transaction commits."""
    fs = asyncfs.get_filesystem(f"{scheme}://")
    base = f"file://{tmp_path}" if scheme == "file" else f"mem:///abi-{uuid.uuid4().hex}"
    root = f"{base}/root"
    assert fs.offers_transactions()
    token = fs.start_transaction()
    fs.add_to_transaction(root, token)  # the first path roots it
    fs.add_to_transaction(f"{root}/deeper/file", token)
    with pytest.raises(asyncfs.InvalidArgumentError, match="outside"):
        fs.add_to_transaction(f"{base}/elsewhere", token)
    staging = fs.to_uri(fs.decode_transaction_token(token), root)
    assert staging != root
    fs.write_file(f"{staging}/x.txt", b"x")
    found = fs.get_transaction_for_path(f"{root}/x.txt")
    assert fs.decode_transaction_token(found) == fs.decode_transaction_token(token)
    with pytest.raises(asyncfs.NotFoundError):
        fs.get_transaction_for_path(f"{base}/other")
    assert fs.get_or_start_transaction_for_path(root).raw == token.raw  # the same one
    with pytest.raises(asyncfs.AbortedError, match="conflicts"):
        fs.get_or_start_transaction_for_path(f"{root}/nested")
    assert not fs.exists(f"{root}/x.txt")
    fs.end_transaction(token)
    assert fs.read_file(f"{root}/x.txt") == b"x"
    with pytest.raises(asyncfs.NotFoundError):
        fs.get_transaction_for_path(f"{root}/x.txt")
    token = fs.get_or_start_transaction_for_path(root)
    fs.delete_file(f"{fs.to_uri(fs.decode_transaction_token(token), root)}/x.txt")
    fs.abort_transaction(token)
    assert fs.read_file(f"{root}/x.txt") == b"x"


# ---- nested roots across processes ------------------------------------------------------


def run_holder(root: str, native: bool, name: str) -> str:
    holder = Holder(root, native, name)
    holder.finish()
    return holder.state


@pytest.mark.parametrize("native", [True, False], ids=["native", "generic"])
def test_nested_roots_in_two_processes_exclude_each_other(tmp_path: Path, native: bool) -> None:
    root = f"file://{tmp_path}/root"
    (tmp_path / "root" / "sub").mkdir(parents=True)
    # the enclosing root is held: a nested one waits, then conflicts
    outer = Holder(root, native, "a.txt")
    assert outer.state == "held"
    assert run_holder(f"{root}/sub", native, "s.txt") == "conflict"
    outer.finish()
    # the nested root is held: the enclosing one conflicts, and the nested
    # commit is never reverted by a later commit of the enclosing root
    inner = Holder(f"{root}/sub", native, "s.txt")
    assert inner.state == "held"
    assert run_holder(root, native, "b.txt") == "conflict"
    inner.finish()
    assert run_holder(root, native, "b.txt") == "held"
    assert (tmp_path / "root" / "sub" / "s.txt").read_bytes() == f"written by {root}/sub".encode()
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["a.txt", "b.txt", "sub"]
    # siblings do not conflict
    left, right = Holder(f"{root}/x", native, "l.txt"), Holder(f"{root}/y", native, "r.txt")
    assert (left.state, right.state) == ("held", "held")
    left.finish()
    right.finish()
    # no lock, marker or staging file is left inside any root's tree, or beside it
    leftovers = [str(p) for p in tmp_path.rglob("*") if "asyncfs" in p.name]
    assert leftovers == []


async def test_a_bare_path_root_and_a_nested_file_uri_root_conflict(env: asyncfs.Env, tmp_path: Path) -> None:
    outer = await env.transaction(f"{tmp_path}/root", native=False).begin()
    try:
        with pytest.raises(asyncfs.TransactionConflictError):
            await env.transaction(f"file://{tmp_path}/root/sub", native=False, timeout=0.2).begin()
    finally:
        await outer.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["root"] or list(tmp_path.iterdir()) == []


# ---- the generic lock between processes ---------------------------------------------------


@pytest.mark.parametrize("stale", [False, True], ids=["free-root", "stale-lock"])
def test_processes_racing_for_one_root_never_both_hold_it(tmp_path: Path, stale: bool) -> None:
    """Two processes released into begin() at the same moment: one holds
    the root, the other conflicts, and the winner's commit stays. With a
    lock left by a dead process, both find it stale at once; only one may
    take it over (deleting and re-making it let both in)."""
    root = f"file://{tmp_path}/root"
    lock = tmp_path / ".root.asyncfs-lock.d"
    for trial in range(4):
        if stale:
            claim = lock / "claim.1"
            claim.mkdir(parents=True)
            (claim / "owner").write_text(f"{dead_pid()} 0 {socket.gethostname()}")
        outcomes = race(root, native=False)
        assert sorted(outcomes) == ["conflict", "held"], f"trial {trial}: {outcomes}"
        winner = f"f{outcomes.index('held')}"
        assert (tmp_path / "root" / winner).read_text() == f"written by {root}"
        (tmp_path / "root" / winner).unlink()
        assert not lock.exists()
