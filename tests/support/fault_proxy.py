"""An HTTP proxy on loopback that injects faults in front of the S3 gateway.

Each request is read whole, then, by the next entry of the plan (``pass``
when the plan is empty), answered with 503 SlowDown, AWS's 301
PermanentRedirect to another region or 403 RequestTimeTooSkewed, 429 with
``Retry-After: 1``, dropped without an answer, left without an answer for
``stall_seconds`` (a server that hangs), cut off halfway through the
gateway's answer, or forwarded. A proxy made with a port listens on it, so a test can start one
where a client has been failing to connect (a gateway coming back). The
request bytes go upstream unchanged, so SigV4 signatures (which cover the
Host header the client sent) still hold. Every request is answered with
``Connection: close``: one request per connection keeps the framing trivial.
Given an ``ssl.SSLContext``, the proxy speaks TLS to the client (an https://
endpoint in front of the plain-HTTP gateway).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from typing import Literal

__all__ = ["FaultProxy"]

Fault = Literal["pass", "503", "301", "skewed", "429", "drop", "stall", "cut"]


def _error(status: str, code: str, message: str, *headers: str) -> bytes:
    body = (
        f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    ).encode()
    head = "".join(f"{h}\r\n" for h in headers)
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/xml\r\n{head}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


CANNED = {
    "503": _error("503 Service Unavailable", "SlowDown", "Please reduce your request rate."),
    "301": _error(
        "301 Moved Permanently",
        "PermanentRedirect",
        "The bucket you are attempting to access must be addressed using the specified endpoint.",
        "x-amz-bucket-region: eu-west-3",
    ),
    "429": _error("429 Too Many Requests", "SlowDown", "Please reduce your request rate.", "Retry-After: 1"),
    "skewed": _error(
        "403 Forbidden",
        "RequestTimeTooSkewed",
        "The difference between the request time and the current time is too large.",
    ),
}


def _read_request(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(min(1 << 20, length - len(body)))
        if not chunk:
            return None
        body += chunk
    # One request per connection, on both sides.
    request_line, _, headers = head.partition(b"\r\n")
    kept = [h for h in headers.split(b"\r\n") if not h.lower().startswith(b"connection:")]
    return b"\r\n".join([request_line, *kept, b"Connection: close"]) + b"\r\n\r\n" + body


class FaultProxy:
    def __init__(self, upstream: str, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        host, _, upstream_port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(upstream_port))
        self.plan: list[Fault] = []
        self.requests: list[tuple[str, Fault]] = []  # (request line, what was done)
        self.heads: list[bytes] = []  # each request's line and headers
        self.times: list[float] = []  # when each request was read (time.monotonic)
        self.stall_seconds = 5.0
        self._tls = tls
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", port))
        scheme = "https" if tls is not None else "http"
        self.endpoint = f"{scheme}://127.0.0.1:{self._server.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def inject(self, faults: Iterable[Fault]) -> None:
        with self._lock:
            self.plan = list(faults)
            self.requests.clear()
            self.times.clear()

    def _next(self) -> Fault:
        with self._lock:
            return self.plan.pop(0) if self.plan else "pass"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self._tls is not None:
            try:
                conn = self._tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):  # the client refused the certificate
                conn.close()
                return
        with conn:
            request = _read_request(conn)
            if request is None:
                return
            fault = self._next()
            with self._lock:
                self.requests.append((request.split(b"\r\n", 1)[0].decode(), fault))
                self.heads.append(request.partition(b"\r\n\r\n")[0])
                self.times.append(time.monotonic())
            if fault in CANNED:
                conn.sendall(CANNED[fault])
                return
            if fault == "drop":
                return
            if fault == "stall":
                time.sleep(self.stall_seconds)
                return
            with socket.create_connection(self.upstream) as up:
                up.sendall(request)
                answer = b""
                while chunk := up.recv(1 << 20):
                    answer += chunk
            if fault == "cut":
                head, _, body = answer.partition(b"\r\n\r\n")
                answer = head + b"\r\n\r\n" + body[: len(body) // 2]
            with contextlib.suppress(OSError):  # a client may stop reading early
                conn.sendall(answer)

    def close(self) -> None:
        self._server.close()
