"""Each call as OpenTelemetry sees it, when the application uses it.

A call of an :class:`AsyncModularFileSystem` made inside a trace becomes a
span (:func:`watch`); every Env's meters (its own counts, see
:mod:`.metrics`) are read by OpenTelemetry's observable instruments.

OpenTelemetry is never imported here: it is used when the application
imported it (``opentelemetry`` is in ``sys.modules``) and set a tracer or
meter provider, looked up on each call (a dictionary lookup while it is
absent). Then:

- each call made while the caller's current span records is a span
  ``"{operation} {scheme}"`` of kind CLIENT, that span's child, with the
  attributes ``asyncfs.scheme``, ``asyncfs.operation``, ``file.path`` (the
  URI), ``asyncfs.bytes`` and, on failure, ``error.type`` (semantic
  conventions: the status code's name) and the span's status ERROR; the
  call runs on its worker thread inside the span's context, so what it
  logs or starts there is the span's. Calls outside a trace (a background
  prefetch of a million files) start none: a span costs the SDK 10-15 µs,
  several times a local read;
- the counters ``asyncfs.client.operations`` (calls; attributes
  ``asyncfs.scheme``, ``asyncfs.operation``, and ``error.type`` on the
  failed ones), ``asyncfs.client.operation.time`` (seconds spent) and
  ``asyncfs.client.operation.bytes`` (bytes moved), summed over the
  process's Envs, and the gauges ``asyncfs.pool.threads``,
  ``asyncfs.pool.in_flight`` and ``asyncfs.pool.stuck`` (per kind of pool,
  local or network) are read from the Envs' own counts when the
  application's reader collects: nothing is recorded per call (a histogram
  record costs the SDK about 6 µs; the latency histogram is the Env's,
  :meth:`Env.metrics`).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import astuple
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from .._sync import StoreTraffic
from .metrics import Meter, error_type

if TYPE_CHECKING:
    from .._native import Request

__all__ = ["EnvMeters", "Watch", "carried", "carried_context", "follow_meters", "imported", "watch"]

T = TypeVar("T")

_NAME = "asyncfs"


class EnvMeters:
    """An Env's meters, by scheme."""

    __slots__ = ("__weakref__", "_by_scheme", "_stores")

    def __init__(self) -> None:
        self._by_scheme: dict[str, Meter] = {}
        # what its network stores' requests did, by scheme: its Env says how
        # to read it (follow_stores); kept in a box the finalizer can read
        self._stores: list[Callable[[], dict[str, StoreTraffic]]] = [dict]

    def follow_stores(self, read: Callable[[], dict[str, StoreTraffic]]) -> None:
        """How to read what the Env's network stores' requests did (it
        must not hold the Env: it is read again when the Env is gone)."""
        self._stores[0] = read

    def stores(self) -> dict[str, StoreTraffic]:
        return self._stores[0]()

    def __getitem__(self, scheme: str) -> Meter:
        meter = self._by_scheme.get(scheme)
        if meter is None:
            meter = self._by_scheme[scheme] = Meter()
        return meter

    def items(self) -> list[tuple[str, Meter]]:
        return list(self._by_scheme.items())


# What OpenTelemetry's counters read: the meters of every live Env (weakly),
# and the totals of those gone, so that a counter never goes down.
_live: weakref.WeakSet[EnvMeters] = weakref.WeakSet()
_retired: dict[tuple[str, str, str | None], list[float]] = {}  # (scheme, operation, error) -> [calls, ns, bytes]
_retired_stores: dict[str, list[int]] = {}  # scheme -> StoreTraffic's fields, in order
_retired_lock = threading.Lock()


def follow_meters() -> EnvMeters:
    """A new Env's meters, read by OpenTelemetry's counters while it lives
    and added to their totals when it is gone."""
    meters = EnvMeters()
    _live.add(meters)
    # (not at exit: nothing is read then, and the plugins may be going)
    weakref.finalize(meters, _retire, meters._by_scheme, meters._stores).atexit = False
    return meters


def _retire(by_scheme: dict[str, Meter], stores: list[Callable[[], dict[str, StoreTraffic]]]) -> None:
    last = stores[0]()
    with _retired_lock:
        _add(_retired, by_scheme.items())
        _add_stores(_retired_stores, last)


def _add_stores(totals: dict[str, list[int]], stores: dict[str, StoreTraffic]) -> None:
    """Add each store's StoreTraffic, field by field, to its scheme's totals."""
    for scheme, traffic in stores.items():
        values = astuple(traffic)
        entry = totals.setdefault(scheme, [0] * len(values))
        for i, value in enumerate(values):
            entry[i] += value


