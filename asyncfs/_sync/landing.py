"""A file written whole under a staging name beside its target, landing on
the target by rename when it closes, and deleted if it is dropped: the
steps, on the synchronous adapter, that an atomic writer takes. The async
stream writer (:mod:`asyncfs._streams.streams`) runs them on the worker pool; the
fsspec bridge's writer runs them on the caller's thread."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from .. import _uri
from ..errors import FailedPreconditionError, PathIsDirectoryError
from .fallbacks import naming_target, write_by_rename

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .files import WritableFile
    from .filesystem import ModularFileSystem

__all__ = ["Landing", "write_whole"]


def _stages(fs: ModularFileSystem, atomic: bool) -> bool:
    """Whether a write goes to a staging name and is renamed over its
    target: an atomic one, where the store's files do not appear only whole
    (an object store's do: there it is written in place)."""
    return atomic and fs.stages_atomic_writes()


def _open_for_writing(
    fs: ModularFileSystem, uri: str, staged: str | None, landing: str | None, attributes: Mapping[str, str] | None
) -> WritableFile:
    if staged is None:
        return fs.new_writable_file(uri, attributes=attributes)
    if fs.isdir(uri):
        raise PathIsDirectoryError("path is a directory", op="open", path=uri)
    with naming_target("open", staged, uri, landing):
        if attributes:
            return fs.new_writable_file(staged, attributes=attributes)
        return fs.new_temporary_file(staged)


class Landing:
    """A file on its way to uri: appended to (under a staging name where
    the store stages atomic writes), then landed on uri or dropped. Once an
    append has failed the file never lands: what reached it before the
    failure is not what the caller was writing, so every later write, and
    the close, raise :class:`FailedPreconditionError` naming that failure
    (io's callers close a file whose write raised: fsspec's ``OpenFile``,
    a ``try``/``finally``). Errors name uri, never the staging name."""

    def __init__(
        self, fs: ModularFileSystem, uri: str, file: WritableFile, staged: str | None, landing: str | None = None
    ) -> None:
        self.fs = fs
        self.uri = uri
        self.file = file
        self.staged = staged
        self.landing = uri if landing is None else landing  # what staged is renamed over: uri, or the file it links to
        self.failure: str | None = None  # what the failed append raised (not the exception: its frames hold buffers)

    @classmethod
    def open(
        cls, fs: ModularFileSystem, uri: str, atomic: bool = True, attributes: Mapping[str, str] | None = None
    ) -> Landing:
        """A new file for uri: staged if atomic and the store stages, beside
        the file uri leads to where it is a link; in place on a device or a
        FIFO, which a rename would replace (``ModularFileSystem.landing_path``)."""
        landing = fs.landing_path(uri) if _stages(fs, atomic) else None
        staged = _uri.staging_name(landing) if landing is not None else None
        return cls(fs, uri, _open_for_writing(fs, uri, staged, landing, attributes), staged, landing)

    def append(self, data: Buffer) -> None:
        self._refuse_if_failed("write")
        try:
            with self._naming("write"):
                self.file.append(data)
        except BaseException as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            raise

    def land(self) -> None:
        """Close the file and put it in place of uri; if either fails, or an
        append failed before, drop it."""
        try:
            self._refuse_if_failed("close")
            with self._naming("close"):
                self.file.close()
            if self.staged is not None:
                self.fs.replace_file(self.staged, self.landing)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Drop the file: the target is left as it was."""
        try:
            self.file.discard()
        finally:
            if self.staged is not None and self.fs.exists(self.staged):
                self.fs.delete_file(self.staged)

    def _refuse_if_failed(self, op: str) -> None:
        if self.failure is not None:
            message = f"not written: an earlier write to it failed ({self.failure})"
            raise FailedPreconditionError(message, op=op, path=self.uri)

    def _naming(self, op: str) -> AbstractContextManager[None]:
        return nullcontext() if self.staged is None else naming_target(op, self.staged, self.uri, self.landing)


def write_whole(
    fs: ModularFileSystem, uri: str, data: Buffer, atomic: bool, attributes: Mapping[str, str] | None
) -> None:
    """uri created or replaced with data: by rename from a staging name
    when atomic and the store stages, else in place."""
    if _stages(fs, atomic):
        write_by_rename(fs, uri, data, attributes)
    else:
        fs.write_file(uri, data, attributes=attributes)
