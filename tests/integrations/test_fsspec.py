"""The fsspec bridge in the stack users have: fsspec's own URL handling,
pandas, pyarrow (datasets, through FSSpecHandler), universal-pathlib, and
Dask with worker processes. Plus what the bridge adds: listing with
statistics in one call, transactions, pickling, typed errors."""

from __future__ import annotations

import asyncio
import datetime
import errno
import gc
import json
import os
import pickle
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed (pip install 'asyncfs[fsspec]')")

from conftest import REPO, build_plugin  # noqa: E402
from support.ceph_gateway import Gateway  # noqa: E402

import asyncfs  # noqa: E402
from asyncfs.fsspec import AsyncfsFileSystem, BridgeFile, DirectFile, DirectWriter, filesystem_class, register  # noqa: E402
from asyncfs.fsspec.names import plugin_options  # noqa: E402


def s3_options(gateway: Gateway) -> dict[str, Any]:
    return {
        "endpoint": gateway.endpoint,
        "access_key_id": gateway.access_key,
        "secret_access_key": gateway.secret_key,
        "region": gateway.region,
        "path_style": 1,
    }


@pytest.fixture(params=["file", "mem", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[AsyncfsFileSystem, str, dict[str, Any]]]:
    """(filesystem, a fresh folder as a full URL, storage options) on each store."""
    if request.param == "file":
        yield filesystem_class("file")(), f"asyncfs+file://{tmp_path}", {}
        return
    if request.param == "mem":
        fs = filesystem_class("mem")()
        folder = f"t{uuid.uuid4().hex}"
        fs.makedirs(folder)
        yield fs, f"asyncfs+mem://{folder}", {}
        fs.rm(folder, recursive=True)
        return
    gateway: Gateway = request.getfixturevalue("s3_gateway")
    options = s3_options(gateway)
    fs = filesystem_class("s3")(**options)
    if not fs.exists("asyncfs-stack"):
        fs.mkdir("asyncfs-stack")
    folder = f"asyncfs-stack/{uuid.uuid4().hex}"
    yield fs, f"asyncfs+s3://{folder}", options
    if fs.exists(folder):
        fs.rm(folder, recursive=True)


# ---- fsspec itself -----------------------------------------------------------------


def test_protocols_resolve_through_the_entry_points_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """No import of asyncfs: fsspec finds asyncfs+file through the
    fsspec.specs entry point, and its own file protocol is untouched."""
    (tmp_path / "a.txt").write_text("through the entry point")
    code = (
        "import fsspec, sys\n"
        "assert 'asyncfs' not in sys.modules\n"
        f"print(fsspec.open('asyncfs+file://{tmp_path}/a.txt', 'r').open().read())\n"
        "print(type(fsspec.filesystem('file')).__module__)\n"
        "print(type(fsspec.filesystem('asyncfs+mem')).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [
        "through the entry point",
        "fsspec.implementations.local",
        "AsyncfsFileSystem[mem]",
    ]


def test_a_loaded_plugin_becomes_a_protocol(tmp_path: Path) -> None:
    source = REPO / "plugins/examples/demo_fs.c"
    library = tmp_path / "libdemo_bridge.so"
    include = asyncfs.get_include()
    built = subprocess.run(
        ["cc", "-std=c99", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(library)],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip(f"no C compiler to build the demo plugin: {built.stderr.strip()[:200]}")
    if "demo" not in asyncfs.default_registry().schemes():
        asyncfs.load_plugin(library)
    fs = fsspec.filesystem("asyncfs+demo")
    fs.pipe(f"{tmp_path}/via-demo", b"demo bytes")
    assert fs.cat(f"asyncfs+demo://{tmp_path}/via-demo") == b"demo bytes"
    # the demo plugin has no get_children_stats: ls(detail=True) takes the fallback
    assert fs.ls(str(tmp_path), detail=True)[-1]["size"] == len(b"demo bytes")
    assert "asyncfs+demo" in register()


def test_ls_find_glob_and_info(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    fs, base, _ = where
    fs.pipe({f"{base}/a.csv": b"1,2\n", f"{base}/sub/b.csv": b"3,4\n5,6\n", f"{base}/sub/deep/c.txt": b"c"})
    root = fs._strip_protocol(base)
    listing = {info["name"]: info for info in fs.ls(base, detail=True)}
    assert listing[f"{root}/a.csv"]["size"] == 4 and listing[f"{root}/a.csv"]["type"] == "file"
    assert listing[f"{root}/sub"]["type"] == "directory"
    assert fs.ls(base, detail=False) == sorted(listing)
    assert fs.find(base) == [f"{root}/a.csv", f"{root}/sub/b.csv", f"{root}/sub/deep/c.txt"]
    assert fs.find(base, maxdepth=1) == [f"{root}/a.csv"]
    assert f"{root}/sub" in fs.find(base, withdirs=True)
    assert fs.glob(f"{base}/**/*.csv") == [f"{root}/a.csv", f"{root}/sub/b.csv"]
    assert fs.glob(f"{base}/*/*.csv") == [f"{root}/sub/b.csv"]
    assert fs.info(f"{base}/sub/b.csv")["size"] == 8
    assert fs.du(base) == 4 + 8 + 1
    assert fs.isdir(f"{base}/sub") and fs.isfile(f"{base}/a.csv") and not fs.exists(f"{base}/nope")
    with pytest.raises(FileNotFoundError):
        fs.info(f"{base}/nope")
    with pytest.raises(FileNotFoundError):
        fs.cat(f"{base}/nope")
    with pytest.raises(IsADirectoryError):
        fs.cat_file(f"{base}/sub")
    with pytest.raises(NotADirectoryError):
        fs.ls(f"{base}/a.csv/x")


def test_modified_is_the_files_time_in_utc(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    fs, base, _ = where
    before = datetime.datetime.now(datetime.timezone.utc)
    fs.pipe(f"{base}/sub/f", b"x")
    when = fs.modified(f"{base}/sub/f")
    assert when.tzinfo is not None
    assert abs((when - before).total_seconds()) < 60  # a store's clock may differ from ours a little
    assert when.timestamp() == pytest.approx(fs.info(f"{base}/sub/f")["mtime"])
    if base.startswith("asyncfs+s3"):  # a prefix of keys keeps no time
        with pytest.raises(IsADirectoryError):
            fs.modified(f"{base}/sub")
    else:
        assert fs.modified(f"{base}/sub").timestamp() == pytest.approx(fs.info(f"{base}/sub")["mtime"])
    if base.startswith("asyncfs+file"):
        assert when.timestamp() == pytest.approx(os.stat(fs._strip_protocol(f"{base}/sub/f")).st_mtime)
    with pytest.raises(FileNotFoundError):
        fs.modified(f"{base}/nope")


def test_cat_ranges_and_batched_cat(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    fs, base, _ = where
    data = bytes(range(256)) * 4
    fs.pipe(f"{base}/blob", data)
    assert fs.cat_file(f"{base}/blob", 10, 20) == data[10:20]
    assert fs.cat_file(f"{base}/blob", -5) == data[-5:]
    assert fs.cat_file(f"{base}/blob", 1000, 5000) == data[1000:]
    assert fs.cat_file(f"{base}/blob", 50, -50) == data[50:-50]
    assert fs.cat_ranges([f"{base}/blob"] * 3, [0, 100, 1020], [4, 104, 1024]) == [data[:4], data[100:104], data[1020:]]
    paths = [f"{base}/many/{i}" for i in range(50)]
    fs.pipe({p: str(i).encode() for i, p in enumerate(paths)})
    got = fs.cat(paths)
    assert [got[fs._strip_protocol(p)] for p in paths] == [str(i).encode() for i in range(50)]
    got = fs.cat([*paths[:2], f"{base}/missing"], on_error="omit")
    assert len(got) == 2
    got = fs.cat([paths[0], f"{base}/missing"], on_error="return")
    assert isinstance(got[fs._strip_protocol(f"{base}/missing")], FileNotFoundError)


def test_open_modes(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    """Writes go through asyncfs streams; reads of a local store run on the
    caller's thread (DirectFile), a network store's through a stream."""
    fs, base, options = where
    with fs.open(f"{base}/f.bin", "wb") as f:
        for i in range(1000):
            f.write(b"%d\n" % i)
    with fs.open(f"{base}/f.bin", "ab") as f:
        f.write(b"tail\n")
    with fs.open(f"{base}/f.bin", "rb", block_size=64) as f:
        assert isinstance(f, BridgeFile if fs.scheme == "s3" else DirectFile)
        assert f.readline() == b"0\n"
        assert f.read(2) == b"1\n"
        assert f.seek(-5, os.SEEK_END) == f.size - 5
        assert f.read() == b"tail\n"
        f.seek(0)
        assert len(f.readlines()) == 1001
    with fs.open(f"{base}/t.txt", "w", encoding="utf-8") as t:
        t.write("ünïcode\nline two\n")
    with fs.open(f"{base}/t.txt", "r", encoding="utf-8") as t:
        assert t.read().splitlines() == ["ünïcode", "line two"]
    with pytest.raises(FileExistsError):
        fs.open(f"{base}/t.txt", "xb")
    # fsspec.open closes the file under the codec (fs.open leaves that to
    # the garbage collector, which never lands a half-written file here)
    with fsspec.open(f"{base}/f.bin.gz", "wb", compression="gzip", **options) as f:
        f.write(b"squeezed" * 100)
    with fsspec.open(f"{base}/f.bin.gz", "rb", compression="infer", **options) as f:
        assert f.read() == b"squeezed" * 100


_READS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.integers(-1, 300)),
        st.tuples(st.just("readline"), st.integers(-1, 80)),
        st.tuples(st.just("seek"), st.integers(-400, 400), st.sampled_from([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END])),
        st.tuples(st.just("tell")),
        st.tuples(st.just("readinto"), st.integers(0, 200)),
    ),
    max_size=25,
)


def _outcome(f: Any, op: tuple[Any, ...]) -> Any:
    try:
        if op[0] == "readinto":
            buffer = bytearray(op[1])
            return f.readinto(buffer), bytes(buffer)
        return getattr(f, op[0])(*op[1:])
    except (OSError, ValueError) as exc:
        return type(exc).__name__


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600) | st.just(b"line\n" * 90), ops=_READS, block=st.sampled_from([None, 1, 7, 64]))
def test_direct_reads_behave_as_the_standard_librarys_file(
    tmp_path: Path, data: bytes, ops: list[tuple[Any, ...]], block: int | None
) -> None:
    """A local store's file object answers any sequence of reads, seeks and
    tells as open(path, "rb") does, whatever its buffer size."""
    path = tmp_path / "same.bin"
    path.write_bytes(data)
    fs = filesystem_class("file")()
    with fs.open(str(path), "rb", block_size=block) as ours, open(path, "rb") as theirs:
        assert isinstance(ours, DirectFile)
        for op in ops:
            assert _outcome(ours, op) == _outcome(theirs, op), op
        assert ours.size == len(data)


@pytest.mark.parametrize("scheme", ["file", "mem"])
def test_sync_queries_on_a_local_store_ask_the_plugin_on_the_calling_thread(tmp_path: Path, scheme: str) -> None:
    """info, ls, exists, isdir, isfile, size and cat_file, called where no
    event loop runs, make no trip through fsspec's loop or asyncfs's pool,
    and answer as the coroutines do, errors included."""
    fs = filesystem_class(scheme)()
    base = str(tmp_path) if scheme == "file" else f"t{uuid.uuid4().hex}"
    fs.makedirs(f"{base}/sub")
    fs.pipe_file(f"{base}/a.bin", bytes(range(200)))
    fs.pipe_file(f"{base}/sub/b.txt", b"bee")
    calls = [
        ("info", f"{base}/a.bin"), ("info", f"{base}/sub"), ("info", f"{base}/missing"),
        ("ls", f"{base}"), ("ls", f"{base}/a.bin"), ("ls", f"{base}/missing"),
        ("exists", f"{base}/a.bin"), ("exists", f"{base}/missing"), ("exists", "/"),
        ("isdir", f"{base}/sub"), ("isdir", f"{base}/a.bin"), ("isfile", f"{base}/a.bin"),
        ("isfile", f"{base}/sub"), ("isfile", f"{base}/missing"), ("size", f"{base}/a.bin"),
        ("cat_file", f"{base}/a.bin"), ("cat_file", f"{base}/missing"), ("cat_file", f"{base}/sub"),
    ]  # fmt: skip

    def outcome(value: Any) -> Any:
        if isinstance(value, list):
            return [{k: v for k, v in e.items() if k != "mtime"} if isinstance(e, dict) else e for e in value]
        return {k: v for k, v in value.items() if k != "mtime"} if isinstance(value, dict) else value

    def sync_call(name: str, path: str) -> Any:
        try:
            return outcome(getattr(fs, name)(path))
        except Exception as exc:
            return type(exc)

    async def async_call(name: str, path: str) -> Any:
        try:
            return outcome(await getattr(fs, f"_{name}")(path))
        except Exception as exc:
            return type(exc)

    before = fs.env.pool.stats().operations
    here = [sync_call(name, path) for name, path in calls]
    assert fs.env.pool.stats().operations == before  # nothing went through the pool
    assert here == [asyncio.run(async_call(name, path)) for name, path in calls]
    assert issubclass(here[2], FileNotFoundError) and issubclass(here[-2], FileNotFoundError)
    assert here[-3] == bytes(range(200)) and here[6:9] == [True, False, True]
    if scheme == "mem":
        fs.rm(base, recursive=True)


class _FullDisk:
    """A plugin file whose appends fail as on a full disk."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def append(self, data: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.parametrize("scheme", ["file", "mem"])
def test_a_sync_open_that_fails_leaves_no_half_made_file(tmp_path: Path, scheme: str) -> None:
    """fs.open(path, "rb") of a missing file and fs.open(path, "wb") under a
    file raise, and the file objects they had begun are left closed: their
    finalizers report nothing (Python 3.13, and -X dev before it, report
    what an IOBase finalizer's close() raises)."""
    base = str(tmp_path) if scheme == "file" else f"t{uuid.uuid4().hex}"
    script = f"""
import gc
from asyncfs.fsspec import filesystem_class
fs = filesystem_class({scheme!r})()
fs.pipe_file({base!r} + "/a-file", b"x")
for path, mode in (({base!r} + "/missing", "rb"), ({base!r} + "/a-file/under", "wb")):
    try:
        fs.open(path, mode)
    except OSError as error:
        print(type(error).__name__)
    gc.collect()
"""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["NotFoundError", "PathNotDirectoryError"]
    assert "Exception ignored" not in done.stderr, done.stderr


@pytest.mark.parametrize("scheme", ["file", "mem"])
def test_sync_writes_on_a_local_store_run_on_the_calling_thread_and_stay_atomic(tmp_path: Path, scheme: str) -> None:
    """pipe_file, makedirs, mkdir and open(..., "wb"), called where no event
    loop runs (pandas' to_csv, pyarrow's create_dir), make no trip through fsspec's loop or asyncfs's
    pool, and stay atomic: a block that raises, a failed write and a writer
    dropped without close all leave the target as it was, with no staged
    sibling left; a missing folder is made, as the Env makes it."""
    fs = filesystem_class(scheme)()
    base = str(tmp_path) if scheme == "file" else f"t{uuid.uuid4().hex}"
    target = f"{base}/t.bin"
    fs.pipe_file(target, b"old")
    before = fs.env.pool.stats().operations
    fs.makedirs(f"{base}/d/e", exist_ok=True)
    fs.mkdir(f"{base}/d/e/f/g")  # parents made (fsspec's default; pyarrow's create_dir)
    fs.mkdir(f"{base}/d/e/f/h", create_parents=False)
    with pytest.raises(FileNotFoundError):
        fs.mkdir(f"{base}/d/none/i", create_parents=False)
    assert fs.isdir(f"{base}/d/e/f/g") and fs.isdir(f"{base}/d/e/f/h")
    fs.pipe_file(f"{base}/d/e/p.bin", b"piped")
    with fs.open(target, "wb") as f:
        assert isinstance(f, DirectWriter)
        f.write(b"new " * 40_000)  # more than one buffer
        assert f.tell() == 160_000
    with pytest.raises(FileExistsError):
        fs.makedirs(f"{base}/d", exist_ok=False)
    with pytest.raises(FileExistsError):
        fs.open(target, "xb")
    with pytest.raises(FileExistsError):
        fs.pipe_file(target, b"x", mode="create")
    assert fs.env.pool.stats().operations == before  # nothing went through the pool
    assert fs.cat_file(target) == b"new " * 40_000 and fs.cat_file(f"{base}/d/e/p.bin") == b"piped"

    with pytest.raises(RuntimeError), fs.open(target, "wb") as f:
        f.write(b"half" * 100_000)
        raise RuntimeError("the block fails")
    dropped = fs.open(target, "wb")
    dropped.write(b"dropped" * 100_000)
    del dropped
    gc.collect()
    failing = fs.open(target, "wb")
    failing.write(b"x" * 10)
    failing._sink._landing.file = _FullDisk(failing._sink._landing.file)
    with pytest.raises(OSError, match="No space"):
        failing.close()
    assert fs.cat_file(target) == b"new " * 40_000
    assert sorted(fs.ls(base, detail=False)) == [f"{base}/d", target]

    fs.pipe_file(f"{base}/x/y/z.bin", b"z")
    with fs.open(f"{base}/q/r.bin", "wb") as f:
        f.write(b"r")
    assert fs.cat_file(f"{base}/x/y/z.bin") == b"z" and fs.cat_file(f"{base}/q/r.bin") == b"r"
    if scheme == "mem":
        fs.rm(base, recursive=True)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), start=st.none() | st.integers(-400, 400), end=st.none() | st.integers(-400, 400))
