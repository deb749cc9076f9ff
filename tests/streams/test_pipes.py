"""Files that cannot be read at an offset, a pipe's read end named by a path
(``/dev/stdin`` under a shell's ``|``, a shell's ``<(...)``): read onward,
whole or as a stream, as ``open(path).read()`` reads them, by every way
asyncfs reads a file; a read that asks to go back says it cannot."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import anyio
import pytest

import asyncfs
import asyncfs.aiofiles

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="names a pipe through /dev/fd"),
]

DATA = bytes(range(256)) * 1200  # 300 KiB: more than read_file's first read and a stream's block


@contextlib.contextmanager
def pipe(data: bytes) -> Iterator[str]:
    """The path of a pipe's read end that data is written to (by a thread)."""
    read_end, write_end = os.pipe()

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), os.fdopen(write_end, "wb") as out:  # a reader that left early
            out.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield f"/dev/fd/{read_end}"
    finally:
        os.close(read_end)  # a writer still writing gets EPIPE and ends
        writer.join(10)


@pytest.mark.parametrize("size", [0, 10, 65536, 65537, len(DATA)])
async def test_read_file_reads_a_pipe_to_its_end(size: int) -> None:
    async with asyncfs.Env() as env:
        with pipe(DATA[:size]) as path:
            assert await env.read_file(path) == DATA[:size]


async def test_a_stream_reads_a_pipe_onward_in_binary_and_text() -> None:
    lines = b"".join(b"line %d\n" % i for i in range(50_000))
    async with asyncfs.Env() as env:
        with pipe(DATA) as path:
            async with env.open(path, "rb") as f:
                assert await f.read(1000) == DATA[:1000]
                assert await f.read() == DATA[1000:]
                assert await f.read() == b""
        with pipe(lines) as path:
            async with env.open(path, "r") as text:
                assert [line async for line in text] == lines.decode().splitlines(keepends=True)


async def test_prefetch_reads_a_pipe_among_files(tmp_path: os.PathLike[str]) -> None:
    plain = os.path.join(tmp_path, "plain")
    with open(plain, "wb") as f:
        f.write(b"plain")
    async with asyncfs.Env() as env:
        with pipe(DATA) as path:
            got = {name: data async for name, data in env.prefetch([plain, path, plain])}
    assert got == {plain: b"plain", path: DATA}


async def test_prefetch_reads_a_pipe_longer_than_its_buffer_and_budget_whole(tmp_path: os.PathLike[str]) -> None:
    """A pipe's bytes, once read, are gone from it: one longer than the
    scratch buffer is read to its end on the first try, and held even past
    the budget, not refused to be read again later (which found nothing)."""
    plain = os.path.join(tmp_path, "plain")
    with open(plain, "wb") as f:
        f.write(b"plain")
    budget = asyncfs.Budget(100_000)
    async with asyncfs.Env() as env:
        with pipe(DATA) as path:
            got = [
                data
                async for _, data in env.prefetch(
                    [plain, path, plain], scratch_size=64 << 10, budget=budget, ordered=False
                )
            ]
    assert sorted(got, key=len) == [b"plain", b"plain", DATA]
    assert budget.used == 0 and budget.peak >= len(DATA)


async def test_going_back_in_a_pipe_says_it_cannot() -> None:
    async with asyncfs.Env() as env:
        with pipe(DATA) as path:
            async with env.open(path, "rb", block_size=4096, readahead=0) as f:
                assert await f.read(8192) == DATA[:8192]
                await f.seek(0)
                with pytest.raises(asyncfs.FailedPreconditionError, match="read onward only"):
                    await f.read(10)


def test_the_cli_cats_standard_input() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asyncfs.cli", "cat", "/dev/stdin"], input=DATA, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == DATA


def _cli(*args: str, data: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "asyncfs.cli", *args], input=data, capture_output=True, check=False)


def test_a_dash_is_standard_input_to_cat_and_cp_and_standard_output_to_cp(tmp_path: os.PathLike[str]) -> None:
    target = os.path.join(tmp_path, "from-stdin")
    done = _cli("cat", "-", data=b"piped")
    assert (done.returncode, done.stdout) == (0, b"piped"), done.stderr
    done = _cli("cp", "-", target, "--progress", "off", data=DATA)
    assert done.returncode == 0, done.stderr
    with open(target, "rb") as f:
        assert f.read() == DATA
    done = _cli("cp", target, "-")
    assert (done.returncode, done.stdout) == (0, DATA), done.stderr
    done = _cli("cp", "-r", target, "-")
    assert done.returncode != 0 and b"without -r" in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
@pytest.mark.parametrize("way", ["read_file", "open", "aiofiles"])
async def test_a_fifo_whose_writer_waits_to_open_gets_all_its_bytes(tmp_path: os.PathLike[str], way: str) -> None:
    """A writer waiting in its open of a FIFO is let go by any open of it to
    read, even one with O_NONBLOCK that is closed at once: its bytes would
    then be lost, and the read that follows would wait for another writer.
    So no way of reading opens a FIFO at hand (on the loop's thread): the
    path is looked at first, and only a regular file is opened."""
    fifo = os.path.join(tmp_path, "fifo")
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            with open(fifo, "wb") as out:  # waits for a reader
                out.write(DATA)
        except BaseException as error:  # BrokenPipeError: the reader left at once
            outcome.append(error)
        else:
            outcome.append(None)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    await anyio.sleep(0.2)  # the writer now waits in its open
    async with asyncfs.Env() as env:
        try:
            with anyio.fail_after(20):
                if way == "read_file":
                    got = await env.read_file(fifo)
                elif way == "open":
                    async with env.open(fifo, "rb") as f:
                        got = await f.read()
                else:
                    async with asyncfs.aiofiles.open(fifo, "rb") as f:
                        got = await f.read()
        finally:
            with contextlib.suppress(OSError):  # a read left waiting for another writer: let it go
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            writer.join(10)
    assert outcome == [None]
    assert got == DATA
