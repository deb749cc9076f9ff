"""A one-node Ceph cluster with its S3 gateway (radosgw), on loopback.

Used by the s3 tests and the benchmarks; also runnable by hand::

    python tests/support/ceph_gateway.py      # prints AWS_* settings, serves until ^C

One monitor, one memstore OSD and one beast gateway, every path inside one
scratch folder, no authentication inside the cluster (S3 requests are still
signed and checked by the gateway). ``tcp_nodelay=1`` matters: without it
every response with a body waits about 40 ms for a delayed ACK.

The daemons detach themselves, so a watcher process stops them if the
process that started them ends without calling ``stop()`` (a crash, a
SIGKILL): left running, idle clusters take CPU from every later benchmark.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Gateway", "missing_reason", "start_gateway"]

DAEMONS = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
INSTALL_HINT = "apt-get install radosgw ceph-mon ceph-osd"
ACCESS_KEY = "ASYNCFSTESTACCESSKEY"
SECRET_KEY = "asyncfs-test-secret-key-not-a-real-one"


def missing_reason() -> str | None:
    """Why no gateway can start here, or None when it can."""
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return f"Ceph is not installed (missing {', '.join(missing)}; {INSTALL_HINT})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Gateway:
    """A running gateway: its endpoint, credentials and the daemons' pids."""

    endpoint: str
    access_key: str
    secret_key: str
    region: str
    scratch: Path
    pid_files: list[Path] = field(default_factory=list)
    _watcher: subprocess.Popen[bytes] | None = None  # see _watch

    def environ(self) -> dict[str, str]:
        """The environment variables the s3 plugin (and boto3) read."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "S3_USE_PATH_STYLE": "1",
        }

    def admin(self, *args: str) -> str:
        done = subprocess.run(
            ["radosgw-admin", "-c", str(self.scratch / "ceph.conf"), "-n", "client.rgw.asyncfs", *args],
            check=True,
            capture_output=True,
            text=True,
            errors="replace",  # `object stat` prints raw attributes, which need not be UTF-8
        )
        return done.stdout

    def stop(self) -> None:
        if self._watcher is not None:  # stopped on purpose: the watcher leaves them
            self._watcher.communicate(b"stopped", timeout=30)
            self._watcher = None
        _stop(reversed(self.pid_files), self.scratch)


def _stop(pid_files: Iterable[Path], scratch: Path) -> None:
    """Stop each daemon named in pid_files (SIGTERM, then SIGKILL after 5 s)
    and remove scratch."""
    for pid_file in pid_files:
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            continue
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(scratch, ignore_errors=True)


_WATCHER = """
import os, pathlib, sys
sys.path.insert(0, sys.argv[1])
from ceph_gateway import _stop
if not os.read(0, 1):  # the end of the pipe, unannounced: its owner is gone
    scratch = pathlib.Path(sys.argv[2])
    _stop(scratch.glob("run/*.pid"), scratch)
"""


def _watch(scratch: Path) -> subprocess.Popen[bytes]:
    """A process that stops the daemons whose pid files are in scratch once
    this process is gone (its stdin, ours to write, then ends), unless it
    was told first that they were stopped."""
    here = str(Path(__file__).parent)
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHER, here, str(scratch)], stdin=subprocess.PIPE, start_new_session=True
    )


def _config(scratch: Path, mon_port: int, rgw_port: int, fsid: str, memstore_bytes: int) -> str:
    s = scratch
    return f"""[global]
fsid = {fsid}
mon host = v1:127.0.0.1:{mon_port}
auth cluster required = none
auth service required = none
auth client required = none
osd objectstore = memstore
memstore device bytes = {memstore_bytes}
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon allow pool delete = true
osd crush chooseleaf type = 0
mon warn on pool no redundancy = false
# The monitor keeps a few MiB on disk and the OSD keeps its data in memory:
# a nearly full host disk (CI machines run at 5% free) must not stop it.
mon data avail crit = 0
mon data avail warn = 0
run dir = {s}/run
admin socket = {s}/run/$name.asok
log file = {s}/log/$name.log
pid file = {s}/run/$name.pid
mon data = {s}/mon/$name
osd data = {s}/osd/$name
keyring = {s}/keyring
crash dir = {s}/crash
exporter sock dir = {s}/run
ms bind ipv6 = false
osd max object name len = 460
osd max object namespace len = 64

