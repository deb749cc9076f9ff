"""Opens and reads made at hand, on the calling thread
(``ModularFileSystem.new_random_access_file_if_ready``, entry 45 of the
filesystem table, API 7; ``RandomAccessFile.read_if_ready``, the entry
appended to the random access file table, API 1): posix opens through cached
directory entries and reads what the page cache holds, memory what its store
holds, and neither ever waits; a stream opens and reads a local file so, on
the event loop's thread, until the bytes are not at hand, then ahead on
other threads, and loses nothing on the way."""

from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from conftest import at_hand_here, put_dir, put_file
from support import slow_fuse

import asyncfs
from asyncfs._async import filesystem as async_filesystem
from asyncfs._streams import streams

pytestmark = pytest.mark.anyio

T = TypeVar("T")

TEXT = b"".join(b"%08d %s\n" % (i, b"x" * (i % 61)) for i in range(80_000))  # 3.1 MB of lines


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def at_hand(
    f: asyncfs.RandomAccessFile, offset: int, n: int, read: Callable[..., bytes | None] | None = None
) -> bytes | None:
    """f.read_if_ready (or read), asked up to five times: the page cache may
    answer "not now" while another thread holds a page (rarely: 2 in
    120,000 reads of a cached file here)."""
    for _ in range(5):
        got = read(f, offset, n) if read is not None else f.read_if_ready(offset, n)
        if got is not None:
            return got
    return None


