"""HTTP servers on loopback for the http plugin's tests, serving one
folder: nginx (ranges, strong ETags, ``autoindex``), started from the
Debian package's binary with a configuration of our own, and Python's
``http.server``, which ignores ``Range`` (it answers 200 with the whole
file), sends no ETag and speaks HTTP/1.0. Both answer a folder's name
without its trailing "/" with a 301 to the name with it."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HttpServer", "nginx_missing_reason", "start_nginx", "start_python_server"]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_missing_reason() -> str | None:
    """Why nginx cannot run here, or None."""
    if not Path(NGINX).exists():
        return "nginx is not installed (Debian: nginx-light)"
    return None


@dataclass
class HttpServer:
    url: str  # "http://127.0.0.1:PORT"
    root: Path
    stop: contextlib.ExitStack
    seen: list[dict[str, str]] = field(default_factory=list)  # requests' headers, where kept

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


NGINX_CONF = """
{user}
daemon off;
worker_processes 1;
pid {scratch}/nginx.pid;
error_log {scratch}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {scratch}/body;
    proxy_temp_path {scratch}/proxy;
    fastcgi_temp_path {scratch}/fastcgi;
    uwsgi_temp_path {scratch}/uwsgi;
    scgi_temp_path {scratch}/scgi;
    keepalive_requests 100000;
    sendfile on;
    types {{ text/html html; application/octet-stream bin; }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        autoindex on;
        location /private/ {{
            if ($http_authorization != "Bearer {token}") {{ return 401; }}
        }}
        location = /redirect/loop {{ return 302 /redirect/loop; }}
        location = /redirect/elsewhere {{ return 302 http://localhost:{port}/private/secret.txt; }}
        location = /redirect/here {{ return 302 /private/secret.txt; }}
    }}
}}
"""

TOKEN = "let-me-in"


def start_nginx(root: Path, scratch: Path) -> HttpServer:
    """nginx serving root on a free loopback port, until stop is closed.
    ``/private/`` wants ``Authorization: Bearer let-me-in``; ``/redirect/``
    holds a loop, a redirect to the same origin and one to another host
    (``localhost`` instead of ``127.0.0.1``)."""
    port = _free_port()
    scratch.mkdir(parents=True, exist_ok=True)
    conf = scratch / "nginx.conf"
    # run by root (CI), the workers would be nobody, who cannot enter pytest's
    # private temporary folders: they stay root, on loopback
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(user=user, scratch=scratch, port=port, root=root, token=TOKEN))
    process = subprocess.Popen(
        [NGINX, "-c", str(conf), "-p", str(scratch)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stop = contextlib.ExitStack()

    def end() -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stop.callback(end)
    try:
        _wait_for(port)
    except RuntimeError:
        stop.close()
        log = scratch / "error.log"
        raise RuntimeError(f"nginx did not start: {log.read_text() if log.exists() else '(no log)'}") from None
    return HttpServer(f"http://127.0.0.1:{port}", root, stop)


class _Recording(http.server.SimpleHTTPRequestHandler):
    """Serves quietly, keeping each request's headers (server.seen)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok:
            self.server.seen.append(dict(self.headers.items()))  # type: ignore[attr-defined]
        return ok


def start_python_server(root: Path) -> HttpServer:
    """Python's http.server serving root on a free loopback port, in a
    thread of this process, until stop is closed."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Recording, directory=str(root)))
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stop = contextlib.ExitStack()
    stop.callback(thread.join)
    stop.callback(server.server_close)
    stop.callback(server.shutdown)
    return HttpServer(f"http://127.0.0.1:{server.server_address[1]}", root, stop, server.seen)  # type: ignore[attr-defined]


@dataclass
class Process:
    """A server process started by :func:`start_process`: stopped with stop."""

    stop: contextlib.ExitStack
    pid: int


def start_process(command: list[str], port: int, ready: str, timeout: float) -> Process:
    """command, listening on loopback port, once GET ready (a path) gets an
    HTTP answer (any status: a store refuses an unsigned request); stopped
    with the returned stop."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = contextlib.ExitStack()

    def end() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stop.callback(end)
    try:
        _wait_for(port, timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:  # listening is not yet serving
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{ready}", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # answered
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not answer within {timeout} s")
            time.sleep(0.05)
    except BaseException:
        stop.close()
        raise
    return Process(stop, process.pid)
