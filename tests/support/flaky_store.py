"""An Azure blob endpoint that fails on purpose (503s, then 404s), with
Entra ID's token endpoint, on loopback: what the object-store engine does
with retries, seen in its logs and its counts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import asyncfs
from asyncfs._native import libraries as _libs


class Flaky:
    """A blob endpoint that answers 503 to the first n requests, then 404;
    and Entra ID's token endpoint."""

    def __init__(self, failures: int) -> None:
        self.left = failures
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, code: int, body: bytes = b"") -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self._answer(200, b'{"access_token": "t0ken-value", "expires_in": 3600}')

            def do_HEAD(self) -> None:
                if flaky.left > 0:
                    flaky.left -= 1
                    self._answer(503)
                else:
                    self._answer(404)

            do_GET = do_HEAD

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def az(self, registry: asyncfs.Registry | None = None, **options: str | int) -> asyncfs.ModularFileSystem:
        """The az filesystem of registry (by default, a registry of its own)
        pointed at this server, with Entra ID credentials (a client secret)
        and 1 ms retry waits; options change it."""
        fs = (registry or asyncfs.Registry()).get("az")
        settings: dict[str, str | int] = {
            "connection_string": "",
            "account_key": "",
            "sas_token": "",
            "retry_base_ms": 1,
        }
        settings |= {"account": "acct", "endpoint": f"{self.url}/acct", "authority_host": self.url}
        settings |= {"tenant_id": "t", "client_id": "c", "client_secret": "s3cret-value"}
        for name, value in (settings | options).items():
            fs.set_option(name, value.encode() if isinstance(value, str) else value)
        return fs


def flaky_az() -> Iterator[Flaky]:
    """A Flaky server for a test (as a fixture: ``pytest.fixture(flaky_az)``);
    the test skips if the az plugin is not built."""
    if _libs.unavailable_reason("az") is not None:
        pytest.skip(f"the az plugin is not built: {_libs.unavailable_reason('az')}")
    server = Flaky(failures=2)
    yield server
    server.server.shutdown()
    server.server.server_close()
