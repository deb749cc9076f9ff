"""asyncfs+s3 inside the tools that glob a dataset and then ask about each
file, against s3fs, both on one Ceph gateway started for the run: a
DuckDB hive-partitioned query, ``pq.read_table(..., filters=)``, the
requests ``info``/``size``/``modified`` make after a glob (counted on the
wire), and the threads ten bridge filesystems hold."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.support.ceph_gateway import Gateway, missing_reason, start_gateway
from tests.support.fault_proxy import FaultProxy

from .harness import Row, optional
from .s3_bench import bridge_s3

FOLDER = "stacks"


def bench_stacks(repeat: int, quick: bool) -> list[Row]:
    reason = missing_reason()
    if reason is not None:
        return [Row("stacks (Ceph gateway)", "-", notes=[f"skipped: {reason}"])]
    if not optional("pyarrow"):
        return [Row("stacks", "-", notes=["skipped: pyarrow is not installed"])]
    gw = start_gateway()
    try:
        return _bench(gw, repeat, quick)
    finally:
        gw.stop()


def _s3fs(endpoint: str, gw: Gateway) -> Any:
    s3fs = optional("s3fs")
    return s3fs.S3FileSystem(
        key=gw.access_key,
        secret=gw.secret_key,
        endpoint_url=endpoint,
        client_kwargs={"region_name": gw.region},
        skip_instance_cache=True,
    )


def _clients(endpoint: str, gw: Gateway) -> dict[str, Callable[[], Any]]:
    """Each client's maker: a fresh filesystem (cold caches) per use."""
    makers: dict[str, Callable[[], Any]] = {"asyncfs": lambda: bridge_s3(gw, endpoint)}
    if optional("s3fs"):
        makers["s3fs"] = lambda: _s3fs(endpoint, gw)
    return makers


def _dataset(fs: Any, bucket: str, years: int, months: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for year in range(2020, 2020 + years):
        for month in range(1, months + 1):
            table = pa.table({"v": list(range(1000)), "w": [float(year * 100 + month)] * 1000})
            sink = io.BytesIO()
            pq.write_table(table, sink)
            fs.pipe_file(f"{bucket}/{FOLDER}/year={year}/month={month}/part-0.parquet", sink.getvalue())


def _timed(makers: dict[str, Callable[[], Any]], run: Callable[[Any], object], repeat: int) -> dict[str, float]:
    """Each client's best time of run(a fresh filesystem), taking turns."""
    times: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(repeat):
        for name, make in makers.items():
            fs = make()
            began = time.perf_counter()
            run(fs)
            times[name].append(time.perf_counter() - began)
    return {name: min(seconds) for name, seconds in times.items()}


def _row(work: str, times: dict[str, float], target: float, files: int) -> Row:
    row = Row(work, "queries/s", {name: 1 / seconds for name, seconds in times.items()}, target=f"≥ {target:.1f}× s3fs")
    row.notes.append(f"{files} files; each query on a fresh filesystem (cold listing cache)")
    if "s3fs" in row.results:
        row.ratio = row.results["asyncfs"] / row.results["s3fs"]
        row.verdict = f"{row.ratio:.2f}× s3fs ({'met' if row.ratio >= target else 'missed'})"
    else:
        row.verdict = "s3fs not installed"
    return row


def _bench(gw: Gateway, repeat: int, quick: bool) -> list[Row]:
    import pyarrow.parquet as pq

    years, months = (2, 6) if quick else (4, 12)
    files = years * months
    bucket = f"stacks-{uuid.uuid4().hex[:8]}"
    writer = bridge_s3(gw, gw.endpoint)
    writer.mkdir(bucket)
    _dataset(writer, bucket, years, months)
    makers = _clients(gw.endpoint, gw)
    rows: list[Row] = []

    duckdb = optional("duckdb")
    if duckdb:
        protocol = {"asyncfs": "asyncfs+s3", "s3fs": "s3"}

        def query(fs: Any) -> object:
            name = "asyncfs" if type(fs).__module__.startswith("asyncfs") else "s3fs"
            con = duckdb.connect()
            con.register_filesystem(fs)
            found = con.execute(
                f"SELECT count(*), sum(v) FROM read_parquet('{protocol[name]}://{bucket}/{FOLDER}/**/*.parquet', "
                f"hive_partitioning = true) WHERE year = 2021"
            ).fetchone()
            con.close()
            assert found == (months * 1000, months * 499_500), found
            return found

        rows.append(_row("DuckDB hive query on s3", _timed(makers, query, repeat), 1.0, files))
    else:
        rows.append(Row("DuckDB hive query on s3", "-", notes=["skipped: duckdb is not installed"]))

    def filtered(fs: Any) -> object:
        table = pq.read_table(f"{bucket}/{FOLDER}", filesystem=fs, filters=[("year", "=", 2021)])
        assert table.num_rows == months * 1000, table.num_rows
        return table

    rows.append(_row("pq.read_table(filters=) on s3", _timed(makers, filtered, repeat), 1.0, files))
    rows.append(_requests_after_glob(gw, bucket, files))
    rows.append(_threads(gw))
    return rows


def _requests_after_glob(gw: Gateway, bucket: str, files: int) -> Row:
    """The requests info, size and modified of every globbed file make,
    counted at a proxy in front of the gateway."""
    proxy = FaultProxy(gw.endpoint)
    counts: dict[str, float] = {}
    try:
        for name, make in _clients(proxy.endpoint, gw).items():
            fs = make()
            found = fs.glob(f"{bucket}/{FOLDER}/**/*.parquet")
            assert len(found) == files, len(found)
            proxy.inject([])
            for path in found:
                fs.info(path)
                fs.size(path)
                fs.modified(path)
            counts[name] = len(proxy.requests)
    finally:
        proxy.close()
    row = Row("requests for info+size+modified after a glob", "requests", counts, target="0 (asyncfs)")
    row.notes.append(f"{files} files, 3 calls each, counted at a proxy; lower is better")
    row.ratio = counts["asyncfs"]
    row.verdict = f"asyncfs {counts['asyncfs']:.0f} ({'met' if counts['asyncfs'] == 0 else 'missed'})"
    return row


_THREADS = """
import os, sys
from asyncfs.fsspec import filesystem_class
endpoint, key, secret, region, n = sys.argv[1:6]
base = len(os.listdir("/proc/self/task"))
made = [filesystem_class("s3")(endpoint=endpoint, access_key_id=key, secret_access_key=secret, region=region,
        path_style=1, connect_timeout_ms=1000 + i) for i in range(int(n))]
for fs in made:
    fs.ls("")
print(len(os.listdir("/proc/self/task")) - base)
"""


def _threads(gw: Gateway) -> Row:
    """Threads a fresh process holds after n bridge filesystems differing
    only in connect_timeout_ms each listed the buckets."""
    counts: dict[str, float] = {}
    for n in (1, 10):
        done = subprocess.run(
            [sys.executable, "-c", _THREADS, gw.endpoint, gw.access_key, gw.secret_key, gw.region, str(n)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        counts[f"{n} filesystem{'s' if n > 1 else ''}"] = float(done.stdout.split()[-1])
    row = Row("threads of asyncfs+s3 filesystems", "threads", counts, target="10 ≤ 1")
    row.notes.append("a fresh process each; filesystems differ only in connect_timeout_ms; lower is better")
    ten, one = counts["10 filesystems"], counts["1 filesystem"]
    row.ratio = ten / one
    row.verdict = f"10: {ten:.0f}, 1: {one:.0f} ({'met' if ten <= one else 'missed'})"
    return row
