"""The test gateway's own promise: its daemons, which detach themselves, do
not outlive a process that dies without stopping them (an idle cluster left
behind takes CPU from every later test run and benchmark)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTS, require_stores
from support.ceph_gateway import missing_reason

CRASHING_OWNER = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from support.ceph_gateway import start_gateway
gateway = start_gateway()
print(gateway.scratch, *(f.read_text().strip() for f in gateway.pid_files), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_daemons_end_with_a_process_killed_before_it_stopped_them(request: pytest.FixtureRequest) -> None:
    require_stores(request.config)
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_OWNER, str(TESTS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == -9, done.stderr[-2000:]
    scratch, *pids = done.stdout.split()
    assert len(pids) == 3  # monitor, OSD, gateway
    deadline = time.monotonic() + 30
    while any(alive(int(pid)) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(int(pid)) for pid in pids)
    while Path(scratch).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(scratch).exists()
