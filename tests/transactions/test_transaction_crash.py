"""Transactions survive SIGKILL at any moment.

A child process commits transactions on a root in a loop and is killed at
random moments, hundreds of times. After each kill, recovery must leave the
root equal to one fully committed transaction (every file's checksum matches
the committed manifest, no file missing or extra), no older than the last
state seen, with no staging or journal left beside it. Both the plugins'
native transaction ops and the generic path are tested, on file://.

ASYNCFS_CRASH_KILLS sets the kills per path (default 150).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import select
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SUPPORT

import asyncfs

CHILD = SUPPORT / "crash_child.py"
KILLS = int(os.environ.get("ASYNCFS_CRASH_KILLS", "150"))


def committed_state(root: Path) -> tuple[int, list[str]]:
    """(generation, problems) of the tree at root."""
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()
    if "MANIFEST.json" not in files:
        return 0, [f"files without a manifest: {sorted(files)}"] if files else []
    manifest = json.loads((root / "MANIFEST.json").read_bytes())
    problems = []
    expected = set(manifest["files"])
    if files - {"MANIFEST.json"} != expected:
        problems.append(f"files {sorted(files - {'MANIFEST.json'})} != manifest {sorted(expected)}")
    for name, digest in manifest["files"].items():
        path = root / name
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name} does not match the manifest of generation {manifest['generation']}")
    return manifest["generation"], problems


def leftovers(root: Path) -> list[str]:
    allowed = {root.name, f".{root.name}.asyncfs-lock"}
    return sorted(p.name for p in root.parent.iterdir() if p.name not in allowed)


def run_child_until_killed(root: Path, mode: str, seed: int, rng: random.Random) -> None:
    with subprocess.Popen(
        [sys.executable, str(CHILD), f"file://{root}", mode, str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:
        try:
            ready, _, _ = select.select([child.stdout], [], [], 60)
            assert ready and child.stdout is not None and child.stdout.readline() == b"ready\n", "no start"
            # kill it somewhere inside its stream of transactions
            select.select([], [], [], rng.uniform(0.0, 0.25))
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else "the child died"
        finally:
            child.kill()


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_sigkill_at_random_moments_never_leaves_a_torn_state(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "ckpt"
    rng = random.Random(f"asyncfs-crash-{mode}")
    env = asyncfs.Env(workers=2)
    torn: list[str] = []
    needed_recovery = rolled_forward = 0
    last_generation = 0
    generations = set()
    for kill in range(KILLS):
        run_child_until_killed(root, mode, rng.randrange(1 << 30), rng)
        if leftovers(root):
            needed_recovery += 1
        if (root.parent / f".{root.name}.asyncfs-journal").exists():
            rolled_forward += 1  # killed past the generic commit point
        asyncio.run(env.recover(f"file://{root}", native=mode == "native"))
        generation, problems = committed_state(root)
        debris = leftovers(root)
        if problems or debris or generation < last_generation:
            torn.append(f"kill {kill}: generation {generation} (last {last_generation}) {problems} {debris}")
        last_generation = max(last_generation, generation)
        generations.add(generation)
    env.close()
    summary = (
        f"{mode}: {KILLS} kills, {needed_recovery} left staging or a journal to recover "
        f"({rolled_forward} past the commit point, rolled forward), "
        f"{len(generations)} distinct committed states seen, last generation {last_generation}, "
        f"{len(torn)} torn"
    )
    print(summary)
    (tmp_path.parent / f"crash-summary-{mode}.txt").write_text(summary)
    assert not torn, "\n".join(torn[:10])
    assert last_generation > KILLS // 2, "the child committed too few transactions to mean anything"
    assert needed_recovery > KILLS // 10, "too few kills landed inside a transaction"
