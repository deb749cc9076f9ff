"""Safe on a shared machine and on hostile data: what another user of the
machine, a planted file or a hostile answer can make asyncfs do. Each
finding of the shared-machine audit has its regression test here (the CLI's
in tests/integrations/test_cli.py, the s3 plugin's in tests/stores/test_s3.py). Tests that need a
second user run as a real one: made with useradd when the suite runs as
root, skipped (saying why) otherwise."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pwd
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

import asyncfs
from asyncfs import _private, tfrecord
from asyncfs._native import libraries as _libs
from asyncfs.tfrecord import masked_crc32c

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


# ---- reads sized by the caller ---------------------------------------------------------


async def test_a_read_of_more_than_memory_holds_gives_what_the_file_has(env: asyncfs.Env, tmp_path: Path) -> None:
    (tmp_path / "ten").write_bytes(b"0123456789")
    file = await env.new_random_access_file(str(tmp_path / "ten"))
    try:
        assert await file.read(0, 2**62) == b"0123456789"
        assert await file.read(3, 2**40) == b"3456789"
        with pytest.raises(asyncfs.OutOfRangeError):
            await file.read(0, 2**62, strict=True)
    finally:
        await file.close()


# ---- decompression bombs ----------------------------------------------------------------


def _bomb(path: Path, codec: str, zeros: int) -> None:
    """A small file that decompresses to zeros bytes of zeros."""
    from asyncfs._streams.compression import compressor  # noqa: PLC0415

    squeeze = compressor(codec, str(path))
    block = bytes(1 << 20)
    with path.open("wb") as out:
        for _ in range(zeros >> 20):
            out.write(squeeze.compress(block))
        out.write(squeeze.flush())


def _need(codec: str) -> None:
    if codec == "zstd" and sys.version_info < (3, 14):
        pytest.importorskip("backports.zstd", reason="zstd streams need backports.zstd before Python 3.14")
    if codec == "snappy":
        pytest.importorskip("snappy", reason="snappy streams need python-snappy")


@pytest.mark.parametrize("codec, suffix", [("gzip", ".gz"), ("zstd", ".zst"), ("snappy", ".sz")])
async def test_a_decompression_bomb_costs_only_what_is_read(
    env: asyncfs.Env, tmp_path: Path, codec: str, suffix: str
) -> None:
    """256 MiB of zeros in a few kilobytes (zstd, gzip): read(10), and a
    whole read in blocks, hold about a block at a time, never the whole."""
    _need(codec)
    bomb = tmp_path / f"bomb{suffix}"
    _bomb(bomb, codec, 256 << 20)
    assert bomb.stat().st_size < 16 << 20
    tracemalloc.start()
    try:
        async with env.open(str(bomb), "rb") as stream:
            assert await stream.read(10) == bytes(10)
            _, peak = tracemalloc.get_traced_memory()
            assert peak < 24 << 20, f"read(10) of a {codec} bomb held {peak >> 20} MiB"
            total = 10
            while chunk := await stream.read(4 << 20):
                total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 256 << 20
    assert peak < 48 << 20, f"reading a {codec} bomb in 4 MiB pieces held {peak >> 20} MiB"


# ---- TFRecord files that claim more than they hold ---------------------------------------


def _record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


async def test_a_record_of_many_blocks_is_read_in_linear_time(env: asyncfs.Env, tmp_path: Path) -> None:
    """A valid 96 MiB record between small ones: read whole, with about the
    memory of the record twice (its pieces and the joined bytes), not the
    quadratic re-joining of everything before each block."""
    big = os.urandom(1 << 20) * 96
    (tmp_path / "big.tfrecord").write_bytes(_record(b"a") + _record(big) + _record(b"z"))
    tracemalloc.start()
    try:
        records = [record async for record in tfrecord.reader(env, str(tmp_path / "big.tfrecord"))]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [len(r) for r in records] == [1, len(big), 1] and records[1] == big
    assert peak < 3 * len(big), f"{peak >> 20} MiB held for a {len(big) >> 20} MiB record"


@pytest.mark.parametrize("compression", [None, "gzip"])
async def test_a_header_claiming_exabytes_holds_only_what_the_file_has(
    env: asyncfs.Env, tmp_path: Path, compression: str | None
) -> None:
    """A header whose length (2**62, its checksum right) is more than the
    file holds: a record cut short, found after reading what is there, with
    memory bounded by the file, not the claim."""
    length = struct.pack("<Q", 2**62)
    hostile = length + struct.pack("<I", masked_crc32c(length)) + bytes(32 << 20)
    suffix = ".gz" if compression else ""
    path = tmp_path / f"claims.tfrecord{suffix}"
    path.write_bytes(gzip.compress(hostile, 1) if compression else hostile)
    tracemalloc.start()
    try:
        with pytest.raises(tfrecord.TFRecordCorruptionError, match="ends inside a record"):
            async for _ in tfrecord.reader(env, str(path)):
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * len(hostile), f"{peak >> 20} MiB held for a file of {len(hostile) >> 20} MiB"
    skipped = tfrecord.reader(env, str(path), skip_corrupt=True)
    assert [record async for record in skipped] == []


# ---- two real users ------------------------------------------------------------------------


@dataclass(frozen=True)
class User:
    """A user of this machine that tests run code as (setpriv), with the
    suite's interpreter and this checkout's asyncfs."""

    name: str
    uid: int
    gid: int

    def run(self, code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> str:
        """Run Python code as this user; its standard output. The code
        fails the test if it raises."""
        done = self._run(code, env, timeout)
        assert done.returncode == 0, f"as {self.name}:\n{done.stderr}"
        return done.stdout

    def _run(self, code: str, env: dict[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": f"/tmp/{self.name}-home",
            "ASYNCFS_CACHE_DIR": f"/tmp/{self.name}-home/cache",
            **(env or {}),
        }
        command = [SETPRIV, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", sys.executable, "-c"]
        return subprocess.run(
            [*command, textwrap.dedent(code)], env=environ, capture_output=True, text=True, timeout=timeout, check=False
        )


SETPRIV = shutil.which("setpriv") or "setpriv"


def _missing_users_reason() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "two real users are made with useradd, which needs root"
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@pytest.fixture(scope="session")
def users() -> Iterator[tuple[User, User]]:
    """Alice (the victim) and Mallory (another user of the machine), each
    with a home folder of their own under /tmp; removed after the session."""
    reason = _missing_users_reason()
    if reason is not None:
        pytest.skip(reason)
    made: list[User] = []
    try:
        for role in ("alice", "mallory"):
            name = f"afs-{role}-{uuid.uuid4().hex[:6]}"
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                check=True,
                capture_output=True,
            )
            record = pwd.getpwnam(name)
            user = User(name, record.pw_uid, record.pw_gid)
            made.append(user)
            home = Path(f"/tmp/{name}-home")
            home.mkdir(mode=0o700)
            os.chown(home, user.uid, user.gid)
        alice, mallory = made
        probe = alice._run("import asyncfs; asyncfs.get_filesystem('file://')", None, 120)
        if probe.returncode != 0:
            pytest.skip(f"another user cannot import this checkout's asyncfs: {probe.stderr.strip()[-300:]}")
        yield alice, mallory
    finally:
        for user in made:
            shutil.rmtree(f"/tmp/{user.name}-home", ignore_errors=True)
            subprocess.run(["userdel", user.name], check=False, capture_output=True)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky folder every user may write, as /tmp is."""
    folder = Path(tempfile.mkdtemp(prefix="asyncfs-shared-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_write_never_follows_another_users_link_in_a_sticky_folder(users: tuple[User, User], shared: Path) -> None:
    """Mallory's link in /tmp to a file of Alice's: open() as Alice is
    refused (protected_symlinks), and so is an atomic write, which used to
    resolve the link itself and rename over Alice's file."""
    alice, mallory = users
    private = shared / "alice"
    private.mkdir(mode=0o700)
    (private / "keep").write_text("precious")
    os.chown(private, alice.uid, alice.gid)
    os.chown(private / "keep", alice.uid, alice.gid)
    mallory.run(f"import os; os.symlink({str(private / 'keep')!r}, {str(shared / 'report')!r})")
    said = alice.run(
        f"""
        import asyncio, asyncfs
        async def main():
            async with asyncfs.Env() as env:
                for write in (lambda: env.write_file({str(shared / "report")!r}, b"x"),
                              lambda: env.copy({str(private / "keep")!r}, {str(shared / "report")!r})):
                    try:
                        await write()
                    except asyncfs.PermissionDeniedError as exc:
                        print("refused:", exc)
        asyncio.run(main())
        """
    )
    assert said.count("refused:") == 2 and "symbolic link" in said
    assert (private / "keep").read_text() == "precious"
    assert (shared / "report").is_symlink()


def test_a_users_own_link_in_a_sticky_folder_is_followed(shared: Path, tmp_path: Path) -> None:
    """The rule is the kernel's: one's own link, or the folder owner's, is
    followed as before (this test's user owns both)."""
    (tmp_path / "target").write_text("old")
    (shared / "mine").symlink_to(tmp_path / "target")
    asyncfs.get_filesystem("file://")  # the default registry
    anyio.run(_write, str(shared / "mine"), b"new")
    assert (tmp_path / "target").read_text() == "new" and (shared / "mine").is_symlink()


async def _write(uri: str, data: bytes) -> None:
    async with asyncfs.Env() as env:
        await env.write_file(uri, data)


# ---- permissions kept ---------------------------------------------------------------------


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


@pytest.mark.usefixtures("umask_027")
async def test_writes_keep_the_targets_permissions_and_new_files_get_the_umasks(
    env: asyncfs.Env, tmp_path: Path
) -> None:
    key, script, new = tmp_path / "key", tmp_path / "run.sh", tmp_path / "new"
    key.write_bytes(b"old secret")
    key.chmod(0o600)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    os.chown(key, -1, 4242)  # a group the writer may give (root may give any)
    await env.write_file(str(key), b"new secret")
    async with env.open(str(script), "w") as out:
        await out.write("#!/bin/sh\necho hi\n")
    await env.write_file(str(new), b"fresh")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_gid == 4242
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # as open(p, "w") under umask 027
    assert key.read_bytes() == b"new secret" and script.read_text().endswith("hi\n")


async def test_a_write_in_progress_is_its_owners_alone(env: asyncfs.Env, tmp_path: Path) -> None:
    """While a public file is rewritten, its temporary sibling (holding the
    new bytes) can be read by no one else: it gets the target's mode only
    when it lands."""
    target = tmp_path / "public"
    target.write_bytes(b"old")
    target.chmod(0o644)
    async with env.open(str(target), "wb") as out:
        await out.write(b"new content")
        await out.flush()
        temporaries = [p for p in tmp_path.iterdir() if p.name != "public"]
        assert temporaries and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in temporaries)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644 and target.read_bytes() == b"new content"


@pytest.mark.usefixtures("umask_027")
async def test_a_copy_keeps_its_sources_permission_bits_as_shutil_copy_does(env: asyncfs.Env, tmp_path: Path) -> None:
    secret, tool = tmp_path / "secret", tmp_path / "tool"
    secret.write_bytes(b"s")
    secret.chmod(0o600)
    tool.write_bytes(b"#!")
    tool.chmod(0o755)
    await env.copy(str(secret), str(tmp_path / "secret-copy"))
    await env.copy(str(tool), str(tmp_path / "tool-copy"))
    (tmp_path / "over").write_bytes(b"x")
    (tmp_path / "over").chmod(0o644)
    await env.copy(str(secret), str(tmp_path / "over"))
    for name, mode in [("secret-copy", 0o600), ("tool-copy", 0o755), ("over", 0o600)]:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name
    # across schemes a file keeps the target's bits, or gets a new file's
    await env.write_file("mem://perm/x", b"from memory")
    await env.copy("mem://perm/x", str(tmp_path / "from-mem"))
    assert stat.S_IMODE((tmp_path / "from-mem").stat().st_mode) == 0o640


async def test_a_native_commit_keeps_the_roots_mode_owner_and_group(env: asyncfs.Env, tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "old").write_bytes(b"old")
    root.chmod(0o700)
    os.chown(root, 4242, 4343)
    async with env.transaction(str(root)) as txn:
        await txn.write_file("new", b"new")
    info = root.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and (info.st_uid, info.st_gid) == (4242, 4343)
    assert sorted(p.name for p in root.iterdir()) == ["new", "old"]


# ---- transactions beside other writers ------------------------------------------------------


async def test_a_native_commit_keeps_what_other_writers_made_in_the_root(env: asyncfs.Env, tmp_path: Path) -> None:
    """Files written into the root while a transaction is open, outside it,
    survive its commit (as with the generic way); a file both wrote ends as
    the transaction wrote it."""
    root = tmp_path / "root"
    root.mkdir()
    for name in ("untouched", "replaced-by-other", "both"):
        (root / name).write_bytes(b"before")
    async with env.transaction(str(root)) as txn:
        await txn.write_file("mine", b"txn")
        await txn.write_file("both", b"txn")
        await env.write_file(str(root / "theirs"), b"other")
        await env.write_file(str(root / "replaced-by-other"), b"other")
        await env.write_file(str(root / "both"), b"other")
        await env.makedirs(str(root / "their-folder/deep"))
        await env.write_file(str(root / "their-folder/deep/f"), b"other")
    got = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert got == {
        "untouched": b"before",
        "replaced-by-other": b"other",
        "both": b"txn",
        "mine": b"txn",
        "theirs": b"other",
        "their-folder/deep/f": b"other",
    }
    assert not [p for p in tmp_path.iterdir() if p.name != "root"]  # no staging left


async def test_staging_and_copy_names_cannot_be_guessed(env: asyncfs.Env, tmp_path: Path) -> None:
    """Another user who makes the names a pid and a counter would give
    cannot make a copy or a transaction fail (or take its place)."""
    (tmp_path / "src").write_bytes(b"data")
    for n in range(1, 200):
        (tmp_path / f"dst.~asyncfs-copy.{os.getpid()}.{n}").write_bytes(b"taken")
        (tmp_path / f".root.asyncfs-txn.{os.getpid()}.{n}").mkdir()
    await env.copy(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert (tmp_path / "dst").read_bytes() == b"data"
    async with env.transaction(str(tmp_path / "root")) as txn:
        staging = [p.name for p in tmp_path.iterdir() if ".asyncfs-txn." in p.name and p.stat().st_mode & 0o077 == 0]
        assert len(staging) == 1 and str(os.getpid()) not in staging[0]
        await txn.write_file("x", b"x")
    assert (tmp_path / "root/x").read_bytes() == b"x"


# ---- trees with links, loops and FIFOs -------------------------------------------------------


@pytest.fixture
def looped(tmp_path: Path) -> Path:
    """A tree with two loops of links, a link out of it, and a FIFO."""
    tree = tmp_path / "tree"
    (tree / "a/b").mkdir(parents=True)
    (tree / "a/b/file").write_bytes(b"data")
    (tree / "a/up").symlink_to("..")  # a loop
    (tree / "a/b/self").symlink_to(".")  # another
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"not part of the tree")
    (tree / "out").symlink_to(outside)
    (tree / "to-file").symlink_to("a/b/file")
    os.mkfifo(tree / "pipe")
    return tree


async def test_walks_treat_a_linked_folder_as_a_link(env: asyncfs.Env, looped: Path) -> None:
    walked = [(d, sorted(ds), sorted(fs)) async for d, ds, fs in env.walk(str(looped))]
    assert walked == [
        (str(looped), ["a"], ["out", "pipe", "to-file"]),
        (f"{looped}/a", ["b"], ["up"]),
        (f"{looped}/a/b", [], ["file", "self"]),
    ]
    everything = await env.glob(f"{looped}/**", recursive=True)
    assert len(everything) == 8 and not any("secret" in path for path in everything)
    sync_walk = list(asyncfs.get_filesystem("file://").walk(str(looped)))
    assert [(d, sorted(ds), sorted(fs)) for d, ds, fs in sync_walk] == walked


async def test_a_tree_copy_recreates_links_and_fifos_as_cp_r_does(env: asyncfs.Env, looped: Path) -> None:
    with anyio.fail_after(30):  # a FIFO copied by reading it would wait for ever
        await env.copy(str(looped), str(looped.parent / "copy"), recursive=True)
    copy = looped.parent / "copy"
    assert os.readlink(copy / "a/up") == ".." and os.readlink(copy / "a/b/self") == "."
    assert os.readlink(copy / "out") == str(looped.parent / "outside")
    assert os.readlink(copy / "to-file") == "a/b/file"
    assert stat.S_ISFIFO((copy / "pipe").lstat().st_mode)
    assert (copy / "a/b/file").read_bytes() == b"data"


async def test_a_tree_copy_to_a_store_without_links_leaves_them_out_and_says_so(
    env: asyncfs.Env, looped: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="asyncfs.copy"), anyio.fail_after(30):
        await env.copy(str(looped), "mem://copied/tree", recursive=True)
    found = [(d, sorted(fs)) async for d, _, fs in env.walk("mem://copied/tree")]
    assert found == [("mem://copied/tree", []), ("mem://copied/tree/a", []), ("mem://copied/tree/a/b", ["file"])]
    skipped = sorted(r.args[0].rpartition("/")[2] for r in caplog.records if r.name == "asyncfs.copy")  # type: ignore[index,union-attr]
    assert skipped == ["out", "pipe", "self", "to-file", "up"]


async def test_a_copy_into_its_own_source_is_refused(env: asyncfs.Env, tmp_path: Path) -> None:
    tree = tmp_path / "d"
    (tree / "e").mkdir(parents=True)
    (tree / "e/f").write_bytes(b"x")
    for target in (tree / "e/inner", tree, tmp_path / "d/./e/../e/inner"):
        with pytest.raises(asyncfs.InvalidArgumentError, match="into itself"):
            await env.copy(str(tree), str(target), recursive=True)
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == ["e", "e/f"]
    await env.copy(str(tree), str(tmp_path / "d-copy"), recursive=True)  # beside it is fine
    assert (tmp_path / "d-copy/e/f").read_bytes() == b"x"


def test_du_ls_and_cp_of_the_cli_end_on_loops(looped: Path) -> None:
    for args in (["du", "-s", str(looped)], ["ls", "-R", str(looped)], ["cp", "-r", str(looped), str(looped) + "2"]):
        command = [sys.executable, "-m", "asyncfs", *args]
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
    assert os.readlink(f"{looped}2/a/up") == ".."


def test_the_fsspec_bridge_finds_without_following_linked_folders(looped: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("asyncfs+file")
    found = fs.find(str(looped))
    assert sorted(Path(p).relative_to(looped).as_posix() for p in found) == [
        "a/b/file", "a/b/self", "a/up", "out", "pipe", "to-file",
    ]  # fmt: skip


# ---- asyncfs's own transient names ---------------------------------------------------------------


async def test_listings_for_walks_and_copies_leave_out_asyncfs_temporaries(env: asyncfs.Env, tmp_path: Path) -> None:
    """A folder being rewritten atomically by another process holds
    temporary siblings that vanish at any moment: walks, globs and tree
    copies leave them out (a copy used to fail on them)."""
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "data").write_bytes(b"d")
    (folder / f"data.~asyncfs-tmp.{os.getpid()}.abcdef").write_bytes(b"half")
    (folder / ".root.asyncfs-txn.0123456789abcdef").mkdir()
    (folder / ".root.asyncfs-journal").write_bytes(b"{}")
    assert [files async for _, _, files in env.walk(str(folder))] == [["data"]]
    assert await env.glob(f"{folder}/**", recursive=True) == [f"{folder}/data"]
    await env.copy(str(folder), str(tmp_path / "copy"), recursive=True)
    assert [p.name for p in (tmp_path / "copy").iterdir()] == ["data"]


# ---- what generic transactions leave beside a root --------------------------------------------


def _journal(root: Path, plan: dict[str, object], signed: str | None = None) -> None:
    body = json.dumps(plan, sort_keys=True)
    record: dict[str, object] = {"plan": plan, "check": hashlib.sha256(body.encode()).hexdigest()}
    if signed is not None:
        record["signed"] = signed
    (root.parent / f".{root.name}.asyncfs-journal").write_text(json.dumps(record))


async def test_a_planted_journal_is_never_carried_out(env: asyncfs.Env, tmp_path: Path) -> None:
    """A journal beside a root that this user's transaction did not write
    (unsigned, or naming paths out of the root) deletes nothing: the next
    transaction on the root refuses to go on, naming the journal."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_bytes(b"keep")
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside").write_bytes(b"keep too")
    staging = f".{root.name}.asyncfs-txn.x"
    (tmp_path / staging).mkdir()
    for plan, signed in [
        ({"staging": staging, "deletes": ["../victim"], "mkdirs": [], "moves": []}, None),
        ({"staging": staging, "deletes": ["inside"], "mkdirs": [], "moves": []}, None),
        ({"staging": staging, "deletes": ["inside"], "mkdirs": [], "moves": []}, "0" * 64),
        ({"staging": "../elsewhere", "deletes": [], "mkdirs": [], "moves": ["x"]}, None),
    ]:
        _journal(root, plan, signed)
        with pytest.raises(asyncfs.FailedPreconditionError, match="not written by this user"):
            async with env.transaction(str(root), native=False):
                pass
    assert (victim / "precious").read_bytes() == b"keep" and (root / "inside").read_bytes() == b"keep too"


async def test_this_users_crashed_journal_is_rolled_forward(env: asyncfs.Env, tmp_path: Path) -> None:
    """The other side of the rule above: a journal this user's transaction
    wrote (signed with this user's key) is finished by the next one."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "old").write_bytes(b"old")
    staging = tmp_path / f".{root.name}.asyncfs-txn.crashed"
    staging.mkdir()
    (staging / "new").write_bytes(b"new")
    plan = {"staging": staging.name, "deletes": ["old"], "mkdirs": [], "moves": ["new"]}
    _journal(root, plan, _private.sign(json.dumps(plan, sort_keys=True).encode()))
    await env.recover(str(root), native=False)
    assert [p.name for p in root.iterdir()] == ["new"] and not staging.exists()


async def test_an_empty_intent_marker_left_by_a_kill_names_nobody(env: asyncfs.Env, tmp_path: Path) -> None:
    """A marker cut short (killed between its create and its write, as the
    old in-place write could leave) no longer blocks the folder for ever."""
    root = tmp_path / "outer"
    root.mkdir()
    intents = tmp_path / ".outer.asyncfs-intent.d"
    intents.mkdir()
    (intents / "0123").write_bytes(b"")
    async with env.transaction(str(root), native=False) as txn:
        await txn.write_file("x", b"x")
    await env.recover(str(root), native=False)
    assert (root / "x").read_bytes() == b"x" and not list(intents.iterdir())


async def test_nested_generic_transactions_leave_no_markers(env: asyncfs.Env, tmp_path: Path) -> None:
    for _ in range(3):
        async with env.transaction(str(tmp_path / "a/b/c"), native=False) as txn:
            await txn.write_file("f", b"f")
    assert not [p for p in tmp_path.rglob("*") if "asyncfs-" in p.name]


# ---- another user on the same machine ----------------------------------------------------------


def test_a_lock_folder_another_user_made_first_is_refused_by_name(users: tuple[User, User], shared: Path) -> None:
    alice, mallory = users
    locks = Path(f"/tmp/asyncfs-locks-{alice.uid}")
    shutil.rmtree(locks, ignore_errors=True)
    try:
        mallory.run(f"import os; os.mkdir({str(locks)!r}); os.chmod({str(locks)!r}, 0o777)")
        said = alice.run(
            f"""
            import asyncio, asyncfs
            async def main():
                async with asyncfs.Env() as env:
                    try:
                        async with env.transaction({str(shared / "alice-ckpt")!r}) as txn:
                            await txn.write_file("x", b"x")
                    except asyncfs.PermissionDeniedError as exc:
                        print("refused:", exc)
            asyncio.run(main())
            """
        )
        assert "refused:" in said and str(locks) in said and "another user" in said
    finally:
        shutil.rmtree(locks, ignore_errors=True)


def test_two_users_transactions_on_their_own_folders_never_interfere(users: tuple[User, User], shared: Path) -> None:
    """With protected_regular at 1 or a umask of 077, a lock file one user
    made in a shared lock folder locked the other out: each now has a lock
    folder of their own. Both run nested transactions under one shared
    parent at once."""
    alice, mallory = users
    code = """
        import asyncio, asyncfs, os, sys
        async def main():
            os.umask(0o077)
            async with asyncfs.Env() as env:
                for n in range(20):
                    async with env.transaction(sys.argv[1] + f"/ckpt-{n}") as txn:
                        await txn.write_file("x", b"x")
            print("done")
        asyncio.run(main())
    """
    folders = {}
    for user in users:
        folders[user] = shared / user.name
        folders[user].mkdir()
        os.chown(folders[user], user.uid, user.gid)
    procs = [
        subprocess.Popen(
            [
                SETPRIV,
                f"--reuid={u.uid}",
                f"--regid={u.gid}",
                "--clear-groups",
                sys.executable,
                "-c",
                textwrap.dedent(code),
                str(folders[u]),
            ],
            env={"PATH": os.environ.get("PATH", ""), "HOME": f"/tmp/{u.name}-home"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for u in (alice, mallory)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == "done", err


def test_a_fifo_planted_as_a_lock_file_does_not_hang_a_transaction(tmp_path: Path) -> None:
    """In a lock folder shared on purpose (a sticky one, as /tmp), a FIFO
    where a lock file belongs is refused at once, not waited on for ever."""
    shared_locks = tmp_path / "locks"
    shared_locks.mkdir()
    shared_locks.chmod(0o1777)
    root = tmp_path / "root"
    # the lock file of the root itself: FNV-1a of its canonical path, as posix_transactions.c names it
    digest = 14695981039346656037
    for byte in str(root).encode():
        digest = ((digest ^ byte) * 1099511628211) % 2**64
    os.mkfifo(shared_locks / f"{digest:016x}.lock")
    code = f"""
        import asyncio, asyncfs
        async def main():
            async with asyncfs.Env() as env:
                try:
                    async with env.transaction({str(root)!r}, timeout=5):
                        pass
                except asyncfs.FailedPreconditionError as exc:
                    print("refused:", exc)
        asyncio.run(main())
    """
    environ = {**os.environ, "ASYNCFS_LOCK_DIR": str(shared_locks)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "refused:" in done.stdout and "not a regular file" in done.stdout, done.stderr


def test_a_plugin_cache_others_may_write_is_never_loaded_from(users: tuple[User, User], shared: Path) -> None:
    """Alice's cache folder, made writable by others: her plugin copies are
    written to, checked in and loaded from a private folder instead, so
    nothing Mallory puts in the cache runs in her process."""
    alice, mallory = users
    cache = shared / "cache"
    (cache / "plugins").mkdir(parents=True)
    for folder in (cache, cache / "plugins"):
        folder.chmod(0o777)
        os.chown(folder, alice.uid, alice.gid)
    mallory.run(f"import os; os.mkdir({str(cache / 'plugins' / 'planted')!r})")
    said = alice.run(
        """
        import asyncfs, os
        fs = asyncfs.get_filesystem("mem://")
        fs.recursively_create_dir("mem://x")
        fs.write_file("mem://x/y", b"ok")
        loaded = [os.readlink(f"/proc/self/fd/{fd}") for fd in asyncfs._plugins.copies._held.values()]
        print(fs.read_file("mem://x/y").decode(), *loaded)
        """,
        env={"ASYNCFS_CACHE_DIR": str(cache)},
    )
    words = said.split()
    assert words[0] == "ok" and len(words) >= 3  # posix and memory, at least
    assert not any(path.startswith(str(cache)) for path in words[1:])
    assert sorted(p.name for p in (cache / "plugins").iterdir()) == ["planted"]


# ---- hostile endpoints ----------------------------------------------------------------------------


class HostileStore:
    """An S3 endpoint on loopback that answers as a hostile or broken
    server would: a listing that names itself as its next page, and answers
    (an error document, a listing) of many megabytes. It counts what it
    managed to send before the client hung up."""

    BIG = 96 << 20

    def __init__(self) -> None:
        store = self
        self.pages = 0
        self.sent = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                prefix = query.get("prefix", [""])[0]
                if "list-type" in query and prefix.startswith("loop"):
                    store.pages += 1
                    body = (
                        "<?xml version='1.0'?><ListBucketResult><IsTruncated>true</IsTruncated>"
                        "<NextContinuationToken>same</NextContinuationToken>"
                        f"<Contents><Key>{prefix}k{store.pages}</Key><Size>1</Size>"
                        "<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents></ListBucketResult>"
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                status, head = (200, b"<ListBucketResult>") if "list-type" in query else (403, b"<Error>")
                self.send_response(status)
                self.send_header("Content-Length", str(HostileStore.BIG))
                self.end_headers()
                store.stream(self.wfile, head + b"<Code>AccessDenied</Code>" + b" " * ((1 << 20) - 40))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stream(self, out: Any, first: bytes) -> None:
        chunk = first.ljust(1 << 20)
        try:
            for _ in range(HostileStore.BIG >> 20):
                out.write(chunk)
                self.sent += len(chunk)
                chunk = b" " * (1 << 20)
        except OSError:
            pass  # the client hung up: what it read is counted

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[HostileStore, asyncfs.ModularFileSystem]]:
    if "s3" not in asyncfs.default_registry().schemes():
        pytest.skip("asyncfs was built without the s3 plugin")
    store = HostileStore()
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, value in {
        "AWS_ENDPOINT_URL": store.endpoint,
        "AWS_ACCESS_KEY_ID": "AKHOSTILE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "3",
    }.items():
        monkeypatch.setenv(name, value)
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(_libs.library_path("s3"))
    yield store, registry.get("s3")
    store.close()


def test_a_listing_that_names_itself_as_its_next_page_ends(hostile: tuple[HostileStore, Any]) -> None:
    store, fs = hostile
    with pytest.raises(asyncfs.DataLossError, match="for ever"):
        fs.get_children("s3://bucket/loop")
    assert store.pages == 2  # the first page, and the one that named itself again


def test_an_error_document_of_many_megabytes_is_read_only_as_far_as_its_code(
    hostile: tuple[HostileStore, Any],
) -> None:
    store, fs = hostile
    with pytest.raises(asyncfs.PermissionDeniedError, match="AccessDenied"):
        fs.read_file("s3://bucket/huge-error")
    assert store.sent < 24 << 20, f"{store.sent >> 20} MiB of an error document were taken"


def test_a_listing_of_many_megabytes_is_cut_off(hostile: tuple[HostileStore, Any]) -> None:
    store, fs = hostile
    with pytest.raises(asyncfs.StatusError, match="longer than asked for"):
        fs.get_children("s3://bucket/huge")
    assert store.sent < 48 << 20, f"{store.sent >> 20} MiB of a listing were taken"
