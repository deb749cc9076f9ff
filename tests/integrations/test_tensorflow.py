"""Binary compatibility with TensorFlow, both ways, in one process: plugins
built against asyncfs's header load into TensorFlow's own registry and serve
tf.io.gfile and tf.data; TensorFlow and asyncfs share a process in either
import order, even registering the same plugin library; TensorFlow's own GCS
plugin loads through asyncfs with no TensorFlow library path; the s3 plugin
signs and speaks TLS beside the OpenSSL and curl TensorFlow exports.

Runs in TensorFlow's interpreter (the current one if it has TensorFlow, or the
one named by ASYNCFS_TF_PYTHON), with the asyncfs under test put first on its
path (it needs asyncfs's dependencies: .ci/run installs asyncfs there)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import REPO, build_plugin, preloadable
from support.ceph_gateway import Gateway
from support.gcs_emulator import GcsEmulator

import asyncfs
from asyncfs._native import libraries as _libs

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
with tempfile.TemporaryDirectory() as d:
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


def run_in_tensorflow(
    tmp_path: Path, script: str, *args: str, asyncfs_too: bool = False, preload: str | None = None
) -> str:
    """Run script in TensorFlow's interpreter; with asyncfs_too, the asyncfs
    under test comes first on its path; preload names a library for
    LD_PRELOAD. Returns stdout; fails on a crash."""
    python = tensorflow_python()
    if python is None:
        pytest.skip("TensorFlow is not installed (set ASYNCFS_TF_PYTHON to a Python that has it)")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if preload is not None:
        env["LD_PRELOAD"] = preload
    env.pop("LD_LIBRARY_PATH", None)
    if asyncfs_too:
        path = tmp_path / "path"
        path.mkdir()
        (path / "asyncfs").symlink_to(Path(asyncfs.__file__).parent)
        env.update(PYTHONPATH=str(path), ASYNCFS_LIB_DIR=str(_libs.lib_dir()))
        probe = subprocess.run([python, "-c", "import cffi, anyio"], env=env, capture_output=True, check=False)
        if probe.returncode != 0:
            pytest.skip(f"TensorFlow's interpreter {python} lacks asyncfs's dependencies (pip install asyncfs there)")
    done = subprocess.run(
        [python, "-c", script, *args], capture_output=True, text=True, timeout=600, check=False, env=env
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (
        f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def test_asyncfs_plugins_load_into_tensorflow(tmp_path: Path) -> None:
    demo = build_plugin(REPO / "plugins/examples/demo_fs.c", tmp_path / "libdemo_fs.so")
    run_in_tensorflow(tmp_path, SCRIPT, str(_libs.library_path("memory")), str(demo))


SAME_PROCESS = """
import asyncio, os, sys
order, memory, folder = sys.argv[1:]
if order == "tensorflow-first":
    import tensorflow as tf
import asyncfs
from asyncfs import tfrecord
if order == "asyncfs-first":
    import tensorflow as tf

# the library of asyncfs's built-in mem://, registered in TensorFlow too:
# each loads its own instance, bound to its own status functions
tf.experimental.register_filesystem_plugin(memory)
g = tf.io.gfile
g.makedirs("mem:///tf")
with g.GFile("mem:///tf/x.txt", "w") as f:
    f.write("from tensorflow")
assert g.GFile("mem:///tf/x.txt").read() == "from tensorflow"
try:
    g.stat("mem:///tf/none")
except tf.errors.NotFoundError:
    pass
else:
    raise AssertionError("TensorFlow's status lost its code")

async def main():
    env = asyncfs.Env()
    await env.write_file("mem:///asyncfs/x", b"from asyncfs")
    assert await env.read_file("mem:///asyncfs/x") == b"from asyncfs"
    try:
        await env.read_file("mem:///asyncfs/none")
    except asyncfs.NotFoundError as error:
        assert error.path == "mem:///asyncfs/none"
    else:
        raise AssertionError("asyncfs's status lost its code")
    async with await tfrecord.writer(env, f"file://{folder}/data.tfrecord") as out:
        for i in range(100):
            await out.write(b"record %d" % i)
    await env.aclose()

