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
from .stores import Clients, Cpu, standard_rows

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
    counts = {"small": small_count, "prefetch": small_count, "listed": list_count, "big": big_size}
    counts["in_flight"] = IN_FLIGHT
    env = started_env()
    env.filesystem("gs://").wrapped.set_option("endpoint", emulator.endpoint.encode())
    gcsfs_run = _gcsfs(emulator)
    store = _obstore(emulator, scratch)
    obstore = optional("obstore")

    small = [f"small-{i:05d}" for i in range(small_count)]
    listed = [f"list/k{i:05d}" for i in range(list_count)]
    payload = b"x" * 4096
    big = bytes(range(256)) * (big_size // 256)
    emulator.create_bucket(BUCKET)

    def uris(keys: list[str]) -> list[str]:
        return [f"gs://{BUCKET}/{k}" for k in keys]

    async def setup() -> None:
        await bounded(lambda uri: env.write_file(uri, payload), uris(small + listed))

    asyncio.run(setup())

    async def asyncfs_prefetch() -> None:
        async for _ in env.prefetch(uris(small), in_flight=IN_FLIGHT):
            pass

    clients: dict[str, Clients] = {
        "get": {"asyncfs": lambda: bounded(env.read_file, uris(small))},
        "prefetch": {"asyncfs": asyncfs_prefetch},
        "put": {"asyncfs": lambda: bounded(lambda k: env.write_file(f"gs://{BUCKET}/put-asyncfs/{k}", payload), small)},
        "head": {"asyncfs": lambda: bounded(env.stat, uris(small))},
        "list": {"asyncfs": lambda: env.listdir(f"gs://{BUCKET}/list")},
        "put_big": {"asyncfs": lambda: env.write_file(f"gs://{BUCKET}/big-asyncfs", big)},
        "get_big": {"asyncfs": lambda: env.read_file(f"gs://{BUCKET}/big")},
    }
    if store is not None:

        async def obs_get(key: str) -> bytes:
            return bytes(await (await obstore.get_async(store, key)).bytes_async())

        clients["get"]["obstore"] = lambda: bounded(obs_get, small)
        clients["prefetch"]["obstore"] = lambda: bounded(obs_get, small)
        clients["head"]["obstore"] = lambda: bounded(lambda k: obstore.head_async(store, k), small)
        clients["list"]["obstore"] = lambda: obstore.list_with_delimiter_async(store, "list/")
        clients["get_big"]["obstore"] = lambda: obs_get("big")
    if gcsfs_run is not None:
        clients["get"]["gcsfs"] = lambda: gcsfs_run(lambda fs: bounded(lambda k: fs._cat_file(f"{BUCKET}/{k}"), small))
        clients["prefetch"]["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._cat([f"{BUCKET}/{k}" for k in small]))
        clients["put"]["gcsfs"] = lambda: gcsfs_run(
            lambda fs: bounded(lambda k: fs._pipe_file(f"{BUCKET}/put-gcsfs/{k}", payload), small)
        )
        clients["head"]["gcsfs"] = lambda: gcsfs_run(lambda fs: bounded(lambda k: fs._info(f"{BUCKET}/{k}"), small))
        clients["list"]["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._ls(f"{BUCKET}/list", refresh=True))
        clients["put_big"]["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._pipe_file(f"{BUCKET}/big-gcsfs", big))
        clients["get_big"]["gcsfs"] = lambda: gcsfs_run(lambda fs: fs._cat_file(f"{BUCKET}/big"))
    notes = {
        "prefetch": f"asyncfs: env.prefetch, in order; obstore: get_async in {IN_FLIGHT} lanes; gcsfs: cat of the "
        f"list; best of {repeat} rounds",
        "put": f"best of {repeat} rounds; obstore: the emulator takes no XML uploads",
        "list": f"best of {repeat} rounds; obstore lists through the XML API, which this emulator answers in one "
        "page whatever max-keys asks; asyncfs and gcsfs page the JSON API by 1000, as GCS caps it, and the "
        "emulator scans the whole bucket for each page",
        "put_big": f"best of {repeat} rounds; asyncfs: one upload up to 32 MiB, above a resumable session (a "
        "first chunk of 32 MiB, then 64 MiB); obstore: no XML uploads here",
    }
    cpu = Cpu([emulator.pid])

    def write_big() -> None:
        asyncio.run(env.write_file(f"gs://{BUCKET}/big", big))

    rows = standard_rows(
        "gs", counts, clients, notes, repeat=repeat, cpu=cpu, server="emulator", before={"get_big": write_big}
    )
    rows.extend(cpu.rows(0.35))
    env.close()
    return rows
