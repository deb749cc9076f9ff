"""Binary compatibility with TensorFlow, both ways where it can be shown:
plugins built against asyncfs's header load into TensorFlow's own registry
and serve tf.io.gfile and tf.data. Runs in a separate interpreter (so that
TensorFlow's status symbols never meet asyncfs's runtime): the current one if
it has TensorFlow, or the one named by ASYNCFS_TF_PYTHON."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, build_plugin

from asyncfs import _libs

SCRIPT = """
import sys, tempfile
import tensorflow as tf
mem, demo = sys.argv[1], sys.argv[2]
tf.experimental.register_filesystem_plugin(mem)
tf.experimental.register_filesystem_plugin(demo)
g = tf.io.gfile
g.makedirs("mem:///tf/a")
with g.GFile("mem:///tf/a/x.txt", "w") as f:
    f.write("line one\\nline two\\n")
assert g.GFile("mem:///tf/a/x.txt").read() == "line one\\nline two\\n"
assert g.glob("mem:///tf/*/*.txt") == ["mem:///tf/a/x.txt"], g.glob("mem:///tf/*/*.txt")
assert g.stat("mem:///tf/a/x.txt").length == 18
assert g.isdir("mem:///tf/a") and not g.exists("mem:///tf/none")
g.rename("mem:///tf/a/x.txt", "mem:///tf/a/y.txt")
lines = [l.numpy() for l in tf.data.TextLineDataset(["mem:///tf/a/y.txt"])]
assert lines == [b"line one", b"line two"], lines
d = tempfile.mkdtemp()
with g.GFile(f"demo://{d}/z.txt", "w") as f:
    f.write("demo")
assert g.listdir(f"demo://{d}") == ["z.txt"]
assert g.glob(f"demo://{d}/*.txt") == [f"demo://{d}/z.txt"]
print("ok")
"""


def tensorflow_python() -> str | None:
    named = os.environ.get("ASYNCFS_TF_PYTHON")
    if named:
        return named
    return sys.executable if importlib.util.find_spec("tensorflow") is not None else None


def test_asyncfs_plugins_load_into_tensorflow(tmp_path: Path) -> None:
    python = tensorflow_python()
    if python is None:
        pytest.skip("TensorFlow is not installed (set ASYNCFS_TF_PYTHON to a Python that has it)")
    demo = build_plugin(REPO / "plugins/examples/demo_fs.c", tmp_path / "libdemo_fs.so")
    memory = _libs.library_path("memory")
    done = subprocess.run(
        [python, "-c", SCRIPT, str(memory), str(demo)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_real_tensorflow_plugin_loads_into_asyncfs() -> None:
    """tensorflow-io-gcs-filesystem's library, built by TensorFlow's authors
    against TensorFlow's header, loads through asyncfs's loader; its TF_*
    imports resolve to asyncfs's runtime, and its errors come back typed."""
    python = tensorflow_python()
    if python is None:
        pytest.skip("TensorFlow is not installed (set ASYNCFS_TF_PYTHON to a Python that has it)")
    where = subprocess.run(
        [python, "-c", FIND_GCS_PLUGIN], capture_output=True, text=True, timeout=120, check=False
    ).stdout.split()
    if len(where) != 2:
        pytest.skip("tensorflow-io-gcs-filesystem is not installed beside TensorFlow")
    library, tensorflow_dir = where
    done = subprocess.run(
        [sys.executable, "-c", LOAD_GCS_PLUGIN, library],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # the plugin links TensorFlow's framework library; asyncfs supplies TF_*
        env={**os.environ, "LD_LIBRARY_PATH": tensorflow_dir, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr[-3000:]


FIND_GCS_PLUGIN = """
import importlib.util, os
gcs = importlib.util.find_spec("tensorflow_io_gcs_filesystem")
tf = importlib.util.find_spec("tensorflow")
lib = os.path.join(os.path.dirname(gcs.origin), "core/python/ops/libtensorflow_io_gcs_filesystem.so")
print(lib, os.path.dirname(tf.origin))
"""

LOAD_GCS_PLUGIN = """
import sys, warnings
import asyncfs
registry = asyncfs.Registry(builtins=False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    info = registry.load_plugin(sys.argv[1])
assert info.schemes == ("gs",), info.schemes
assert any(issubclass(w.category, asyncfs.PluginAPIMismatchWarning) for w in caught)
fs = registry.get("gs")
assert fs.offers("new_random_access_file") and not fs.offers("abort_transaction")
try:
    fs.path_exists("gs://asyncfs-no-such-bucket/x")  # no credentials, no network
except asyncfs.StatusError as error:
    assert error.path == "gs://asyncfs-no-such-bucket/x"
else:
    raise AssertionError("expected an error without credentials")
print("ok")
"""
