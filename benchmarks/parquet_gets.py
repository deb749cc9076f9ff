"""The GETs pyarrow's Parquet reads make through the fsspec bridge (footer,
then column chunks, then the same again from a second open), counted at a
proxy in front of the store, with the engine's block cache off and on: on,
at most one GET per distinct block. One measure for every remote store
(http_bench.py, s3_bench.py)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from .harness import Row, optional

BLOCK = 1 << 20

# (proxy endpoint, the bridge's options) -> (a bridge filesystem, the file's URL through the proxy)
Bridge = Callable[[str, dict[str, Any]], tuple[Any, str]]


def parquet_gets(store: str, upstream: str, put: Callable[[bytes], None], bridge: Bridge, quick: bool) -> Row:
    row = Row(f"{store} parquet through the bridge: footer, then columns, twice", "GETs")
    if optional("pyarrow") is None or optional("fsspec") is None:
        row.verdict = "pyarrow or fsspec not installed"
        return row
    import pyarrow as pa
    from pyarrow import parquet

    import asyncfs.fsspec  # noqa: F401 (the bridge's protocols)
    from tests.support.fault_proxy import FaultProxy

    rows = 200_000 if quick else 2_000_000
    table = pa.table({f"c{i}": pa.array(range(i, rows + i), pa.int64()) for i in range(4)})
    sink = io.BytesIO()
    parquet.write_table(table, sink, row_group_size=rows // 8)
    size = len(sink.getvalue())
    put(sink.getvalue())
    opens: dict[str, int] = {}  # the opens' GETs of the first read_ahead bytes
    for label, options in (("cache off", {}), ("cache on", {"block_cache_bytes": 256 << 20, "block_size": BLOCK})):
        proxy = FaultProxy(upstream)
        try:
            fs, url = bridge(proxy.endpoint, options)
            for _ in range(2):
                with fs.open(url, "rb") as f:
                    parquet.read_table(f, columns=["c1", "c3"])
            heads = [head.lower() for head in proxy.heads if head.startswith(b"GET")]
            row.results[label] = len(heads)
            opens[label] = sum(b"range:" not in head or b"range: bytes=0-65535\r" in head for head in heads)
        finally:
            proxy.close()
    distinct = -(-size // BLOCK)
    beyond = row.results["cache on"] - opens["cache on"]
    row.notes.append(
        f"{size / 2**20:.0f} MB file, {distinct} blocks of 1 MiB; requests counted at a proxy; "
        f"of them the two opens' GETs of their first bytes: {opens['cache off']} without the cache, "
        f"{opens['cache on']} with it"
    )
    row.target = "cache on: at most one GET per distinct block"
    met = beyond <= distinct
    row.verdict = f"{beyond:.0f} GETs of blocks for {distinct} blocks ({'met' if met else 'missed'})"
    return row
