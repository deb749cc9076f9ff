"""Generic versions of the optional filesystem ops, built on the ops every
plugin offers, for plugins that leave them NULL (TensorFlow's core has the
same fallbacks). Each works on URIs through the adapter's public methods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .. import _uri
from .._native import refuse_text
from ..errors import Code, NotFoundError, PathIsDirectoryError, PathNotDirectoryError, StatusError

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .filesystem import ModularFileSystem

__all__ = [
    "write_by_rename",
    "copy_file",
    "stream_copy",
    "get_file_size",
    "is_directory",
    "recursively_create_dir",
    "rename_file",
]

_COPY_CHUNK = 1 << 20


def is_directory(fs: ModularFileSystem, uri: str) -> bool:
    if not fs.stat(uri).is_directory:
        raise PathNotDirectoryError("path is not a directory", op="is_directory", path=uri)
    return True


def get_file_size(fs: ModularFileSystem, uri: str) -> int:
    stats = fs.stat(uri)
    if stats.is_directory:
        raise PathIsDirectoryError("path is a directory", op="get_file_size", path=uri)
    return stats.length


def _parent(uri: str) -> str | None:
    parsed = _uri.parse_uri(uri)
    path = parsed.path.rstrip("/")
    cut = path.rfind("/")
    if cut < 0:
        return None
    return parsed.prefix() + (path[:cut] or "/")


def recursively_create_dir(fs: ModularFileSystem, uri: str) -> None:
    """Create uri and its missing parents; a file in the way is
    FAILED_PRECONDITION."""
    missing: list[str] = []
    current: str | None = uri
    while current is not None:
        try:
            fs.is_directory(current)
            break
        except NotFoundError:
            missing.append(current)
            current = _parent(current)
    for directory in reversed(missing):
        try:
            fs.create_dir(directory)
        except StatusError as exc:
            if exc.code != Code.ALREADY_EXISTS:
                raise
            fs.is_directory(directory)  # raced with a creator: must be a dir


@contextmanager
def naming_target(op: str, staged: str, target: str, landing: str | None = None) -> Iterator[None]:
    """An error about the temporary sibling staged names the target the
    caller gave instead: the temporary name is ours, not theirs. landing is
    the file staged stands beside, when it is not target (the file a link
    named target leads to)."""
    beside = target if landing is None else landing
    try:
        yield
    except StatusError as exc:
        if exc.path != staged:
            raise
        # a plugin that names the path in its message named the sibling
        suffix = staged[len(beside) :] if staged.startswith(beside) else ""
        message = exc.message.replace(suffix, "") if suffix else exc.message
        raise type(exc)(message, op=op, path=target) from None


def write_by_rename(fs: ModularFileSystem, uri: str, data: Buffer, attributes: Mapping[str, str] | None = None) -> None:
    """Write uri as a new file: data goes to a temporary sibling that is
    renamed over uri, so uri holds the old content or the new, never a part
    (a file hard-linked elsewhere is replaced, not written in place). The
    sibling is created new and private, and lands with uri's permissions
    (``new_temporary_file``, ``replace_file``): a rewritten 0600 key stays
    0600. Where uri is a symbolic link, the sibling stands beside the file
    it leads to and replaces that file, as a plain write would write there;
    a device or a FIFO, which a rename would replace, is written in place
    (``ModularFileSystem.landing_path``)."""
    landing = fs.landing_path(uri)
    if landing is None:
        fs.write_file(uri, data, attributes=attributes)
        return
    staged = _uri.staging_name(landing)
    try:
        with naming_target("write_file", staged, uri, landing):
            if attributes:
                fs.write_file(staged, data, attributes=attributes)
            else:
                refuse_text(data, "write_file", uri)  # before the file is created
                with fs.new_temporary_file(staged) as file:
                    file.append(data)
        fs.replace_file(staged, landing)
    except BaseException:
        if fs.exists(staged):
            fs.delete_file(staged)
        raise


def stream_copy(source: ModularFileSystem, src: str, target: ModularFileSystem, dst: str, chunk: int) -> None:
    """Copy src to dst chunk by chunk (never the whole file in memory) into a
    temporary sibling that is renamed over dst (over the file dst leads to,
    where it is a link) when the target can rename natively, so a failed
    copy leaves dst as it was; in place on a device or a FIFO."""
    if target.isdir(dst):
        raise PathIsDirectoryError("target path is a directory", op="copy_file", path=dst)
    landing = target.landing_path(dst) if target.stages_atomic_writes() else None
    staged = _uri.staging_name(landing) if landing is not None else dst
    buffer = bytearray(chunk)
    view = memoryview(buffer)
    with source.new_random_access_file(src) as reader:
        try:
            opened = target.new_temporary_file(staged) if landing is not None else target.new_writable_file(staged)
            with naming_target("copy_file", staged, dst, landing), opened as writer:
                offset = 0
                while True:
                    count = reader.read_into(offset, buffer)
                    if count:
                        writer.append(view[:count])
                        offset += count
                    if count < chunk:
                        break
            if landing is not None:
                target.replace_file(staged, landing)
        except BaseException:
            if landing is not None and target.exists(staged):
                target.delete_file(staged)
            raise


def copy_file(fs: ModularFileSystem, src: str, dst: str) -> None:
    stream_copy(fs, src, fs, dst, _COPY_CHUNK)


def rename_file(fs: ModularFileSystem, src: str, dst: str) -> None:
    if fs.isdir(src):
        raise PathIsDirectoryError("source path is a directory", op="rename_file", path=src)
    fs.copy_file(src, dst)
    fs.delete_file(src)
