"""Walk, glob and tree deletion, each written once.

An algorithm here is a *plan*: a generator that says, step by step, which
calls of :class:`~asyncfs.ModularFileSystem` it needs
(:class:`Calls`: one operation over a list of arguments, a whole directory
level at once) and receives their results, each a value or the exception
the call raised. It never calls a filesystem itself. Two drivers run a plan:

- :func:`run` and :func:`iterate` make the calls one after another on the
  calling thread (the sync adapter's fallbacks, ``ModularFileSystem.walk``);
- ``asyncfs._async.plans`` hands each step's calls to the worker pool as
  one batch (``AsyncModularFileSystem``), so a level of N directories costs
  about N / workers round trips, not N.

A plan that produces items as it goes (walk) yields :class:`Emit`; the
driver passes the item on and resumes the plan when the consumer asks for
the next one, so changing a yielded list in place (walk's dirnames) steers
the plan, as with :func:`os.walk`.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from .. import _uri
from ..errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, PathNotDirectoryError, StatusError
from .entries import PLAIN, EntryKind, FileStatistics

__all__ = [
    "Calls",
    "Emit",
    "Plan",
    "children_stats",
    "delete_tree",
    "glob",
    "has_glob_meta",
    "iterate",
    "move_tree",
    "recursive_glob",
    "run",
    "walk",
]

R = TypeVar("R")

_GLOB_META = re.compile(r"[*?\[\\]")


@dataclass(frozen=True)
class Calls:
    """One step: ``op`` (a ModularFileSystem method) once per argument tuple."""

    op: str
    args: list[tuple[Any, ...]]
    mutating: bool = False


@dataclass(frozen=True)
class Emit:
    """An item the plan produces (a walk's ``(directory, dirs, files)``)."""

    item: Any


Plan: TypeAlias = Generator["Calls | Emit", list[Any], R]
Walk: TypeAlias = tuple[str, list[str], list[str]]


def has_glob_meta(text: str) -> bool:
    """Whether text holds a glob metacharacter (``*``, ``?``, ``[``, ``\\``)."""
    return _GLOB_META.search(text) is not None


def _value(result: Any) -> Any:
    if isinstance(result, BaseException):
        raise result
    return result


# ---- the plans -------------------------------------------------------------------------


def walk(top: str, *, kinds: bool = False, everything: bool = False) -> Plan[None]:
    """(directory, dir names, file names) for top and every directory below
    it, level by level, names sorted; unreadable directories are skipped.
    A link to a directory is a name among the files, never entered (as
    ``find`` and ``cp -r`` treat it): a loop of links ends, and nothing
    outside the tree is reached through one. With kinds, a fourth item:
    the names that are not regular files, with their :class:`EntryKind`
    (links, FIFOs). asyncfs's own transient names (temporary siblings of
    atomic writes, a transaction's staging) are left out, unless everything."""
    level = [top]
    while level:
        listings = yield Calls("get_children_kinds", [(directory,) for directory in level])
        following: list[str] = []
        for directory, listing in zip(level, listings, strict=True):
            if isinstance(listing, StatusError):
                continue  # unreadable or vanished, as os.walk skips it
            entries = sorted(_value(listing))
            if not everything:
                entries = [entry for entry in entries if not _uri.is_internal_name(entry[0])]
            dirs = [name for name, _, kind in entries if kind == EntryKind.DIRECTORY]
            files = [name for name, _, kind in entries if kind != EntryKind.DIRECTORY]
            if kinds:
                special = {name: kind for name, _, kind in entries if kind not in PLAIN}
                yield Emit((directory, dirs, files, special))
            else:
                yield Emit((directory, dirs, files))
            following += [_uri.join(directory, name) for name in dirs]
        level = following


def children_stats(uri: str) -> Plan[list[tuple[str, FileStatistics]]]:
    """get_children_stats for a plugin without it: the listing, then a stat
    of every child in one step. A child removed in between is left out."""
    names: list[str] = _value((yield Calls("get_children", [(uri,)]))[0])
    stats = yield Calls("stat", [(_uri.join(uri, name),) for name in names])
    return [
        (name, _value(found)) for name, found in zip(names, stats, strict=True) if not isinstance(found, NotFoundError)
    ]


def _collect(plan: Plan[None]) -> Plan[list[Any]]:
    """Run a plan that emits inside another plan, returning its items."""
    items: list[Any] = []
    try:
        step = next(plan)
        while True:
            if isinstance(step, Emit):
                items.append(step.item)
                step = plan.send([])
            else:
                step = plan.send((yield step))
    except StopIteration:
        return items


def delete_tree(uri: str) -> Plan[tuple[int, int]]:
    """Delete uri and all below it: every file at once, then directories
    from the deepest level up. Returns (0, 0); on failure raises the first
    error with ``undeleted`` = (undeleted files, undeleted dirs)."""
    (exists,) = yield Calls("path_exists", [(uri,)])
    if isinstance(exists, StatusError):
        exists.undeleted = (0, 1)
        raise exists
    (is_dir,) = yield Calls("isdir", [(uri,)])
    if not _value(is_dir):
        (deleted,) = yield Calls("delete_file", [(uri,)], mutating=True)
        _value(deleted)
        return (0, 0)
    levels: dict[int, list[str]] = {}
    files: list[str] = []
    for directory, _, names in (yield from _collect(walk(uri, everything=True))):
        levels.setdefault(directory.count("/"), []).append(directory)
        files += [_uri.join(directory, name) for name in names]
    results = yield Calls("delete_file", [(f,) for f in files], mutating=True)
    errors = _not_deleted(results)
    undeleted_files, undeleted_dirs = len(errors), 0
    for depth in sorted(levels, reverse=True):
        results = yield Calls("delete_dir", [(d,) for d in levels[depth]], mutating=True)
        failed = _not_deleted(results)
        undeleted_dirs += len(failed)
        errors += failed
    if errors:
        first = errors[0]
        if isinstance(first, StatusError):
            first.undeleted = (undeleted_files, undeleted_dirs)
        raise first
    return (0, 0)


def _not_deleted(results: list[Any]) -> list[Exception]:
    """The errors of deletions. Gone already is deleted: on an object store
    a folder without a marker vanishes with its last file."""
    return [r for r in results if isinstance(r, Exception) and not isinstance(r, NotFoundError)]


def move_tree(src: str, dst: str) -> Plan[None]:
    """rename_dir for a plugin without it (object stores): rename_dir's
    checks, then the tree copied (folders level by level, every file at
    once) and the source deleted. Not atomic: a failure part-way leaves the
    copy made so far beside the intact source."""
    where = f"{src} -> {dst}"
    (is_dir,) = yield Calls("isdir", [(src,)])
    if _value(is_dir) is not True:
        (exists,) = yield Calls("exists", [(src,)])
        if _value(exists) is not True:
            raise NotFoundError("no such directory", op="rename_dir", path=where)
        raise PathNotDirectoryError("source path is not a directory", op="rename_dir", path=where)
    if dst.rstrip("/") == src.rstrip("/") or dst.startswith(src.rstrip("/") + "/"):
        raise InvalidArgumentError("cannot move a directory into itself", op="rename_dir", path=where)
    exists, parent = yield Calls("exists", [(dst,), (_uri.parent(dst),)])
    if _value(exists):
        raise AlreadyExistsError("target path exists", op="rename_dir", path=where)
    if _value(parent) is not True:
        raise NotFoundError("the target's parent directory does not exist", op="rename_dir", path=where)
    levels: list[list[str]] = []
    copies: list[tuple[str, str]] = []
    for directory, _, names in (yield from _collect(walk(src))):
        target = dst + directory[len(src) :]
        depth = directory.count("/") - src.count("/")
        levels += [[] for _ in range(depth + 1 - len(levels))]
        levels[depth].append(target)
        copies += [(_uri.join(directory, name), _uri.join(target, name)) for name in names]
    for level in levels:
        for result in (yield Calls("create_dir", [(d,) for d in level], mutating=True)):
            _value(result)
    for result in (yield Calls("copy_file", copies, mutating=True)):
        _value(result)
    yield from delete_tree(src)


def glob(pattern: str, *, native: bool) -> Plan[list[str]]:
    """The sorted paths matching pattern, expanded one directory level at a
    time from the first level with a wildcard. With ``native`` each level is
    the plugin's own get_matching_paths on every candidate directory at
    once; without it, get_children and :func:`fnmatch.fnmatchcase` (then
    isdir, to keep only directories above the last level)."""
    parsed = _uri.parse_uri(pattern)
    parts = parsed.path.split("/")
    wild = [i for i, part in enumerate(parts) if has_glob_meta(part)]
    if native and (not wild or wild == [len(parts) - 1]):
        (found,) = yield Calls("get_matching_paths", [(pattern,)])  # one call does it
        return list(_value(found))
    if not wild:
        (exists,) = yield Calls("exists", [(pattern,)])
        return [pattern] if exists is True else []
    first = wild[0]
    base = "/".join(parts[:first])
    if not base and parsed.path.startswith("/"):
        base = "/"
    candidates = [parsed.prefix() + base]
    rest = [part for part in parts[first:] if part]
    for depth, part in enumerate(rest):
        last = depth == len(rest) - 1
        if not last and not has_glob_meta(part):
            candidates = [_uri.join(directory, part) for directory in candidates]  # no call
            continue
        if native:
            found = yield Calls("get_matching_paths", [(_uri.join(d, part),) for d in candidates])
            candidates = [match for result in found if not isinstance(result, Exception) for match in result]
        else:
            listings = yield Calls("get_children", [(d or ".",) for d in candidates])
            candidates = [
                _uri.join(directory, name)
                for directory, names in zip(candidates, listings, strict=True)
                if not isinstance(names, Exception)
                for name in names
                if fnmatch.fnmatchcase(name, part)
            ]
            if not last:
                kinds = yield Calls("isdir", [(c,) for c in candidates])
                candidates = [c for c, is_dir in zip(candidates, kinds, strict=True) if is_dir is True]
        if not candidates:
            return []
    return sorted(candidates)


def recursive_glob(pattern: str) -> Plan[list[str]]:
    """The sorted paths matching pattern by :func:`glob.glob`'s recursive
    rule: a ``**`` component matches any number of directory levels, none
    included (so ``a/**/x`` finds ``a/x``); every other component matches
    one level as in :func:`glob`. The tree below the deepest folder without
    a wildcard is walked once; the folder itself is not a match of
    ``folder/**``, and a trailing ``**`` matching no level stands for a
    directory (``*/**`` matches the folders, not the files, beside it).
    Names starting with a dot match like any other (as in fsspec, unlike
    :mod:`glob`)."""
    parsed = _uri.parse_uri(pattern)
    parts = parsed.path.split("/")
    first = next((i for i, part in enumerate(parts) if has_glob_meta(part)), len(parts))
    base = "/".join(parts[:first])
    if not base and parsed.path.startswith("/"):
        base = "/"
    top = parsed.prefix() + base
    rest = tuple(part for part in parts[first:] if part)
    below: dict[str, tuple[str, ...]] = {top: ()}  # each folder's names under top
    found = []
    # a file never matches a trailing ** with no level: its names but the
    # last must match the whole pattern (the ** then takes the last one)
    files_drop = 1 if rest[-1:] == ("**",) else 0
    for directory, dirs, files in (yield from _collect(walk(top))):
        for name in dirs:
            path = _uri.join(directory, name)
            below[path] = below[directory] + (name,)
            if _components_match(below[path], rest):
                found.append(path)
        for name in files:
            names = below[directory] + (name,)
            if _components_match(names[: len(names) - files_drop], rest):
                found.append(_uri.join(directory, name))
    return sorted(found)


def _components_match(names: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether a path's components match a pattern's, ``**`` spanning any
    number of them."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if j == len(parts):
            return i == len(names)
        if parts[j] == "**":
            return match(i, j + 1) or (i < len(names) and match(i + 1, j))
        return i < len(names) and fnmatch.fnmatchcase(names[i], parts[j]) and match(i + 1, j + 1)

    return match(0, 0)


# ---- the drivers -----------------------------------------------------------------------


def _call_each(fs: object, step: Calls) -> list[Any]:
    method = getattr(fs, step.op)
    results: list[Any] = []
    for args in step.args:
        try:
            results.append(method(*args))
        except Exception as exc:
            results.append(exc)
    return results


def iterate(fs: object, plan: Plan[R]) -> Generator[Any, None, R]:
    """Run plan on the calling thread, yielding what it emits; the
    generator's return value is the plan's."""
    try:
        step = next(plan)
        while True:
            if isinstance(step, Emit):
                yield step.item
                step = plan.send([])
            else:
                step = plan.send(_call_each(fs, step))
    except StopIteration as done:
        result: R = done.value
        return result


def run(fs: object, plan: Plan[R]) -> R:
    """Run a plan that emits nothing on the calling thread; its result."""
    driver = iterate(fs, plan)
    try:
        next(driver)
    except StopIteration as done:
        result: R = done.value
        return result
    raise AssertionError("run() is for plans that emit nothing")