asyncio.run(main())
records = [r.numpy() for r in tf.data.TFRecordDataset([f"{folder}/data.tfrecord"])]
assert records == [b"record %d" % i for i in range(100)], records[:3]
print("ok")
"""


@pytest.mark.parametrize("order", ["asyncfs-first", "tensorflow-first"])
def test_tensorflow_and_asyncfs_share_a_process(tmp_path: Path, order: str) -> None:
    memory = str(_libs.library_path("memory"))
    run_in_tensorflow(tmp_path, SAME_PROCESS, order, memory, str(tmp_path), asyncfs_too=True)


FIND_GCS_PLUGIN = """
import importlib.util, os
gcs = importlib.util.find_spec("tensorflow_io_gcs_filesystem")
print(os.path.join(os.path.dirname(gcs.origin), "core/python/ops/libtensorflow_io_gcs_filesystem.so"), "ok")
"""

LOAD_GCS_PLUGIN = """
import sys, warnings
order, library = sys.argv[1:]
if order == "tensorflow-first":
    import tensorflow as tf
import asyncfs
registry = asyncfs.Registry(builtins=False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    info = registry.load_plugin(library)
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
if order == "plugin-first":
    import tensorflow as tf  # finds its own framework library, not asyncfs's runtime
if order != "alone":
    assert int(tf.reduce_sum(tf.constant([1, 2, 3]))) == 6
    assert tf.io.gfile.exists(library)
print("ok")
"""


@pytest.mark.parametrize("order", ["alone", "plugin-first", "tensorflow-first"])
def test_tensorflows_gcs_plugin_loads_without_tensorflows_library_path(tmp_path: Path, order: str) -> None:
    """tensorflow-io-gcs-filesystem's library, built by TensorFlow's authors
    against TensorFlow's header and linked to libtensorflow_framework.so.2,
    loads through asyncfs with no LD_LIBRARY_PATH: its TF_* imports bind to
    asyncfs's runtime, and TensorFlow imported before or after still works."""
    where = run_in_tensorflow(tmp_path, FIND_GCS_PLUGIN + "\n", asyncfs_too=False).split()
    if not os.path.exists(where[0]):
        pytest.skip("tensorflow-io-gcs-filesystem is not installed beside TensorFlow")
    run_in_tensorflow(tmp_path, LOAD_GCS_PLUGIN, order, where[0], asyncfs_too=True)


S3_BESIDE_TENSORFLOW = """
import asyncio, os, sys
order, access_key, secret_key, region, http, https, ca_bundle = sys.argv[1:]
if order == "tensorflow-first":
    import tensorflow as tf
import asyncfs

def s3(env, endpoint, secret=secret_key):
    fs = env.filesystem("s3://").wrapped
    for name, value in [("endpoint", endpoint), ("access_key_id", access_key), ("secret_access_key", secret),
                        ("region", region), ("ca_bundle", ca_bundle)]:
        fs.set_option(name, value.encode())
    fs.set_option("path_style", 1)

async def main():
    for endpoint in (http, https):
        env = asyncfs.Env()
        s3(env, endpoint)
        bucket = f"s3://beside-tensorflow-{order}"
        if not await env.exists(bucket):
            await env.makedirs(bucket)
        await env.write_file(f"{bucket}/object", endpoint.encode() * 1000)
        assert await env.read_file(f"{bucket}/object") == endpoint.encode() * 1000
        env.filesystem("s3://").wrapped.set_option("part_size", 5 << 20)
        big = os.urandom(11 << 20)  # three parts
        await env.write_file(f"{bucket}/folder/big", big)
        assert await env.read_file(f"{bucket}/folder/big") == big
        await env.rmtree(f"{bucket}/folder")  # one DeleteObjects, with its Content-MD5
        assert not await env.exists(f"{bucket}/folder/big")
        s3(env, endpoint, secret="s" * 600)  # signed, and refused by the gateway
        try:
            await env.read_file(f"{bucket}/object")
        except asyncfs.PermissionDeniedError as error:
            assert "SignatureDoesNotMatch" in str(error), error
        else:
            raise AssertionError("a wrong secret was accepted")
        await env.aclose()

if order == "asyncfs-first":  # the plugin loaded and used, then TensorFlow imported
    asyncio.run(main())
    import tensorflow as tf
asyncio.run(main())
assert int(tf.reduce_sum(tf.constant([1, 2, 3]))) == 6
from asyncfs._plugins import loader as _loader
print(_loader.binding(), "ok")
"""


@pytest.mark.parametrize("malloc", ["libc", "tcmalloc"])
@pytest.mark.parametrize("order", ["asyncfs-first", "tensorflow-first"])
def test_s3_over_http_and_https_beside_tensorflow(
    tmp_path: Path, s3_gateway: Gateway, tls_gateway: tuple[str, Path], order: str, malloc: str
) -> None:
    """TensorFlow exports its own BoringSSL and curl to every library loaded
    after it; the s3 plugin links OpenSSL and libcurl. Deep-bound, it uses
    its own; with tcmalloc preloaded (as TensorFlow's users often run) it is
    not deep-bound and uses TensorFlow's throughout. Either way it signs and
    speaks TLS; a mix of the two crashed."""
    preload = preloadable(malloc) if malloc != "libc" else None
    https, ca_bundle = tls_gateway
    gateway = s3_gateway
    out = run_in_tensorflow(
        tmp_path,
        S3_BESIDE_TENSORFLOW,
        order,
        gateway.access_key,
        gateway.secret_key,
        gateway.region,
        gateway.endpoint,
        https,
        str(ca_bundle),
        asyncfs_too=True,
        preload=preload,
    )
    assert out.startswith("deep (RTLD_DEEPBIND)" if malloc == "libc" else "as usual, not deep: the process's malloc")


GCS_IN_TENSORFLOW = """
import asyncio, os, sys, types
bucket = sys.argv[1]
# TensorFlow leaves gs:// to a plugin (its built-in GCS filesystem is not
# registered); its own import of tensorflow-io-gcs-filesystem, which would
# take the scheme first, is answered by an empty module
os.environ["TF_USE_MODULAR_FILESYSTEM"] = "1"
sys.modules.setdefault("tensorflow_io_gcs_filesystem", types.ModuleType("tensorflow_io_gcs_filesystem"))
import tensorflow as tf
import asyncfs

library = next(p.metadata.library for p in asyncfs.default_registry().plugins() if "gs" in p.schemes)
tf.experimental.register_filesystem_plugin(library)
g = tf.io.gfile
root = f"gs://{bucket}/tf"
g.makedirs(f"{root}/ckpt")
with g.GFile(f"{root}/notes.txt", "w") as f:
    f.write("written by tensorflow")
with tf.io.TFRecordWriter(f"{root}/data.tfrecord") as w:
    for i in range(100):
        w.write(b"record %d" % i)
assert sorted(g.listdir(root)) == ["ckpt", "data.tfrecord", "notes.txt"], g.listdir(root)
assert g.isdir(f"{root}/ckpt") and g.glob(f"{root}/*.tfrecord") == [f"{root}/data.tfrecord"]
records = [r.numpy() for r in tf.data.TFRecordDataset([f"{root}/data.tfrecord"])]
assert records == [b"record %d" % i for i in range(100)], records[:3]

async def main():
    env = asyncfs.Env()  # asyncfs in the same process, on the same store
    assert await env.read_file(f"{root}/notes.txt") == b"written by tensorflow"
    await env.write_file(f"{root}/from-asyncfs.txt", b"written by asyncfs")
    await env.aclose()

asyncio.run(main())
assert g.GFile(f"{root}/from-asyncfs.txt").read() == "written by asyncfs"
print("ok")
"""


def test_tensorflow_serves_gs_through_the_asyncfs_plugin(tmp_path: Path, gcs_emulator: GcsEmulator) -> None:
    """tf.io.gfile and TFRecordDataset on gs:// through asyncfs's gs plugin,
    on the emulator, with asyncfs itself in the same process."""
    bucket = f"tf-{uuid.uuid4().hex[:10]}"
    gcs_emulator.create_bucket(bucket)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.endpoint)
        run_in_tensorflow(tmp_path, GCS_IN_TENSORFLOW, bucket, asyncfs_too=True)
