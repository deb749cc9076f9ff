"""What asyncfs says through Python's logging: plugin loads, the object
store engine's retries and the credential chain's choices (written in C,
queued by the runtime, moved into ``logging`` by one thread), calls that
run long, and what a transaction's recovery did. Silent until the
application configures logging (a NullHandler on ``asyncfs``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

import anyio
import pytest
from conftest import exit_code_of
from support.flaky_store import Flaky, flaky_az

import asyncfs
from asyncfs._async import pool as _pool
from asyncfs._transactions.generic import Siblings


def _records(caplog: pytest.LogCaptureFixture, logger: str, needle: str, timeout: float = 5.0) -> list[str]:
    """The messages of logger holding needle, waited for (C's lines arrive
    through the forwarding thread)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r.getMessage() for r in caplog.records if r.name == logger and needle in r.getMessage()]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_asyncfs_is_silent_until_logging_is_configured() -> None:
    handlers = logging.getLogger("asyncfs").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_a_plugin_load_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="asyncfs"):
        asyncfs.Registry()
    [line] = _records(caplog, "asyncfs.plugins", "memory")
    assert "mem://" in line and "libasyncfs_memory" in line


flaky = pytest.fixture(flaky_az, name="flaky")


def test_the_engines_retries_and_the_token_fetch_reach_the_stores_logger(
    flaky: Flaky, caplog: pytest.LogCaptureFixture
) -> None:
    """Two 503s, then the answer: each retry is a line on asyncfs.az with
    the request, the status and the wait; the token's source is named, the
    token and the secret never are."""
    with caplog.at_level(logging.INFO, logger="asyncfs"):
        with pytest.raises(asyncfs.NotFoundError):
            flaky.az().stat("az://cont/blob")
        retries = _records(caplog, "asyncfs.az", "HTTP 503")
        tokens = _records(caplog, "asyncfs.az", "credentials: a token from Entra ID client secret")
    assert len(retries) == 2, retries
    assert retries[0].startswith("HEAD az://cont/blob: HTTP 503; try 2 of 10 in ")
    assert retries[1].startswith("HEAD az://cont/blob: HTTP 503; try 3 of 10 in ")
    assert len(tokens) == 1 and "valid for" in tokens[0]
    everything = " ".join(r.getMessage() for r in caplog.records)
    assert "t0ken-value" not in everything and "s3cret-value" not in everything


def test_a_credential_chain_that_finds_nothing_is_a_warning(flaky: Flaky, caplog: pytest.LogCaptureFixture) -> None:
    fs = flaky.az(tenant_id="", client_secret="", msi_endpoint=f"{flaky.url}/gone", max_attempts=1)
    flaky.server.shutdown()
    flaky.server.server_close()
    with caplog.at_level(logging.INFO, logger="asyncfs"), pytest.raises(asyncfs.UnauthenticatedError):
        fs.stat("az://cont/blob")
    [line] = _records(caplog, "asyncfs.az", "no credentials")
    assert [r.levelno for r in caplog.records if r.getMessage() == line] == [logging.WARNING]


def test_a_call_that_runs_long_is_a_warning(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past LONG_CALL, once per call, naming it (here 0.3 s instead of 30 s)."""
    monkeypatch.setattr(_pool, "LONG_CALL", 0.3)
    pool = _pool.WorkerPool(2)
    try:
        with caplog.at_level(logging.DEBUG, logger="asyncfs.pool"):
            asyncio.run(pool.run(time.sleep, 1.0, mutating=False))
    finally:
        pool.shutdown()
    warnings = [r for r in caplog.records if r.name == "asyncfs.pool" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "sleep()" in warnings[0].getMessage(), [r.getMessage() for r in caplog.records]
    assert any("the calls queued behind it move" in r.getMessage() for r in caplog.records)  # the DEBUG line


def test_recovery_says_what_it_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A torn journal and a staging folder beside the root, as a crash
    leaves them: recovery removes both and says so."""
    root = tmp_path / "ckpt"
    root.mkdir()
    names = Siblings(str(root))
    Path(names.journal).write_text("{torn")
    Path(names.staging("1234")).mkdir()

    async def main() -> None:
        async with asyncfs.Env() as env:
            await env.recover(str(root), native=False)

    with caplog.at_level(logging.INFO, logger="asyncfs"):
        anyio.run(main)
    said = [r.getMessage() for r in caplog.records if r.name == "asyncfs.transactions"]
    assert any("torn journal" in line for line in said), said
    assert any("unfinished transaction left" in line and "1234" in line for line in said), said
    assert not Path(names.journal).exists() and not Path(names.staging("1234")).exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_forwards_its_own_plugins_lines(flaky: Flaky, tmp_path: Path) -> None:
    """The parent's forwarding thread is not the child's: the child starts
    its own, and a retry in the child reaches the child's logging."""
    fs = flaky.az()
    out = tmp_path / "child.log"
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            handler = logging.FileHandler(out)
            logging.getLogger("asyncfs.az").addHandler(handler)
            logging.getLogger("asyncfs.az").setLevel(logging.INFO)
            with contextlib.suppress(asyncfs.NotFoundError):
                fs.stat("az://cont/blob")
            deadline = time.monotonic() + 5
            while "HTTP 503" not in out.read_text() and time.monotonic() < deadline:
                time.sleep(0.02)
            code = 0 if "HTTP 503" in out.read_text() else 2
        finally:
            os._exit(code)
    assert exit_code_of(pid, "the child's stat hung") == 0, out.read_text() if out.exists() else "no log"
