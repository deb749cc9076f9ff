"""gs:// against gcsfs and obstore's GCSStore, all on one fake-gcs-server
started for the run (tests/support/gcs_emulator.py), with the same data and
in-flight limits. The emulator shares the machine's two cores with the
client, so each small-request row also says how much CPU the emulator spent
per request.

obstore speaks only GCS's XML API, of which the emulator serves reads,
HEADs and listings but no uploads (400, "invalid uploadType"), and it
writes "/" in a key as %2F, which the emulator does not decode on the XML
paths: its rows use keys without "/", and it has no PUT rows."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.support.gcs_emulator import GcsEmulator, emulator_missing_reason, start_fake_gcs

from .harness import IN_FLIGHT, Row, bounded, optional, started_env
from .stores import Clients, Cpu, in_turns, verdict

MiB = 1 << 20
BUCKET = "asyncfs-bench"


def bench_gs(repeat: int, quick: bool) -> list[Row]:
    reason = emulator_missing_reason()
    if reason is not None:
        return [Row("gs (fake-gcs-server)", "-", notes=[f"skipped: {reason}"])]
    emulator = start_fake_gcs()
    try:
        with tempfile.TemporaryDirectory(prefix="asyncfs-gs-bench-") as scratch:
            return _bench(emulator, Path(scratch), repeat, quick)
    finally:
        emulator.stop.close()


def _gcsfs(emulator: GcsEmulator) -> Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[Any]] | None:
    """A runner of gcsfs work: a filesystem whose session is made on the
    loop that uses it, and closed there."""
    gcsfs = optional("gcsfs")
    if gcsfs is None:
        return None

    async def run(work: Callable[[Any], Awaitable[Any]]) -> Any:
        fs = gcsfs.GCSFileSystem(
            endpoint_url=emulator.endpoint, token="anon", project="test", asynchronous=True, skip_instance_cache=True
        )
        session = await fs._set_session()
        try:
            return await work(fs)
        finally:
            await session.close()

    return run


def _obstore(emulator: GcsEmulator, scratch: Path) -> Any:
    if optional("obstore") is None:
        return None
    from obstore.store import GCSStore

    # object_store's own way to an emulator: a service account naming it,
    # with OAuth off (its CI's)
    account = scratch / "emulator-account.json"
    account.write_text(
        json.dumps(
            {
                "gcs_base_url": emulator.endpoint,
                "disable_oauth": True,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            }
        )
    )
    return GCSStore(BUCKET, service_account_path=str(account), client_options={"allow_http": True})


def _bench(emulator: GcsEmulator, scratch: Path, repeat: int, quick: bool) -> list[Row]:
    small_count, big_size, list_count = (500, 32 * MiB, 2000) if quick else (2000, 256 * MiB, 10_000)
    env = started_env()
    env.filesystem("gs://").wrapped.set_option("endpoint", emulator.endpoint.encode())
    gcsfs_run = _gcsfs(emulator)
    store = _obstore(emulator, scratch)
    obstore = optional("obstore")
    cpu = Cpu([emulator.pid])
    rows: list[Row] = []

    small = [f"small-{i:05d}" for i in range(small_count)]
    listed = [f"list/k{i:05d}" for i in range(list_count)]
    payload = b"x" * 4096
    emulator.create_bucket(BUCKET)

    async def setup() -> None:
        await bounded(lambda key: env.write_file(f"gs://{BUCKET}/{key}", payload), small + listed)

    asyncio.run(setup())

    def row_of(row: Row, clients: Clients, *, requests: int, units: float, target: float, note: str = "") -> None:
        times = in_turns(clients, repeat, cpu=cpu if requests else None, requests=requests)
        row.results = {name: units / seconds for name, seconds in times.items()}
        if requests:
            cpu.note(row, "emulator")
        row.notes.append(note or f"best of {repeat} rounds, the clients in turn")
        row.target = f"≥ {target}× the faster peer"
        verdict(row, target)
        rows.append(row)

    # ---- GET, prefetch, PUT and HEAD of small objects --------------------------------
    gets: Clients = {"asyncfs": lambda: bounded(env.read_file, [f"gs://{BUCKET}/{k}" for k in small])}
    if store is not None:

        async def obs_get(key: str) -> bytes:
            return bytes(await (await obstore.get_async(store, key)).bytes_async())

        gets["obstore"] = lambda: bounded(obs_get, small)
    if gcsfs_run is not None:
        gets["gcsfs"] = lambda: gcsfs_run(lambda fs: bounded(lambda k: fs._cat_file(f"{BUCKET}/{k}"), small))
    row_of(
        Row(f"gs GET {small_count} × 4 KiB, {IN_FLIGHT} in flight", "objects/s"),
        gets,
        requests=small_count,
        units=small_count,
        target=1.2,
    )

    async def asyncfs_prefetch() -> None:
        async for _ in env.prefetch([f"gs://{BUCKET}/{k}" for k in small], in_flight=IN_FLIGHT):
            pass

    prefetches: Clients = {"asyncfs": asyncfs_prefetch}
    if store is not None:
        prefetches["obstore"] = lambda: bounded(obs_get, small)
    if gcsfs_run is not None:
        prefetches["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._cat([f"{BUCKET}/{k}" for k in small]))
    row_of(
        Row(f"gs prefetch {small_count} × 4 KiB, {IN_FLIGHT} in flight", "objects/s"),
        prefetches,
        requests=small_count,
        units=small_count,
        target=1.2,
        note=f"asyncfs: env.prefetch, in order; obstore: get_async in {IN_FLIGHT} lanes; gcsfs: cat of the list; "
        f"best of {repeat} rounds",
    )

    puts: Clients = {
        "asyncfs": lambda: bounded(lambda k: env.write_file(f"gs://{BUCKET}/put-asyncfs/{k}", payload), small)
    }
    if gcsfs_run is not None:
        puts["gcsfs"] = lambda: gcsfs_run(
            lambda fs: bounded(lambda k: fs._pipe_file(f"{BUCKET}/put-gcsfs/{k}", payload), small)
        )
    row_of(
        Row(f"gs PUT {small_count} × 4 KiB, {IN_FLIGHT} in flight", "objects/s"),
        puts,
        requests=small_count,
        units=small_count,
        target=1.2,
        note=f"best of {repeat} rounds; obstore: the emulator takes no XML uploads",
    )

    heads: Clients = {"asyncfs": lambda: bounded(env.stat, [f"gs://{BUCKET}/{k}" for k in small])}
    if store is not None:
        heads["obstore"] = lambda: bounded(lambda k: obstore.head_async(store, k), small)
    if gcsfs_run is not None:
        heads["gcsfs"] = lambda: gcsfs_run(lambda fs: bounded(lambda k: fs._info(f"{BUCKET}/{k}"), small))
    row_of(
        Row(f"gs HEAD {small_count} (stat), {IN_FLIGHT} in flight", "objects/s"),
        heads,
        requests=small_count,
        units=small_count,
        target=1.2,
    )

    # ---- LIST one folder -------------------------------------------------------------------
    lists: Clients = {"asyncfs": lambda: env.listdir(f"gs://{BUCKET}/list")}
    if store is not None:
        lists["obstore"] = lambda: obstore.list_with_delimiter_async(store, "list/")
    if gcsfs_run is not None:
        lists["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._ls(f"{BUCKET}/list", refresh=True))
    row_of(
        Row(f"gs LIST {list_count} keys (one folder)", "keys/s"),
        lists,
        requests=0,
        units=list_count,
        target=1.2,
        note=f"best of {repeat} rounds; obstore lists through the XML API, which this emulator answers in one "
        "page whatever max-keys asks; asyncfs and gcsfs page the JSON API by 1000, as GCS caps it, and the "
        "emulator scans the whole bucket for each page",
    )

    # ---- one big object, PUT then GET ------------------------------------------------------
    big = bytes(range(256)) * (big_size // 256)
    mib = big_size / MiB
    writes: Clients = {"asyncfs": lambda: env.write_file(f"gs://{BUCKET}/big-asyncfs", big)}
    if gcsfs_run is not None:
        writes["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._pipe_file(f"{BUCKET}/big-gcsfs", big))
    row_of(
        Row(f"gs PUT {big_size // MiB} MiB", "MiB/s"),
        writes,
        requests=0,
        units=mib,
        target=1.0,
        note=f"best of {repeat} rounds; asyncfs: a resumable upload in 64 MiB chunks; obstore: no XML uploads here",
    )
    asyncio.run(env.write_file(f"gs://{BUCKET}/big", big))
    reads: Clients = {"asyncfs": lambda: env.read_file(f"gs://{BUCKET}/big")}
    if store is not None:

        async def obs_big() -> bytes:
            return bytes(await (await obstore.get_async(store, "big")).bytes_async())

        reads["obstore"] = obs_big
    if gcsfs_run is not None:
        reads["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._cat_file(f"{BUCKET}/big"))
    row_of(Row(f"gs GET {big_size // MiB} MiB", "MiB/s"), reads, requests=0, units=mib, target=1.0)
    rows.extend(cpu.rows(0.35))
    env.close()
    return rows
