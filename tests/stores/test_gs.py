"""gs:// on fake-gcs-server, started by the test session on loopback: what
the conformance suite does not cover. Writes in one request and in
resumable chunks, read back byte for byte; names that need encoding;
directories decided by the server; transactions; objects written by
google-cloud-storage and gcsfs read by asyncfs and the other way round;
and what a missing credential says (test_gs_credentials.py)."""

from __future__ import annotations

import gc
import json
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from support.fault_proxy import FaultProxy
from support.gcs_emulator import GcsEmulator, python_emulator_missing_reason, start_python_emulator
from support.races import make_dir_race, transaction_commits_and_rolls_back

import asyncfs
from asyncfs.fsspec.names import plugin_options

# names that a URL, JSON or a shell would each mangle some other way
ODD = ["sp ace.txt", "q?uestion", "hash#tag", "per%25cent", "plus+sign", "ünï€ødé", 'quo"te', "back\\slash"]


@pytest.fixture
def bucket(gs_fs: asyncfs.ModularFileSystem, gcs_emulator: GcsEmulator) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:12]}"
    gs_fs.create_dir(f"gs://{name}")
    yield name
    gs_fs.delete_recursively(f"gs://{name}")


def own_gs(emulator: GcsEmulator, **options: int | bytes) -> asyncfs.ModularFileSystem:
    registry = asyncfs.Registry()
    fs = registry.get("gs")
    fs.set_option("endpoint", emulator.endpoint.encode())
    fs.set_option("project", b"test")
    for name, value in options.items():
        fs.set_option(name, value)
    return fs


