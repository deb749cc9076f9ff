"""Hostile and careless input never reaches a target the caller did not
name: NUL bytes, file:// authorities, malformed schemes, filesystem roots as
transaction roots, symlinks out of a transaction root, names at NAME_MAX,
corrupt compressed data and TFRecord garbage. Each finding of the hardening
issue has its regression test here, on every built-in plugin it applies to."""

from __future__ import annotations

import asyncio
import os
import random
import struct
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncfs
from asyncfs import InvalidArgumentError, _uri
from asyncfs._native import binding as _ffi
from asyncfs.tfrecord import masked_crc32c

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


@pytest.fixture(params=["file", "mem", "s3"])
def any_base(request: pytest.FixtureRequest, registry: asyncfs.Registry, tmp_path: Path) -> Iterator[str]:
    """A fresh folder on each built-in plugin of the session registry, s3
    included where the Ceph gateway runs (skipped, saying why, elsewhere)."""
    if request.param == "file":
        yield f"file://{tmp_path}"
        return
    fs = request.getfixturevalue("s3_fs") if request.param == "s3" else registry.get("mem")
    root = f"{request.param}://asyncfs-hostile/{uuid.uuid4().hex}"
    fs.recursively_create_dir(root)
    yield root
    fs.delete_recursively(root)


@pytest.fixture
async def any_env(registry: asyncfs.Registry) -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env(registry=registry) as environment:
        yield environment


# ---- 1. NUL bytes ----------------------------------------------------------------


async def test_a_nul_byte_never_reaches_the_file_before_it(any_env: asyncfs.Env, any_base: str) -> None:
    env, base = any_env, any_base
    target = f"{base}/report.txt"
    await env.write_file(target, b"precious")
    for op in (
        env.write_file(f"{target}\0.png", b"overwritten"),
        env.append(f"{target}\0.log", b"appended"),
        env.rm(f"{target}\0.bak"),
        env.rmtree(f"{target}\0.d"),
        env.read_file(f"{target}\0/anything"),
        env.exists(f"{target}\0"),
        env.stat(f"{target}\0"),
        env.glob(f"{base}/*\0"),
        env.copy(target, f"{target}\0.copy"),
        env.rename(target, f"{target}\0.moved"),
        env.files_exist([target, f"{target}\0x"]),
    ):
        with pytest.raises(InvalidArgumentError, match="NUL byte"):
            await op
    assert await env.read_file(target) == b"precious"
    assert await env.listdir(base) == ["report.txt"]


def test_the_sync_adapter_refuses_nul_bytes(registry: asyncfs.Registry, any_base: str) -> None:
    base = any_base
    fs = registry.for_uri(base)
    target = f"{base}/report.txt"
    fs.write_file(target, b"precious")
    for call in (
        lambda: fs.delete_file(f"{target}\0.bak"),
        lambda: fs.read_file(f"{target}\0"),
        lambda: fs.new_writable_file(f"{target}\0.png"),
        lambda: fs.files_exist([f"{target}\0"]),
        lambda: fs.translate_name(f"{target}\0"),
        lambda: fs.get_matching_paths(f"{base}/\0*"),
    ):
        with pytest.raises(InvalidArgumentError, match="NUL byte"):
            call()
    assert fs.read_file(target) == b"precious"


# ---- 2. file://NAME is host NAME, not a path ---------------------------------------


@pytest.mark.parametrize("uri", ["file://zzz_nonexistent", "file://ds", "file://data/x", "file://127.0.0.1/tmp"])
async def test_a_file_uri_with_a_host_is_refused(env: asyncfs.Env, uri: str) -> None:
    with pytest.raises(InvalidArgumentError, match="take no host"):
        await env.exists(uri)
    with pytest.raises(InvalidArgumentError, match="take no host"):
        asyncfs.get_filesystem("file://").path_exists(uri)


async def test_mem_takes_its_authority_as_the_first_folder(env: asyncfs.Env) -> None:
    folder = f"hostile-{uuid.uuid4().hex}"
    await env.makedirs(f"mem://{folder}/a")
    await env.write_file(f"mem://{folder}/a/x", b"same")
    assert await env.read_file(f"mem:///{folder}/a/x") == b"same"
    await env.rmtree(f"mem:///{folder}")


async def test_file_localhost_is_the_local_disk(env: asyncfs.Env, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"local")
    assert await env.read_file(f"file://localhost{tmp_path}/a.txt") == b"local"
    assert await env.read_file(f"file://LOCALHOST{tmp_path}/a.txt") == b"local"


