"""OpenTelemetry: with a tracer provider set by the application, each call
of an Env inside a trace is a span, child of the caller's, run on its
worker inside that span's context; with a meter provider, the calls, time,
bytes and the pools' gauges reach the application's reader. Read back with the
SDK's in-memory exporter and reader, under asyncio and trio and in a forked
child; and nothing of OpenTelemetry is imported when the application does
not use it."""

from __future__ import annotations

import gc
import multiprocessing
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from support.flaky_store import Flaky, flaky_az

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
async def test_calls_outside_a_trace_start_no_span(anyio_backend: Any, spans: InMemorySpanExporter) -> None:
    """A span costs the SDK 10-15 µs: calls that no trace is waiting for
    (a background prefetch) start none; those of an unsampled trace neither."""
    async with asyncfs.Env(own={"mem"}) as env:
        await env.write_file("mem://quiet", b"1")
        assert await env.read_file("mem://quiet") == b"1"
        async for _ in env.prefetch(["mem://quiet"] * 3):
            pass
        unsampled = trace.NonRecordingSpan(trace.SpanContext(1, 2, is_remote=False))
        with trace.use_span(unsampled):
            await env.read_file("mem://quiet")
    assert spans.get_finished_spans() == ()


@pytest.mark.anyio
async def test_counts_time_bytes_and_pools_reach_the_applications_reader(
    anyio_backend: Any, reader: InMemoryMetricReader
) -> None:
    async with asyncfs.Env(own={"mem"}) as env:
        for i in range(5):
            await env.write_file(f"mem://{i}", b"x" * 10)
            await env.read_file(f"mem://{i}")
        with pytest.raises(asyncfs.NotFoundError):
            await env.read_file("mem://none")
        own = env.metrics()
        points = _points(reader)

    def by_call(name: str) -> dict[tuple[str, str | None], Any]:
        return {
            (p.attributes["asyncfs.operation"], p.attributes.get("error.type")): p.value
            for p in points[name]
            if p.attributes["asyncfs.scheme"] == "mem"
        }

    # summed over the process's Envs: this one's calls at least, and the same sums as its own counts
    calls = by_call("asyncfs.client.operations")
    assert calls["read_file", None] >= 5 and calls["write_file", None] >= 5 and calls["read_file", "NOT_FOUND"] >= 1
    read = own.operation("mem", "read_file")
    assert read is not None
    seconds = by_call("asyncfs.client.operation.time")
    assert seconds["read_file", None] >= read.seconds > 0
    moved = by_call("asyncfs.client.operation.bytes")
    assert moved["read_file", None] >= 50 and moved["write_file", None] >= 50
    assert {p.attributes["asyncfs.pool.kind"] for p in points["asyncfs.pool.threads"]} == {"local", "network"}
    assert {"asyncfs.pool.in_flight", "asyncfs.pool.stuck"} <= set(points)


def test_the_counters_keep_the_calls_of_an_env_that_is_gone(reader: InMemoryMetricReader) -> None:
    """A counter never goes down: an Env collected takes its counts into
    the process's totals."""

    def reads() -> int:
        return sum(
            p.value
            for p in _points(reader).get("asyncfs.client.operations", [])
            if p.attributes["asyncfs.operation"] == "read_file" and p.attributes["asyncfs.scheme"] == "mem"
        )

    env = asyncfs.Env(own={"mem"})
    anyio.run(env.write_file, "mem://a", b"1")
    before = reads()
    anyio.run(env.read_file, "mem://a")
    env.close()
    assert reads() == before + 1
    del env
    gc.collect()
    assert reads() == before + 1


def _traced_child(results: Any) -> None:
    """In a forked child: the parent's provider, the parent's Env, spans
    of the child's calls."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]

    async def work() -> None:
        with trace.get_tracer("test").start_as_current_span("child"):
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
        with trace.get_tracer("test").start_as_current_span("parent"):
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
    assert names == ["child", "read_file mem", "write_file mem"]
    assert [span.name for span in spans.get_finished_spans()] == ["write_file mem", "parent"]  # the parent's own


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


flaky = pytest.fixture(flaky_az, name="flaky")


def test_a_stores_requests_reach_the_applications_reader(flaky: Flaky, reader: InMemoryMetricReader) -> None:
    registry = asyncfs.Registry()
    flaky.az(registry)

    async def stat_a_missing_blob() -> None:
        async with asyncfs.Env(registry=registry) as env:
            with pytest.raises(asyncfs.NotFoundError):
                await env.stat("az://cont/blob")

    anyio.run(stat_a_missing_blob)
    gc.collect()  # (the Env is gone: its counts stay in the totals)
    points = _points(reader)

    def of_az(name: str) -> dict[str | None, int]:
        return {
            p.attributes.get("network.io.direction"): p.value
            for p in points[name]
            if p.attributes["asyncfs.scheme"] == "az"
        }

    assert of_az("asyncfs.store.requests")[None] >= 5
    assert of_az("asyncfs.store.retries")[None] >= 2
    assert of_az("asyncfs.store.connections")[None] >= 1
    moved = of_az("asyncfs.store.io")
    assert moved["transmit"] > 0 and moved["receive"] > 0


def test_a_stores_requests_are_spans_under_the_call(flaky: Flaky, spans: InMemorySpanExporter) -> None:
    """Each try of each HTTP request a traced call made is a CLIENT span
    under the call's, with the HTTP client conventions' attributes; a
    SAS token in the URL never reaches an attribute."""
    registry = asyncfs.Registry()
    flaky.az(registry, tenant_id="", client_secret="", sas_token="sv=2024&sig=SECRET-SIGNATURE")
    tracer = trace.get_tracer("test")

    async def stat_a_missing_blob() -> None:
        async with asyncfs.Env(registry=registry) as env:
            with tracer.start_as_current_span("request"), pytest.raises(asyncfs.NotFoundError):
                await env.stat("az://cont/blob")

    anyio.run(stat_a_missing_blob)
    finished = spans.get_finished_spans()
    [call] = [span for span in finished if span.name == "stat az"]
    tries = sorted(
        (span for span in finished if span.parent is not None and span.parent.span_id == call.context.span_id),
        key=lambda span: span.start_time or 0,
    )
    heads = [span for span in tries if span.name == "HEAD"]
    assert [span.attributes["http.response.status_code"] for span in heads] == [503, 503, 404]  # type: ignore[index]
    assert [span.attributes.get("http.request.resend_count") for span in heads] == [None, 1, 2]  # type: ignore[union-attr]
    for span in tries:
        assert span.kind == trace.SpanKind.CLIENT
        attributes = span.attributes or {}
        assert attributes["server.address"] == "127.0.0.1"
        assert str(attributes["url.full"]).startswith(f"{flaky.url}/acct/cont")
        assert "SECRET" not in str(attributes) and "?" not in str(attributes["url.full"])
        assert span.status.status_code == trace.StatusCode.ERROR  # 503s and 404s all
        assert call.start_time is not None and span.start_time is not None and span.end_time is not None
        assert call.start_time <= span.start_time <= span.end_time
