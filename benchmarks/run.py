"""asyncfs benchmarks against its peers, all measured in the same run.

    python -m benchmarks                # everything, from the repository's root
    python -m benchmarks --quick        # smaller data, for a smoke test

Prints one table and writes it to benchmarks/results/latest.md and .json.
Each figure is the best of --repeat passes (warm page cache); with --runs N
the whole selection runs N times and the table gives each row's median run
(`--only s3 --runs 3`: the s3 rows as medians of three runs). Compare ratios
within one run, never absolute numbers across machines. Peers that are not
installed are reported as such. Each suite is a module of this package
(local_bench, latency_bench, records_bench, responsiveness, telemetry_bench, s3_bench,
gs_bench, az_bench, http_bench, fsspec_bench, aiofiles_bench); this one runs the selected ones and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import asyncfs

from . import responsiveness
from .aiofiles_bench import bench_aiofiles
from .az_bench import bench_az
from .datasets import make_big_file, make_lines, make_small_files, make_tfrecords, make_tree
from .fsspec_bench import bench_fsspec
from .gs_bench import bench_gs
from .harness import Row, median_rows, table
from .http_bench import bench_http
from .latency_bench import bench_latency
from .local_bench import bench_big_file, bench_exists, bench_glob, bench_stat
from .records_bench import bench_lines, bench_prefetch, bench_prefetch_local, bench_tfrecord
from .s3_bench import bench_s3
from .stacks_bench import bench_stacks
from .telemetry_bench import bench_telemetry

RESULTS = Path(__file__).parent / "results"


# ---- output --------------------------------------------------------------------------


# The areas of the table, in its order: each selection's rows go under one.
LOCAL, POOL, PATHS, STREAMS, PREFETCH = (
    "Local files, one call per file",
    "The pool as services call it",
    "Many paths: glob, exists, stat",
    "Big files, lines and records",
    "Prefetch",
)


def measure(only: set[str], data: Path, repeat: int, quick: bool) -> list[Row]:
    """One run of the rows selected by only, each under its area."""
    big_size = (64 if quick else 1024) << 20
    dirs, files = (100, 20) if quick else (1000, 100)
    rows: list[Row] = []

    def add(area: str, *new: Row) -> None:
        for row in new:
            row.area = area
        rows.extend(new)

    if "small" in only:
        add(LOCAL, *responsiveness.bench_small_files(make_small_files(data / "small", 2000, 4096), repeat))
    if "telemetry" in only:
        add(LOCAL, *bench_telemetry(make_small_files(data / "small", 2000, 4096), repeat))
    if "import" in only:
        add(POOL, responsiveness.bench_import())
    if "pool" in only:
        reads = make_small_files(data / "load", 4000, 4096)
        add(POOL, responsiveness.bench_latency_under_load(reads), responsiveness.bench_blocked_call(reads))
        add(POOL, responsiveness.bench_loop_lag(data / "lag"), responsiveness.bench_contention(reads[:2000], repeat))
    if "glob" in only or "exists" in only or "stat" in only:
        make_tree(data / "tree", dirs, files)
    if "glob" in only:
        add(PATHS, bench_glob(data / "tree", dirs, files, repeat))
    if "exists" in only:
        add(PATHS, bench_exists(data / "tree", dirs, files, 1000 if quick else 10_000, repeat))
    if "stat" in only:
        add(PATHS, bench_stat(data / "tree", dirs, files, 1000 if quick else 10_000, repeat))
    if "streams" in only:
        add(STREAMS, responsiveness.bench_stream_reads(data / "streams"))
    if "big" in only:
        add(STREAMS, *bench_big_file(make_big_file(data / "big.bin", big_size), repeat))
    if "lines" in only:
        add(STREAMS, bench_lines(make_lines(data / "lines.csv", 10_000 if quick else 100_000), repeat))
    if "tfrecord" in only:
        records = 10_000 if quick else 100_000
        add(STREAMS, bench_tfrecord(make_tfrecords(data / "records.tfrecord", records, 1024), records, repeat))
    if "latency" in only:
        add(PREFETCH, *bench_latency(dirs, 10, 1000 if quick else 10_000, 32, 5.0))
    if "prefetch" in only:
        add(PREFETCH, bench_prefetch(200 if quick else 1000, 4096, 32, 5.0, 1 << 20))
        for full_count, size in ((2000, 4096), (20_000, 1024)):
            count = full_count // 10 if quick else full_count
            paths = make_small_files(data / f"prefetch-{count}-{size}", count, size)
            add(PREFETCH, bench_prefetch_local(paths, size, repeat))
    if "s3" in only:
        add("s3:// against obstore, s3fs and boto3 (Ceph)", *bench_s3(repeat, quick))
    if "gs" in only:
        add("gs:// against gcsfs and obstore (fake-gcs-server)", *bench_gs(repeat, quick))
    if "az" in only:
        add("az:// against adlfs and obstore (Azurite)", *bench_az(repeat, quick))
    if "http" in only:
        add("http(s):// against fsspec's HTTP and obstore (nginx)", *bench_http(repeat, quick))
    if "stacks" in only:
        add("Through the stacks users call (datasets, Ray, DuckDB)", *bench_stacks(repeat, quick))
    if "fsspec" in only:
        add("The fsspec bridge", *bench_fsspec(data / "fsspec", repeat, quick))
    if "aiofiles" in only:
        add("The aiofiles drop-in", *bench_aiofiles(data / "aiofiles", repeat, quick))
    return rows


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small data sets, one repeat")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1, help="whole runs; the table gives each row's median run")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "asyncfs-bench"))
    parser.add_argument(
        "--only",
        default="import,small,telemetry,pool,streams,big,glob,exists,stat,latency,lines,tfrecord,prefetch,s3,gs,az,http,stacks,fsspec,aiofiles",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    repeat = 1 if args.quick else args.repeat
    data = Path(args.data) / ("quick" if args.quick else "full")
    data.mkdir(parents=True, exist_ok=True)  # the single-file data sets (lines, records) are written straight into it
    only = set(args.only.split(","))

    started = time.strftime("%Y-%m-%d %H:%M")
    loads = []
    runs = []
    for number in range(1, args.runs + 1):
        load_at_start = _load()
        rows = measure(only, data, repeat, args.quick)
        loads.append(f"at start {load_at_start}, at end {_load()}")
        runs.append(rows)
        if args.runs > 1:  # each run's own table as it ends; the medians come last
            print(f"run {number} of {args.runs} ({time.strftime('%H:%M')}), load average {loads[-1]}\n")
            print(f"{table(rows)}\n", flush=True)

    if args.runs == 1:
        load = f"load average {loads[0]}"
    else:
        load = f"median of {args.runs} runs; load average " + "; ".join(f"run {n} {x}" for n, x in enumerate(loads, 1))
    header = (
        f"asyncfs {asyncfs.__version__} · Python {platform.python_version()} · "
        f"{os.cpu_count()} cores · {platform.machine()} · {started} to {time.strftime('%H:%M')} · {load}"
    )
    rows = median_rows(runs)
    text = f"{header}\n\n{table(rows)}\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    suffix = "-quick" if args.quick else ""
    (RESULTS / f"latest{suffix}.md").write_text(text)
    (RESULTS / f"latest{suffix}.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    if args.quick:
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
