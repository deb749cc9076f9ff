"""http:// against fsspec's HTTPFileSystem (aiohttp) and obstore's HTTPStore,
all on one nginx started for the run (tests/support/http_servers.py) serving
the same files, with the same in-flight limits."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.support.http_servers import HttpServer, nginx_missing_reason, start_nginx

from .harness import IN_FLIGHT, Row, bounded, optional, started_env
from .parquet_gets import parquet_gets
from .stores import Cpu, in_turns, verdict

MiB = 1 << 20


def bench_http(repeat: int, quick: bool) -> list[Row]:
    reason = nginx_missing_reason()
    if reason is not None:
        return [Row("http (nginx)", "-", notes=[f"skipped: {reason}"])]
    with tempfile.TemporaryDirectory(prefix="asyncfs-http-bench-") as scratch:
        root = Path(scratch) / "www"
        root.mkdir()
        server = start_nginx(root, Path(scratch) / "nginx")
        try:
            return _bench(server, repeat, quick)
        finally:
            server.stop.close()


def _bench(server: HttpServer, repeat: int, quick: bool) -> list[Row]:
    small_count, big_size = (500, 32 * MiB) if quick else (2000, 256 * MiB)
    small = [f"small/{i:05d}" for i in range(small_count)]
    (server.root / "small").mkdir()
    for name in small:
        (server.root / name).write_bytes(b"x" * 4096)
    big = bytes(range(256)) * (big_size // 256)
    (server.root / "big.bin").write_bytes(big)
    env = started_env()
    base = server.url
    fsspec_http = None
    if optional("fsspec") and optional("aiohttp"):
        from fsspec.implementations.http import HTTPFileSystem

        fsspec_http = HTTPFileSystem(asynchronous=True, skip_instance_cache=True)
    obstore = optional("obstore")
    store = None
    if obstore:
        from obstore.store import HTTPStore

        store = HTTPStore.from_url(base, client_options={"allow_http": True})
    rows: list[Row] = []
    cpu = Cpu()

    async def fsspec_session(make: Callable[[], Awaitable[Any]]) -> Any:
        assert fsspec_http is not None
        session = await fsspec_http.set_session()  # made on the loop that uses it
        try:
            return await make()
        finally:
            await session.close()
            fsspec_http._session = None

    # ---- GET many small files ------------------------------------------------------
    row = Row(f"http GET {small_count} × 4 KiB, {IN_FLIGHT} in flight", "files/s")
    gets: dict[str, Callable[[], Awaitable[Any]]] = {
        "asyncfs": lambda: bounded(lambda k: env.read_file(f"{base}/{k}"), small)
    }
    if fsspec_http is not None:
        gets["fsspec HTTPFileSystem"] = lambda: fsspec_session(
            lambda: bounded(lambda k: fsspec_http._cat_file(f"{base}/{k}"), small)
        )
    if store is not None:

        async def obs_get(key: str) -> bytes:
            return bytes(await (await obstore.get_async(store, key)).bytes_async())

        gets["obstore HTTPStore"] = lambda: bounded(obs_get, small)
    times = in_turns(gets, repeat, cpu=cpu, requests=small_count)
    row.results = {name: small_count / seconds for name, seconds in times.items()}
    cpu.note(row)
    row.notes.append(f"one task per request in {IN_FLIGHT} lanes; best of {repeat} rounds, the clients in turn")
    row.target = "≥ 1.5× the faster peer"
    verdict(row, 1.5)
    rows.append(row)

    # ---- one big file, whole -----------------------------------------------------------
    whole = Row(f"http read {big_size // MiB} MiB whole", "MiB/s")
    reads: dict[str, Callable[[], Awaitable[Any]]] = {"asyncfs": lambda: env.read_file(f"{base}/big.bin")}
    if fsspec_http is not None:
        reads["fsspec HTTPFileSystem"] = lambda: fsspec_session(lambda: fsspec_http._cat_file(f"{base}/big.bin"))
    if store is not None:
        reads["obstore HTTPStore"] = lambda: _obstore_whole(obstore, store)
    times = in_turns(reads, repeat)
    whole.results = {name: big_size / MiB / seconds for name, seconds in times.items()}
    whole.target = "≥ 1.0× the faster peer"
    verdict(whole, 1.0)
    rows.append(whole)

    # ---- one big file, in 1 MiB ranges ------------------------------------------------
    ranged = Row(f"http read {big_size // MiB} MiB in 1 MiB ranges, {IN_FLIGHT} in flight", "MiB/s")
    offsets = list(range(0, big_size, MiB))

    async def asyncfs_ranges() -> None:
        f = await env.new_random_access_file(f"{base}/big.bin")
        await bounded(lambda offset: f.read(offset, MiB), offsets)

    ranges: dict[str, Callable[[], Awaitable[Any]]] = {"asyncfs": asyncfs_ranges}
    if fsspec_http is not None:
        ranges["fsspec HTTPFileSystem"] = lambda: fsspec_session(
            lambda: bounded(lambda o: fsspec_http._cat_file(f"{base}/big.bin", start=o, end=o + MiB), offsets)
        )
    if store is not None:
        ranges["obstore HTTPStore"] = lambda: bounded(
            lambda o: obstore.get_range_async(store, "big.bin", start=o, end=o + MiB), offsets
        )
    times = in_turns(ranges, repeat)
    ranged.results = {name: big_size / MiB / seconds for name, seconds in times.items()}
    ranged.target = "≥ 1.0× the faster peer"
    verdict(ranged, 1.0)
    rows.append(ranged)
    rows.append(_parquet_gets(server, quick))
    env.close()
    return rows


def _parquet_gets(server: HttpServer, quick: bool) -> Row:
    def put(data: bytes) -> None:
        (server.root / "table.parquet").write_bytes(data)

    def bridge(endpoint: str, options: dict[str, Any]) -> tuple[Any, str]:
        import fsspec

        url = f"{endpoint}/table.parquet".removeprefix("http://")
        return fsspec.filesystem("asyncfs+http", skip_instance_cache=True, **options), f"asyncfs+http://{url}"

    return parquet_gets("http", server.url, put, bridge, quick)


async def _obstore_whole(obstore: Any, store: Any) -> bytes:
    return bytes(await (await obstore.get_async(store, "big.bin")).bytes_async())
