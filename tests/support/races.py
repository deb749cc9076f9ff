"""Races a store must decide on the server: several threads making one
directory at the same moment (the transactions' lock relies on exactly one
of them winning)."""

from __future__ import annotations

import threading

import asyncfs

__all__ = ["make_dir_race"]


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
