"""Each call as OpenTelemetry sees it, when the application uses it.

A call of an :class:`AsyncModularFileSystem` becomes a span and a
measurement of OpenTelemetry's metrics (:func:`watch`); every Env's meters
(its own counts, see :mod:`.metrics`) are read by OpenTelemetry's
observable instruments.

OpenTelemetry is never imported here: it is used when the application
imported it (``opentelemetry.trace`` or ``opentelemetry.metrics`` is in
``sys.modules``) and set a tracer or meter provider, looked up on each call
(a dictionary lookup while it is absent). Then:

- each call is a span ``"{operation} {scheme}"`` of kind CLIENT, child of
  the caller's current span, with the attributes ``asyncfs.scheme``,
  ``asyncfs.operation``, ``file.path`` (the URI), ``asyncfs.bytes`` and, on
  failure, ``error.type`` (semantic conventions: the status code's name) and
  the span's status ERROR; the call runs on its worker thread inside the
  span's context, so what it logs or starts there is the span's;
- ``asyncfs.client.operation.duration`` (a histogram, seconds; attributes
  ``asyncfs.scheme``, ``asyncfs.operation``, ``error.type``) gets each
  call's latency, and the observable ``asyncfs.client.operation.bytes``
  (bytes moved, per scheme and operation, summed over the process's Envs)
  and ``asyncfs.pool.threads``, ``asyncfs.pool.in_flight`` and
  ``asyncfs.pool.stuck`` (per kind of pool, local or network) are read
  when the application's reader collects.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from time import perf_counter_ns
from typing import Any, TypeVar

from .metrics import Meter, error_type

__all__ = ["EnvMeters", "Watch", "carried", "carried_context", "follow_meters", "imported", "watch"]

T = TypeVar("T")

_NAME = "asyncfs"

# every Env's meters by scheme, for the observable instruments (weakly: an
# Env that is gone is no longer observed)
_live: weakref.WeakSet[EnvMeters] = weakref.WeakSet()


class EnvMeters:
    """An Env's meters, by scheme."""

    __slots__ = ("__weakref__", "_by_scheme")

    def __init__(self) -> None:
        self._by_scheme: dict[str, Meter] = {}

    def __getitem__(self, scheme: str) -> Meter:
        meter = self._by_scheme.get(scheme)
        if meter is None:
            meter = self._by_scheme[scheme] = Meter()
        return meter

    def items(self) -> list[tuple[str, Meter]]:
        return list(self._by_scheme.items())


def follow_meters() -> EnvMeters:
    """A new Env's meters, observed by OpenTelemetry's metrics while it lives."""
    meters = EnvMeters()
    _live.add(meters)
    return meters


class _Providers:
    """The application's OpenTelemetry providers last seen, and what asyncfs
    made of them (None: no provider set, nothing to do)."""

    tracer_provider: object = None
    tracer: Any = None
    meter_provider: object = None
    duration: Any = None


_seen = _Providers()


def _tracer() -> Any:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if provider is not _seen.tracer_provider:
        _seen.tracer_provider = provider
        unset = isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
        _seen.tracer = None if unset else provider.get_tracer(_NAME)
    return _seen.tracer


def _duration() -> Any:
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return None
    provider = metrics.get_meter_provider()
    if provider is not _seen.meter_provider:
        _seen.meter_provider = provider
        _seen.duration = None if _unset(metrics, provider) else _instruments(provider)
    return _seen.duration


def _unset(metrics: Any, provider: object) -> bool:
    from opentelemetry.metrics._internal import _ProxyMeterProvider  # noqa: PLC0415 (present: metrics is)

    return isinstance(provider, _ProxyMeterProvider | metrics.NoOpMeterProvider)


def _instruments(provider: Any) -> Any:
    """The instruments on a meter provider the application set: the
    duration histogram (returned), and the observable ones."""
    meter = provider.get_meter(_NAME)
    meter.create_observable_counter(
        "asyncfs.client.operation.bytes", callbacks=[_observe_bytes], unit="By", description="Bytes read or written"
    )
    gauges = (("threads", "Worker threads"), ("in_flight", "Calls queued or running"), ("stuck", "Stuck calls"))
    for name, what in gauges:
        meter.create_observable_up_down_counter(
            f"asyncfs.pool.{name}", callbacks=[partial(_observe_pools, name)], description=what
        )
    return meter.create_histogram(
        "asyncfs.client.operation.duration",
        unit="s",
        description="Duration of asyncfs filesystem operations",
        explicit_bucket_boundaries_advisory=[(1 << i) / 1e9 for i in range(10, 35, 2)],
    )


