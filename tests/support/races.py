"""What every object store's tests ask of its directories and transactions:
races the server must decide (several threads making one directory at the
same moment: the transactions' lock relies on exactly one of them winning),
and a generic transaction committed and rolled back."""

from __future__ import annotations

import threading

import anyio
import pytest

import asyncfs

__all__ = ["make_dir_race", "transaction_commits_and_rolls_back"]


def make_dir_race(fs: asyncfs.ModularFileSystem, path: str, threads: int = 8) -> list[str]:
    """Each thread's outcome of create_dir(path), released at one moment:
    "made" or "exists", sorted."""
    barrier = threading.Barrier(threads)
    outcomes: list[str] = []

    def make() -> None:
        barrier.wait()
        try:
            fs.create_dir(path)
            outcomes.append("made")
        except asyncfs.AlreadyExistsError:
            outcomes.append("exists")

    running = [threading.Thread(target=make) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return sorted(outcomes)


def transaction_commits_and_rolls_back(env: asyncfs.Env, root: str) -> None:
    """Under root (made here): a transaction's files all appear at its
    commit; a transaction left by an exception leaves nothing."""

    async def main() -> None:
        await env.makedirs(root)
        await env.write_file(f"{root}/old", b"old")
        async with env.transaction(root) as txn:
            await txn.write_file("a", b"A")
            await txn.write_file("b", b"B")
        assert sorted(await env.listdir(root)) == ["a", "b", "old"]
        with pytest.raises(RuntimeError):
            async with env.transaction(root) as txn:
                await txn.write_file("c", b"C")
                raise RuntimeError("rolled back")
        assert sorted(await env.listdir(root)) == ["a", "b", "old"]
        assert await env.read_file(f"{root}/a") == b"A"

    anyio.run(main)
