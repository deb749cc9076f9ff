"""The asyncfs exception tree.

:class:`AsyncFSError` is the root and is never raised directly. Failures of
filesystem operations are :class:`StatusError` subclasses, one per status code
of the plugin ABI, and each also inherits the builtin it resembles, so
``except FileNotFoundError`` works as it does with :func:`open`. Refusals of
the plugin loader are :class:`PluginError` subclasses naming the library, the
scheme and the item at fault.

Status codes become exceptions in one place only: ``asyncfs._native.binding.check``.
"""

from __future__ import annotations

import errno as _errno
import re
from enum import IntEnum
from typing import Any

__all__ = [
    "ABIMismatchError",
    "AbandonedOperationWarning",
    "AbortedError",
    "AlreadyExistsError",
    "AsyncFSError",
    "Code",
    "CoreABIRangeError",
    "DataLossError",
    "DeadlineExceededError",
    "DirectoryNotEmptyError",
    "EnvClosedError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidSchemeError",
    "MissingAllocatorError",
    "MissingEntryPointError",
    "MissingOperationError",
    "MissingTableError",
    "NotFoundError",
    "OperationCancelledError",
    "OutOfRangeError",
    "PathIsDirectoryError",
    "PathNotDirectoryError",
    "PermissionDeniedError",
    "IgnoredOptionWarning",
    "PluginAPIMismatchWarning",
    "PluginError",
    "PluginInitError",
    "PluginOpenError",
    "ResourceExhaustedError",
    "SchemeAlreadyRegisteredError",
    "StatusError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "UnknownSchemeError",
]