def test_cat_file_ranges_slice_as_python_does(tmp_path: Path, data: bytes, start: int | None, end: int | None) -> None:
    """cat_file(path, start, end) is data[start:end], negative bounds from
    the end, on the calling thread and through the loop alike."""
    path = tmp_path / "ranged.bin"
    path.write_bytes(data)
    fs = filesystem_class("file")()
    assert fs.cat_file(str(path), start, end) == data[start:end]
    assert asyncio.run(fs._cat_file(str(path), start, end)) == data[start:end]


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_direct_reads_from_a_running_loop_take_a_stream(tmp_path: Path, loop: str) -> None:
    """On a thread running an event loop, a plugin call must not block it:
    fs.open hands back the stream-backed file there."""
    (tmp_path / "a").write_bytes(b"from the loop")
    fs = filesystem_class("file")()

    async def open_on_loop() -> tuple[type, bytes]:
        with fs.open(f"{tmp_path}/a", "rb") as f:
            return type(f), f.read()

    if loop == "asyncio":
        got = asyncio.run(open_on_loop())
    else:
        got = pytest.importorskip("trio", reason="trio is not installed").run(open_on_loop)
    assert got == (BridgeFile, b"from the loop")
    with pytest.raises(FileNotFoundError):
        fs.open(f"{tmp_path}/missing", "rb")


