"""A FUSE filesystem whose server holds some requests until told to go on:
a network filesystem whose server does not answer (NFS and FUSE send their
server fstatfs(2), and an open), for tests/async/test_at_hand.py.

It holds one file, ``/a``, and counts the requests it is sent by name. It
needs root (or a mount the kernel lets this user make), /dev/fuse, libfuse 2
(Debian: libfuse2) and fusepy; :func:`mounted` skips, saying which, where
one is missing."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DATA = b"hello from a slow server\n"
HOLD_AT_MOST = 60.0  # seconds a held request waits for the gate (a test that fails must not hang)


def _fuse() -> ModuleType:
    """fusepy, or a skip that says what is missing."""
    try:
        import fuse  # noqa: PLC0415 (optional, and it looks for libfuse when imported)
    except (ImportError, OSError) as why:  # OSError: fusepy found no libfuse
        pytest.skip(f"FUSE from Python needs fusepy and libfuse 2 (Debian: libfuse2): {why}")
    return fuse


@contextmanager
def mounted(where: Path) -> Iterator[SlowServer]:
    """A slow server's filesystem mounted at where (made if missing): the
    requests named in its ``hold`` (none at first) wait until its gate is
    set, at the end at the latest. Unmounted on the way out."""
    fuse = _fuse()
    if not os.path.exists("/dev/fuse"):
        pytest.skip("there is no /dev/fuse here")
    where.mkdir(parents=True, exist_ok=True)
    server = SlowServer()
    # (use_ns: times in nanoseconds, as fusepy 3 asks to be told)
    operations = type("SlowOperations", (fuse.Operations,), {"__call__": server.answer, "use_ns": True})()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            fuse.FUSE(operations, str(where), foreground=True, attr_timeout=600, entry_timeout=600)
        except BaseException as error:  # a mount the kernel refused (no root, a container without it)
            errors.append(error)

    # libfuse sets SIGPIPE back to SIG_DFL when it stops, whatever it was
    # (Python ignores it): the process would then die of a write to a
    # closed pipe, so the signals libfuse touches are put back after it
    touched = (signal.SIGPIPE, signal.SIGHUP, signal.SIGTERM)
    before = {number: signal.getsignal(number) for number in touched}
    thread = threading.Thread(target=serve, name="slow-fuse", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not os.path.ismount(where) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not os.path.ismount(where):
        pytest.skip(f"a FUSE filesystem could not be mounted here: {errors or 'it never appeared'}")
    try:
        yield server
    finally:
        server.gate.set()
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)
        thread.join(10)
        for number, handler in before.items():
            signal.signal(number, handler)


class SlowServer:
    def __init__(self) -> None:
        self.hold: frozenset[str] = frozenset()
        self.gate = threading.Event()
        self.asked: Counter[str] = Counter()

    def settle(self) -> None:
        """Wait until the files opened so far were released: the kernel
        sends a release after close(2) returns."""
        deadline = time.monotonic() + 10
        while self.asked["release"] < self.asked["open"] and time.monotonic() < deadline:
            time.sleep(0.01)

    def answer(self, op: str, path: str, *args: Any) -> Any:
        self.asked[op] += 1
        if op in self.hold:
            self.gate.wait(HOLD_AT_MOST)
        now = time.time()
        if op == "getattr":
            if path == "/":
                return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_mtime": now, "st_ctime": now}
            if path == "/a":
                return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": len(DATA), "st_mtime": now}
            raise _error(errno.ENOENT)
        if op == "readdir":
            return [".", "..", "a"]
        if op == "open":
            return 0
        if op == "read":
            size, offset = args[0], args[1]
            return DATA[offset : offset + size]
        if op == "statfs":
            return {"f_bsize": 4096, "f_blocks": 1, "f_bavail": 0, "f_bfree": 0}
        if op == "getxattr":
            raise _error(errno.ENODATA)
        if op in ("release", "flush", "access", "listxattr", "opendir", "releasedir", "init", "destroy"):
            return 0
        raise _error(errno.ENOSYS)


def _error(code: int) -> BaseException:
    return _fuse().FuseOSError(code)  # type: ignore[no-any-return]
