"""Walk, glob and tree deletion are written once (asyncfs/_plans.py) and run
by two drivers: the sync one makes each step's calls in turn, the async one
hands them to the worker pool as a batch. Both must give the same answers,
with the plugin's own glob and with the generic, listing-based one."""

from __future__ import annotations

from pathlib import Path

import pytest

import asyncfs
from asyncfs._async import plans as _driver
from asyncfs._sync import plans as _plans

pytestmark = pytest.mark.anyio

FILES = ["a/x.txt", "a/y.bin", "a/b/z.txt", "a/b/c/w.txt", "d/x.txt", "top.txt"]
PATTERNS = ["*", "*.txt", "*/x.txt", "a/*/*.txt", "a/b/*", "*/*/c/*", "a/[xy].*", "nothing/*", "a/b/c/w.txt"]


@pytest.fixture(params=["mem", "file"])
def tree(request: pytest.FixtureRequest, tmp_path: Path, env: asyncfs.Env) -> str:
    root = f"mem:///plans-{tmp_path.name}" if request.param == "mem" else str(tmp_path / "tree")
    fs = env.filesystem(root).wrapped
    for name in FILES:
        fs.recursively_create_dir(root + "/" + name.rpartition("/")[0])
        fs.write_file(f"{root}/{name}", name.encode())
    return root


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("pattern", PATTERNS)
async def test_glob_drivers_agree(tree: str, env: asyncfs.Env, pattern: str, native: bool) -> None:
    afs = env.filesystem(tree)
    full = f"{tree}/{pattern}"
    synchronous = _plans.run(afs.wrapped, _plans.glob(full, native=native))
    concurrent = await _driver.run(afs, _plans.glob(full, native=native))
    assert synchronous == concurrent == afs.wrapped.get_matching_paths(full)


async def test_walk_drivers_agree_and_prune(tree: str, env: asyncfs.Env) -> None:
    afs = env.filesystem(tree)
    synchronous = list(afs.wrapped.walk(tree))
    concurrent = [entry async for entry in afs.walk(tree)]
    assert synchronous == concurrent
    assert [d for d, _, _ in synchronous] == [tree, f"{tree}/a", f"{tree}/d", f"{tree}/a/b", f"{tree}/a/b/c"]
    pruned = []
    async for directory, dirs, _ in afs.walk(tree):
        pruned.append(directory)
        dirs[:] = [d for d in dirs if d != "a"]  # os.walk's rule: pruning steers the walk
    assert pruned == [tree, f"{tree}/d"]


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_delete_tree_drivers(tree: str, env: asyncfs.Env, driver: str) -> None:
    afs = env.filesystem(tree)
    plan = _plans.delete_tree(f"{tree}/a")
    counts = _plans.run(afs.wrapped, plan) if driver == "sync" else await _driver.run(afs, plan)
    assert counts == (0, 0)
    assert not afs.wrapped.exists(f"{tree}/a")
    assert afs.wrapped.exists(f"{tree}/d/x.txt")


async def test_delete_tree_of_a_missing_path_counts_its_root(env: asyncfs.Env, tmp_path: Path) -> None:
    afs = env.filesystem(str(tmp_path))
    with pytest.raises(asyncfs.NotFoundError) as raised:
        await _driver.run(afs, _plans.delete_tree(str(tmp_path / "missing")))
    assert raised.value.undeleted == (0, 1)
