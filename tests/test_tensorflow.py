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
