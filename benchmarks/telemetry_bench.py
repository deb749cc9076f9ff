"""What watching costs: the small-file calls of a service, with the Env's
metrics off (``Env(metrics=False)``), on (the default), and on with an
OpenTelemetry SDK configured as a service configures it (a tracer provider
with a batch span processor and a meter provider with a periodic reader,
both exporting to no-op exporters), the calls made outside a trace and
inside one (each call then a span). The target (docs/observability.md):
metrics on, and the SDK outside a trace, lose at most 5% against off. Each
way's median over rounds in which they take turns, on one event loop (this
machine's speed drifts within seconds; a gather's time through the pool
is spread too wide, 30 to 55 µs a mem:// write, for the best of a few to
compare a few hundred nanoseconds)."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncfs

from .harness import Row

TARGET = 0.95  # metrics on keep at least this share of the rate with them off
OFF, ON, SDK, TRACED = "metrics off", "metrics on", "SDK, outside a trace", "SDK, inside a trace"


def _otel(on: bool) -> Callable[[], None] | None:
    """Configure OpenTelemetry's SDK with no-op exporters (on), and return
    how to take it away again; None when the SDK is not installed."""
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        return None
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import _internal
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.util._once import Once

    class NoSpans(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class NoMetrics(MetricExporter):
        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(NoSpans()))
    meter_provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(NoMetrics(), 10_000)])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)

    def off() -> None:  # (the API allows one provider per process: reset as OpenTelemetry's tests do)
        tracer_provider.shutdown()
        meter_provider.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
        _internal._METER_PROVIDER, _internal._METER_PROVIDER_SET_ONCE = None, Once()

    return off


def bench_telemetry(paths: list[str], repeat: int) -> list[Row]:
    repeat = max(repeat, 24)  # six rounds each way starts
    cases: dict[str, Callable[[asyncfs.Env], Awaitable[None]]] = {
        f"read_file of {len(paths)} local 4 KiB files, a task each (gather)": lambda env: _gathered(env, paths),
        f"read_file of {len(paths)} local 4 KiB files, one after another": lambda env: _in_turn(env, paths),
        f"stat of {len(paths)} local files, a task each (gather)": lambda env: _stats(env, paths),
        f"write_file of {len(paths)} mem:// files of 4 KiB, a task each (gather)": lambda env: _writes(env, len(paths)),
    }

    async def in_turns() -> dict[str, dict[str, float]]:
        envs = {OFF: asyncfs.Env(metrics=False, own={"mem"}), ON: asyncfs.Env(own={"mem"})}
        times: dict[str, dict[str, list[float]]] = {case: {} for case in cases}
        ways = [OFF, ON, SDK, TRACED]
        for case, run in cases.items():
            for env in envs.values():
                await run(env)  # warm: threads, page cache
            for round_ in range(repeat):
                for way in ways[round_ % len(ways) :] + ways[: round_ % len(ways)]:
                    off = _otel(True) if way in (SDK, TRACED) else None
                    if way in (SDK, TRACED) and off is None:
                        continue
                    env = envs[OFF if way == OFF else ON]
                    gc.collect()  # (collections that the setup of the SDK left due are not timed)
                    start = time.perf_counter()
                    if way == TRACED:
                        await _traced(run, env)
                    else:
                        await run(env)
                    took = time.perf_counter() - start
                    if off is not None:
                        off()
                    times[case].setdefault(way, []).append(took)
        for env in envs.values():
            await env.aclose()
        return {case: {way: statistics.median(t) for way, t in ways_.items()} for case, ways_ in times.items()}

    rows = []
    for case, times in asyncio.run(in_turns()).items():
        row = Row(case, "calls/s", target=f"metrics on, and the SDK outside a trace, ≥ {TARGET:g}× off")
        row.results = {way: len(paths) / seconds for way, seconds in times.items()}
        off = row.results[OFF]
        row.ratio = min(row.results[ON], row.results.get(SDK, row.results[ON])) / off
        row.verdict = ", ".join(f"{way}: {rate / off:.3f}×" for way, rate in row.results.items() if way != OFF)
        if SDK not in row.results:
            row.notes.append("the OpenTelemetry SDK is not installed: its columns are missing")
        rows.append(row)
    return rows


async def _traced(run: Callable[[asyncfs.Env], Awaitable[None]], env: asyncfs.Env) -> None:
    from opentelemetry import trace

    with trace.get_tracer("benchmark").start_as_current_span("request"):
        await run(env)


async def _gathered(env: asyncfs.Env, paths: list[str]) -> None:
    await asyncio.gather(*(env.read_file(p) for p in paths))


async def _in_turn(env: asyncfs.Env, paths: list[str]) -> None:
    for p in paths:
        await env.read_file(p)


async def _stats(env: asyncfs.Env, paths: list[str]) -> None:
    await asyncio.gather(*(env.stat(p) for p in paths))


_DATA = b"x" * 4096


async def _writes(env: asyncfs.Env, count: int) -> None:
    await asyncio.gather(*(env.write_file(f"mem:///bench-telemetry/{i}", _DATA) for i in range(count)))