def test_times_keep_the_fraction_gcs_gives(
    gs_fs: asyncfs.ModularFileSystem, gcs_emulator: GcsEmulator, bucket: str
) -> None:
    """stat and a listing give an object's `updated` time with its fraction
    (to the microsecond datetime reads), as s3 gives LastModified's."""
    gs_fs.write_file(f"gs://{bucket}/timed", b"x")
    url = f"{gcs_emulator.endpoint}/storage/v1/b/{bucket}/o/timed"
    with urllib.request.urlopen(url, timeout=10) as answer:
        updated = json.load(answer)["updated"]
    moment = datetime.fromisoformat(updated.replace("Z", "+00:00"))
    expected = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000
    assert gs_fs.stat(f"gs://{bucket}/timed").mtime_nsec // 1000 * 1000 == expected
    [(name, stats)] = gs_fs.get_children_stats(f"gs://{bucket}")
    assert (name, stats.mtime_nsec // 1000 * 1000) == ("timed", expected)


def pattern(n: int) -> bytes:
    return bytes((i * 7 + i // 251) % 256 for i in range(n))


@pytest.mark.parametrize("piece", [100_000, 1 << 30], ids=["pieces", "one-append"])
@pytest.mark.parametrize("size", [0, 1, 256 * 1024, 512 * 1024, 512 * 1024 + 1, 768 * 1024, 3 * 1024 * 1024 + 17])
def test_writes_in_one_request_and_in_chunks_read_back_exactly(
    gcs_emulator: GcsEmulator, bucket: str, size: int, piece: int
) -> None:
    """Above upload_threshold a file goes up as a resumable session in
    256 KiB-multiple chunks while it is written (the first holds what one
    request would); below, as one request."""
    fs = own_gs(gcs_emulator, upload_threshold=512 * 1024, chunk_size=256 * 1024)
    data = pattern(size)
    uri = f"gs://{bucket}/chunks/{size}-{piece}"
    with fs.new_writable_file(uri) as f:
        for at in range(0, size, piece):
            f.append(data[at : at + piece])
        assert f.tell() == size
    assert fs.stat(uri).length == size
    assert fs.read_file(uri) == data
    with fs.new_random_access_file(uri) as r:  # ranged reads after the open's
        assert r.read(size // 3, 1000) == data[size // 3 : size // 3 + 1000]


def test_a_file_dropped_without_close_leaves_nothing(gcs_emulator: GcsEmulator, bucket: str) -> None:
    fs = own_gs(gcs_emulator, upload_threshold=256 * 1024, chunk_size=256 * 1024)
    uri = f"gs://{bucket}/dropped"
    f = fs.new_writable_file(uri)
    f.append(pattern(2 * 1024 * 1024))  # a session is open, chunks are sent
    del f
    gc.collect()
    assert not fs.exists(uri)


def test_append_rewrites_the_object(gs_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    uri = f"gs://{bucket}/log"
    gs_fs.write_file(uri, b"first\n")
    with gs_fs.new_appendable_file(uri) as f:
        assert f.tell() == 6
        f.append(b"second\n")
    assert gs_fs.read_file(uri) == b"first\nsecond\n"


def test_odd_names_round_trip_and_list(gs_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    for name in ODD:
        gs_fs.write_file(f"gs://{bucket}/odd/{name}", name.encode())
    assert sorted(gs_fs.get_children(f"gs://{bucket}/odd")) == sorted(ODD)
    for name in ODD:
        assert gs_fs.read_file(f"gs://{bucket}/odd/{name}") == name.encode()
        assert gs_fs.stat(f"gs://{bucket}/odd/{name}").length == len(name.encode())
    gs_fs.rename_file(f"gs://{bucket}/odd/{ODD[0]}", f"gs://{bucket}/odd/{ODD[1]}-renamed")
    assert gs_fs.read_file(f"gs://{bucket}/odd/{ODD[1]}-renamed") == ODD[0].encode()
    assert gs_fs.delete_recursively(f"gs://{bucket}/odd") == (0, 0)
    assert not gs_fs.exists(f"gs://{bucket}/odd")


def test_listings_page(gcs_emulator: GcsEmulator, bucket: str) -> None:
    """More keys than one page (1000) holds: every page is asked for."""
    fs = own_gs(gcs_emulator)
    names = [f"k{i:04d}" for i in range(1203)]
    fs.write_files([f"gs://{bucket}/many/{n}" for n in names], [b"x"] * len(names))
    assert sorted(fs.get_children(f"gs://{bucket}/many")) == names
    assert len(fs.get_matching_paths(f"gs://{bucket}/many/k1*")) == 203
    assert fs.delete_recursively(f"gs://{bucket}/many") == (0, 0)


def test_create_dir_is_decided_by_the_server(gs_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    """The marker is uploaded with ifGenerationMatch=0 (a multipart upload,
    where the emulator honours it): of eight creators, exactly one makes it."""
    for trial in range(3):
        outcomes = make_dir_race(gs_fs, f"gs://{bucket}/race-{trial}")
        assert outcomes == ["exists"] * 7 + ["made"], f"trial {trial}: {outcomes}"


def test_generic_transactions_commit_and_roll_back(
    env: asyncfs.Env, gs_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    transaction_commits_and_rolls_back(env, f"gs://{bucket}/ckpt")


def test_google_cloud_storage_and_asyncfs_read_each_other(
    gs_fs: asyncfs.ModularFileSystem, gcs_emulator: GcsEmulator, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = pytest.importorskip("google.cloud.storage", reason="google-cloud-storage checks interop")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.endpoint)
    client = storage.Client(project="test", credentials=_anonymous())
    theirs = client.bucket(bucket)
    for name in ODD:
        data = pattern(1000) + name.encode()
        theirs.blob(f"from-google/{name}").upload_from_string(data)
        assert gs_fs.read_file(f"gs://{bucket}/from-google/{name}") == data
        gs_fs.write_file(f"gs://{bucket}/from-asyncfs/{name}", data)
        assert theirs.blob(f"from-asyncfs/{name}").download_as_bytes() == data
    assert sorted(b.name for b in client.list_blobs(bucket, prefix="from-asyncfs/")) == sorted(
        f"from-asyncfs/{n}" for n in ODD
    )


def _anonymous() -> object:
    credentials = pytest.importorskip("google.auth.credentials")
    return credentials.AnonymousCredentials()


def test_gcsfs_and_asyncfs_read_each_other(
    gs_fs: asyncfs.ModularFileSystem, gcs_emulator: GcsEmulator, bucket: str
) -> None:
    gcsfs = pytest.importorskip("gcsfs", reason="gcsfs checks interop")
    theirs = gcsfs.GCSFileSystem(
        endpoint_url=gcs_emulator.endpoint, token="anon", project="test", skip_instance_cache=True
    )
    for name in ODD[:4]:
        data = pattern(3000) + name.encode()
        theirs.pipe(f"{bucket}/from-gcsfs/{name}", data)
        assert gs_fs.read_file(f"gs://{bucket}/from-gcsfs/{name}") == data
        gs_fs.write_file(f"gs://{bucket}/from-asyncfs/{name}", data)
        assert theirs.cat(f"{bucket}/from-asyncfs/{name}") == data


# ---- the fsspec bridge, with gcsfs's storage_options ----------------------------------


def test_pandas_through_the_bridge_with_gcsfs_options(gcs_emulator: GcsEmulator, bucket: str) -> None:
    """storage_options written for gcsfs (endpoint_url, token="anon",
    project) work unchanged, under asyncfs+gs:// and asyncfs+gcs://."""
    pd = pytest.importorskip("pandas", reason="pandas reads through the bridge")
    pytest.importorskip("pyarrow", reason="pandas writes parquet with pyarrow")
    options = {"endpoint_url": gcs_emulator.endpoint, "token": "anon", "project": "test"}
    frame = pd.DataFrame({"n": range(100), "s": [f"row {i}" for i in range(100)]})
    frame.to_parquet(f"asyncfs+gcs://{bucket}/frames/a.parquet", storage_options=options)
    back = pd.read_parquet(f"asyncfs+gs://{bucket}/frames/a.parquet", storage_options=options)
    assert back.equals(frame)


@pytest.mark.parametrize(
    ("token", "options"),
    [
        (None, {}),
        ("google_default", {}),
        ("cloud", {}),
        ("anon", {"anonymous": 1}),
        ("/etc/gcloud/sa.json", {"credentials_file": "/etc/gcloud/sa.json"}),
        ("ya29.a-bearer-token", {"token": "ya29.a-bearer-token"}),
    ],
)
def test_gcsfs_token_values(token: str | None, options: dict[str, object]) -> None:
    given = {"token": token, "endpoint_url": "http://e", "default_location": "EU"}
    assert plugin_options("gs", given) == {**options, "endpoint": "http://e", "location": "EU"}


def test_gcsfs_options_asyncfs_cannot_honour_are_refused() -> None:
    with pytest.raises(asyncfs.InvalidArgumentError, match="requester"):
        plugin_options("gs", {"requester_pays": True})
    with pytest.raises(asyncfs.InvalidArgumentError, match="file's path"):
        plugin_options("gs", {"token": {"type": "service_account"}})


# ---- resuming a failed chunk (gcp-storage-emulator, which answers the status query) ----


@pytest.fixture(scope="module")
def python_emulator() -> Iterator[GcsEmulator]:
    reason = python_emulator_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    emulator = start_python_emulator()
    yield emulator
    emulator.stop.close()


@pytest.mark.parametrize(("fault", "before"), [("drop", 2), ("cut", 6)])
def test_a_failed_chunk_resumes_from_what_the_session_holds(
    gs_fs: asyncfs.ModularFileSystem, python_emulator: GcsEmulator, fault: str, before: int
) -> None:
    """A chunk fails: the second, dropped before the server saw it; or the
    last, its answer cut after the server stored it. The writer asks the
    session what it holds and sends only the rest (or nothing); the object
    is whole."""
    bucket = f"r-{uuid.uuid4().hex[:10]}"
    python_emulator.create_bucket(bucket)
    proxy = FaultProxy(python_emulator.endpoint)
    try:
        fs = asyncfs.Registry().get("gs")
        for name, value in {
            "endpoint": proxy.endpoint.encode(),
            "upload_threshold": 256 * 1024,
            "chunk_size": 256 * 1024,
            "retry_base_ms": 1,
        }.items():
            fs.set_option(name, value)
        data = pattern(5 * 256 * 1024 + 123)
        proxy.inject(["pass"] * before + [fault])  # the session, then chunks 1 to 5, then the rest
        fs.write_file(f"gs://{bucket}/resumed", data)
        asked = [head for head in proxy.heads if b"Content-Range: bytes */" in head]
        assert len(asked) == 1, [(line[-40:], what) for line, what in proxy.requests]  # one status query
        assert fs.read_file(f"gs://{bucket}/resumed") == data
    finally:
        proxy.close()


def test_append_to_a_big_object_composes_instead_of_rewriting(gcs_emulator: GcsEmulator, bucket: str) -> None:
    """At upload_threshold and above, the new bytes go to a temporary
    object that compose puts after the old ones (pinned to the generation
    the append saw); the temporary object is gone after close."""
    fs = own_gs(gcs_emulator, upload_threshold=256 * 1024, chunk_size=256 * 1024)
    uri = f"gs://{bucket}/logs/events"
    old = pattern(300 * 1024)
    fs.write_file(uri, old)
    with fs.new_appendable_file(uri) as f:
        assert f.tell() == len(old)
        f.append(b"one more record\n")
        assert f.tell() == len(old) + 16
    assert fs.read_file(uri) == old + b"one more record\n"
    with fs.new_appendable_file(uri) as f:
        pass  # nothing appended: the object stays as it is
    assert fs.read_file(uri) == old + b"one more record\n"
    assert fs.get_children(f"gs://{bucket}/logs") == ["events"]  # no .tmpcompose left
