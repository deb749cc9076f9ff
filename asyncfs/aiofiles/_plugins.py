"""The ``os`` and ``os.path`` functions that also take URIs of a plugin's
scheme (``mem://``, ``s3://``): what each does there, on the process-wide
Env. A local path (or a ``file://`` URI) goes to the standard library."""

from __future__ import annotations

import asyncio
import inspect
import os
import stat as _stat
from collections.abc import Callable, Coroutine
from functools import wraps
from typing import Any

from .._sync import FileStatistics
from ..env import default_env
from ..errors import NotFoundError
from ._paths import local, plugin_uri
from ._stats import StatMany
from .base import on_worker

__all__ = ["either"]

_Async = Callable[..., Coroutine[Any, Any, Any]]


def either(
    local_fn: Callable[..., Any], on_plugin: _Async | None, *, shielded: bool, batched: StatMany[Any] | None = None
) -> _Async:
    """local_fn on a worker for a local path (as :func:`.base.wrap` runs
    it, shielded or not), or through batched, which answers it as local_fn
    would, with the other calls of the loop's iteration (:mod:`._stats`);
    on_plugin(uri, ...) for a URI (with no on_plugin, a URI is a path)."""

    @wraps(local_fn)
    async def call(path: Any, *args: Any, loop: object = None, executor: Any = None, **kwargs: Any) -> Any:
        if on_plugin is not None:
            uri = plugin_uri(path)
            if uri is not None:
                return await on_plugin(uri, *args, **kwargs)
            path = local(path)
        if batched is not None and executor is None:
            combined = batched.call(path, args, kwargs)
            if combined is not None:
                return await combined
        return await on_worker(executor, local_fn, (path, *args), kwargs, shielded=shielded)

    if batched is None:
        return call

    @wraps(local_fn)
    def plain_or_call(path: Any, *args: Any, loop: object = None, executor: Any = None, **kwargs: Any) -> Any:
        # The commonest call, a plain local path, returns the pool's
        # combined call itself: no coroutine of its own, one object less
        # for the garbage collector to traverse (see docs/aiofiles.md,
        # Faster). Deciding so raises nothing: whatever could goes through
        # call, and raises where it is awaited, as there.
        if not args and not kwargs and executor is None:
            combined = batched.plain(path)
            if combined is not None:
                return combined
        return call(path, *args, loop=loop, executor=executor, **kwargs)

    return coroutine_function(plain_or_call)


def coroutine_function(fn: Callable[..., Any]) -> _Async:
    """fn, which returns a coroutine, marked as ``async def`` would make it
    for the checks that decide whether to await a function's result
    (``inspect.iscoroutinefunction`` from Python 3.12, and
    ``asyncio.iscoroutinefunction``, which ``unittest.mock`` uses to
    make an autospec'd mock async)."""
    if hasattr(inspect, "markcoroutinefunction"):  # Python 3.12+
        marked: _Async = inspect.markcoroutinefunction(fn)
        return marked
    fn._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]
    return fn


def stat_result(stats: FileStatistics) -> os.stat_result:
    """An os.stat_result for what a plugin reports: kind, size, mtime."""
    mode = (_stat.S_IFDIR | 0o755) if stats.is_directory else (_stat.S_IFREG | 0o644)
    seconds = stats.mtime_nsec / 1e9
    whole = stats.mtime_nsec // 1_000_000_000
    ns = stats.mtime_nsec
    return os.stat_result(
        (mode, 0, 0, 1, 0, 0, stats.length, whole, whole, whole, seconds, seconds, seconds, ns, ns, ns)
    )


async def uri_stat(uri: str, *, dir_fd: None = None, follow_symlinks: bool = True) -> os.stat_result:
    return stat_result(await default_env().stat(uri))


async def uri_exists(uri: str) -> bool:
    return await default_env().exists(uri)


async def uri_isdir(uri: str) -> bool:
    return await default_env().isdir(uri)


async def uri_isfile(uri: str) -> bool:
    try:
        return not (await default_env().stat(uri)).is_directory
    except NotFoundError:
        return False


async def uri_getsize(uri: str) -> int:
    return (await default_env().stat(uri)).length


async def uri_getmtime(uri: str) -> float:
    return (await default_env().stat(uri)).mtime_nsec / 1e9


async def uri_listdir(uri: str) -> list[str]:
    return await default_env().listdir(uri)


async def uri_remove(uri: str, *, dir_fd: None = None) -> None:
    await default_env().rm(uri)


async def uri_mkdir(uri: str, mode: int = 0o777, *, dir_fd: None = None) -> None:
    await default_env().mkdir(uri)


async def uri_makedirs(uri: str, mode: int = 0o777, exist_ok: bool = False) -> None:
    await default_env().makedirs(uri, exist_ok=exist_ok)


async def uri_rmdir(uri: str, *, dir_fd: None = None) -> None:
    await default_env().rmdir(uri)


async def uri_rename(src: str, dst: str, **kwargs: Any) -> None:
    await default_env().rename(src, dst)
