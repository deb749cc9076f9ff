"""What a user of the Env expects of writes and errors: missing folders above the
target are made (the README's first example, on a fresh Env), errors name
the path the user gave and never a temporary one, and the plugins' own
rule (TensorFlow's: the parent must exist) stays one option away."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import asyncfs
from asyncfs import _uri, tfrecord

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["mem", "file"])
def base(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "mem":
        return f"mem://writes-{uuid.uuid4().hex}"
    return f"file://{tmp_path}"


async def test_the_readme_example_runs_on_a_fresh_env() -> None:
    async with asyncfs.Env() as env:
        await env.write_file("mem://data/a.txt", b"hello")
        assert await env.read_file("mem://data/a.txt") == b"hello"
        assert await env.files_exist(["mem://data/a.txt", "/nonexistent/x"]) == [True, False]


async def test_every_kind_of_write_makes_missing_folders(base: str) -> None:
    async with asyncfs.Env() as env:
        await env.write_file(f"{base}/w/deep/a.bin", b"a")
        await env.append(f"{base}/ap/deep/b.log", b"b")
        async with env.open(f"{base}/st/deep/c.txt", "w") as f:
            await f.write("c")
        async with await tfrecord.writer(env, f"{base}/tf/deep/d.tfrecord") as out:
            await out.write(b"d")
        await env.copy(f"{base}/w/deep/a.bin", f"{base}/cp/deep/e.bin")
        await env.copy(f"{base}/w", f"{base}/tree/deep/w", recursive=True)
        assert await env.read_file(f"{base}/w/deep/a.bin") == b"a"
        assert await env.read_file(f"{base}/ap/deep/b.log") == b"b"
        assert await env.read_file(f"{base}/st/deep/c.txt") == b"c"
        assert [r async for r in tfrecord.reader(env, f"{base}/tf/deep/d.tfrecord")] == [b"d"]
        assert await env.read_file(f"{base}/cp/deep/e.bin") == b"a"
        assert await env.read_file(f"{base}/tree/deep/w/deep/a.bin") == b"a"


async def test_without_create_parents_the_error_names_the_users_path(base: str) -> None:
    async with asyncfs.Env(create_parents=False) as env:
        target = f"{base}/missing/a.bin"
        with pytest.raises(asyncfs.NotFoundError) as info:
            await env.write_file(target, b"a")
        assert info.value.path == target and "asyncfs-tmp" not in str(info.value)
        with pytest.raises(asyncfs.NotFoundError) as info:
            await env.open(target, "wb")
        assert info.value.path == target and "asyncfs-tmp" not in str(info.value)
        assert not await env.exists(f"{base}/missing")


async def test_a_missing_source_makes_no_folders(base: str) -> None:
    async with asyncfs.Env() as env:
        with pytest.raises(asyncfs.NotFoundError):
            await env.copy(f"{base}/no-such-file", f"{base}/new/folder/x")
        assert not await env.exists(f"{base}/new")


async def test_a_file_in_the_way_is_not_replaced(base: str) -> None:
    async with asyncfs.Env() as env:
        await env.write_file(f"{base}/f", b"file")
        with pytest.raises((asyncfs.FailedPreconditionError, asyncfs.NotFoundError)):
            await env.write_file(f"{base}/f/under/x", b"x")
        assert await env.read_file(f"{base}/f") == b"file"


names = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1).filter(
    lambda name: name not in (".", "..")
)


@given(
    prefix=st.sampled_from(["mem://host", "mem://", "file://", "", "s3://bucket"]),
    folders=st.lists(names, max_size=4),
    name=names,
)
def test_parent_undoes_join(prefix: str, folders: list[str], name: str) -> None:
    folder = prefix + "".join(f"/{part}" for part in folders)
    if not folders and not prefix.startswith(("mem://host", "s3://")):
        folder += "/"
    assert _uri.parent(_uri.join(folder, name)).rstrip("/") == folder.rstrip("/")


async def test_text_given_to_a_binary_write_says_to_encode_it_and_writes_nothing(base: str) -> None:
    async with asyncfs.Env() as env:
        for atomic in (True, False):
            target = f"{base}/text-{atomic}.bin"
            with pytest.raises(TypeError, match=rf"write_file {target}: .*not str; encode it"):
                await env.write_file(target, "hello", atomic=atomic)  # type: ignore[arg-type]
            assert not await env.exists(target)
        with pytest.raises(TypeError, match="not str; encode it"):
            await env.append(f"{base}/log", "x")  # type: ignore[arg-type]
        async with env.open(f"{base}/stream.bin", "wb") as f:
            with pytest.raises(TypeError, match="text mode"):
                await f.write("text")  # type: ignore[arg-type]
            await f.write(b"bytes")
        assert await env.read_file(f"{base}/stream.bin") == b"bytes"


def test_a_plugins_cancelled_status_is_not_asyncios_cancellation() -> None:
    assert not issubclass(asyncfs.OperationCancelledError, asyncio.CancelledError)
    assert asyncfs.errors.STATUS_ERRORS[asyncfs.Code.CANCELLED] is asyncfs.OperationCancelledError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncfs.CancelledError is asyncfs.OperationCancelledError
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


async def test_an_error_says_each_thing_once(base: str) -> None:
    """The plugin says what went wrong, the core says where: the path
    appears once, as given."""
    missing = f"{base}/nope/x"
    async with asyncfs.Env() as env:
        for call in (env.stat, env.read_file, env.listdir, env.rm):
            with pytest.raises(asyncfs.NotFoundError) as info:
                await call(missing)
            text = str(info.value)
            assert text.count("nope/x") == 1, text
            assert text.startswith(f"{call.__name__} {missing}: "), text  # the operation as called


async def test_pathlib_paths_are_accepted_wherever_a_uri_is(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    async with asyncfs.Env() as env:
        await env.write_file(folder / "a.txt", b"a")
        assert await env.read_file(folder / "a.txt") == b"a"
        assert await env.exists(folder / "a.txt") and await env.isdir(folder)
        assert await env.listdir(folder) == ["a.txt"]
        assert await env.files_exist([folder / "a.txt", folder / "b.txt"]) == [True, False]
        assert await env.glob(tmp_path / "*" / "*.txt") == [str(folder / "a.txt")]
        async with env.open(folder / "b.txt", "w") as out:
            await out.write("text")
        await env.copy(folder / "b.txt", folder / "c.txt")
        await env.rename(folder / "c.txt", folder / "d.txt")
        async with env.transaction(folder) as txn:
            await txn.write_file(folder / "e.txt", b"e")
            await txn.rm(Path("a.txt"))
        assert [p async for p, _ in env.prefetch([folder / "b.txt", folder / "d.txt"])] == [
            str(folder / "b.txt"),
            str(folder / "d.txt"),
        ]
        assert sorted(p.name for p in folder.iterdir()) == ["b.txt", "d.txt", "e.txt"]
        await env.rmtree(folder)
        assert not folder.exists()


@pytest.mark.parametrize("size", [0, 3, 63, 64, 65, 1000])
def test_a_memory_region_is_a_c_string_too(size: int) -> None:
    """TensorFlow's own conformance test reads a region's data as a C
    string: the memory plugin keeps a zero byte after the content."""
    from asyncfs._native.binding import ffi  # noqa: PLC0415

    fs = asyncfs.get_filesystem("mem://")
    uri = f"mem:///regions/{uuid.uuid4().hex}"
    fs.recursively_create_dir("mem:///regions")
    with fs.new_writable_file(uri) as file:
        for chunk in (b"x" * (size // 2), b"y" * (size - size // 2)):
            if chunk:
                file.append(chunk)
    if size == 0:
        return  # an empty file has no region to map
    with fs.new_read_only_memory_region_from_file(uri) as region:
        assert ffi.string(ffi.cast("char*", ffi.from_buffer(region.data))) == b"x" * (size // 2) + b"y" * (
            size - size // 2
        )


async def test_copy_tells_its_progress_in_bytes(base: str) -> None:
    async with asyncfs.Env() as env:
        await env.write_file(f"{base}/tree/a", b"a" * 1000)
        await env.write_file(f"{base}/tree/sub/b", b"b" * 234)
        told: list[int] = []
        await env.copy(f"{base}/tree/a", f"{base}/single", progress=told.append)
        assert told == [1000]
        told.clear()
        await env.copy(f"{base}/tree", "mem:///progress-copy", recursive=True, progress=told.append)
        assert sum(told) == 1234 and len(told) == 2  # one call per folder level
        assert await env.read_file("mem:///progress-copy/sub/b") == b"b" * 234


# ---- a device that refuses the bytes -------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full (every write: ENOSPC)")
def test_a_failed_call_gives_the_callers_buffer_back() -> None:
    """The plugin's error reaches the caller, and the buffer the caller
    passed is free again while that error is held: an exported buffer would
    make resizing it raise BufferError, and a ``with memoryview(...)`` around
    the call (how io's buffered writers hand data to a raw file) would
    replace the plugin's error with that BufferError."""
    fs = asyncfs.get_filesystem("file://")
    data = bytearray(b"x" * 100)
    file = fs.new_writable_file("file:///dev/full")
    with pytest.raises(asyncfs.ResourceExhaustedError, match="No space left") as failed, memoryview(data) as view:
        file.append(view)
    data.extend(b"y")  # the error (and its traceback) is still held here
    assert failed.value.path == "file:///dev/full"
    file.discard()

    (error,) = fs.write_files(["file:///dev/full"], [data])
    assert isinstance(error, asyncfs.ResourceExhaustedError)
    data.extend(b"y")

    reader = fs.new_random_access_file("file:///proc/self/mem")  # pread at 0: EIO
    target = bytearray(10)
    with pytest.raises(asyncfs.StatusError) as failed_read:
        reader.read_into(0, target)
    target.extend(b"y")
    reader.close()
    assert failed_read.value.path == "file:///proc/self/mem"


FILE_SIZE_LIMIT_JOB = """
import asyncio, resource, signal, sys
import fsspec
import asyncfs

target = sys.argv[1]
big = b"x" * 1_000_000

async def env_write_old():
    async with asyncfs.Env() as env:
        await env.write_file("file://" + target, b"old")

# the plugins load (and may copy themselves into the cache directory) before the limit
asyncio.run(env_write_old())
fsspec.filesystem("asyncfs+file").pipe_file(target, b"old")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))

async def env_open():
    async with asyncfs.Env() as env:
        async with env.open("file://" + target, "wb") as f:
            await f.write(big)

async def env_write_caught_then_close():
    async with asyncfs.Env() as env:
        f = await env.open("file://" + target, "wb")
        try:
            for _ in range(8):  # past the writer's buffer
                await f.write(big)
        except asyncfs.OutOfRangeError:
            pass
        await f.close()

def fs_open():
    with fsspec.filesystem("asyncfs+file").open(target, "wb") as f:
        f.write(big)

def fsspec_open():
    with fsspec.open("asyncfs+file://" + target, "wb") as f:
        f.write(big)

writes = [lambda: asyncio.run(env_open()), lambda: asyncio.run(env_write_caught_then_close()), fs_open, fsspec_open]
for write in writes:
    try:
        write()
    except Exception as exc:
        print(type(exc).__name__, getattr(exc, "path", None), flush=True)
        print(exc, file=sys.stderr)
    else:
        print("no error", flush=True)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as Linux has them")
def test_a_write_the_system_refuses_raises_its_error_and_leaves_the_target(tmp_path: Path) -> None:
    """Past a file-size limit (EFBIG, as a full disk gives ENOSPC), the Env's
    writer and the fsspec bridge's writer raise the plugin's error naming
    the user's file, and the file keeps what it held: no part of the new
    bytes and no staging file beside it, even when the caller goes on to
    close the file (which then says it was not written)."""
    target = tmp_path / "table.parquet"
    script = tmp_path / "job.py"
    script.write_text(FILE_SIZE_LIMIT_JOB)
    done = subprocess.run(
        [sys.executable, str(script), str(target)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        f"OutOfRangeError file://{target}",
        f"FailedPreconditionError file://{target}",  # a close after a failed write: not written
        f"OutOfRangeError {target}",
        f"FailedPreconditionError {target}",  # fsspec's OpenFile closes the file whatever its block raised
    ]
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.py", "table.parquet"]