# fsspec's MMapCache (cache_type="mmap", blockcache::) leaves the file under
# its mmap to the garbage collector (fsspec/filesystem_spec#849)
@pytest.mark.filterwarnings(r"ignore:Exception ignored in. <_io.FileIO:pytest.PytestUnraisableExceptionWarning")
def test_fsspecs_caches_over_the_bridge(where: tuple[AsyncfsFileSystem, str, dict[str, Any]], tmp_path: Path) -> None:
    """fsspec's caching layers work on asyncfs URLs: ``simplecache::`` and
    ``filecache::`` (whole files), ``blockcache::`` (blocks kept in a
    local sparse file, which opens the target with ``cache_type="none"``
    and puts its own cache in), and each ``cache_type`` of ``fs.open``."""
    fs, base, options = where
    protocol = base.split("://")[0]
    data = bytes(range(256)) * 3000  # 750 KiB: several blocks of the caches below
    fs.pipe(f"{base}/blob", data)
    for cache_type in ("none", "bytes", "readahead", "first", "all", "mmap", "blockcache", "background"):
        with fs.open(f"{base}/blob", "rb", cache_type=cache_type, block_size=64 << 10) as f:
            f.seek(100_000)
            middle = f.read(200_000)
            f.seek(-10, os.SEEK_END)
            assert (middle, f.read(), f.size) == (data[100_000:300_000], data[-10:], len(data)), cache_type

    for layer in ("simplecache", "filecache", "blockcache"):
        storage = {layer: {"cache_storage": str(tmp_path / layer)}, protocol: options}
        url = f"{layer}::{base}/blob"
        with fsspec.open(url, "rb", **storage) as f:
            f.seek(5000)
            assert f.read(70_000) == data[5000:75_000], layer
        assert any((tmp_path / layer).iterdir()), f"{layer} kept nothing"
        # what the cache holds answers the next open: the object changed
        # meanwhile, and the bytes read before come back as they were cached
        fs.pipe(f"{base}/blob", bytes(len(data)))
        with fsspec.open(url, "rb", **storage) as f:
            f.seek(5000)
            assert f.read(70_000) == data[5000:75_000], layer
        fs.pipe(f"{base}/blob", data)