def _observe_bytes(_options: object) -> Iterator[Any]:
    from opentelemetry.metrics import Observation  # noqa: PLC0415 (called by it: present)

    totals: dict[tuple[str, str], int] = {}
    for meters in list(_live):
        for scheme, meter in meters.items():
            for operation, counted in list(meter.items()):
                totals[scheme, operation] = totals.get((scheme, operation), 0) + counted.bytes
    for (scheme, operation), total in totals.items():
        yield Observation(total, {"asyncfs.scheme": scheme, "asyncfs.operation": operation})


def _observe_pools(name: str, _options: object) -> Iterator[Any]:
    from opentelemetry.metrics import Observation  # noqa: PLC0415 (called by it: present)

    from .pool import live_pools  # noqa: PLC0415 (pool imports this module)

    totals = {"local": 0, "network": 0}
    for pool in live_pools():
        totals["network" if pool.network else "local"] += getattr(pool.stats(), name)
    for kind, total in totals.items():
        yield Observation(total, {"asyncfs.pool.kind": kind})


def imported() -> bool:
    """Whether the application imported OpenTelemetry (only then is a
    provider looked for: :func:`watch`)."""
    return "opentelemetry" in sys.modules


class Watch:
    """One call seen by OpenTelemetry: a span, a duration, or both;
    :meth:`done` or :meth:`failed` when it ends."""

    __slots__ = ("attributes", "duration", "span", "start")

    def __init__(self, span: Any, duration: Any, attributes: dict[str, str]) -> None:
        self.span = span
        self.duration = duration
        self.attributes = attributes
        self.start = perf_counter_ns()

    def done(self, nbytes: int = 0) -> None:
        if self.duration is not None:
            self.duration.record((perf_counter_ns() - self.start) / 1e9, self.attributes)
        if self.span is not None:
            self.span.set_attribute("asyncfs.bytes", nbytes)
            self.span.end()

    def failed(self, error: BaseException) -> None:
        kind = error_type(error)
        if self.duration is not None:
            self.duration.record((perf_counter_ns() - self.start) / 1e9, {**self.attributes, "error.type": kind})
        if self.span is not None:
            from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415 (a span: it is present)

            self.span.set_attribute("error.type", kind)
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, str(error)))
            self.span.end()

    def carry(self, fn: Callable[..., T]) -> Callable[..., T]:
        """fn, run inside the span's context (on the worker that runs it)."""
        return fn if self.span is None else carried(self.span, fn)


def watch(scheme: str, operation: str, uri: object = None) -> Watch | None:
    """OpenTelemetry's watch on one call of operation (on uri, if one), or
    None when the application set no tracer or meter provider."""
    tracer = _tracer()
    duration = _duration()
    if tracer is None and duration is None:
        return None
    attributes = {"asyncfs.scheme": scheme, "asyncfs.operation": operation}
    span = None
    if tracer is not None:
        from opentelemetry.trace import SpanKind  # noqa: PLC0415 (a tracer: it is present)

        on = {**attributes, "file.path": uri} if isinstance(uri, str) else attributes
        span = tracer.start_span(f"{operation} {scheme or 'file'}", kind=SpanKind.CLIENT, attributes=on)
    return Watch(span, duration, attributes)


def carried(span: Any, fn: Callable[..., T]) -> Callable[..., T]:
    """fn, run inside span's context on whichever thread calls it."""
    from opentelemetry import trace  # noqa: PLC0415 (a span: it is present)

    return partial(_in_context, trace.set_span_in_context(span), fn)


def carried_context(fn: Callable[..., T]) -> Callable[..., T]:
    """fn, run inside the caller's OpenTelemetry context on whichever
    thread calls it, when a tracer provider is set; else fn itself."""
    if _tracer() is None:
        return fn
    from opentelemetry import context  # noqa: PLC0415 (a tracer: it is present)

    return partial(_in_context, context.get_current(), fn)


def _in_context(otel_context: Any, fn: Callable[..., T], *args: Any) -> T:
    from opentelemetry import context  # noqa: PLC0415 (a context: it is present)

    token = context.attach(otel_context)
    try:
        return fn(*args)
    finally:
        context.detach(token)
