"""A drop-in for aiofiles: ``from asyncfs import aiofiles``, and every line
that used aiofiles runs unchanged, on asyncfs's worker pool.

The same API (``open``, the standard streams, :mod:`.os`, :mod:`.ospath`,
:mod:`.tempfile`, and the file classes under :mod:`.threadpool`), the same
behaviour (the standard library's own file objects do the work: modes,
encodings, newlines, ``tell`` cookies and errors are theirs), and much
faster: calls of one event-loop iteration share one thread hop, and a read
or write the file's bytes in memory can answer costs no hop at all. See
``docs/aiofiles.md`` for every difference.
"""

from __future__ import annotations

from . import os, ospath, tempfile
from .threadpool import open, stderr, stderr_bytes, stdin, stdin_bytes, stdout, stdout_bytes

__all__ = [
    "open",
    "os",
    "ospath",
    "stderr",
    "stderr_bytes",
    "stdin",
    "stdin_bytes",
    "stdout",
    "stdout_bytes",
    "tempfile",
]
