"""The fsspec bridge the way its users call it (synchronous fsspec and
pandas), against fsspec's LocalFileSystem and, on the Ceph gateway, s3fs:
same data, same run."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from tests.support.ceph_gateway import Gateway, missing_reason, start_gateway

from .harness import Row, best, optional

BUCKET = "asyncfs-bench-fsspec"
CSV = "".join(f"{i},{i * 2},name {i}\n" for i in range(20))


def _ratio(row: Row, target: float, peer: str) -> None:
    if peer not in row.results:
        row.verdict = f"{peer} not installed"
        return
    ratio = row.ratio = row.results["asyncfs"] / row.results[peer]
    row.verdict = f"{ratio:.2f}× {peer} ({'met' if ratio >= target else 'missed'})"


def _csv_rows(pd: Any, urls: list[str], repeat: int, count: int, options: dict[str, Any]) -> float:
    def run() -> None:
        for url in urls:
            pd.read_csv(url, header=None, storage_options=options or None)

    return count / best(run, repeat)


def _parse_only(pd: Any, paths: list[str], repeat: int) -> float:
    """pandas parsing the files' bytes already in memory: what any
    filesystem's read_csv rate is bounded by."""
    blobs = [Path(path).read_bytes() for path in paths]

    def run() -> None:
        for data in blobs:
            pd.read_csv(io.BytesIO(data), header=None)

    return len(paths) / best(run, repeat)


def _cat_then_parse(pd: Any, fs: Any, paths: list[str], repeat: int) -> float:
    def run() -> None:
        for data in fs.cat(paths).values():
            pd.read_csv(io.BytesIO(data), header=None)

    return len(paths) / best(run, repeat)


def _writes(pd: Any, folder: Path, count: int, repeat: int) -> Row:
    """pandas to_csv of small frames, each file replaced: through the bridge
    (atomic: a new file renamed over the old), fsspec's LocalFileSystem (in
    place), and pandas writing a plain path then os.replace (what an atomic
    replace costs without fsspec)."""
    frame = pd.read_csv(io.StringIO(CSV), header=None)
    for name in ("asyncfs", "local", "plain"):
        (folder / name).mkdir(parents=True, exist_ok=True)

    def to_csv(prefix: str, name: str) -> None:
        for i in range(count):
            frame.to_csv(f"{prefix}{folder}/{name}/f{i:05d}.csv", index=False)

    def plain() -> None:
        for i in range(count):
            path = folder / "plain" / f"f{i:05d}.csv"
            staged = path.with_suffix(".tmp")
            frame.to_csv(staged, index=False)
            os.replace(staged, path)

    row = Row(f"pandas to_csv of {count} small files, each replaced", "files/s")
    row.results["asyncfs (atomic)"] = count / best(lambda: to_csv("asyncfs+file://", "asyncfs"), repeat)
    # pandas hands file:// URLs to urllib; local:// is fsspec's LocalFileSystem
    row.results["fsspec local (in place)"] = count / best(lambda: to_csv("local://", "local"), repeat)
    row.results["plain path + os.replace"] = count / best(plain, repeat)
    ours = row.results["asyncfs (atomic)"]
    row.verdict = (
        f"{ours / row.results['fsspec local (in place)']:.2f}× fsspec local, "
        f"{ours / row.results['plain path + os.replace']:.2f}× a plain path + os.replace"
    )
    return row


