"""What every benchmark shares: a result row, best-of timing, the bounded
in-flight harness every async peer runs under, and the printed table."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import asyncfs

IN_FLIGHT = 64


@dataclass
class Row:
    work: str
    unit: str
    results: dict[str, float] = field(default_factory=dict)  # peer -> rate (higher is better)
    notes: list[str] = field(default_factory=list)
    target: str = ""
    verdict: str = ""
    ratio: float | None = None  # the figure the verdict judges (higher or lower better), where it is one
    area: str = ""  # the table's section it is printed under (run.py)


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of repeat calls of fn."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def best_async(
    make: Callable[[], Awaitable[Any]],
    repeat: int,
    setup: Callable[[], Awaitable[Any]] | None = None,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    teardown: Callable[[], Awaitable[Any]] | None = None,
) -> float:
    """Best wall time of repeat awaits of make(), on one fresh event loop
    (asyncio's, or loop_factory's: uvloop's, say); setup runs on that loop
    first and teardown last, untimed."""

    async def timed() -> float:
        if setup is not None:
            await setup()
        try:
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                await make()
                times.append(time.perf_counter() - start)
            return min(times)
        finally:
            if teardown is not None:
                await teardown()

    loop = (loop_factory or asyncio.new_event_loop)()
    try:
        return loop.run_until_complete(timed())
    finally:
        loop.close()


async def bounded(fn: Callable[[Any], Awaitable[Any]], items: Iterable[Any], limit: int = IN_FLIGHT) -> None:
    """Run fn over items with limit in flight: the same harness for every
    async peer."""
    iterator = iter(items)

    async def lane() -> None:
        for item in iterator:
            await fn(item)

    await asyncio.gather(*(lane() for _ in range(limit)))


def started_env(**options: Any) -> asyncfs.Env:
    """An Env with its plugins loaded and workers started: start-up is a
    one-time cost of an application, not of each operation."""
    env = asyncfs.Env(**options)

    async def warm() -> None:
        await env.exists("/")

    asyncio.run(warm())
    return env


def optional(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        return None


def median_rows(runs: list[list[Row]]) -> list[Row]:
    """Each row as its median run measured it (the higher middle one for an
    even count): the run whose ratio is the median where every run gave the
    row one (whichever way is better, the median is the same run), else the
    middle run in time. A note lists every run's verdict, so the spread
    shows beside the median."""
    if len(runs) == 1:
        return runs[0]
    merged = []
    for same in zip(*runs, strict=True):
        ratios = [other.ratio for other in same]
        ranked = list(same) if None in ratios else sorted(same, key=lambda other: other.ratio or 0.0)
        row = replace(ranked[len(same) // 2])
        verdicts = " ".join(f"({n}) {other.verdict}" for n, other in enumerate(same, 1))
        row.notes = [*row.notes, f"median of {len(same)} runs; each run's verdict: {verdicts}"]
        merged.append(row)
    return merged


def _by_area(rows: list[Row]) -> dict[str, list[Row]]:
    """The rows of each area, the areas in the order they first come."""
    areas: dict[str, list[Row]] = {}
    for row in rows:
        areas.setdefault(row.area, []).append(row)
    return areas


def table(rows: list[Row]) -> str:
    """The rows as markdown: one table per area, in the order the areas
    first come."""
    return "\n\n".join(
        (f"### {area}\n\n" if area else "") + _one_table(members) for area, members in _by_area(rows).items()
    )


def _one_table(rows: list[Row]) -> str:
    lines = ["| work | unit | results (same run) | target | result |", "|---|---|---|---|---|"]
    for row in rows:
        cells = ", ".join(f"{peer} {value:,.3g}" for peer, value in row.results.items())
        if row.notes:
            cells += " (" + "; ".join(row.notes) + ")"
        lines.append(f"| {row.work} | {row.unit} | {cells} | {row.target} | {row.verdict} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    """The rows as a reader takes them in: per area, each row's work, its
    verdict and its target (the peers' figures are in the full table)."""
    parts = []
    for area, members in _by_area(rows).items():
        lines = [f"### {area}", "", "| work | result | target |", "|---|---|---|"]
        lines += [f"| {row.work} | {row.verdict} | {row.target} |" for row in members]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
