"""Where C meets Python: the cffi declarations, the status runtime, and the
one function that turns a C status into a Python exception.

The declarations come from the marked regions of the C headers, pre-parsed
into ``cdef.py`` (``python -m asyncfs._native.cdef_build``), so the headers stay
the single source of the ABI and no process pays for parsing them.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any, NoReturn

from .. import _uri
from ..errors import Code, DataLossError, StatusError, UnknownError, status_error_class
from . import libraries as _libs
from .cdef import ffi

__all__ = [
    "UNBOUNDED",
    "check",
    "check_count",
    "error_from",
    "ffi",
    "new_status",
    "raise_status",
    "reset",
    "runtime",
    "runtime_provides",
    "thread_status",
]

CData = Any  # cffi objects carry no static types

RTLD_GLOBAL_NOW = ffi.RTLD_NOW | ffi.RTLD_GLOBAL


@cache
def runtime() -> Any:
    """The status runtime, loaded once with RTLD_GLOBAL so that every plugin
    loaded afterwards resolves its (renamed) TF_* imports against it. It
    exports none of TensorFlow's names (runtime_core.h)."""
    return ffi.dlopen(str(_libs.library_path("runtime")), RTLD_GLOBAL_NOW)


@cache
def runtime_provides() -> frozenset[str]:
    """The X of each TF_X the runtime provides (as AF_X)."""
    return frozenset(name[3:] for name in dir(runtime()) if name.startswith("AF_"))


def new_status() -> CData:
    rt = runtime()
    return ffi.gc(rt.AF_NewStatus(), rt.AF_DeleteStatus)


class _ThreadStatus(threading.local):
    def __init__(self) -> None:
        self.status = new_status()


_statuses = _ThreadStatus()


def thread_status() -> CData:
    """This thread's scratch status, reset to OK: one per thread, reused by
    every call the thread makes. The core reads and resets the runtime's
    status fields directly (runtime_core.h), sparing a call into C."""
    status = _statuses.status
    status.code = 0
    return status


def reset(status: CData) -> None:
    status.code = 0


def error_from(status: CData, op: str, path: str | None = None) -> StatusError:
    code = int(status.code)
    raw = status.message
    message = ffi.string(raw).decode("utf-8", "replace") if raw != ffi.NULL else ""
    try:
        cls = status_error_class(Code(code), message)
    except (KeyError, ValueError):
        cls = UnknownError
        message = f"{message} (unrecognised status code {code})"
    message = _unrepeated(message, path, op) or Code(cls.code).name.lower().replace("_", " ")
    if cls.code == Code.NOT_FOUND and path:
        message += _one_slash_short(path)
    return cls(message, op=op, path=path)


def _one_slash_short(path: str) -> str:
    """What to add to a NOT_FOUND about path when it is a URI with one slash
    too few ("s3:/bucket/key"), which names a local path."""
    scheme, one_slash, rest = path.partition(":/")
    if scheme and one_slash and not rest.startswith("/") and _uri.is_scheme(scheme):
        return f" (a local path; the URI would be {scheme}://{rest})"
    return ""


def _unrepeated(message: str, path: str | None, op: str = "") -> str:
    """The plugin's message without a leading copy of the path the error
    names anyway (TensorFlow's "path; strerror" convention), or of the op
    and that path (an object store's "stat s3://b/k: ..."), so that each
    thing is said once: ``stat /x/nope: No such file or directory``. A
    message that names something else first (the HTTP request that failed:
    "GET s3://b/k: ...") keeps it."""
    if not path:
        return message
    said = []
    for named in path.split(" -> "):  # a rename or copy names both
        said.append(named)
        if "://" in named:  # and the plugin may say its own path for it
            said.append(_uri.parse_uri(named).path or "/")
    verb, _, after_verb = message.partition(" ")
    starts = (message, after_verb) if op and verb == op else (message,)
    for prefix in said:
        for separator in ("; ", ": "):
            for start in starts:
                if start.startswith(prefix + separator):
                    return start[len(prefix) + len(separator) :]
    return message


def check(status: CData, op: str, path: str | None = None) -> None:
    """Raise the exception matching a non-OK status; the one place where C
    status codes become Python exceptions."""
    if status.code:
        raise error_from(status, op, path)


def raise_status(code: Code, message: str, op: str, path: str | None = None) -> NoReturn:
    """Raise the exception for a status the core itself produces (a missing
    op, a generic fallback's failure), through the same table as plugins'."""
    raise status_error_class(code, message)(message, op=op, path=path)


def check_count(count: int, limit: int, *, plugin: str, op: str, path: str | None, what: str = "bytes") -> int:
    """Return count if ``0 <= count <= limit``; otherwise the plugin answered
    OK with nonsense (a negative size, a read longer than asked), which is a
    :class:`DataLossError` naming the plugin and the operation."""
    if 0 <= count <= limit:
        return count
    bound = f"at most {limit}" if limit != UNBOUNDED else "a count >= 0"
    raise DataLossError(f"the {plugin} plugin's {op} answered {count} {what}, expected {bound}", op=op, path=path)


UNBOUNDED = (1 << 63) - 1