def _add(totals: dict[tuple[str, str, str | None], list[float]], meters: Any) -> None:
    """Add meters (scheme, Meter pairs) to totals: per scheme, operation and
    error type (None for the calls that succeeded), calls, nanoseconds and
    bytes (the time and bytes go with the successes' entry)."""
    for scheme, meter in list(meters):
        for operation, counted in list(meter.items()):
            errors = dict(counted.errors)
            calls = counted.count
            entry = totals.setdefault((scheme, operation, None), [0, 0, 0])
            entry[0] += calls - sum(errors.values())
            entry[1] += counted.total_ns
            entry[2] += counted.bytes
            for kind, n in errors.items():
                totals.setdefault((scheme, operation, kind), [0, 0, 0])[0] += n


def _totals() -> dict[tuple[str, str, str | None], list[float]]:
    with _retired_lock:
        totals = {key: list(value) for key, value in _retired.items()}
    for meters in list(_live):
        _add(totals, meters.items())
    return totals


def _store_totals() -> dict[str, list[int]]:
    with _retired_lock:
        totals = {scheme: list(values) for scheme, values in _retired_stores.items()}
    for meters in list(_live):
        _add_stores(totals, meters.stores())
    return totals


class _Seen:
    """What asyncfs took from OpenTelemetry: its tracer, of the tracer
    provider last seen, and the meter provider its instruments were
    registered with (None: not yet)."""

    tracer_provider: Any = None
    tracer: Any = None
    meter_provider: Any = None
    follows_the_proxy = False  # registered with the API's proxy, which follows any provider set later


_seen = _Seen()


def _register_instruments() -> None:
    """The observable instruments, on the application's meter provider, or
    on the API's proxy that passes them to the provider it sets later;
    again on a provider that replaced the one they were registered with.
    (Never ``get_meter_provider()`` while none is set: that looks up an
    environment variable, 0.7 µs, on every call.)"""
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None or _seen.follows_the_proxy:
        return
    provider = metrics.get_meter_provider()
    if provider is _seen.meter_provider:
        return
    _seen.meter_provider = provider
    from opentelemetry.metrics._internal import _ProxyMeterProvider  # noqa: PLC0415 (present: metrics is)

    _seen.follows_the_proxy = isinstance(provider, _ProxyMeterProvider)
    _instruments(provider)


def _instruments(provider: Any) -> None:
    meter = provider.get_meter(_NAME)
    counters = (
        ("asyncfs.client.operations", "{call}", 0, 1, "Calls of asyncfs filesystem operations"),
        ("asyncfs.client.operation.time", "s", 1, 1e-9, "Time spent in asyncfs filesystem operations"),
        ("asyncfs.client.operation.bytes", "By", 2, 1, "Bytes read or written by asyncfs filesystem operations"),
    )
    for name, unit, field, scale, what in counters:
        meter.create_observable_counter(
            name, callbacks=[partial(_observe_operations, field, scale)], unit=unit, description=what
        )
    stores = (
        ("asyncfs.store.requests", "{request}", (0,), "Requests sent to object stores, each try counted"),
        ("asyncfs.store.retries", "{request}", (1,), "Tries retried"),
        ("asyncfs.store.failures", "{request}", (2,), "Requests failed after their retries"),
        ("asyncfs.store.connections", "{connection}", (3,), "Connections opened"),
        ("asyncfs.store.io", "By", (4, 5), "Bytes sent (transmit) and received (receive)"),
    )
    for name, unit, fields, what in stores:
        meter.create_observable_counter(name, callbacks=[partial(_observe_stores, fields)], unit=unit, description=what)
    gauges = (("threads", "Worker threads"), ("in_flight", "Calls queued or running"), ("stuck", "Stuck calls"))
    for name, what in gauges:
        meter.create_observable_up_down_counter(
            f"asyncfs.pool.{name}", callbacks=[partial(_observe_pools, name)], description=what
        )


def _observe_stores(fields: tuple[int, ...], _options: object) -> Iterator[Any]:
    from opentelemetry.metrics import Observation  # noqa: PLC0415 (called by it: present)

    for scheme, values in _store_totals().items():
        if len(fields) == 1:
            yield Observation(values[fields[0]], {"asyncfs.scheme": scheme})
        else:  # bytes: the semantic conventions' direction
            for field, direction in zip(fields, ("transmit", "receive"), strict=True):
                yield Observation(values[field], {"asyncfs.scheme": scheme, "network.io.direction": direction})


