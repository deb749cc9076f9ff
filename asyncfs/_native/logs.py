"""Plugins' log lines in Python's logging, under the loggers of their
areas: a line the C of a plugin writes as ``"az: ..."`` (TF_Log) reaches
the logger ``asyncfs.az``, one without such a prefix ``asyncfs.plugins``.

The runtime queues the lines (plugins/runtime/log.c) and one daemon
thread of this process moves them into ``logging``: a plugin's thread
never waits for Python. Plugins log rare events only (a retry, a token
fetched or refused), so the queue is always on once a plugin is loaded;
what reaches a handler is the loggers' to decide, as for any library.
``ASYNCFS_VLOG=n`` also forwards TF_VLog lines up to verbosity n, as
``DEBUG``."""

from __future__ import annotations

import logging
import os
import threading

from .binding import ffi, runtime

__all__ = ["forward"]

_TF_INFO = 0
_LEVELS = {-1: logging.DEBUG, 0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.CRITICAL}
_LINE = 1024

_lock = threading.Lock()
_forwarding_in: int | None = None  # the pid whose drain thread runs


def forward() -> None:
    """Send plugins' log lines to ``logging`` from now on (once per
    process; a forked child starts its own thread)."""
    global _forwarding_in
    with _lock:
        if _forwarding_in == os.getpid():
            return
        verbose = os.environ.get("ASYNCFS_VLOG", "0")
        runtime().ASYNCFS_LogToQueue(1, _TF_INFO, int(verbose) if verbose.isdigit() else 0)
        threading.Thread(target=_drain, name="asyncfs-log", daemon=True).start()
        _forwarding_in = os.getpid()


def _drain() -> None:
    rt = runtime()
    line = ffi.new("char[]", _LINE)
    level = ffi.new("int *")
    while True:
        if not rt.ASYNCFS_NextLogLine(line, _LINE, level, 60_000):
            continue
        text = ffi.string(line).decode("utf-8", "replace")
        area, sep, message = text.partition(": ")
        named = bool(sep) and area.isidentifier()
        logging.getLogger(f"asyncfs.{area if named else 'plugins'}").log(
            _LEVELS.get(level[0], logging.INFO), "%s", message if named else text
        )


def _after_fork_in_child() -> None:
    if _forwarding_in is not None:  # the parent forwarded: so does the child
        forward()


os.register_at_fork(after_in_child=_after_fork_in_child)