def test_a_failed_write_leaves_the_target_as_it_was(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    fs, base, _ = where
    fs.pipe(f"{base}/keep", b"old")
    with pytest.raises(RuntimeError), fs.open(f"{base}/keep", "wb") as f:
        f.write(b"half of the new")
        raise RuntimeError("the writer fails")
    assert fs.cat(f"{base}/keep") == b"old"
    assert fs.ls(base, detail=False) == [f"{fs._strip_protocol(base)}/keep"]


def test_transactions_land_together_or_not_at_all(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    fs, base, _ = where
    root = fs._strip_protocol(base)
    fs.pipe(f"{base}/ckpt/meta", b"v1")
    with fs.transaction:
        with fs.open(f"{base}/ckpt/weights", "wb") as f:
            f.write(b"w2")
        fs.pipe(f"{base}/ckpt/meta", b"v2")
        assert fs.cat(f"{base}/ckpt/meta") == b"v1"  # nothing lands before the end
        assert not fs.exists(f"{base}/ckpt/weights")
    assert fs.cat(f"{base}/ckpt/meta") == b"v2" and fs.cat(f"{base}/ckpt/weights") == b"w2"
    with pytest.raises(KeyError), fs.transaction:
        fs.pipe(f"{base}/ckpt/meta", b"v3")
        with fs.open(f"{base}/ckpt/other", "wb") as f:
            f.write(b"never")
        raise KeyError("abandon")
    assert fs.cat(f"{base}/ckpt/meta") == b"v2"
    assert fs.ls(f"{base}/ckpt", detail=False) == [f"{root}/ckpt/meta", f"{root}/ckpt/weights"]
    assert not fs._intrans


def test_mv_cp_rm_and_put_get(
    where: tuple[AsyncfsFileSystem, str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    fs, base, _ = where
    root = fs._strip_protocol(base)
    fs.pipe({f"{base}/d/x": b"x", f"{base}/d/y/z": b"z"})
    fs.mv(f"{base}/d", f"{base}/moved", recursive=True)
    assert fs.find(base) == [f"{root}/moved/x", f"{root}/moved/y/z"]
    fs.mv(f"{base}/moved/x", f"{base}/x2")
    fs.cp(f"{base}/moved", f"{base}/copy", recursive=True)
    assert fs.cat(f"{base}/copy/y/z") == b"z"
    local = tmp_path_factory.mktemp("local") / "got"
    fs.get(f"{base}/copy", str(local), recursive=True)
    assert (local / "y" / "z").read_bytes() == b"z"
    (local / "up.txt").write_bytes(b"uploaded")
    fs.put(str(local / "up.txt"), f"{base}/up.txt")
    assert fs.cat(f"{base}/up.txt") == b"uploaded"
    fs.rm(f"{base}/copy", recursive=True)
    fs.rm(f"{base}/x2")
    assert fs.find(base) == [f"{root}/moved/y/z", f"{root}/up.txt"]


def test_pickles_to_a_worker_process(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    fs, base, _ = where
    if fs.scheme == "mem":
        pytest.skip("mem:// is each process's own memory")
    fs.pipe(f"{base}/for-the-worker", b"pickled")
    code = (
        "import pickle, sys\nfs, path = pickle.loads(sys.stdin.buffer.read())\nsys.stdout.buffer.write(fs.cat(path))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps((fs, f"{base}/for-the-worker")),
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"pickled"
    assert pickle.loads(pickle.dumps(fs)) is fs  # same options: fsspec's cached instance


def test_options_reach_a_plugin_loaded_at_run_time(tmp_path: Path) -> None:
    """A third-party plugin's options through the bridge (a GCS plugin's
    credentials, say): each filesystem given options has a filesystem of
    the plugin of its own, here and in a worker process it is pickled to,
    which loads the plugin for it."""
    library = build_plugin(
        REPO / "tests/plugins/testfs.c", tmp_path / "libanswers.so", "CONFIGURED", 'SCHEME="answers"'
    )
    if "answers" not in asyncfs.default_registry().schemes():
        asyncfs.load_plugin(library)
    cls = filesystem_class("answers")
    plain, seven, forty_two = cls(), cls(answer=7), cls(answer=42)
    assert [fs.exists("/answer/7") for fs in (plain, seven, forty_two)] == [False, True, False]
    assert [fs.exists("/answer/42") for fs in (plain, seven, forty_two)] == [False, False, True]
    assert plain.exists("/answer/0")  # the registry's filesystem kept its own value
    with pytest.warns(asyncfs.IgnoredOptionWarning, match=r"ignores 'question'.*takes answer"):
        asked = cls(question=1)
    assert asked.exists("/answer/0")  # nothing reached a plugin: the registry's filesystem serves it

    code = "import pickle, sys\nfs = pickle.loads(sys.stdin.buffer.read())\nprint(fs.exists('/answer/42'))\n"
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(forty_two), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.strip() == b"True"


def test_options_and_an_env_do_not_go_together() -> None:
    """Options given with env= used to be dropped without a word."""
    env = asyncfs.Env()
    with pytest.raises(asyncfs.InvalidArgumentError, match=r"\(latency_us\) and env="):
        filesystem_class("mem")(env=env, latency_us=5)
    env.close()


def test_bad_options_are_typed_errors(s3_gateway: Gateway) -> None:
    with pytest.warns(asyncfs.IgnoredOptionWarning, match=r"ignores 'endpoint_uri'.*takes.* endpoint,"):
        filesystem_class("s3")(endpoint_uri="http://x", skip_instance_cache=True)
    with pytest.raises(asyncfs.InvalidArgumentError, match="must be a str"):
        filesystem_class("s3")(region=["eu"])


# ---- pandas, pyarrow, universal-pathlib ---------------------------------------------------------


def test_pandas_csv_and_parquet_round_trips(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pandas needs it for Parquet)")
    _, base, options = where
    frame = pd.DataFrame({"a": range(100), "b": [f"row {i}" for i in range(100)]})
    frame.to_csv(f"{base}/frame.csv", index=False, storage_options=options)
    assert pd.read_csv(f"{base}/frame.csv", storage_options=options).equals(frame)
    frame.to_parquet(f"{base}/frame.parquet", storage_options=options)
    assert pd.read_parquet(f"{base}/frame.parquet", storage_options=options).equals(frame)


def s3fs_options(gateway: Gateway, secret: str | None = None) -> dict[str, Any]:
    """The gateway's settings as a storage_options dict written for s3fs."""
    return {
        "key": gateway.access_key,
        "secret": secret or gateway.secret_key,
        "client_kwargs": {"endpoint_url": gateway.endpoint, "region_name": gateway.region},
        "config_kwargs": {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 2}},
    }


def test_storage_options_written_for_s3fs_work_unchanged(s3_gateway: Gateway) -> None:
    """A pandas user's s3fs storage_options, with s3:// changed to
    asyncfs+s3:// and nothing else: the keys, endpoint, region and
    addressing style reach the plugin (a wrong secret is refused by the
    gateway, so the secret given is the one used)."""
    pd = pytest.importorskip("pandas", reason="pandas is not installed")
    native = filesystem_class("s3")(**s3_options(s3_gateway))
    if not native.exists("asyncfs-stack"):
        native.mkdir("asyncfs-stack")
    url = f"asyncfs+s3://asyncfs-stack/{uuid.uuid4().hex}/frame.csv"
    frame = pd.DataFrame({"a": range(10), "b": [f"row {i}" for i in range(10)]})
    frame.to_csv(url, index=False, storage_options=s3fs_options(s3_gateway))
    assert native.cat(url) == frame.to_csv(index=False).encode()
    assert pd.read_csv(url, storage_options=s3fs_options(s3_gateway)).equals(frame)
    with pytest.raises(PermissionError):
        pd.read_csv(url, storage_options=s3fs_options(s3_gateway, secret="not-the-secret"))
    native.rm(url)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": "AKID", "access_key_id": "OTHER"}, r"key and access_key_id both set 'access_key_id'"),
        ({"client_kwargs": {"use_fips": True}}, r"client_kwargs\['use_fips'\]; it takes endpoint_url"),
        ({"client_kwargs": "http://x"}, r"client_kwargs must be a dict, not str"),
        ({"config_kwargs": {"s3": {"addressing_style": "sideways"}}}, r"'path', 'virtual' or 'auto', not 'sideways'"),
        ({"config_kwargs": {"connect_timeout": "5"}}, r"connect_timeout'\] must be seconds"),
        ({"requester_pays": True}, r"cannot honour s3fs's 'requester_pays': requests are not sent as"),
        ({"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}}, r"'s3_additional_kwargs': no extra request"),
    ],
)
def test_s3fs_options_asyncfs_cannot_honour_are_typed_errors(
    options: dict[str, Any], message: str, s3_plugin: None
) -> None:
    with pytest.raises(asyncfs.InvalidArgumentError, match=message):
        filesystem_class("s3")(skip_instance_cache=True, **options).env.close()


_S3FS_NAMES = {"key": "access_key_id", "secret": "secret_access_key", "token": "session_token", "anon": "anonymous"}


@given(
    st.dictionaries(st.sampled_from(sorted(_S3FS_NAMES)), st.text(max_size=8) | st.booleans(), max_size=4),
    st.dictionaries(st.sampled_from(["endpoint_url", "region_name", "verify"]), st.text(max_size=8), max_size=3),
)
def test_s3fs_names_map_to_the_plugins_options(top: dict[str, Any], client: dict[str, Any]) -> None:
    translated = plugin_options("s3", {**top, "client_kwargs": client})
    expected = {_S3FS_NAMES[k]: v for k, v in top.items()}
    names = {"endpoint_url": "endpoint", "region_name": "region", "verify": "ca_bundle"}
    expected.update({names[k]: v for k, v in client.items()})
    assert translated == expected
    assert plugin_options("mem", {**top, "client_kwargs": client}) == {**top, "client_kwargs": client}


def test_pyarrow_dataset_with_partitioning(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    ds = pytest.importorskip("pyarrow.dataset")
    pafs = pytest.importorskip("pyarrow.fs")

    fs, base, _ = where
    table = pa.table({"year": [2024, 2024, 2025, 2026] * 25, "value": list(range(100))})
    arrow_fs = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    root = fs._strip_protocol(base)
    ds.write_dataset(table, f"{root}/ds", format="parquet", partitioning=["year"], filesystem=arrow_fs)
    assert sorted(fs.ls(f"{base}/ds", detail=False)) == [f"{root}/ds/{y}" for y in (2024, 2025, 2026)]
    back = ds.dataset(f"{root}/ds", format="parquet", partitioning=["year"], filesystem=arrow_fs).to_table()
    assert sorted(back.column("value").to_pylist()) == list(range(100))
    assert back.filter(pa.compute.equal(back.column("year"), 2025)).num_rows == 25


def test_zarr_arrays_and_groups(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    """zarr 3 (xarray's storage for chunked arrays) writes and reads through
    the bridge: its FsspecStore drives the AsyncFileSystem's coroutines."""
    zarr = pytest.importorskip("zarr", reason="zarr 3 is not installed (it needs Python 3.11 or later)")
    np = pytest.importorskip("numpy")
    fs, base, options = where
    data = np.arange(10_000, dtype="i4").reshape(100, 100)
    url = f"{base}/a.zarr"
    array = zarr.open_array(url, mode="w", shape=data.shape, chunks=(32, 32), dtype="i4", storage_options=options)
    array[:] = data
    back = zarr.open_array(url, mode="r", storage_options=options)
    assert back.shape == data.shape and (back[10:50, 60:99] == data[10:50, 60:99]).all()
    assert len(fs.ls(f"{base}/a.zarr/c")) == 4  # chunk rows of the default layout
    group = zarr.open_group(f"{base}/g.zarr", mode="w", storage_options=options)
    group.create_array("x", shape=(4,), dtype="f8")[:] = [1.0, 2.0, 3.0, 4.0]
    group.attrs["units"] = "m"
    again = zarr.open_group(f"{base}/g.zarr", mode="r", storage_options=options)
    assert [name for name, _ in again.members()] == ["x"]
    assert list(again["x"][:]) == [1.0, 2.0, 3.0, 4.0] and again.attrs["units"] == "m"


def test_universal_pathlib(where: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    upath = pytest.importorskip("upath", reason="universal-pathlib is not installed")
    _, base, options = where
    folder = upath.UPath(base, **options)
    (folder / "notes.txt").write_text("through UPath")
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    (folder / "sub" / "x.bin").write_bytes(b"x")
    assert (folder / "notes.txt").read_text() == "through UPath"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "sub"]
    assert [p.name for p in folder.glob("**/*.bin")] == ["x.bin"]
    assert (folder / "notes.txt").stat().st_size == len("through UPath")
    assert (folder / "notes.txt").exists() and not (folder / "gone").exists()


# ---- Dask on worker processes --------------------------------------------------------------------

DASK_JOB = """
import sys, json
import dask.dataframe as dd
import pandas as pd
from distributed import Client, LocalCluster

base, options = sys.argv[1], json.loads(sys.argv[2])
if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            frame = pd.DataFrame({"part": [i % 4 for i in range(400)], "value": range(400)})
            dd.from_pandas(frame, npartitions=4).to_parquet(
                f"{base}/table", partition_on=["part"], storage_options=options
            )
            back = dd.read_parquet(f"{base}/table", storage_options=options).compute()
            pids = client.run(lambda: __import__("os").getpid())
            print(json.dumps({"rows": len(back), "sum": int(back["value"].sum()), "workers": len(set(pids.values()))}))
"""


def test_dask_cluster_of_worker_processes(where: tuple[AsyncfsFileSystem, str, dict[str, Any]], tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="dask[distributed] is not installed")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    fs, base, options = where
    if fs.scheme == "mem":
        pytest.skip("mem:// is each process's own memory: worker processes cannot share it")

    script = tmp_path / "job.py"
    script.write_text(DASK_JOB)
    done = subprocess.run(
        [sys.executable, str(script), base, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"rows": 400, "sum": sum(range(400)), "workers": 2}
    assert sorted(fs.ls(f"{base}/table", detail=False))[:4] == [
        f"{fs._strip_protocol(base)}/table/part={i}" for i in range(4)
    ]


def test_a_file_read_from_a_loop_thread_sees_what_was_appended_after_its_end(tmp_path: Path) -> None:
    """The stream-backed file (a thread running a loop gets it) answers
    reads from its buffer without a hop, and still, once it came back empty
    at the end, asks again: a log followed from there sees new lines."""
    path = tmp_path / "log"
    path.write_bytes(b"one\n")
    fs = filesystem_class("file")()

    async def follow() -> list[bytes]:
        with fs.open(str(path), "rb") as f:
            assert isinstance(f, BridgeFile)
            got = [f.readline(), f.readline(), f.read()]
            with path.open("ab") as more:
                more.write(b"two\nthree\n")
            got += [f.readline(), f.read(), f.read()]
            return got

    assert asyncio.run(follow()) == [b"one\n", b"", b"", b"two\n", b"three\n", b""]
