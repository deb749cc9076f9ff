"""Generic versions of the optional filesystem ops, built on the ops every
plugin offers, for plugins that leave them NULL (TensorFlow's core has the
same fallbacks). Each works on URIs through the adapter's public methods.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING

from . import _uri
from .errors import Code, FailedPreconditionError, NotFoundError, StatusError

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .filesystem import ModularFileSystem

__all__ = [
    "write_by_rename",
    "copy_file",
    "stream_copy",
    "delete_recursively",
    "get_file_size",
    "get_matching_paths",
    "is_directory",
    "recursively_create_dir",
    "rename_file",
]

_COPY_CHUNK = 1 << 20
_GLOB_META = re.compile(r"[*?\[\\]")


def is_directory(fs: ModularFileSystem, uri: str) -> bool:
    if not fs.stat(uri).is_directory:
        raise FailedPreconditionError("path is not a directory", op="is_directory", path=uri)
    return True


def get_file_size(fs: ModularFileSystem, uri: str) -> int:
    stats = fs.stat(uri)
    if stats.is_directory:
        raise FailedPreconditionError("path is a directory", op="get_file_size", path=uri)
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


def delete_recursively(fs: ModularFileSystem, uri: str) -> tuple[int, int]:
    """Delete uri and all below it; returns (undeleted files, dirs)."""
    try:
        fs.path_exists(uri)
    except StatusError as exc:
        exc.undeleted = (0, 1)  # type: ignore[attr-defined]
        raise
    if not fs.isdir(uri):
        fs.delete_file(uri)
        return (0, 0)
    files: list[str] = []
    dirs: list[str] = [uri]
    index = 0
    while index < len(dirs):  # breadth first: parents before children
        directory = dirs[index]
        index += 1
        for name in fs.get_children(directory):
            child = _uri.join(directory, name)
            (dirs if fs.isdir(child) else files).append(child)
    undeleted_files = undeleted_dirs = 0
    first_error: StatusError | None = None
    for child in files:
        try:
            fs.delete_file(child)
        except StatusError as exc:
            undeleted_files += 1
            first_error = first_error or exc
    for directory in reversed(dirs):
        try:
            fs.delete_dir(directory)
        except StatusError as exc:
            undeleted_dirs += 1
            first_error = first_error or exc
    if first_error is not None:
        first_error.undeleted = (undeleted_files, undeleted_dirs)  # type: ignore[attr-defined]
        raise first_error
    return (0, 0)


def write_by_rename(fs: ModularFileSystem, uri: str, data: Buffer) -> None:
    """Write uri as a new file: data goes to a temporary sibling that is
    renamed over uri, so uri holds the old content or the new, never a part
    (and a file linked elsewhere is replaced, not written in place)."""
    staged = _uri.staging_name(uri)
    try:
        fs.write_file(staged, data)
        fs.rename_file(staged, uri)
    except BaseException:
        if fs.exists(staged):
            fs.delete_file(staged)
        raise


def stream_copy(source: ModularFileSystem, src: str, target: ModularFileSystem, dst: str, chunk: int) -> None:
    """Copy src to dst chunk by chunk (never the whole file in memory) into a
    temporary sibling that is renamed over dst when the target can rename
    natively, so a failed copy leaves dst as it was."""
    if target.isdir(dst):
        raise FailedPreconditionError("target path is a directory", op="copy_file", path=dst)
    staged = _uri.staging_name(dst) if target.stages_atomic_writes() else dst
    buffer = bytearray(chunk)
    view = memoryview(buffer)
    with source.new_random_access_file(src) as reader:
        try:
            with target.new_writable_file(staged) as writer:
                offset = 0
                while True:
                    count = reader.read_into(offset, buffer)
                    if count:
                        writer.append(view[:count])
                        offset += count
                    if count < chunk:
                        break
            if staged != dst:
                target.rename_file(staged, dst)
        except BaseException:
            if staged != dst and target.exists(staged):
                target.delete_file(staged)
            raise


def copy_file(fs: ModularFileSystem, src: str, dst: str) -> None:
    stream_copy(fs, src, fs, dst, _COPY_CHUNK)


def rename_file(fs: ModularFileSystem, src: str, dst: str) -> None:
    if fs.isdir(src):
        raise FailedPreconditionError("source path is a directory", op="rename_file", path=src)
    fs.copy_file(src, dst)
    fs.delete_file(src)


def get_matching_paths(fs: ModularFileSystem, pattern: str) -> list[str]:
    """Expand a glob one directory level at a time with get_children."""
    parsed = _uri.parse_uri(pattern)
    path = parsed.path
    prefix = parsed.prefix()
    if not _GLOB_META.search(path):
        return [pattern] if fs.exists(pattern) else []
    parts = [p for p in path.split("/") if p]
    fixed: list[str] = []
    while parts and not _GLOB_META.search(parts[0]):
        fixed.append(parts.pop(0))
    root = "/" + "/".join(fixed) if path.startswith("/") else "/".join(fixed)
    candidates = [prefix + root if root else prefix or ""]
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        matched: list[str] = []
        for directory in candidates:
            try:
                names = fs.get_children(directory or ".")
            except StatusError:
                continue
            for name in names:
                if _GLOB_META.search(part):
                    if not fnmatch.fnmatchcase(name, part):
                        continue
                elif name != part:
                    continue
                child = _uri.join(directory, name)
                if last or fs.isdir(child):
                    matched.append(child)
        candidates = matched
    return sorted(candidates)
