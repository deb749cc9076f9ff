"""OpenTelemetry: with a tracer provider set by the application, each call
of an Env is a span, child of the caller's, run on its worker inside that
span's context; with a meter provider, the duration histogram, the bytes
and the pools' gauges reach the application's reader. Read back with the
SDK's in-memory exporter and reader, under asyncio and trio and in a forked
child; and nothing of OpenTelemetry is imported when the application does
not use it."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import asyncfs

trace = pytest.importorskip("opentelemetry.trace", reason="needs opentelemetry-api (the test extras have it)")
metrics = pytest.importorskip("opentelemetry.metrics", reason="needs opentelemetry-api (the test extras have it)")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="needs opentelemetry-sdk (the test extras have it)")
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402 (after the skip)
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.util._once import Once  # noqa: E402


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


def _unset_providers() -> None:
    """Back to no provider, as OpenTelemetry's own tests do: the API lets an
    application set its providers once, and the rest of the suite must not
    run traced."""
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    from opentelemetry.metrics import _internal  # noqa: PLC0415

    _internal._METER_PROVIDER = None
    _internal._METER_PROVIDER_SET_ONCE = Once()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    _unset_providers()


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    metrics.set_meter_provider(provider)
    yield found
    provider.shutdown()
    _unset_providers()


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


@pytest.mark.anyio
async def test_each_call_is_a_span_under_the_callers(anyio_backend: Any, spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    async with asyncfs.Env(own={"mem"}) as env:
        await env.write_file("mem://t/a", b"abc")
        spans.clear()
        with tracer.start_as_current_span("caller") as caller:
            assert await env.read_file("mem://t/a") == b"abc"
            with pytest.raises(asyncfs.NotFoundError):
                await env.stat("mem://t/none")
            await env.write_file("mem://t/b", b"12345")
    found = {span.name: span for span in spans.get_finished_spans()}
    assert set(found) == {"caller", "read_file mem", "stat mem", "write_file mem"}
    caller_id = caller.get_span_context().span_id
    for name in ("read_file mem", "stat mem", "write_file mem"):
        span = found[name]
        assert span.parent is not None and span.parent.span_id == caller_id
        assert span.kind == trace.SpanKind.CLIENT
        assert span.attributes is not None and span.attributes["asyncfs.scheme"] == "mem"
    read = found["read_file mem"].attributes
    assert read is not None and read["file.path"] == "mem://t/a" and read["asyncfs.bytes"] == 3
    written = found["write_file mem"].attributes
    assert written is not None and written["asyncfs.bytes"] == 5
    failed = found["stat mem"]
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes["error.type"] == "NOT_FOUND"
    assert [event.name for event in failed.events] == ["exception"]


@pytest.mark.anyio
async def test_work_on_a_worker_runs_in_the_callers_context(anyio_backend: Any, spans: InMemorySpanExporter) -> None:
    """What runs on the pool's threads sees the span of the call that sent
    it there: a span it starts is that span's child."""
    tracer = trace.get_tracer("test")

    def on_the_worker() -> tuple[int, int]:
        with tracer.start_as_current_span("inside") as inside:
            return trace.get_current_span().get_span_context().span_id, inside.get_span_context().span_id

    async with asyncfs.Env(own={"mem"}) as env:
        fs = env.filesystem("mem://")
        with tracer.start_as_current_span("caller") as caller:
            current, inside_id = await fs.run(on_the_worker, mutating=False)
    by_name = {span.name: span for span in spans.get_finished_spans()}
    assert by_name["inside"].parent is not None
    assert by_name["inside"].parent.span_id == caller.get_span_context().span_id
    assert current == inside_id


@pytest.mark.anyio
async def test_durations_bytes_and_pools_reach_the_applications_reader(
    anyio_backend: Any, reader: InMemoryMetricReader
) -> None:
    async with asyncfs.Env(own={"mem"}) as env:
        for i in range(5):
            await env.write_file(f"mem://{i}", b"x" * 10)
            await env.read_file(f"mem://{i}")
        with pytest.raises(asyncfs.NotFoundError):
            await env.read_file("mem://none")
        points = _points(reader)
    durations = {
        (p.attributes["asyncfs.operation"], p.attributes.get("error.type")): p
        for p in points["asyncfs.client.operation.duration"]
        if p.attributes["asyncfs.scheme"] == "mem"
    }
    assert durations["read_file", None].count == 5 and durations["write_file", None].count == 5
    assert durations["read_file", "NOT_FOUND"].count == 1
    assert all(0 < p.sum < 5 for p in durations.values())
    moved = {
        p.attributes["asyncfs.operation"]: p.value
        for p in points["asyncfs.client.operation.bytes"]
        if p.attributes["asyncfs.scheme"] == "mem"
    }
    assert moved["read_file"] >= 50 and moved["write_file"] >= 50  # (summed over the process's live Envs)
    assert {p.attributes["asyncfs.pool.kind"] for p in points["asyncfs.pool.threads"]} == {"local", "network"}
    assert {"asyncfs.pool.in_flight", "asyncfs.pool.stuck"} <= set(points)


def _traced_child(results: Any) -> None:
    """In a forked child: the parent's provider, the parent's Env, spans
    of the child's calls."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]

    async def work() -> None:
        await _forked_env.write_file("mem://child", b"from the child")
        await _forked_env.read_file("mem://child")

    anyio.run(work)
    results.put(sorted(span.name for span in exporter.get_finished_spans()))


_forked_env: asyncfs.Env


@pytest.mark.skipif(sys.platform != "linux", reason="fork is Linux's here")
def test_a_forked_child_traces_its_calls(spans: InMemorySpanExporter) -> None:
    global _forked_env
    _forked_env = asyncfs.Env(own={"mem"})
    try:
        anyio.run(_forked_env.write_file, "mem://parent", b"1")
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=_traced_child, args=(results,))
        child.start()
        names = results.get(timeout=60)
        child.join(60)
    finally:
        _forked_env.close()
    assert child.exitcode == 0
    assert names == ["read_file mem", "write_file mem"]
    assert [span.name for span in spans.get_finished_spans()] == ["write_file mem"]  # the parent's own


def test_nothing_of_opentelemetry_is_imported_without_it() -> None:
    code = (
        "import sys, anyio, asyncfs\n"
        "async def main():\n"
        "    async with asyncfs.Env() as env:\n"
        "        await env.write_file('mem://x', b'1')\n"
        "        assert await env.read_file('mem://x') == b'1'\n"
        "anyio.run(main)\n"
        "print(sorted(name for name in sys.modules if name.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
