"""The HTTP requests a plugin call made, for the core's traces: the object
store engine records each try of the requests a thread hands it while that
thread collects (plugins/runtime/requests.c), and :func:`collected` gives
them back when the call is done."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .binding import CData, ffi, runtime
from .marshal import decode

__all__ = ["Request", "collected"]

_ids = itertools.count(1)
_BATCH = 64


@dataclass(frozen=True)
class Request:
    """One try of a request: its ``method`` and ``url`` (never the query,
    which may hold a signature), the HTTP ``status`` (0: no answer) or
    curl's ``error`` code, which ``attempt`` it was (1: the first), and its
    wall-clock start and end in nanoseconds."""

    method: str
    url: str
    status: int
    error: int
    attempt: int
    start_ns: int
    end_ns: int


@contextmanager
def collected() -> Iterator[list[Request]]:
    """``with collected() as tries:`` the tries of the requests this
    thread hands an engine inside the block are in ``tries`` after it."""
    rt = runtime()
    mine = next(_ids)
    before = rt.ASYNCFS_CollectRequests(mine)
    found: list[Request] = []
    try:
        yield found
    finally:
        rt.ASYNCFS_CollectRequests(before)
        out = ffi.new("ASYNCFS_Request[]", _BATCH)
        while True:
            n = rt.ASYNCFS_TakeRequests(mine, out, _BATCH)
            found += [_request(out[i]) for i in range(n)]
            if n < _BATCH:
                break


def _request(raw: CData) -> Request:
    return Request(
        method=decode(ffi.string(raw.method)),
        url=decode(ffi.string(raw.url)),
        status=int(raw.status),
        error=int(raw.error),
        attempt=int(raw.attempt),
        start_ns=int(raw.start_ns),
        end_ns=int(raw.end_ns),
    )
