"""The machine's own limits, printed beside each small-file row: what the
same system calls cost in a C loop (``probes/limits.c``, built here with
the machine's C compiler), on one core and on all of them, and what the
harness alone costs (a no-op coroutine under the same ``gather`` +
semaphore or lanes). A row's figure then splits into the machine's part,
asyncio's part and asyncfs's own part (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncfs._async.pool import available_cores

from .harness import best_async

PROBE = Path(__file__).parent / "probes" / "limits.c"
ROUNDS = 9


@functools.cache
def _probe() -> tuple[Path | None, str]:
    """The built probe, or None and why not (no compiler, a failed build)."""
    compiler = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if compiler is None:
        return None, "no C compiler here: the C limits are not measured"
    source = PROBE.read_bytes()
    built = Path(tempfile.gettempdir()) / f"asyncfs-limits-{hashlib.sha256(source).hexdigest()[:12]}"
    if not built.exists():
        scratch = built.with_suffix(f".{os.getpid()}")
        done = subprocess.run(
            [compiler, "-std=c99", "-O2", "-pthread", "-o", str(scratch), str(PROBE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return None, f"{compiler} could not build {PROBE.name}: {done.stderr.strip()[:200]}"
        scratch.replace(built)
    return built, ""


def c_limit(mode: str, paths: Sequence[str], threads: int = 1) -> float | None:
    """Microseconds per path of mode's calls over paths in C, the best of
    ROUNDS rounds (see probes/limits.c); None where no probe could be built."""
    probe, _ = _probe()
    if probe is None:
        return None
    done = subprocess.run(
        [str(probe), mode, str(threads), str(ROUNDS)],
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.split()[0])


def harness_cost(
    harness: Callable[[Callable[[Any], Awaitable[Any]], Iterable[Any]], Awaitable[None]],
    items: Sequence[Any],
    repeat: int,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> float:
    """Microseconds per item of a no-op coroutine under harness: what
    asyncio itself costs a library called one task per item."""

    async def nothing(_: Any) -> None:
        return None

    return best_async(lambda: harness(nothing, items), repeat, loop_factory=loop_factory) / len(items) * 1e6


def describe(limits: dict[str, float | None]) -> str:
    """The note beside a row: each limit in µs per item, or why the C
    ones are missing."""
    parts = [f"{name} {value:.2f} µs" for name, value in limits.items() if value is not None]
    if any(value is None for value in limits.values()):
        parts.append(_probe()[1])
    return "machine's limits per item: " + ", ".join(parts)


@dataclass(frozen=True)
class ReadLimits:
    """The C loop reading the same files whole: µs per file, on one core
    and on all of them (None without a probe)."""

    one_core: float | None
    all_cores: float | None

    def named(self) -> dict[str, float | None]:
        return {"C read loop": self.one_core, f"C read on {available_cores()} cores": self.all_cores}


def read_limits(paths: Sequence[str]) -> ReadLimits:
    return ReadLimits(c_limit("read", paths), c_limit("read", paths, available_cores()))