async def turns_taken(work: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """work's result, and how many turns the loop gave a task that yields
    at each, while work ran."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(tick)
        await anyio.sleep(0)
        before = ticks
        result = await work()
        turns = ticks - before
        tasks.cancel_scope.cancel()
    return result, turns


# ---- the entry ---------------------------------------------------------------------------------


def test_read_if_ready_reads_what_read_reads(sync_fs: asyncfs.ModularFileSystem, root: str) -> None:
    data = bytes(range(256)) * 600
    put_file(sync_fs, f"{root}/file", data)
    cases = [(0, 4096), (4096, 65536), (len(data) - 10, 100), (len(data), 10), (len(data) + 5, 1), (7, 0)]
    with sync_fs.new_random_access_file(f"{root}/file") as f:
        if sync_fs.scheme in ("file", "mem"):  # the built-ins that have bytes at hand
            assert f.reads_if_ready
        if not f.reads_if_ready:
            assert f.read_if_ready(0, 10) is None  # read then reads them
            return
        assert [at_hand(f, offset, n) for offset, n in cases] == [f.read(offset, n) for offset, n in cases]
        buffer = bytearray(100)
        assert f.read_if_ready_into(len(data) - 40, buffer) == 40
        assert bytes(buffer[:40]) == data[-40:]
    with pytest.raises(ValueError, match="closed"):
        f.read_if_ready(0, 1)


def test_a_pipe_is_never_at_hand() -> None:
    """A pipe is read onward, under a lock: never on the loop's thread."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"abc")
    os.close(write_end)
    try:
        with asyncfs.get_filesystem("file://").new_random_access_file(f"/dev/fd/{read_end}") as f:
            assert f.reads_if_ready
            assert f.read_if_ready(0, 3) is None
            assert f.read(0, 3) == b"abc"
    finally:
        os.close(read_end)


@pytest.mark.parametrize("path", ["/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"])
def test_a_file_on_a_filesystem_not_listed_is_never_at_hand_however_often_asked(path: str) -> None:
    """procfs and sysfs are on no list of local filesystems: asked again (a
    mount is looked up once and then remembered, by its unique id where the
    kernel gives one), such a file is still not at hand, while a file of a
    listed filesystem asked between them still is."""
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    fs = asyncfs.get_filesystem("file://")
    here = Path(__file__)
    for _ in range(3):
        assert fs.read_file_if_ready(path) is None
        if at_hand_here(here) and here.stat().st_size < 64 << 10:
            expected = here.read_bytes()  # (read first: a page reclaimed since collection is in memory again)
            assert fs.read_file_if_ready(str(here)) == expected
    assert fs.read_file(path)  # a worker reads it


# a process that, for each line on its stdin, asks a stat and a read of a path at hand and prints
# whether each was at hand; one that asked a server holding its requests would wait for it instead
_ASK_AT_HAND = """
import sys, asyncfs
fs = asyncfs.get_filesystem("file://")
for _ in sys.stdin:
    print(fs.stat_if_ready(sys.argv[1]) is not None, fs.read_file_if_ready(sys.argv[1]) is not None, flush=True)
"""


@pytest.mark.parametrize("mounts_from", ["statmount", "mountinfo"])
def test_a_network_filesystem_whose_server_does_not_answer_never_holds_a_call_at_hand(
    tmp_path: Path, mounts_from: str
) -> None:
    """NFS sends fstatfs(2) to its server and FUSE to its daemon, and a
    stat may ask too: a look at hand tells a mount's type from what the
    kernel keeps (statmount(2) from Linux 6.8; /proc/self/mountinfo before,
    or when ASYNCFS_AT_HAND_MOUNTINFO is set) and stats with
    AT_STATX_DONT_SYNC, so on a FUSE mount whose server holds every
    request, with the file's entry and attributes cached, a stat and a read
    at hand answer "not at hand" at once and ask the server nothing."""
    if sys.platform != "linux":
        pytest.skip("at hand is Linux's")
    with slow_fuse.mounted(tmp_path / "mnt") as server:
        path = tmp_path / "mnt" / "a"
        assert path.read_bytes() == slow_fuse.DATA  # its entry and attributes now cached
        server.settle()
        server.hold = frozenset({"statfs", "open", "getattr", "lookup"})
        asked = server.asked.copy()
        env = {**os.environ, "ASYNCFS_AT_HAND_MOUNTINFO": "1" if mounts_from == "mountinfo" else ""}
        asking = [sys.executable, "-c", _ASK_AT_HAND, str(path)]
        run = subprocess.run(asking, input="go\n", check=False, env=env, capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["False", "False"]
        assert server.asked == asked


def test_a_mount_at_hand_is_told_again_after_the_mount_table_changed(tmp_path: Path) -> None:
    """By /proc/self/mountinfo (before Linux 6.8), a mount is known by an id
    that a later mount may take: a tmpfs file stated at hand, then the
    tmpfs unmounted and a FUSE filesystem mounted in its place (often with
    the same id), the FUSE file is not at hand and its server is asked
    nothing: the mount table changed, so what was read of it is forgotten."""
    if sys.platform != "linux":
        pytest.skip("at hand is Linux's")
    where = tmp_path / "mnt"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(where)], check=False, capture_output=True).returncode:
        pytest.skip("no tmpfs can be mounted here (not root)")
    child = subprocess.Popen(
        [sys.executable, "-c", _ASK_AT_HAND, str(where / "a")],
        env={**os.environ, "ASYNCFS_AT_HAND_MOUNTINFO": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        try:
            (where / "a").write_bytes(b"local")
            child.stdin.write("go\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
            # a tmpfs: its stat at hand (not its read: tmpfs refuses RWF_NOWAIT)
            assert child.stdout.readline().split()[:1] == ["True"]  # type: ignore[union-attr]
        finally:
            subprocess.run(["umount", str(where)], check=True)
        with slow_fuse.mounted(where) as server:
            assert (where / "a").read_bytes() == slow_fuse.DATA
            server.settle()
            server.hold = frozenset({"statfs", "open", "getattr", "lookup"})
            asked = server.asked.copy()
            out, err = child.communicate("go\n", timeout=30)
            assert child.returncode == 0, err
            assert out.split() == ["False", "False"]
            assert server.asked == asked
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def test_a_store_made_slow_is_not_at_hand() -> None:
    """The memory plugin's latency_us fakes a store that waits: what waits
    is not at hand."""
    fs = asyncfs.Registry().get("mem")  # an instance of its own: the option stays here
    fs.recursively_create_dir("mem://b")
    with fs.new_writable_file("mem://b/f") as w:
        w.append(b"data")
    with fs.new_random_access_file("mem://b/f") as f:
        assert f.read_if_ready(0, 4) == b"data"
        fs.set_option("latency_us", 1000)
        assert f.read_if_ready(0, 4) is None
        assert f.read(0, 4) == b"data"


def test_an_open_at_hand_is_the_open_of_new_random_access_file(sync_fs: asyncfs.ModularFileSystem, root: str) -> None:
    """Where the plugin opens at hand, it opens what new_random_access_file
    opens, with get_file_size's size; an error it knows at hand raises as
    that would; anything else is left to new_random_access_file (None)."""
    data = bytes(range(256)) * 300
    put_file(sync_fs, f"{root}/file", data)
    put_dir(sync_fs, f"{root}/dir")
    offered = sync_fs.offers("new_random_access_file_if_ready")
    assert offered == (sync_fs.scheme in ("file", "mem"))  # the built-ins that open at hand
    with sync_fs.new_random_access_file(f"{root}/file"):  # its directory entries now cached
        pass
    opened = sync_fs.new_random_access_file_if_ready(f"{root}/file")
    if not offered or (sync_fs.scheme == "file" and not at_hand_here(Path(root.removeprefix("file://")))):
        assert opened is None
        return
    assert opened is not None
    file, size = opened
    with file:
        assert size == sync_fs.get_file_size(f"{root}/file") == len(data)
        assert file.read(0, len(data)) == data
        assert at_hand(file, 100, 50) == data[100:150]
    with pytest.raises(asyncfs.NotFoundError):
        sync_fs.stat(f"{root}/missing")
    with pytest.raises(asyncfs.NotFoundError) as on_a_worker:
        sync_fs.new_random_access_file(f"{root}/missing")
    with pytest.raises(asyncfs.NotFoundError) as at_hand_too:
        sync_fs.new_random_access_file_if_ready(f"{root}/missing")  # a cached negative entry, in posix
    assert str(at_hand_too.value) == str(on_a_worker.value)  # the same open, the same words
    assert at_hand_too.value.op == on_a_worker.value.op
    try:
        got = sync_fs.new_random_access_file_if_ready(f"{root}/dir")
    except asyncfs.FailedPreconditionError:
        pass  # known at hand, as new_random_access_file says it
    else:
        assert got is None  # left to new_random_access_file


def test_a_stat_at_hand_is_the_stat_of_stat(sync_fs: asyncfs.ModularFileSystem, root: str) -> None:
    """Where the plugin stats at hand (stat_if_ready, API 9), it answers
    what stat answers, for a file, a folder and a missing path (the same
    error, in the same words); anything not at hand is left to stat (None)."""
    put_file(sync_fs, f"{root}/file", b"x" * 1234)
    put_dir(sync_fs, f"{root}/dir")
    offered = sync_fs.offers("stat_if_ready")
    assert offered == (sync_fs.scheme in ("file", "mem"))  # the built-ins that stat at hand
    for name in ("file", "dir"):
        stat = sync_fs.stat(f"{root}/{name}")  # its directory entries now cached
        got = sync_fs.stat_if_ready(f"{root}/{name}")
        if not offered or (sync_fs.scheme == "file" and not at_hand_here(Path(root.removeprefix("file://")))):
            assert got is None
            return
        assert got == stat, name
    with pytest.raises(asyncfs.NotFoundError) as on_a_worker:
        sync_fs.stat(f"{root}/missing")
    with pytest.raises(asyncfs.NotFoundError) as at_hand_too:
        sync_fs.stat_if_ready(f"{root}/missing")  # a cached negative entry, in posix
    assert str(at_hand_too.value) == str(on_a_worker.value)
    assert at_hand_too.value.op == on_a_worker.value.op == "stat"
    for name in ("file", "dir", "missing", "file/below"):
        uri = f"{root}/{name}"
        sync_fs.exists(uri)  # (cached, a negative entry too)
        assert sync_fs.exists_if_ready(uri) in (sync_fs.exists(uri), None), name
        assert sync_fs.isdir_if_ready(uri) in (sync_fs.isdir(uri), None), name
    assert sync_fs.exists_if_ready(f"{root}/file") is True
    assert sync_fs.isdir_if_ready(f"{root}/dir") is True
    assert sync_fs.size_if_ready(f"{root}/file") == sync_fs.get_file_size(f"{root}/file") == 1234
    for name in ("dir", "missing", "file/below"):  # get_file_size's to answer or refuse, in its words
        assert sync_fs.size_if_ready(f"{root}/{name}") is None, name


def test_a_fifo_is_stated_at_hand_without_being_opened(tmp_path: Path) -> None:
    """A FIFO is stat'ed through an O_PATH descriptor, which opens nothing:
    a writer waiting in its own open still waits."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fs = asyncfs.get_filesystem("file://")
    expected = fs.stat(str(fifo))
    got = fs.stat_if_ready(str(fifo))
    assert got is None or got == expected
    with pytest.raises(OSError) as no_reader:  # no reader came: a writer's open would wait
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert no_reader.value.errno == errno.ENXIO


def test_a_pipe_or_a_slow_store_is_not_opened_at_hand() -> None:
    """A pipe's size says nothing of its length, and a store that waits
    (the memory plugin's latency_us) has nothing at hand."""
    read_end, write_end = os.pipe()
    try:
        assert asyncfs.get_filesystem("file://").new_random_access_file_if_ready(f"/dev/fd/{read_end}") is None
    finally:
        os.close(read_end)
        os.close(write_end)
    fs = asyncfs.Registry().get("mem")  # an instance of its own: the option stays here
    fs.recursively_create_dir("mem://b")
    with fs.new_writable_file("mem://b/f") as w:
        w.append(b"data")
    opened = fs.new_random_access_file_if_ready("mem://b/f")
    assert opened is not None
    opened[0].close()
    assert opened[1] == 4
    fs.set_option("latency_us", 1000)
    assert fs.new_random_access_file_if_ready("mem://b/f") is None


@pytest.mark.parametrize("where", ["file", "mem"])
async def test_a_stream_of_a_file_at_hand_asks_no_worker(tmp_path: Path, where: str) -> None:
    """Open and read of a small cached file: the pool is not asked (the
    close then runs on a worker, and nobody waits for it)."""
    async with asyncfs.Env() as env:
        uri = await _stored(env, where, tmp_path)("small", TEXT[:5000])
        await env.read_file(uri)
        expect_none = where == "mem" or at_hand_here(tmp_path)
        for mode in ("rb", "r"):
            asked = env.pool.stats().operations
            async with env.open(uri, mode) as f:
                if mode == "rb":
                    assert await f.read() == TEXT[:5000]
                else:
                    assert [line async for line in f] == TEXT[:5000].decode().splitlines(keepends=True)
                asked = env.pool.stats().operations - asked
            assert asked == 0 if expect_none else asked >= 1, mode
        with pytest.raises(asyncfs.NotFoundError):
            await env.open(uri + "-missing", "rb")


# ---- streams -----------------------------------------------------------------------------------


class Spied:
    """Counts a stream's plugin reads: made at hand, made on a worker, and
    started ahead on a runtime thread; with cold_after, the reads at hand
    after that many answer "not at hand"."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cold_after: int | None) -> None:
        self.at_hand: list[int] = []  # offsets asked at hand
        self.not_at_hand = 0
        self.worker = 0
        self.ahead = 0
        cls = asyncfs.RandomAccessFile
        read_if_ready, read, read_ahead = cls.read_if_ready, cls.read, cls.read_ahead

        def spied_read_if_ready(file: asyncfs.RandomAccessFile, offset: int, n: int) -> bytes | None:
            self.at_hand.append(offset)
            refused = cold_after is not None and len(self.at_hand) > cold_after
            got = None if refused else at_hand(file, offset, n, read_if_ready)
            self.not_at_hand += got is None
            return got

        def spied_read(file: asyncfs.RandomAccessFile, *args: Any, **kwargs: Any) -> bytes:
            self.worker += 1
            return read(file, *args, **kwargs)

        def spied_read_ahead(file: asyncfs.RandomAccessFile, *args: Any) -> Any:
            self.ahead += 1
            return read_ahead(file, *args)

        monkeypatch.setattr(cls, "read_if_ready", spied_read_if_ready)
        monkeypatch.setattr(cls, "read", spied_read)
        monkeypatch.setattr(cls, "read_ahead", spied_read_ahead)


async def read_back(env: asyncfs.Env, uri: str, mode: str) -> bytes:
    """The stream's content: 64 KiB reads (binary), or its lines (text)."""
    async with env.open(uri, mode) as f:
        if mode == "r":
            return "".join([line async for line in f]).encode()
        parts = []
        while chunk := await f.read(65536):
            parts.append(chunk)
        return b"".join(parts)


def _stored(env: asyncfs.Env, where: str, tmp_path: Path) -> Callable[[str, bytes], Any]:
    async def store(name: str, data: bytes) -> str:
        uri = f"{tmp_path}/{name}" if where == "file" else f"mem://at-hand-{tmp_path.name}/{name}"
        await env.write_file(uri, data)
        return uri

    return store


@pytest.mark.parametrize("where", ["file", "mem"])
@pytest.mark.parametrize("mode", ["rb", "r", "gzip"])
@pytest.mark.parametrize("cold_after", [None, 0, 1, 7])
async def test_a_stream_reads_at_hand_then_ahead_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, mode: str, cold_after: int | None
) -> None:
    """All at hand (cold_after None): no read on a worker, none ahead.
    Once a read at hand is refused (after cold_after of them), that block
    and the rest are read ahead, and none is asked at hand again. The bytes
    are the file's either way, raw, as lines, and decompressed."""
    async with asyncfs.Env() as env:
        store = _stored(env, where, tmp_path)
        if mode == "gzip":
            uri = await store("data.gz", gzip.compress(TEXT, compresslevel=0))  # stored: several blocks
        else:
            uri = await store("data", TEXT)
        spied = Spied(monkeypatch, cold_after)
        assert await read_back(env, uri, "r" if mode == "r" else "rb") == TEXT
    if cold_after is None:
        assert spied.not_at_hand == 0
        assert len(spied.at_hand) > 10
        assert (spied.worker, spied.ahead) == (0, 1 if mode == "gzip" else 0)  # a compressed file's first block
    else:
        assert spied.not_at_hand == 1
        assert len(spied.at_hand) == cold_after + 1  # none asked after the refusal
        assert spied.worker + spied.ahead > 1


async def test_a_stream_of_a_file_not_in_the_page_cache_reads_it_ahead(tmp_path: Path) -> None:
    """The real thing: a file the kernel dropped from its page cache."""
    path = tmp_path / "cold"
    data = os.urandom(4 << 20)
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
        os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.preadv(fd, [bytearray(4096)], 2 << 20, os.RWF_NOWAIT)
        pytest.skip("the kernel kept the file in its page cache (or cannot say it is not there)")
    except (BlockingIOError, OSError):
        pass
    finally:
        os.close(fd)
    async with asyncfs.Env() as env:
        assert await read_back(env, str(path), "rb") == data


async def test_reading_at_hand_gives_the_loops_other_tasks_turns(tmp_path: Path) -> None:
    """A read of many cached blocks at hand never waits, and so would keep
    the loop to itself: every AT_HAND_MOST bytes, the other tasks get a turn."""
    path = tmp_path / "big"
    size = 8 << 20
    data = os.urandom(size)
    path.write_bytes(data)

    async with asyncfs.Env() as env, env.open(str(path), "rb") as f:

        async def read_all() -> bytes:
            parts = []
            while part := await f.read(65536):  # each from what one read at hand brought
                parts.append(part)
            return b"".join(parts)

        got, turns = await turns_taken(read_all)
    assert got == data
    assert turns >= size // streams.AT_HAND_MOST - 2


# ---- read_file ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "mem"])
async def test_read_file_of_a_small_file_at_hand_asks_no_worker(tmp_path: Path, where: str) -> None:
    """env.read_file of a cached file under 64 KiB is read on the loop's
    thread, and the pool is not asked; a file of 64 KiB goes to a worker.
    Both read as the sync read_file reads them, and a rewritten file reads
    its new bytes."""
    async with asyncfs.Env() as env:
        store = _stored(env, where, tmp_path)
        small, edge = await store("small", TEXT[:5000]), await store("edge", TEXT[: 64 << 10])
        fs = env.filesystem(small).wrapped
        at_hand_expected = where == "mem" or at_hand_here(tmp_path)
        for uri, at_hand_here_too in ((small, at_hand_expected), (edge, False)):
            asked = env.pool.stats().operations
            got = await env.read_file(uri)
            asked = env.pool.stats().operations - asked
            assert got == fs.read_file(uri) == TEXT[: len(got)], uri
            assert asked == 0 if at_hand_here_too else asked >= 1, uri
        await store("small", b"new")
        assert await env.read_file(small) == b"new"
        with pytest.raises(asyncfs.NotFoundError):
            await env.read_file(small + "-missing")


@pytest.mark.parametrize("call", ["read_file", "stat", "exists", "isdir", "size"])
async def test_a_store_made_slow_is_asked_on_a_worker(tmp_path: Path, call: str) -> None:
    """A store that waits (the memory plugin's latency_us) has nothing at
    hand: the call waits on a worker, not on the loop, and answers as it
    did at hand."""
    async with asyncfs.Env() as env:
        uri = await _stored(env, "mem", tmp_path)("slow", b"data")
        fs = env.filesystem(uri).wrapped
        expected = await getattr(env, call)(uri)
        fs.set_option("latency_us", 1000)
        try:
            asked = env.pool.stats().operations
            assert await getattr(env, call)(uri) == expected
            assert env.pool.stats().operations - asked >= 1
        finally:
            fs.set_option("latency_us", 0)


async def test_read_files_at_hand_one_after_another_give_the_loops_other_tasks_turns(tmp_path: Path) -> None:
    """Reads at hand never wait, and a loop of them would keep the loop to
    itself: every AT_HAND_TURN bytes (each read counted as at least
    AT_HAND_CALL), the other tasks get a turn."""
    count = 640
    async with asyncfs.Env() as env:
        store = _stored(env, "mem", tmp_path)
        uris = [await store(f"f{i}", b"%d" % i) for i in range(count)]

        async def read_all() -> list[bytes]:
            return [await env.read_file(uri) for uri in uris]

        got, turns = await turns_taken(read_all)
    assert got == [b"%d" % i for i in range(count)]
    assert turns >= count * async_filesystem.AT_HAND_CALL // async_filesystem.AT_HAND_TURN - 2


@pytest.mark.parametrize("call", ["read_file", "stat"])
async def test_each_task_counts_its_own_calls_at_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """The turns go by the calls one task made in a row: a task making
    AT_HAND_TURN's worth gives some, while as many tasks making one call
    each (under anyio's task group, as under gather) give none, which would
    not let the loop poll any sooner, only queue them behind each other."""
    turns = 0
    given = async_filesystem.checkpoint

    async def counted() -> None:
        nonlocal turns
        turns += 1
        await given()

    monkeypatch.setattr(async_filesystem, "checkpoint", counted)
    count = 3 * async_filesystem.AT_HAND_TURN // async_filesystem.AT_HAND_CALL
    async with asyncfs.Env() as env:
        uri = await _stored(env, "mem", tmp_path)("f", b"data")
        one = getattr(env, call)
        for _ in range(count):
            await one(uri)
        assert turns >= 2
        turns = 0
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(one, uri)
        assert turns == 0


# ---- stat ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "mem"])
async def test_stat_of_a_path_at_hand_asks_no_worker(tmp_path: Path, where: str) -> None:
    """env.stat of a cached path is answered on the loop's thread, and the
    pool is not asked; it answers as the sync stat does, sees a rewrite at
    once, and a missing path raises NotFoundError, also at hand."""
    async with asyncfs.Env() as env:
        store = _stored(env, where, tmp_path)
        uri = await store("small", b"12345")
        fs = env.filesystem(uri).wrapped
        at_hand_expected = where == "mem" or at_hand_here(tmp_path)
        fs.stat(uri)  # (its entries cached)
        asked = env.pool.stats().operations
        assert await env.stat(uri) == fs.stat(uri)
        assert (env.pool.stats().operations - asked == 0) == at_hand_expected
        await store("small", b"123")
        assert (await env.stat(uri)).length == 3
        with pytest.raises(asyncfs.NotFoundError):
            await env.stat(uri + "-missing")
        with pytest.raises(asyncfs.NotFoundError):
            await env.stat(uri + "-missing")  # (a cached negative entry, in posix)
        operations = env.metrics().operations
        assert [(op.operation, op.count, op.errors) for op in operations if op.operation == "stat"] == [
            ("stat", 4, {"NOT_FOUND": 2})
        ]


@pytest.mark.parametrize("where", ["file", "mem"])
async def test_exists_and_isdir_at_hand_ask_no_worker(tmp_path: Path, where: str) -> None:
    """env.exists and env.isdir of cached paths answer on the loop's thread,
    as the sync exists and isdir do: a file, a folder, a missing path; and
    a path below a file as they do too, at hand or not (posix: openat2's
    RESOLVE_CACHED leaves that walk to the ordinary call)."""
    async with asyncfs.Env() as env:
        uri = await _stored(env, where, tmp_path)("file", b"x")
        folder = uri.rsplit("/", 1)[0]
        fs = env.filesystem(uri).wrapped
        at_hand_expected = where == "mem" or at_hand_here(tmp_path)
        for path in (uri, folder, f"{folder}/missing", f"{uri}/below"):
            expected = fs.exists(path), fs.isdir(path)  # (its entries cached)
            asked = env.pool.stats().operations
            assert (await env.exists(path), await env.isdir(path)) == expected, path
            if not path.endswith("/below"):
                assert (env.pool.stats().operations - asked == 0) == at_hand_expected, path


@pytest.mark.parametrize("where", ["file", "mem"])
async def test_size_of_a_file_at_hand_asks_no_worker(tmp_path: Path, where: str) -> None:
    """env.size of a cached file answers on the loop's thread; of a folder
    or a missing path, get_file_size answers (or refuses) on a worker, as
    it always did."""
    async with asyncfs.Env() as env:
        uri = await _stored(env, where, tmp_path)("file", b"x" * 321)
        folder = uri.rsplit("/", 1)[0]
        fs = env.filesystem(uri).wrapped
        fs.get_file_size(uri)  # (its entries cached)
        asked = env.pool.stats().operations
        assert await env.size(uri) == 321
        assert (env.pool.stats().operations - asked == 0) == (where == "mem" or at_hand_here(tmp_path))
        for path in (folder, f"{folder}/missing"):
            try:
                expected: object = fs.get_file_size(path)
            except asyncfs.AsyncFSError as error:
                expected = (type(error), str(error))
            asked = env.pool.stats().operations
            try:
                got: object = await env.size(path)
            except asyncfs.AsyncFSError as error:
                got = (type(error), str(error))
            assert got == expected, path
            assert env.pool.stats().operations - asked >= 1, path


async def test_stats_at_hand_one_after_another_give_the_loops_other_tasks_turns(tmp_path: Path) -> None:
    """A loop of stats at hand, each counted as AT_HAND_CALL bytes read at
    hand, gives the loop's other tasks a turn every AT_HAND_TURN."""
    count = 640
    async with asyncfs.Env() as env:
        uri = await _stored(env, "mem", tmp_path)("f", b"data")

        async def stat_all() -> list[int]:
            return [(await env.stat(uri)).length for _ in range(count)]

        got, turns = await turns_taken(stat_all)
    assert got == [4] * count
    assert turns >= count * async_filesystem.AT_HAND_CALL // async_filesystem.AT_HAND_TURN - 2


@pytest.mark.parametrize("call", ["stat", "read_file"])
async def test_errors_known_at_hand_give_the_loops_other_tasks_turns_too(tmp_path: Path, call: str) -> None:
    """A loop over missing paths, each call failing at hand (NOT_FOUND),
    takes the loop's time as a call that answers does: turns are given."""
    count = 640
    async with asyncfs.Env() as env:
        missing = (await _stored(env, "mem", tmp_path)("f", b"data")) + "-missing"

        async def fail_all() -> int:
            failed = 0
            for _ in range(count):
                with pytest.raises(asyncfs.NotFoundError):
                    await getattr(env, call)(missing)
                failed += 1
            return failed

        asked = env.pool.stats().operations
        got, turns = await turns_taken(fail_all)
        assert env.pool.stats().operations == asked  # (all failed at hand)
    assert got == count
    assert turns >= count * async_filesystem.AT_HAND_CALL // async_filesystem.AT_HAND_TURN - 2