class Code(IntEnum):
    """The status codes of the plugin ABI (``TF_Code``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class AsyncFSError(Exception):
    """Root of every asyncfs exception; never raised directly."""


# How an error names a plugin operation: as a user of the Env calls it.
USER_TERMS = {
    "get_children": "listdir",
    "delete_file": "rm",
    "delete_dir": "rmdir",
    "delete_recursively": "rmtree",
    "create_dir": "mkdir",
    "recursively_create_dir": "makedirs",
    "new_random_access_file": "open",
    "new_writable_file": "open for writing",
    "new_appendable_file": "open for appending",
    "new_read_only_memory_region_from_file": "memory_region",
    "rename_file": "rename",
    "rename_dir": "rename",
    "copy_file": "copy",
    "path_exists": "exists",
    "get_file_size": "size",
    "is_directory": "isdir",
    "get_matching_paths": "glob",
}


class StatusError(AsyncFSError):
    """An operation failed with a non-OK status from a plugin.

    ``code`` is the :class:`Code`, ``message`` the plugin's own text, ``op``
    the operation (the plugin's name for it: ``get_children``) and ``path``
    the URI it was applied to (when there is one). The message names the
    operation as the Env calls it (``listdir``; :data:`USER_TERMS`).
    """

    code: Code = Code.UNKNOWN
    errno_value: int | None = None
    #: Set by a recursive delete that failed: (undeleted files, undeleted
    #: directories); None on every other error.
    undeleted: tuple[int, int] | None = None

    def __init__(self, message: str, *, op: str = "", path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.path = path
        if isinstance(self, OSError):
            _fill_os_error(self, self.errno_value, message, path)

    def __str__(self) -> str:
        where = " ".join(part for part in (USER_TERMS.get(self.op, self.op), self.path) if part)
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} [{self.code.name}]"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.message, self.op, self.path, self.undeleted))


def _fill_os_error(error: OSError, errno_value: int | None, message: str, path: str | None) -> None:
    """Give an OSError subclass the fields code that catches OSError reads."""
    error.errno = errno_value
    error.strerror = message
    error.filename = path


def _rebuild(
    cls: type[StatusError], message: str, op: str, path: str | None, undeleted: tuple[int, int] | None = None
) -> StatusError:
    error = cls(message, op=op, path=path)
    if undeleted is not None:
        error.undeleted = undeleted
    return error


class OperationCancelledError(StatusError):
    """A plugin reported that it cancelled the operation (``TF_CANCELLED``).

    Not :class:`asyncio.CancelledError`, which it neither is nor inherits:
    a cancelled task always sees the event loop's own ``CancelledError``
    (or trio's ``Cancelled``), never this, and this never cancels a task.
    It was named ``CancelledError`` before 0.2; that name still works, with
    a :class:`DeprecationWarning`."""

    code = Code.CANCELLED


def __getattr__(name: str) -> object:
    if name == "CancelledError":
        import warnings  # noqa: PLC0415 (only a caller of the old name pays for it)

        warnings.warn(
            "asyncfs.errors.CancelledError is now OperationCancelledError (it is not asyncio.CancelledError)",
            DeprecationWarning,
            stacklevel=2,
        )
        return OperationCancelledError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownError(StatusError):
    code = Code.UNKNOWN


class InvalidArgumentError(StatusError, ValueError):
    code = Code.INVALID_ARGUMENT


class DeadlineExceededError(StatusError, TimeoutError):
    code = Code.DEADLINE_EXCEEDED
    errno_value = _errno.ETIMEDOUT


class NotFoundError(StatusError, FileNotFoundError):
    code = Code.NOT_FOUND
    errno_value = _errno.ENOENT


class AlreadyExistsError(StatusError, FileExistsError):
    code = Code.ALREADY_EXISTS
    errno_value = _errno.EEXIST


class PermissionDeniedError(StatusError, PermissionError):
    code = Code.PERMISSION_DENIED
    errno_value = _errno.EACCES


class ResourceExhaustedError(StatusError, OSError):
    code = Code.RESOURCE_EXHAUSTED
    errno_value = _errno.ENOSPC


class FailedPreconditionError(StatusError, OSError):
    """The path is of the wrong kind for the operation (a directory where a
    file is needed, a file used as a directory, a non-empty directory).
    Where the plugin's message says which (see :func:`status_error_class`),
    the error is one of the three subclasses below, each also the builtin
    the standard library raises in that case."""

    code = Code.FAILED_PRECONDITION


class PathIsDirectoryError(FailedPreconditionError, IsADirectoryError):
    """A directory where a file is needed (reading, writing or deleting it as a file)."""

    errno_value = _errno.EISDIR


class PathNotDirectoryError(FailedPreconditionError, NotADirectoryError):
    """A file where a directory is needed (listing it, or a path below it)."""

    errno_value = _errno.ENOTDIR


class DirectoryNotEmptyError(FailedPreconditionError):
    """Deleting a directory that still holds something (``OSError`` with
    ``ENOTEMPTY``, as ``os.rmdir`` raises)."""

    errno_value = _errno.ENOTEMPTY


class AbortedError(StatusError):
    code = Code.ABORTED


class OutOfRangeError(StatusError, EOFError):
    """A read went past the end of the file."""

    code = Code.OUT_OF_RANGE


class UnimplementedError(StatusError, NotImplementedError):
    """The plugin does not offer the operation and no generic fallback exists."""

    code = Code.UNIMPLEMENTED


class InternalError(StatusError):
    code = Code.INTERNAL


class UnavailableError(StatusError, ConnectionError):
    code = Code.UNAVAILABLE


class DataLossError(StatusError):
    code = Code.DATA_LOSS


class UnauthenticatedError(StatusError, PermissionError):
    code = Code.UNAUTHENTICATED


STATUS_ERRORS: dict[Code, type[StatusError]] = {
    cls.code: cls
    for cls in (
        OperationCancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}

# What a FAILED_PRECONDITION message says was wrong, in the words plugins
# use: TensorFlow's (strerror: "Is a directory", "Not a directory",
# "Directory not empty") and asyncfs's own ("path is a directory", "source
# path is not a directory", "the parent is a file", "delete_dir s3://b/k: a
# file"). Checked in this order: "not a directory" says "a directory" too.
_KINDS: tuple[tuple[re.Pattern[str], type[FailedPreconditionError]], ...] = (
    (re.compile(r"not empty", re.I), DirectoryNotEmptyError),
    (re.compile(r"not a directory|\bis a file\b|: a file$", re.I), PathNotDirectoryError),
    (re.compile(r"\bis a directory\b|: a directory$", re.I), PathIsDirectoryError),
)


def status_error_class(code: Code, message: str) -> type[StatusError]:
    """The exception class for a status: one per code, and for
    FAILED_PRECONDITION the kind the message names, when it names one."""
    cls = STATUS_ERRORS[code]
    if cls is FailedPreconditionError:
        for pattern, kind in _KINDS:
            if pattern.search(message):
                return kind
    return cls


# ---- plugin loader refusals ------------------------------------------------


class PluginError(AsyncFSError):
    """The loader refused a plugin library; the registry is unchanged.

    ``library`` is the path given to the loader, ``scheme`` the scheme being
    validated (None before any scheme is read), ``item`` the missing or
    mismatched piece, and ``plugin`` the plugin's metadata name when it has
    any.
    """

    def __init__(
        self,
        reason: str,
        *,
        library: str,
        scheme: str | None = None,
        item: str | None = None,
        plugin: str | None = None,
    ) -> None:
        self.reason = reason
        self.library = library
        self.scheme = scheme
        self.item = item
        self.plugin = plugin
        where = f"plugin {library}"
        if plugin:
            where += f" ({plugin})"
        if scheme is not None:
            where += f", scheme {scheme!r}"
        super().__init__(f"{where}: {reason}")

    def _fields(self) -> dict[str, Any]:
        """The keyword arguments it was made with."""
        return {"library": self.library, "scheme": self.scheme, "item": self.item, "plugin": self.plugin}

    def __reduce__(self) -> tuple[object, ...]:
        # by keyword, as it was made: a worker process (Dask,
        # multiprocessing) sends it back by pickle
        return (_rebuild_plugin_error, (type(self), self.reason, self._fields()))


def _rebuild_plugin_error(cls: type[PluginError], reason: str, fields: dict[str, Any]) -> PluginError:
    return cls(reason, **fields)


class PluginOpenError(PluginError, OSError):
    """The library could not be opened at all."""


class MissingEntryPointError(PluginError):
    """The library does not export ``TF_InitPlugin``."""


class MissingAllocatorError(PluginError):
    """``plugin_memory_allocate`` or ``plugin_memory_free`` was not set."""


class InvalidSchemeError(PluginError, ValueError):
    """A scheme is NULL, empty where not allowed, or malformed."""


class ABIMismatchError(PluginError):
    """A table was built against an ABI version the core does not speak."""


class MissingOperationError(PluginError):
    """A required entry of a supplied table is NULL."""


class MissingTableError(PluginError):
    """A constructor op is offered without the table for what it constructs."""


class PluginInitError(PluginError):
    """The filesystem's ``init`` op failed; ``status`` holds its error."""

    def __init__(self, reason: str, *, status: StatusError, **where: str | None) -> None:
        self.status = status
        super().__init__(reason, **where)  # type: ignore[arg-type]

    def _fields(self) -> dict[str, Any]:
        return {**super()._fields(), "status": self.status}


class CoreABIRangeError(PluginError):
    """The plugin's metadata excludes this core's ABI version."""


class SchemeAlreadyRegisteredError(PluginError, FileExistsError):
    """The scheme is registered already and replacing was not asked for."""


class TransactionConflictError(AbortedError):
    """Another transaction holds a root that overlaps this one's, and the
    wait for it ran out (``timeout``)."""

    code = Code.ABORTED


class TransactionStateError(AsyncFSError, RuntimeError):
    """A transaction was used outside its lifetime (before begin, after
    commit or abort), or for a path outside its root."""


class EnvClosedError(AsyncFSError, RuntimeError):
    """An operation was asked of an :class:`~asyncfs.Env` after its
    ``close()`` or ``aclose()`` (its worker pool is shut down)."""


class UnknownSchemeError(AsyncFSError, LookupError):
    """No plugin is registered for a URI's scheme."""


class AbandonedOperationWarning(RuntimeWarning):
    """An Env shut down while plugin calls were still blocked (a hung
    network peer, a FIFO); they are left running on daemon threads, and the
    warning names each call and its URI."""


class IgnoredOptionWarning(UserWarning):
    """Keyword arguments given to an ``asyncfs+<scheme>`` fsspec filesystem
    that are not options of its plugin (``encoding``, ``errors`` and ``hf``
    that ``datasets`` passes along, say) are left out, as other fsspec
    filesystems leave them; the warning names them."""


class PluginAPIMismatchWarning(UserWarning):
    """A table's API version differs from the core's; it loads, and entries
    beyond the plugin's table size count as not offered."""