[client.rgw.asyncfs]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port} tcp_nodelay=1
rgw dns name = localhost
rgw enable usage log = false
rgw thread pool size = 256
rgw max chunk size = 4194304
"""


def _run(scratch: Path, *args: str) -> str:
    done = subprocess.run(
        [args[0], "-c", str(scratch / "ceph.conf"), *args[1:]],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _wait(predicate: object, what: str, timeout: float, scratch: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in (scratch / "log").glob("*.log"))
    raise RuntimeError(f"Ceph: {what} did not happen within {timeout:.0f} s\n{logs}")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_gateway(scratch: Path | None = None, *, memstore_bytes: int = 3 << 30, attempts: int = 3) -> Gateway:
    """Start monitor, OSD and gateway; return once S3 requests are served.
    A start that fails (a port taken between choosing and binding it, say)
    is retried from scratch."""
    reason = missing_reason()
    if reason is not None:
        raise RuntimeError(reason)
    for attempt in range(1, attempts + 1):
        folder = Path(tempfile.mkdtemp(prefix="asyncfs-ceph-", dir=scratch))
        try:
            return _start(folder, memstore_bytes)
        except RuntimeError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start(scratch: Path, memstore_bytes: int) -> Gateway:
    for sub in ("run", "log", "mon", "osd", "crash"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    mon_port, rgw_port = _free_port(), _free_port()
    fsid = str(uuid.uuid4())
    (scratch / "ceph.conf").write_text(_config(scratch, mon_port, rgw_port, fsid, memstore_bytes))
    gateway = Gateway(f"http://127.0.0.1:{rgw_port}", ACCESS_KEY, SECRET_KEY, "us-east-1", scratch)
    gateway._watcher = _watch(scratch)
    try:
        monmap = scratch / "monmap"
        _run(scratch, "monmaptool", "--create", "--fsid", fsid, "--add", "a", f"v1:127.0.0.1:{mon_port}", str(monmap))
        _run(scratch, "ceph-mon", "--mkfs", "-i", "a", "--monmap", str(monmap))
        _run(scratch, "ceph-mon", "-i", "a")
        gateway.pid_files.append(scratch / "run/mon.a.pid")
        osd_uuid = str(uuid.uuid4())
        osd_id = _run(scratch, "ceph", "osd", "create", osd_uuid).strip()
        (scratch / f"osd/osd.{osd_id}").mkdir()
        _run(scratch, "ceph-osd", "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
        _run(scratch, "ceph", "osd", "crush", "add", f"osd.{osd_id}", "1", "root=default", "host=asyncfs")
        _run(scratch, "ceph-osd", "-i", osd_id)
        gateway.pid_files.append(scratch / f"run/osd.{osd_id}.pid")
        _wait(lambda: "1 up" in _run(scratch, "ceph", "osd", "stat"), "the OSD coming up", 60, scratch)
        _run(scratch, "radosgw", "-n", "client.rgw.asyncfs")
        gateway.pid_files.append(scratch / "run/client.rgw.asyncfs.pid")
        _wait(lambda: _port_open(rgw_port), "the gateway listening", 90, scratch)
        gateway.admin(
            "user", "create", "--uid=asyncfs", "--display-name=asyncfs tests",
            f"--access-key={ACCESS_KEY}", f"--secret={SECRET_KEY}",
        )  # fmt: skip
    except BaseException:
        gateway.stop()
        raise
    return gateway


if __name__ == "__main__":
    started = time.monotonic()
    gw = start_gateway()
    for key, value in gw.environ().items():
        print(f"export {key}={value}")
    print(f"# started in {time.monotonic() - started:.1f} s; ^C stops it", file=sys.stderr)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        gw.stop()
