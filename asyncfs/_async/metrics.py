"""What an Env counts of its calls: per scheme and operation, calls,
errors, bytes and latency.

Cheap enough to leave on: per scheme and operation, how many calls, their
errors by status code, the bytes they moved and a histogram of their
latency (:class:`Meter`, one per scheme of an Env; :meth:`Env.metrics`
reads them all as plain data).

An operation is one call of :class:`AsyncModularFileSystem`, named as the
plugin ABI names it (``read_file``, ``stat``, ``get_children``, ...): a
Pythonic alias counts as the call it makes (``size`` as ``get_file_size``,
``listdir`` as ``get_children``). Its latency runs from the call to its
answer on the event loop, queueing on the worker pool included: what the
caller waited.

Recording is a few integer additions on the loop's thread (a latency falls
into a power-of-two bucket of nanoseconds by its bit length): about 0.3 µs a
call, measured in benchmarks/ (the small-file rows with metrics on and off).
Calls of one Env made from event loops on several threads at once may,
rarely, lose a count to a race: the counters take no lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from time import perf_counter_ns
from typing import Any

from .._sync import StoreTraffic
from ..errors import StatusError
from .pool import PoolStats

__all__ = ["LatencyHistogram", "Meter", "Metrics", "OperationMeter", "OperationStats", "error_type", "operation_stats"]

# bucket i holds latencies of i bits of nanoseconds: below 2**i ns
# (bucket 10 ends at 1.02 µs, 20 at 1.05 ms, 30 at 1.07 s). 64 of them
# hold any latency, so recording needs no bound check; a reading folds
# those past SHOWN (137 s) into the last it shows.
BUCKETS = 64
SHOWN = 38


def error_type(error: BaseException) -> str:
    """How an error is counted: a status code's name (``NOT_FOUND``),
    ``CANCELLED`` for a cancelled call, else the exception's class name."""
    if isinstance(error, StatusError):
        return error.code.name
    name = type(error).__name__
    return "CANCELLED" if name in ("CancelledError", "Cancelled") else name


class OperationMeter:
    """The counters of one operation of one scheme (the loop's thread
    writes them; a read copies them, see :meth:`stats`). The count of calls
    is the sum of the buckets: one addition fewer per call."""

    __slots__ = ("buckets", "bytes", "errors", "total_ns")

    def __init__(self) -> None:
        self.bytes = 0
        self.total_ns = 0
        self.errors: dict[str, int] = {}
        self.buckets = [0] * BUCKETS

    @property
    def count(self) -> int:
        return sum(self.buckets)

    def record(self, start_ns: int, nbytes: int = 0) -> None:
        """A call that began at start_ns (``perf_counter_ns``) answered now,
        having moved nbytes."""
        elapsed = perf_counter_ns() - start_ns
        self.bytes += nbytes
        self.total_ns += elapsed
        self.buckets[elapsed.bit_length()] += 1

    def failed(self, start_ns: int, error: BaseException) -> None:
        """A call that began at start_ns raised error now."""
        self.add(perf_counter_ns() - start_ns, error=error)

    def add(self, elapsed_ns: int, nbytes: int = 0, error: BaseException | None = None, calls: int = 1) -> None:
        """Calls measured elsewhere: each took elapsed_ns, together they
        moved nbytes; or one failed with error."""
        self.bytes += nbytes
        self.total_ns += elapsed_ns * calls
        self.buckets[max(elapsed_ns, 0).bit_length()] += calls
        if error is not None:
            kind = error_type(error)
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def stats(self, scheme: str, operation: str) -> OperationStats:
        buckets = list(self.buckets)
        shown = [*buckets[: SHOWN - 1], sum(buckets[SHOWN - 1 :])]
        return OperationStats(
            scheme=scheme,
            operation=operation,
            count=sum(buckets),
            errors=dict(self.errors),
            bytes=self.bytes,
            seconds=self.total_ns / 1e9,
            latency=LatencyHistogram.of_buckets(shown),
        )


class Meter(dict[str, OperationMeter]):
    """The operations of one scheme of one Env, by name."""

    def __missing__(self, operation: str) -> OperationMeter:
        meter = self[operation] = OperationMeter()
        return meter


@dataclass(frozen=True)
class LatencyHistogram:
    """Latencies in buckets: ``counts[i]`` calls took at most
    ``bounds[i]`` seconds and more than the bound before (``bounds`` are
    powers of two of nanoseconds; the last is ``inf``)."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]

    @classmethod
    def of_buckets(cls, buckets: list[int]) -> LatencyHistogram:
        bounds = [(1 << i) / 1e9 for i in range(len(buckets) - 1)] + [math.inf]
        return cls(bounds=tuple(bounds), counts=tuple(buckets))

    @property
    def count(self) -> int:
        return sum(self.counts)

    def quantile(self, q: float) -> float:
        """The latency below which a share q of the calls fell, in seconds:
        the upper bound of its bucket (so at most twice the true value);
        0.0 when nothing was counted."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"a quantile is between 0 and 1, not {q}")
        wanted = q * self.count
        seen = 0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            seen += count
            if count and seen >= wanted:
                return bound
        return 0.0


@dataclass(frozen=True)
class OperationStats:
    """One operation of one scheme: ``count`` calls (errors included),
    ``errors`` by type (a status code's name, ``CANCELLED``, or an
    exception's class name), ``bytes`` read or written, ``seconds`` spent
    in all, and the ``latency`` histogram."""

    scheme: str
    operation: str
    count: int
    errors: Mapping[str, int]
    bytes: int
    seconds: float
    latency: LatencyHistogram = field(repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "operation": self.operation,
            "count": self.count,
            "errors": dict(self.errors),
            "bytes": self.bytes,
            "seconds": self.seconds,
            "p50": self.latency.quantile(0.5),
            "p99": self.latency.quantile(0.99),
        }


def operation_stats(meters: Iterable[tuple[str, Meter]]) -> tuple[OperationStats, ...]:
    """Every operation counted, by scheme then operation name."""
    return tuple(
        meter.stats(scheme, operation)
        for scheme, ops in sorted(meters)
        for operation, meter in sorted(list(ops.items()))
        if meter.count
    )


@dataclass(frozen=True)
class Metrics:
    """An Env's measures (:meth:`Env.metrics`): its ``operations`` (each
    scheme and operation called at least once, by scheme then name), the
    state of its ``pool`` (local filesystems) and ``network_pool``
    (network stores, shared by the Envs with the same settings), and what
    the requests of each network store it used did (``stores``, by scheme:
    requests, retries, failures, connections, bytes)."""

    operations: tuple[OperationStats, ...]
    pool: PoolStats
    network_pool: PoolStats
    stores: Mapping[str, StoreTraffic] = field(default_factory=dict)

    def operation(self, scheme: str, operation: str) -> OperationStats | None:
        """The measures of one operation of one scheme (``""`` for bare
        paths), or None if it was never called."""
        for stats in self.operations:
            if stats.scheme == scheme and stats.operation == operation:
                return stats
        return None

    def as_dict(self) -> dict[str, Any]:
        """The same, as JSON-ready dicts (latency as p50 and p99 bounds)."""
        return {
            "operations": [stats.as_dict() for stats in self.operations],
            "pool": asdict(self.pool),
            "network_pool": asdict(self.network_pool),
            "stores": {scheme: asdict(traffic) for scheme, traffic in self.stores.items()},
        }
