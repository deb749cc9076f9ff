"""Azurite, Microsoft's Azure Storage emulator (npm ``azurite``, its blob
service alone), on loopback for the az plugin's tests: in memory, checking
Shared Key signatures, with its API-version check off so that the newest
``azure-storage-blob`` may talk to it too. ``.ci/run`` installs it with npm;
without it the tests skip, saying so.

What it cannot show (docs/az.md): Copy Blob is always finished at once
(never ``pending``), and it answers a conditional create that finds a blob
409 where the service may say 412."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass

from .http_servers import _free_port, start_process

__all__ = ["ACCOUNT", "KEY", "Azurite", "azurite_missing_reason", "start_azurite"]

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_missing_reason() -> str | None:
    """Why Azurite cannot run here, or None."""
    if shutil.which("azurite-blob") is None:
        return "Azurite is not installed (npm install -g azurite@3.35.0: its azurite-blob on PATH)"
    return None


@dataclass
class Azurite:
    endpoint: str  # "http://127.0.0.1:PORT/devstoreaccount1"
    stop: contextlib.ExitStack
    pid: int = 0

    @property
    def connection_string(self) -> str:
        return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};BlobEndpoint={self.endpoint};"


def start_azurite() -> Azurite:
    command = shutil.which("azurite-blob")
    assert command is not None, azurite_missing_reason()
    port = _free_port()
    process = start_process(
        [
            command,
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--silent",
            "--skipApiVersionCheck",
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
        ],
        port,
        f"/{ACCOUNT}?comp=list",
        timeout=30,
    )
    return Azurite(f"http://127.0.0.1:{port}/{ACCOUNT}", process.stop, process.pid)
