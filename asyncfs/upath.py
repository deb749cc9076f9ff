"""universal-pathlib paths on the fsspec bridge's URLs:
``UPath("asyncfs+s3://bucket/data")`` is an :class:`AsyncfsPath`.

universal-pathlib finds it through its ``universal_pathlib.implementations``
entry point for the built-in schemes (``asyncfs+file``, ``asyncfs+mem``,
``asyncfs+s3``).
"""

from __future__ import annotations

from typing import Any

from upath import UPath

from . import fsspec as _bridge  # noqa: F401  # registers the protocols' classes, which universal-pathlib reads

__all__ = ["AsyncfsPath"]


class AsyncfsPath(UPath):
    """A path on an ``asyncfs+<scheme>://`` URL: every operation goes
    through :class:`asyncfs.fsspec.AsyncfsFileSystem`."""

    __slots__ = ()

    @classmethod
    def _transform_init_args(cls, args: Any, protocol: str, storage_options: dict[str, Any]) -> Any:
        # universal-pathlib reads "a+b://" as b under a (and then looks for an
        # fsspec protocol "a"); asyncfs+<scheme> is one protocol, so the
        # arguments carry their paths without it.
        prefix = f"{protocol}://"
        plain = tuple(arg[len(prefix) :] if isinstance(arg, str) and arg.startswith(prefix) else arg for arg in args)
        return super()._transform_init_args(plain, protocol, storage_options)
