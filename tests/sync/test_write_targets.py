"""Writes land where a plain ``open(path, "wb")`` would write: through
symbolic links, on the file they lead to (the link stays a link), and in
place on a FIFO or a device, which the rename that ends an atomic write
would replace. Every way asyncfs stages a write beside its target and
renames it is covered: ``write_file``, a stream opened "wb", a copy (the
posix plugin's own, and the generic one between filesystems) and the
aiofiles drop-in's ``atomic=True``."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

import asyncfs
from asyncfs import aiofiles

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the aiofiles drop-in is asyncio's


async def _write_file(env: asyncfs.Env, path: Path, data: bytes) -> None:
    await env.write_file(str(path), data)


async def _stream(env: asyncfs.Env, path: Path, data: bytes) -> None:
    async with env.open(f"file://{path}", "wb") as f:
        await f.write(data)


async def _copy(env: asyncfs.Env, path: Path, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:  # not beside path: its folder is watched
        source = Path(folder) / "source"
        source.write_bytes(data)
        await env.copy(str(source), str(path))


async def _copy_between_filesystems(env: asyncfs.Env, path: Path, data: bytes) -> None:
    await env.write_file("mem://write-targets/source", data)
    await env.copy("mem://write-targets/source", str(path))


async def _drop_in(env: asyncfs.Env, path: Path, data: bytes) -> None:
    async with aiofiles.open(path, "wb", atomic=True) as f:
        await f.write(data)


WRITES: dict[str, Callable[[asyncfs.Env, Path, bytes], Awaitable[None]]] = {
    "write_file": _write_file,
    "stream": _stream,
    "copy": _copy,
    "copy between filesystems": _copy_between_filesystems,
    "aiofiles atomic": _drop_in,
}


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Where the links and their files are, and nothing else."""
    path = tmp_path / "links"
    path.mkdir()
    return path


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("kind", ["relative", "absolute", "a chain", "in another folder"])
async def test_a_write_through_a_link_replaces_the_file_it_leads_to(
    env: asyncfs.Env, folder: Path, write: str, kind: str
) -> None:
    (folder / "sub").mkdir()
    real = folder / ("sub/real.txt" if kind == "in another folder" else "real.txt")
    real.write_bytes(b"old")
    link = folder / "link.txt"
    if kind == "relative":
        link.symlink_to("real.txt")
    elif kind == "absolute":
        link.symlink_to(real)
    elif kind == "a chain":
        (folder / "middle").symlink_to("real.txt")
        link.symlink_to(folder / "middle")
    else:
        link.symlink_to("sub/real.txt")
    before = sorted(p.name for p in folder.rglob("*"))
    await WRITES[write](env, link, b"new")
    assert link.is_symlink(), "the link was replaced by a file"
    assert real.read_bytes() == b"new"
    assert sorted(p.name for p in folder.rglob("*")) == before  # no temporary sibling left anywhere


@pytest.mark.parametrize("write", WRITES)
async def test_a_dangling_link_gets_the_file_it_names(env: asyncfs.Env, folder: Path, write: str) -> None:
    link = folder / "link.txt"
    link.symlink_to("made.txt")
    await WRITES[write](env, link, b"made through the link")
    assert link.is_symlink()
    assert (folder / "made.txt").read_bytes() == b"made through the link"


@pytest.mark.parametrize("write", WRITES)
async def test_a_loop_of_links_is_refused_and_nothing_is_written(env: asyncfs.Env, folder: Path, write: str) -> None:
    (folder / "a").symlink_to("b")
    (folder / "b").symlink_to("a")
    with pytest.raises((OSError, asyncfs.AsyncFSError), match="symbolic links"):
        await WRITES[write](env, folder / "a", b"x")
    assert sorted(p.name for p in folder.iterdir()) == ["a", "b"]


@contextlib.contextmanager
def _reading(fifo: Path) -> Iterator[list[bytes]]:
    """A reader of fifo on a thread; what it read is in the list at the end."""
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield got
    finally:
        if reader.is_alive():  # the write failed before it opened the FIFO: let the reader go
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("through_a_link", [False, True])
async def test_a_fifo_is_written_in_place(env: asyncfs.Env, folder: Path, write: str, through_a_link: bool) -> None:
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    target = fifo
    if through_a_link:
        target = folder / "link"
        target.symlink_to("fifo")
    with _reading(fifo) as got:
        await WRITES[write](env, target, b"down the pipe")
    assert got == [b"down the pipe"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert target.is_symlink() == through_a_link
    assert sorted(p.name for p in folder.iterdir()) == sorted({"fifo", target.name})


@pytest.mark.parametrize("write", WRITES)
async def test_a_device_is_written_in_place(env: asyncfs.Env, folder: Path, write: str) -> None:
    """A null device of our own (mknod, which needs privileges: skipped
    without them), so that a failure replaces no device the machine uses."""
    device = folder / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError) as error:
        pytest.skip(f"cannot make a device node here: {error}")
    await WRITES[write](env, device, b"into the void")
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert [p.name for p in folder.iterdir()] == ["null"]


async def test_landing_path_says_where_a_write_lands(env: asyncfs.Env, folder: Path) -> None:
    """The op itself: the URI's own form for a plain path or a new one, the
    file a link leads to in the URI's form, None where the write must go in
    place; a plugin without the op (memory) answers the URI."""
    posix = env.filesystem("file://").wrapped
    (folder / "real").write_bytes(b"")
    (folder / "link").symlink_to("real")
    assert posix.landing_path(f"file://{folder}/real") == f"file://{folder}/real"
    assert posix.landing_path(f"{folder}/new") == f"{folder}/new"
    assert posix.landing_path(f"file://{folder}/link") == f"file://{folder}/real"
    assert posix.landing_path(f"{folder}/link") == f"{folder}/real"
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "fifo")
        assert posix.landing_path(f"{folder}/fifo") is None
    memory = env.filesystem("mem://").wrapped
    assert not memory.offers("landing_path")
    assert memory.landing_path("mem://a/b") == "mem://a/b"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("write", WRITES)
async def test_a_file_reached_through_proc_is_written_in_place(env: asyncfs.Env, folder: Path, write: str) -> None:
    """/proc/self/fd/N (what /dev/stdout leads to) names a file this
    process holds open: the write goes into that file, as a shell's ``>``
    would, and does not put another file in its place."""
    log = folder / "log"
    log.write_bytes(b"")
    with open(log, "ab") as held:
        inode = os.fstat(held.fileno()).st_ino
        await WRITES[write](env, Path(f"/proc/self/fd/{held.fileno()}"), b"into the open file")
        assert os.stat(log).st_ino == inode
    assert log.read_bytes() == b"into the open file"
    assert [p.name for p in folder.iterdir()] == ["log"]