def _observe_operations(field: int, scale: float, _options: object) -> Iterator[Any]:
    from opentelemetry.metrics import Observation  # noqa: PLC0415 (called by it: present)

    for (scheme, operation, error), values in _totals().items():
        if error is not None and field != 0:
            continue  # (time and bytes are the successes' entry's)
        attributes = {"asyncfs.scheme": scheme, "asyncfs.operation": operation}
        if error is not None:
            attributes["error.type"] = error
        value = values[field] * scale
        yield Observation(value if scale != 1 else int(value), attributes)


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
    """One call seen by OpenTelemetry, as a span: :meth:`done` or
    :meth:`failed` when it ends. A network store's call also has a child
    span for each try of each HTTP request it made (see :func:`carried`)."""

    __slots__ = ("network", "span")

    def __init__(self, span: Any, network: bool) -> None:
        self.span = span
        self.network = network

    def done(self, nbytes: int = 0) -> None:
        self.span.set_attribute("asyncfs.bytes", nbytes)
        self.span.end()

    def failed(self, error: BaseException) -> None:
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415 (a span: it is present)

        self.span.set_attribute("error.type", error_type(error))
        self.span.record_exception(error)
        self.span.set_status(Status(StatusCode.ERROR, str(error)))
        self.span.end()

    def carry(self, fn: Callable[..., T]) -> Callable[..., T]:
        """fn, run inside the span's context (on the worker that runs it)."""
        return carried(self.span, fn, requests=self.network)


def watch(scheme: str, operation: str, uri: object = None, *, network: bool = False) -> Watch | None:
    """OpenTelemetry's span of one call of operation (on uri, if one), or
    None when the caller's current span does not record (no trace, a trace
    the sampler dropped, or no provider set: then no span records)."""
    _register_instruments()
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or not trace.get_current_span().is_recording():
        return None
    provider = trace.get_tracer_provider()  # (a span records: a provider is set, and this is a lookup)
    if provider is not _seen.tracer_provider:
        _seen.tracer_provider, _seen.tracer = provider, provider.get_tracer(_NAME)
    attributes = {"asyncfs.scheme": scheme, "asyncfs.operation": operation}
    if isinstance(uri, str):
        attributes["file.path"] = uri
    name = f"{operation} {scheme or 'file'}"
    return Watch(_seen.tracer.start_span(name, kind=trace.SpanKind.CLIENT, attributes=attributes), network)


def carried(span: Any, fn: Callable[..., T], *, requests: bool = False) -> Callable[..., T]:
    """fn, run inside span's context on whichever thread calls it; with
    requests, the tries of the HTTP requests it makes become child spans
    of span (the HTTP client conventions' attributes: method, URL without
    its query, server, status, resend count)."""
    from opentelemetry import trace  # noqa: PLC0415 (a span: it is present)

    if requests:
        return partial(_in_span_with_requests, span, fn)
    return partial(_in_context, trace.set_span_in_context(span), fn)


def _in_span_with_requests(span: Any, fn: Callable[..., T], *args: Any) -> T:
    from opentelemetry import context, trace  # noqa: PLC0415 (a span: it is present)

    from .._native import collected  # noqa: PLC0415 (only when tracing a network store)

    within = trace.set_span_in_context(span)
    token = context.attach(within)
    tries: list[Request] = []
    try:
        with collected() as tries:
            return fn(*args)
    finally:
        context.detach(token)
        for request in tries:
            _request_span(within, request)


def _request_span(within: Any, request: Request) -> None:
    """A CLIENT span of one try, under the call's (HTTP client semantic
    conventions), timed as the engine timed it."""
    from opentelemetry.trace import SpanKind, Status, StatusCode  # noqa: PLC0415 (a span: it is present)

    where = urlsplit(request.url)
    attributes: dict[str, str | int] = {"http.request.method": request.method, "url.full": request.url}
    if where.hostname:
        attributes["server.address"] = where.hostname
    if where.port:
        attributes["server.port"] = where.port
    if request.status:
        attributes["http.response.status_code"] = request.status
    if request.attempt > 1:
        attributes["http.request.resend_count"] = request.attempt - 1
    span = _seen.tracer.start_span(
        request.method, context=within, kind=SpanKind.CLIENT, attributes=attributes, start_time=request.start_ns
    )
    if request.status >= 400 or request.status == 0:
        span.set_attribute("error.type", str(request.status) if request.status else f"curl error {request.error}")
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=request.end_ns)


def carried_context(fn: Callable[..., T]) -> Callable[..., T]:
    """fn, run inside the caller's OpenTelemetry context on whichever
    thread calls it, when the caller is inside a recording span; else fn
    itself."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or not trace.get_current_span().is_recording():
        return fn
    from opentelemetry import context  # noqa: PLC0415 (a span records: it is present)

    return partial(_in_context, context.get_current(), fn)


def _in_context(otel_context: Any, fn: Callable[..., T], *args: Any) -> T:
    from opentelemetry import context  # noqa: PLC0415 (a context: it is present)

    token = context.attach(otel_context)
    try:
        return fn(*args)
    finally:
        context.detach(token)
