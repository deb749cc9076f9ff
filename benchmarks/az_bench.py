"""az:// against adlfs and obstore's AzureStore, all on one Azurite started
for the run (tests/support/azurite.py, in memory), with the same data and
in-flight limits, every client signing with the emulator account's Shared
Key. Azurite (Node.js) shares the machine's two cores with the client, so
each small-request row also says how much CPU it spent per request."""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from tests.support.azurite import ACCOUNT, KEY, Azurite, azurite_missing_reason, start_azurite

from .harness import IN_FLIGHT, Row, bounded, optional, started_env
from .stores import Clients, Cpu, standard_rows

MiB = 1 << 20
CONTAINER = "asyncfs-bench"


def bench_az(repeat: int, quick: bool) -> list[Row]:
    reason = azurite_missing_reason()
    if reason is not None:
        return [Row("az (Azurite)", "-", notes=[f"skipped: {reason}"])]
    azurite = start_azurite()
    try:
        return _bench(azurite, repeat, quick)
    finally:
        azurite.stop.close()


def _adlfs(azurite: Azurite) -> Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[Any]] | None:
    """A runner of adlfs work: an asynchronous filesystem made on the loop
    that uses it, and closed there."""
    adlfs = optional("adlfs")
    if adlfs is None:
        return None

    async def run(work: Callable[[Any], Awaitable[Any]]) -> Any:
        fs = adlfs.AzureBlobFileSystem(
            connection_string=azurite.connection_string, asynchronous=True, skip_instance_cache=True
        )
        try:
            return await work(fs)
        finally:
            await fs.service_client.close()
            # adlfs registers finalizers that close the client again, through
            # a loop of its own; this one's is gone by then (adlfs #296)
            for finalizer in list(weakref.finalize._registry):  # type: ignore[attr-defined]
                held = finalizer.peek()
                if held is not None and held[0] is fs:
                    finalizer.detach()

    return run


def _obstore(azurite: Azurite) -> Any:
    if optional("obstore") is None:
        return None
    from obstore.store import AzureStore

    # object_store's way to Azurite: the emulator flag, at the URL its CI names
    os.environ["AZURITE_BLOB_STORAGE_URL"] = azurite.endpoint.rsplit("/", 1)[0]
    return AzureStore(
        CONTAINER,
        account_name=ACCOUNT,
        account_key=KEY,
        use_emulator=True,
        client_options={"allow_http": True},
    )


def _bench(azurite: Azurite, repeat: int, quick: bool) -> list[Row]:
    counts = {"small": 500, "prefetch": 2000, "listed": 2000, "big": 32 * MiB}
    if not quick:
        counts = {"small": 2000, "prefetch": 10_000, "listed": 10_000, "big": 256 * MiB}
    counts["in_flight"] = IN_FLIGHT
    env = started_env()
    env.filesystem("az://").wrapped.set_option("connection_string", azurite.connection_string.encode())
    adlfs_run = _adlfs(azurite)
    store = _obstore(azurite)
    obstore = optional("obstore")

    small = [f"small/{i:05d}" for i in range(counts["small"])]
    fetched = [f"prefetch/{i:05d}" for i in range(counts["prefetch"])]
    listed = [f"list/k{i:05d}" for i in range(counts["listed"])]
    payload = b"x" * 4096
    big = bytes(range(256)) * (counts["big"] // 256)

    def uris(keys: list[str]) -> list[str]:
        return [f"az://{CONTAINER}/{k}" for k in keys]

    async def setup() -> None:
        await env.mkdir(f"az://{CONTAINER}")
        await bounded(lambda uri: env.write_file(uri, payload), uris(small + fetched + listed))
        await env.write_file(f"az://{CONTAINER}/big", big)

    asyncio.run(setup())

    async def asyncfs_prefetch() -> None:
        async for _ in env.prefetch(uris(fetched), in_flight=IN_FLIGHT):
            pass

    clients: dict[str, Clients] = {
        "get": {"asyncfs": lambda: bounded(env.read_file, uris(small))},
        "prefetch": {"asyncfs": asyncfs_prefetch},
        "put": {"asyncfs": lambda: bounded(lambda k: env.write_file(f"az://{CONTAINER}/put/{k}", payload), small)},
        "head": {"asyncfs": lambda: bounded(env.stat, uris(small))},
        "list": {"asyncfs": lambda: env.listdir(f"az://{CONTAINER}/list")},
        "put_big": {"asyncfs": lambda: env.write_file(f"az://{CONTAINER}/big-asyncfs", big)},
        "get_big": {"asyncfs": lambda: env.read_file(f"az://{CONTAINER}/big")},
    }
    if store is not None:

        async def obs_get(key: str) -> bytes:
            return bytes(await (await obstore.get_async(store, key)).bytes_async())

        clients["get"]["obstore"] = lambda: bounded(obs_get, small)
        clients["prefetch"]["obstore"] = lambda: bounded(obs_get, fetched)
        clients["put"]["obstore"] = lambda: bounded(lambda k: obstore.put_async(store, f"put-o/{k}", payload), small)
        clients["head"]["obstore"] = lambda: bounded(lambda k: obstore.head_async(store, k), small)
        clients["list"]["obstore"] = lambda: obstore.list_with_delimiter_async(store, "list/")
        clients["put_big"]["obstore"] = lambda: obstore.put_async(store, "big-obstore", big)
        clients["get_big"]["obstore"] = lambda: obs_get("big")
    if adlfs_run is not None:
        clients["get"]["adlfs"] = lambda: adlfs_run(
            lambda fs: bounded(lambda k: fs._cat_file(f"{CONTAINER}/{k}"), small)
        )
        clients["prefetch"]["adlfs"] = lambda: adlfs_run(lambda fs: fs._cat([f"{CONTAINER}/{k}" for k in fetched]))
        clients["put"]["adlfs"] = lambda: adlfs_run(
            lambda fs: bounded(lambda k: fs._pipe_file(f"{CONTAINER}/put-adlfs/{k}", payload), small)
        )
        clients["head"]["adlfs"] = lambda: adlfs_run(lambda fs: bounded(lambda k: fs._info(f"{CONTAINER}/{k}"), small))
        clients["list"]["adlfs"] = lambda: adlfs_run(lambda fs: fs._ls(f"{CONTAINER}/list", refresh=True))
        clients["put_big"]["adlfs"] = lambda: adlfs_run(lambda fs: fs._pipe_file(f"{CONTAINER}/big-adlfs", big))
        clients["get_big"]["adlfs"] = lambda: adlfs_run(lambda fs: fs._cat_file(f"{CONTAINER}/big"))
    notes = {
        "prefetch": f"asyncfs: env.prefetch, in order; obstore: get_async in {IN_FLIGHT} lanes; adlfs: cat of the "
        f"list; best of {repeat} rounds",
        "put_big": f"best of {repeat} rounds; asyncfs: one Put Blob up to 32 MiB; above, a first block of 32 MiB, "
        "then 8 MiB blocks from the caller's bytes, four in flight, then the block list",
    }
    cpu = Cpu([azurite.pid])
    rows = standard_rows("az", counts, clients, notes, repeat=repeat, cpu=cpu, server="Azurite")
    rows.extend(cpu.rows(0.35))
    env.close()
    return rows
