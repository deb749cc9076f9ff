"""Pickles made before the package was laid out in layers (the 0.1.0 tree,
where every module lay flat in asyncfs/) still load: the module paths they
name (asyncfs.filesystem, asyncfs.env, asyncfs._marshal, ...) keep working.
The fixture was written by that code (tests/fixtures/README.md)."""

from __future__ import annotations

import pickle
import warnings

import pytest
from conftest import FIXTURES

import asyncfs

FIXTURE = FIXTURES / "pickles-0.1.0.pkl"


def test_pickles_of_the_flat_tree_load_and_work() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the old paths say they moved
        items = pickle.loads(FIXTURE.read_bytes())
    env = items["env"]
    try:
        assert isinstance(env, asyncfs.Env) and env.copy_chunk == 1 << 20
        assert isinstance(items["default_filesystem"], asyncfs.ModularFileSystem)
        assert items["registry_filesystem_with_option"].get_option("sync_on_close").value == 1
        assert isinstance(items["async_filesystem"], asyncfs.AsyncModularFileSystem)
        error = items["not_found"]
        assert isinstance(error, asyncfs.NotFoundError) and error.path == "mem://x/y"
        assert isinstance(items["plugin_error"], asyncfs.PluginOpenError)
        assert items["budget"].limit == 1 << 20
        assert items["statistics"] == asyncfs.FileStatistics(3, 7, False)
        bridge = items["bridge"]
        bridge.pipe_file("/unpickled/x", b"ok")
        assert bridge.cat_file("/unpickled/x") == b"ok"
        assert [option.name for option in items["options"]] == ["sync_on_close"]
    finally:
        env.close()


@pytest.mark.parametrize("module", ["asyncfs.filesystem", "asyncfs.env", "asyncfs.errors", "asyncfs.tfrecord"])
def test_public_module_paths_still_import(module: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        __import__(module)