def bench_fsspec(data: Path, repeat: int, quick: bool) -> list[Row]:
    fsspec = optional("fsspec")
    pd = optional("pandas")
    if fsspec is None or pd is None:
        return [Row("fsspec bridge", "-", notes=["skipped: fsspec and pandas are needed"])]
    from fsspec.implementations.local import LocalFileSystem

    from asyncfs.fsspec import filesystem_class

    count, listed = (200, 2000) if quick else (1000, 10_000)
    csv_dir = data / f"csv-{count}"
    csv_dir.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        path = csv_dir / f"part-{i:05d}.csv"
        if not path.exists():
            path.write_text(CSV)
    list_dir = data / f"ls-{listed}"
    if not (list_dir / ".complete").exists():
        list_dir.mkdir(parents=True, exist_ok=True)
        for i in range(listed):
            (list_dir / f"f{i:05d}").write_bytes(b"x" * (i % 100))
        (list_dir / ".complete").touch()
    paths = sorted(str(p) for p in csv_dir.iterdir())
    bridge = filesystem_class("file")()
    local = LocalFileSystem()
    rows = []

    row = Row(f"pandas read_csv of {count} small files, one by one", "files/s", target="≥ 2× fsspec local")
    row.results["asyncfs"] = _csv_rows(pd, [f"asyncfs+file://{p}" for p in paths], repeat, count, {})
    row.results["fsspec local"] = _csv_rows(pd, [f"file://{p}" for p in paths], repeat, count, {})
    row.results["plain path"] = _csv_rows(pd, paths, repeat, count, {})
    row.results["parse only (bytes in memory)"] = _parse_only(pd, paths, repeat)
    _ratio(row, 2.0, "fsspec local")
    ceiling = row.results["parse only (bytes in memory)"] / row.results["fsspec local"]
    row.verdict += f"; parsing alone, with no filesystem at all, is {ceiling:.2f}× fsspec local"
    rows.append(row)

    row = Row(f"fs.cat({count} paths) then read_csv of each", "files/s", target="≥ 2× fsspec local")
    row.results["asyncfs"] = _cat_then_parse(pd, bridge, paths, repeat)
    row.results["fsspec local"] = _cat_then_parse(pd, local, paths, repeat)
    _ratio(row, 2.0, "fsspec local")
    rows.append(row)

    row = Row(f"fs.cat({count} paths) of {len(CSV)} B files", "files/s")
    row.results["asyncfs"] = count / best(lambda: bridge.cat(paths), repeat)
    row.results["fsspec local"] = count / best(lambda: local.cat(paths), repeat)
    _ratio(row, 1.0, "fsspec local")
    rows.append(row)

    row = Row(f"fs.ls(dir, detail=True), {listed} files", "entries/s", target="≥ 1.0× fsspec local")
    row.results["asyncfs"] = listed / best(lambda: bridge.ls(str(list_dir), detail=True), repeat)
    row.results["fsspec local"] = listed / best(lambda: local.ls(str(list_dir), detail=True), repeat)
    _ratio(row, 1.0, "fsspec local")
    rows.append(row)

    # what pyarrow's FSSpecHandler and Dask ask per file, from a thread with no loop
    row = Row(f"fs.info, fs.exists, fs.cat_file of {count} files, one call at a time", "calls/s")
    for name, fs in (("asyncfs", bridge), ("fsspec local", local)):
        for op in ("info", "exists", "cat_file"):
            method = getattr(fs, op)
            row.results[f"{name} {op}"] = count / best(lambda method=method: [method(p) for p in paths], repeat)
    row.verdict = ", ".join(
        f"{op} {row.results[f'asyncfs {op}'] / row.results[f'fsspec local {op}']:.2f}×"
        for op in ("info", "exists", "cat_file")
    )
    rows.append(row)

    rows.append(_writes(pd, data / f"written-{count}", count, repeat))

    reason = missing_reason()
    if reason is not None:
        rows.append(Row("fsspec bridge on s3 (Ceph gateway)", "-", notes=[f"skipped: {reason}"]))
        return rows
    gw = start_gateway()
    try:
        rows += _bench_s3(gw, pd, repeat, count)
    finally:
        gw.stop()
    return rows


def _bench_s3(gw: Gateway, pd: Any, repeat: int, count: int) -> list[Row]:
    from asyncfs.fsspec import filesystem_class

    options = {
        "endpoint": gw.endpoint,
        "access_key_id": gw.access_key,
        "secret_access_key": gw.secret_key,
        "region": gw.region,
        "path_style": 1,
    }
    bridge = filesystem_class("s3")(**options)
    bridge.mkdir(BUCKET)
    keys = [f"{BUCKET}/csv/part-{i:05d}.csv" for i in range(count)]
    bridge.pipe({key: CSV.encode() for key in keys})
    s3fs = optional("s3fs")
    peer_options = {"key": gw.access_key, "secret": gw.secret_key, "endpoint_url": gw.endpoint}
    rows = []

    row = Row(f"s3: pandas read_csv of {count} small objects, one by one", "files/s", target="≥ 2× s3fs")
    row.results["asyncfs"] = _csv_rows(pd, [f"asyncfs+s3://{k}" for k in keys], repeat, count, options)
    if s3fs is not None:
        row.results["s3fs"] = _csv_rows(pd, [f"s3://{k}" for k in keys], repeat, count, peer_options)
    _ratio(row, 2.0, "s3fs")
    rows.append(row)

    row = Row(f"s3: fs.cat({count} keys)", "files/s", target="≥ 2× s3fs")
    row.results["asyncfs"] = count / best(lambda: bridge.cat(keys), repeat)
    if s3fs is not None:
        peer = s3fs.S3FileSystem(**peer_options, skip_instance_cache=True)
        row.results["s3fs"] = count / best(lambda: peer.cat(keys), repeat)
    _ratio(row, 2.0, "s3fs")
    rows.append(row)
    return rows
