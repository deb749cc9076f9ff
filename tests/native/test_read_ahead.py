"""Reads made ahead on the runtime's own threads (plugins/runtime/read_ahead.c,
``RandomAccessFile.read_ahead``): what they read, that they need no
interpreter lock, and that nobody waits on them longer than a read lasts: not
a close, not a reader whose read is queued behind reads that hang, not a
forked child."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import TEST_PLUGINS, build_plugin, exit_code_of, put_file

import asyncfs

SOURCE = TEST_PLUGINS / "testfs.c"


def test_a_read_made_ahead_reads_what_read_reads(sync_fs: asyncfs.ModularFileSystem, root: str) -> None:
    data = bytes(range(256)) * 40
    put_file(sync_fs, f"{root}/file", data)
    cases = [(0, 4096), (4096, 8192), (10000, 4096), (len(data), 10), (20000, 1)]
    with sync_fs.new_random_access_file(f"{root}/file") as f:
        started = [f.read_ahead(offset, n) for offset, n in cases]
        assert [ahead.result() for ahead in started if ahead is not None] == [f.read(o, n) for o, n in cases]
        assert started[0] is not None
        with pytest.raises(ValueError, match="taken already"):
            started[0].result()
        f.read_ahead(0, 4096)  # dropped unread: freed, and the close is not held up
        with pytest.raises(ValueError, match="n > 0"):
            f.read_ahead(0, 0)
    with pytest.raises(ValueError, match="closed"):
        f.read_ahead(0, 1)


def test_a_read_made_ahead_lends_its_bytes_for_one_call(sync_fs: asyncfs.ModularFileSystem, root: str) -> None:
    """lend hands the runtime's buffer to one call, as a view released when
    it returns (a view kept past it is unusable, never freed memory), once;
    an error it raises comes out, and the read is freed all the same."""
    data = bytes(range(256)) * 40
    put_file(sync_fs, f"{root}/file", data)
    kept: list[memoryview] = []
    with sync_fs.new_random_access_file(f"{root}/file") as f:
        ahead = f.read_ahead(100, 5000)
        assert ahead is not None
        assert ahead.lend(lambda view: (kept.append(view), bytes(view[:3]), len(view))[1:]) == (data[100:103], 5000)
        with pytest.raises(ValueError, match="released"):
            kept[0].tobytes()
        with pytest.raises(ValueError, match="taken already"):
            ahead.lend(bytes)
        failing = f.read_ahead(0, 10)
        assert failing is not None
        with pytest.raises(ZeroDivisionError):
            failing.lend(lambda view: len(view) / 0)
        end = f.read_ahead(len(data) - 2, 10)
        assert end is not None and end.lend(bytes) == data[-2:]


@dataclass
class Gated:
    """The test plugin built with GATED: reads at offset 0 wait while the
    gate file exists; every read notes its offset in the entered file."""

    fs: asyncfs.ModularFileSystem
    gate: Path
    log: Path

    def entered(self) -> list[int]:
        return [int(line) for line in self.log.read_text().split()] if self.log.exists() else []


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gated]:
    library = build_plugin(SOURCE, tmp_path / "libgated.so", "GATED", flags=("-Wno-unused-function",))
    gate, log = tmp_path / "gate", tmp_path / "entered"
    gate.touch()
    monkeypatch.setenv("TESTFS_GATE", str(gate))
    monkeypatch.setenv("TESTFS_ENTERED", str(log))
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(library)
    yield Gated(registry.get("testfs"), gate, log)
    gate.unlink(missing_ok=True)  # lets go of any read still waiting


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited 20 s for {what}")
        time.sleep(0.005)


def test_a_read_made_ahead_needs_no_interpreter_lock(gated: Gated) -> None:
    """This thread keeps the interpreter's lock (no switch interval runs out
    while it spins in pure Python), and the read is done meanwhile: a worker
    of the pool could not even have started it."""
    gated.gate.unlink()
    with gated.fs.new_random_access_file("testfs:///f") as f:
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1000)
        try:
            ahead = f.read_ahead(4096, 1 << 16)
            assert ahead is not None
            until = time.perf_counter() + 0.5
            while time.perf_counter() < until:  # no call here lets go of the lock
                pass
            done = ahead.done()
        finally:
            sys.setswitchinterval(interval)
        assert done
        assert ahead.result() == b"g" * (1 << 16)


def test_a_close_waits_for_its_reads_ahead_and_ends_those_not_started(gated: Gated) -> None:
    f = gated.fs.new_random_access_file("testfs:///f")
    started = [f.read_ahead(0, 100) for _ in range(4)]  # at most two threads: two or more stay queued
    wait_until(lambda: bool(gated.entered()), "a read to reach the gate")
    closing = threading.Thread(target=f.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive(), "the close did not wait for the read that is running"
    gated.gate.unlink()
    closing.join(20)
    assert not closing.is_alive()
    made, ended = 0, 0
    for ahead in started:
        assert ahead is not None
        try:
            assert ahead.result() == b"g" * 100
            made += 1
        except asyncfs.FailedPreconditionError as error:
            assert "closed before" in str(error)
            ended += 1
    assert made == len(gated.entered())  # those the close ended never ran
    assert ended >= 2


def test_a_read_queued_behind_reads_that_hang_is_made_by_its_waiter(gated: Gated) -> None:
    f = gated.fs.new_random_access_file("testfs:///f")
    hanging = [f.read_ahead(0, 10) for _ in range(2)]  # the runtime's threads wait at the gate
    wait_until(lambda: bool(gated.entered()), "a read to reach the gate")
    free = f.read_ahead(4096, 10)
    assert free is not None
    got: list[bytes] = []
    waiter = threading.Thread(target=lambda: got.append(free.result()))
    waiter.start()
    waiter.join(20)
    assert not waiter.is_alive(), "the read waited for threads held by reads that hang"
    assert got == [b"g" * 10]
    gated.gate.unlink()
    assert [ahead.result() for ahead in hanging if ahead is not None] == [b"g" * 10] * 2
    f.close()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_gets_the_reads_its_parent_was_making(gated: Gated) -> None:
    """The child has none of the runtime's threads: a read that one of them
    was making at the fork is made again by the child's waiter, and new
    reads start threads of the child's own."""
    f = gated.fs.new_random_access_file("testfs:///f")
    running = f.read_ahead(0, 10)
    wait_until(lambda: gated.entered() == [0], "the read to reach the gate")
    queued = f.read_ahead(4096, 10)
    pid = os.fork()
    if pid == 0:
        reads = [queued, running, f.read_ahead(8192, 10)]
        ok = all(ahead is not None and ahead.result() == b"g" * 10 for ahead in reads)
        os._exit(0 if ok else 1)
    time.sleep(0.2)  # the child's read of offset 0 now waits at the gate too
    gated.gate.unlink()
    assert exit_code_of(pid, "the child waited for a read its parent's thread was making", seconds=30) == 0
    assert running is not None and running.result() == b"g" * 10
    assert queued is not None and queued.result() == b"g" * 10
    f.close()