@pytest.mark.parametrize(
    "command", [["exists", "file://zzz_nonexistent"], ["ls", "file://ds"], ["rm", "-r", "file://data"]]
)
def test_the_cli_refuses_file_uris_with_a_host(command: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asyncfs", *command],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode != 0
    assert "take no host" in done.stderr
    assert done.stdout.strip() != "yes"


@pytest.mark.parametrize("uri", ["bad fs:///x", "2fs://x", "a b://c", "ünï://x"])
async def test_text_before_colon_slash_slash_must_be_a_scheme(
    env: asyncfs.Env, uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="not a URI scheme"):
        await env.write_file(uri, b"x")
    assert list(tmp_path.iterdir()) == []


async def test_an_unregistered_rfc3986_scheme_is_unknown_not_local(
    env: asyncfs.Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(asyncfs.UnknownSchemeError):
        await env.write_file("bad-fs:///x", b"x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("typed", "meant"), [("s3:/bucket/key", "s3://bucket/key"), ("mem:/a/b", "mem://a/b")])
async def test_a_uri_one_slash_short_is_a_local_path_and_says_so(
    env: asyncfs.Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str, meant: str
) -> None:
    """A URI one slash short ("s3:/bucket/key") is a relative local path
    (in a folder "s3:"), as open() takes it; when it is missing, the error
    says which URI the caller probably meant."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(asyncfs.NotFoundError) as caught:
        await env.read_file(typed)
    assert f"(a local path; the URI would be {meant})" in str(caught.value)
    assert caught.value.filename == typed
    await env.write_file(typed, b"here")  # a local path all the same
    assert (tmp_path / typed).read_bytes() == b"here"
    with pytest.raises(asyncfs.NotFoundError) as caught:
        await env.read_file("/no/such/file")
    assert "the URI would be" not in str(caught.value)


# ---- 3. filesystem roots are not transaction roots ------------------------------------


@pytest.mark.parametrize("root", ["file:///", "file://", "/", "mem:///", "mem://", "file://localhost/"])
@pytest.mark.parametrize("native", [True, False])
async def test_a_filesystem_root_is_refused_as_a_transaction_root(
    env: asyncfs.Env, root: str, native: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="transaction root"):
        async with env.transaction(root, native=native) as txn:
            await txn.write_file("x", b"x")
    assert list(tmp_path.iterdir()) == []  # no ./file: folder


# ---- 4. symlinks out of a transaction root ------------------------------------------------


async def test_a_staged_write_never_follows_a_symlink_out_of_the_root(env: asyncfs.Env, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    (root / "inner").mkdir()
    (root / "inner-link").symlink_to(root / "inner")
    with pytest.raises(RuntimeError, match="rollback"):
        async with env.transaction(f"file://{root}") as txn:
            assert txn.native
            for op in (
                txn.write_file("link/x", b"escaped"),
                txn.append("link/y", b"escaped"),
                txn.makedirs("link/sub"),
                txn.write_file("inner-link/x", b"through a link"),
            ):
                with pytest.raises(InvalidArgumentError, match="symlink"):
                    await op
            await txn.write_file("fine.txt", b"ok")
            raise RuntimeError("rollback")
    assert list(outside.iterdir()) == []
    assert list((root / "inner").iterdir()) == []
    assert sorted(p.name for p in root.iterdir()) == ["inner", "inner-link", "link"]
    # the link itself may be replaced or removed, which changes nothing outside
    async with env.transaction(f"file://{root}") as txn:
        await txn.rm("link")
        await txn.write_file("link", b"a file now")
    assert (root / "link").read_bytes() == b"a file now"
    assert outside.is_dir() and list(outside.iterdir()) == []


# ---- 7. names up to NAME_MAX are written atomically ----------------------------------------


@pytest.mark.parametrize("length", [200, 226, 240, 255])
async def test_names_up_to_name_max_are_written_atomically(env: asyncfs.Env, base: str, length: int) -> None:
    name = "n" * (length - 4) + ".bin"
    target = f"{base}/{name}"
    await env.write_file(target, b"first")
    await env.write_file(target, b"second")
    async with env.open(target, "wb") as out:
        await out.write(b"streamed")
    assert await env.read_file(target) == b"streamed"
    await env.copy(target, f"{base}/{'c' * (length - 4)}.bin")
    copies = f"mem:///copies-{os.getpid()}-{length}"
    await env.makedirs(copies)
    await env.copy(target, f"{copies}/{name}")
    assert await env.listdir(copies) == [name]
    await env.rmtree(copies)
    await env.makedirs(f"{base}/tx")
    async with env.transaction(f"{base}/tx") as txn:
        await txn.write_file(name, b"in a transaction")
    assert await env.read_file(f"{base}/tx/{name}") == b"in a transaction"
    assert sorted(await env.listdir(base)) == sorted([name, f"{'c' * (length - 4)}.bin", "tx"])


@pytest.mark.parametrize("native", [True, False])
async def test_a_transaction_root_with_a_long_name(env: asyncfs.Env, tmp_path: Path, native: bool) -> None:
    root = f"file://{tmp_path}/{'r' * 250}"
    async with env.transaction(root, native=native) as txn:
        await txn.write_file("a", b"a")
    assert await env.read_file(f"{root}/a") == b"a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r" * 250]


def test_short_sibling_stays_within_name_max() -> None:
    for length in range(1, 256):
        name = "é" * (length // 2) + "x" * (length % 2)
        for uri in (_uri.staging_name(f"/d/{name}"), _uri.short_sibling(f"/d/{name}", ".", ".asyncfs-journal")):
            assert len(uri.rpartition("/")[2].encode()) <= _uri.NAME_MAX


# ---- compression integrity ---------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".zst", ".sz", ".gz"])
async def test_a_flipped_bit_in_compressed_data_is_data_loss(env: asyncfs.Env, tmp_path: Path, suffix: str) -> None:
    pytest.importorskip(
        "backports.zstd" if suffix == ".zst" and sys.version_info < (3, 14) else "snappy" if suffix == ".sz" else "zlib"
    )
    uri = f"file://{tmp_path}/data{suffix}"
    payload = random.Random(1).randbytes(4096) * 4
    async with env.open(uri, "wb") as out:
        await out.write(payload)
    raw = (tmp_path / f"data{suffix}").read_bytes()
    rng = random.Random(7)
    for _ in range(40):
        damaged = bytearray(raw)
        damaged[rng.randrange(16, len(raw) - 8)] ^= 1 << rng.randrange(8)
        (tmp_path / f"data{suffix}").write_bytes(damaged)
        try:
            async with env.open(uri, "rb") as stream:
                data = await stream.read()
        except asyncfs.DataLossError:
            continue
        assert data == payload, "a flipped bit read back as other data with no error"


# ---- TFRecord: skipping garbage is one pass ----------------------------------------------


def _record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def test_the_header_scan_agrees_with_the_definition() -> None:
    rng = random.Random(3)
    for _ in range(200):
        garbage = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 200)))
        window = garbage + _record(b"x" * rng.randrange(5)) if rng.random() < 0.7 else garbage
        expected = next(
            (
                i
                for i in range(len(window) - 11)
                if masked_crc32c(window[i : i + 8]) == struct.unpack_from("<I", window, i + 8)[0]
            ),
            -1,
        )
        assert _ffi.runtime().ASYNCFS_FindRecordHeader(window, len(window)) == expected


async def test_skip_corrupt_finds_the_record_after_megabytes_of_garbage(env: asyncfs.Env) -> None:
    garbage = random.Random(5).randbytes(2 << 20)
    uri = f"mem:///tfrecord-garbage-{os.getpid()}.tfrecord"
    await env.write_file(uri, _record(b"first") + garbage + _record(b"after the garbage"))
    reader = asyncfs.tfrecord.TFRecordReader(await env.open(uri, "rb"), skip_corrupt=True)
    records = [record async for record in reader]
    assert records[0] == b"first" and records[-1] == b"after the garbage"
    assert reader.skipped >= 1
    await env.rm(uri)


# ---- prefetch: a bad path is that path's answer, not its neighbours' --------------------------

_PREFETCHED_KINDS = st.lists(st.sampled_from(["file", "missing", "nul", "scheme", "host", "folder"]), max_size=30)
_EXPECTED_ERRORS = {
    "missing": asyncfs.NotFoundError,
    "nul": InvalidArgumentError,
    "scheme": asyncfs.UnknownSchemeError,
    "host": InvalidArgumentError,
    "folder": asyncfs.FailedPreconditionError,
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=_PREFETCHED_KINDS, ordered=st.booleans())
def test_prefetch_answers_each_path_whatever_the_paths_around_it(
    tmp_path: Path, kinds: list[str], ordered: bool
) -> None:
    """Files, missing files, folders and paths no plugin may be handed (a
    NUL, an unknown scheme, a file:// host), in any mix: each gets its own
    bytes or its own typed error naming it, whether it starts a group (of
    reads in one call into C) or sits inside one. With errors="raise" the
    files before the first bad path arrive, then its error."""
    folder = tmp_path / uuid.uuid4().hex
    folder.mkdir()
    paths: list[str] = []
    for i, kind in enumerate(kinds):
        path = folder / f"p{i}"
        if kind == "file":
            path.write_bytes(bytes([i]) * i)
        elif kind == "folder":
            path.mkdir()
        unusable = {"nul": f"{path}\0x", "scheme": f"nosuch://{path}", "host": f"file://host{path}"}
        paths.append(unusable.get(kind, str(path)))

    async def prefetched(errors: str) -> tuple[list[tuple[str, Any]], BaseException | None]:
        got: list[tuple[str, Any]] = []
        async with asyncfs.Env(workers=2) as env:
            try:
                async for item in env.prefetch(paths, ordered=ordered, errors=errors, in_flight=4):
                    got.append(item)
            except Exception as error:  # compared below
                return got, error
        return got, None

    got, raised = asyncio.run(prefetched("deliver"))
    assert raised is None
    assert sorted(path for path, _ in got) == sorted(paths)
    if ordered:
        assert [path for path, _ in got] == paths
    answers = dict(got)
    for i, (kind, path) in enumerate(zip(kinds, paths, strict=True)):
        if kind == "file":
            assert answers[path] == bytes([i]) * i
        else:
            assert isinstance(answers[path], _EXPECTED_ERRORS[kind]), (kind, answers[path])
    if ordered:
        got, raised = asyncio.run(prefetched("raise"))
        bad = next((i for i, kind in enumerate(kinds) if kind != "file"), len(kinds))
        assert [path for path, _ in got] == paths[:bad]
        assert (raised is None) if bad == len(kinds) else isinstance(raised, _EXPECTED_ERRORS[kinds[bad]])
