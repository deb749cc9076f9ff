"""``open`` and the standard streams, as aiofiles's ``aiofiles.threadpool``."""

from __future__ import annotations

import asyncio
import io
import sys
from concurrent.futures import Executor
from functools import partial
from typing import Any

from ...env import default_env
from .._bulk import OPEN_TO_READ, close_descriptors
from .._paths import local, plugin_uri
from .._run import run, run_soon, run_soon_together
from .._stack import Unlayered, close_opened, open_stack
from ..base import AiofilesContextManager, AsyncBase
from .binary import AsyncBufferedIOBase, AsyncBufferedReader, AsyncFileIO, AsyncIndirectBufferedIOBase
from .streams import AsyncStreamFile
from .text import AsyncTextIndirectIOWrapper, AsyncTextIOWrapper

__all__ = ["open", "stderr", "stderr_bytes", "stdin", "stdin_bytes", "stdout", "stdout_bytes", "wrap"]


def open(
    file: Any,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Any = None,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
    atomic: bool = False,
) -> AiofilesContextManager[Any]:
    """``open()``, async: ``async with open(path) as f`` or ``f = await
    open(path)``. The arguments and what they do are the standard
    library's; ``executor`` runs the blocking calls (asyncfs's worker pool
    by default), ``loop`` is accepted and not needed.

    ``atomic=True`` (``"w"`` modes; asyncfs's own) writes to a temporary
    sibling that replaces the file on close, and is deleted instead when
    the ``async with`` block raises: the file is never seen half written.
    A URI of a plugin's scheme (``mem://``, ``s3://``) opens a stream of
    that plugin (:mod:`.streams`); a ``file://`` URI, its local path."""
    return AiofilesContextManager(
        _open(file, mode, buffering, encoding, errors, newline, closefd, opener, loop, executor, atomic)
    )


async def _open(
    file: Any,
    mode: str,
    buffering: int,
    encoding: str | None,
    errors: str | None,
    newline: str | None,
    closefd: bool,
    opener: Any,
    loop: asyncio.AbstractEventLoop | None,
    executor: Executor | None,
    atomic: bool,
) -> AsyncBase | AsyncStreamFile:
    uri = plugin_uri(file)
    if uri is not None:
        return await _open_uri(uri, mode, buffering, encoding, errors, newline, atomic)
    close_later = _CLOSE_ON_POOL if executor is None else partial(_close_later, executor)
    args = (local(file), mode, buffering, encoding, errors, newline, closefd, opener, close_later, atomic)
    plain = OPEN_TO_READ.takes(args)  # a plain open to read
    # at hand, on this thread; else with the others of this loop iteration, in one C call
    opened = OPEN_TO_READ.at_hand(args) if plain and executor is None else None
    if opened is None:
        opened = await run(
            executor,
            open_stack,
            *args,
            shielded=False,  # a cancelled open closes what it opened, on a worker
            discard=close_opened,
            combine=OPEN_TO_READ if plain else None,
        )
    return wrap(
        opened.file,
        loop=loop,
        executor=executor,
        memory=opened.memory,
        abandonable_reads=not opened.regular,
        landing=opened.landing,
    )


async def _open_uri(
    uri: str, mode: str, buffering: int, encoding: str | None, errors: str | None, newline: str | None, atomic: bool
) -> AsyncStreamFile:
    if newline is not None:
        raise ValueError(f"newline={newline!r}: a stream on a URI reads universal newlines and writes '\\n' only")
    options: dict[str, Any] = {"compression": None, "atomic": atomic}
    if buffering > 1:
        options["block_size"] = buffering
    stream = await default_env().open(uri, mode, encoding=encoding, errors=errors, **options)
    return AsyncStreamFile(stream, uri, mode)


def _close_later(executor: Executor | None, file: io.FileIO | int) -> None:
    """Close a file that was only read (a FileIO, or a descriptor opened in
    C), on a worker, without waiting."""
    if isinstance(file, int):
        run_soon_together(executor, close_descriptors, file)
    else:
        run_soon(executor, file.close)


_CLOSE_ON_POOL = partial(_close_later, None)  # made once: the commonest by far


def wrap(
    file: Any, *, loop: asyncio.AbstractEventLoop | None = None, executor: Executor | None = None, **layer: Any
) -> AsyncBase:
    """The async file object for a standard library file object."""
    cls: type[AsyncBase]
    if isinstance(file, (Unlayered, io.BufferedReader, io.BufferedRandom)):  # the commonest first
        cls = AsyncBufferedReader
    elif isinstance(file, io.TextIOBase):
        cls = AsyncTextIOWrapper
    elif isinstance(file, io.BufferedIOBase):
        cls = AsyncBufferedIOBase
    elif isinstance(file, io.FileIO):
        cls = AsyncFileIO
    else:
        raise TypeError(f"Unsupported io type: {file}.")
    return cls(file, loop, executor, **layer)


stdin = AsyncTextIndirectIOWrapper("sys.stdin", None, None, indirect=lambda: sys.stdin)
stdout = AsyncTextIndirectIOWrapper("sys.stdout", None, None, indirect=lambda: sys.stdout)
stderr = AsyncTextIndirectIOWrapper("sys.stderr", None, None, indirect=lambda: sys.stderr)
stdin_bytes = AsyncIndirectBufferedIOBase("sys.stdin.buffer", None, None, indirect=lambda: sys.stdin.buffer)
stdout_bytes = AsyncIndirectBufferedIOBase("sys.stdout.buffer", None, None, indirect=lambda: sys.stdout.buffer)
stderr_bytes = AsyncIndirectBufferedIOBase("sys.stderr.buffer", None, None, indirect=lambda: sys.stderr.buffer)
