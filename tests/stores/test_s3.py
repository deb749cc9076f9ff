"""What the s3 plugin does beyond the conformance suite, against Ceph's S3
gateway: multipart uploads streamed in bounded memory and aborted when
dropped, pagination, server-side copies, retries through a fault-injecting
proxy, refused credentials, missing buckets, configuration."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import configure_s3, leave_prefetches_early
from support.ceph_gateway import Gateway
from support.fault_proxy import FaultProxy
from support.races import make_dir_race, transaction_commits_and_rolls_back
from support.txn_holder import race

import asyncfs
from asyncfs._native import libraries as _libs
from asyncfs._sync import traffic_of

MiB = 1 << 20


pytestmark = pytest.mark.usefixtures("s3_plugin")  # every test here needs it


def own_s3(gateway: Gateway, endpoint: str | None = None, **options: int | bytes) -> asyncfs.ModularFileSystem:
    """A second, separately configured s3 filesystem."""
    return own_s3_registry(gateway, endpoint, **options).get("s3")


def own_s3_registry(gateway: Gateway, endpoint: str | None = None, **options: int | bytes) -> asyncfs.Registry:
    """A registry of its own with a separately configured s3 filesystem."""
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(_libs.library_path("s3"))
    fs = registry.get("s3")
    configure_s3(fs, gateway)
    if endpoint is not None:
        fs.set_option("endpoint", endpoint.encode())
    for name, value in options.items():
        fs.set_option(name, value)
    return registry


def pattern(offset: int, n: int) -> bytes:
    """Deterministic bytes for [offset, offset + n), generated on the fly:
    MiB i of the stream repeats sha256(i)."""
    out = bytearray()
    while len(out) < n:
        at = offset + len(out)
        block = hashlib.sha256(str(at // MiB).encode()).digest() * (MiB // 32)
        out += block[at % MiB : at % MiB + n - len(out)]
    return bytes(out)


def object_stat(gateway: Gateway, bucket: str, key: str) -> dict[str, object]:
    return json.loads(gateway.admin("object", "stat", f"--bucket={bucket}", f"--object={key}"))  # type: ignore[no-any-return]


def python_with_gateway(gateway: Gateway, code: str, *args: str) -> str:
    """Runs code in a fresh Python configured for the gateway by the
    environment alone; returns what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, **gateway.environ()},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def bucket_entries(gateway: Gateway, bucket: str) -> list[str]:
    """Every entry the gateway holds, in-progress multipart parts included."""
    listed = json.loads(gateway.admin("bucket", "list", f"--bucket={bucket}"))
    return [f"{entry.get('ns') or ''}:{entry['name']}" for entry in listed]


# ---- multipart uploads ----------------------------------------------------------


UPLOADER = """
import anyio, hashlib, sys
import asyncfs

def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

async def main(uri, mib):
    env = asyncfs.Env()
    await env.exists(uri)  # plugins loaded, pool started: not part of the upload
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM, the peak resident size
    before = hwm()
    async with env.open(uri, "wb") as out:
        for i in range(mib):
            await out.write(hashlib.sha256(str(i).encode()).digest() * 32768)
    print(hwm() - before)

anyio.run(main, sys.argv[1], int(sys.argv[2]))
"""


def test_multipart_upload_streams_160_mib_in_bounded_memory(env: asyncfs.Env, s3_gateway: Gateway, bucket: str) -> None:
    """Uploaded by a fresh process (its peak resident size is the upload's),
    then read back here and checked."""
    mib = 160
    uri = f"s3://{bucket}/big.bin"
    grew = int(python_with_gateway(s3_gateway, UPLOADER, uri, str(mib)))
    # 8 MiB parts, at most four in flight and one filling (measured: 40 to
    # 60 MiB), whatever the object's size.
    assert grew < 80 * MiB, f"peak resident size grew by {grew / MiB:.0f} MiB"

    async def digest() -> str:
        assert await env.size(uri) == mib * MiB
        h = hashlib.sha256()
        async with env.open(uri, "rb") as source:
            while data := await source.read(4 * MiB):
                h.update(data)
        return h.hexdigest()

    assert anyio.run(digest) == hashlib.sha256(pattern(0, mib * MiB)).hexdigest()
    etag = str(object_stat(s3_gateway, bucket, "big.bin")["etag"])
    assert etag.endswith("-20"), f"expected a 20-part multipart upload, ETag {etag}"


def test_dropped_writer_aborts_its_multipart_upload(
    s3_fs: asyncfs.ModularFileSystem, s3_gateway: Gateway, bucket: str
) -> None:
    uri = f"s3://{bucket}/dropped.bin"
    writer = s3_fs.new_writable_file(uri)
    writer.append(pattern(0, 20 * MiB))  # two parts shipped, one filling
    deadline = time.monotonic() + 10
    while not any(e.startswith(":_multipart_") for e in bucket_entries(s3_gateway, bucket)):
        assert time.monotonic() < deadline, "no part reached the gateway"
        time.sleep(0.1)
    writer.discard()
    assert not s3_fs.exists(uri)
    assert bucket_entries(s3_gateway, bucket) == []

    with pytest.raises(RuntimeError), s3_fs.new_writable_file(uri) as failing:
        failing.append(pattern(0, 20 * MiB))
        raise RuntimeError("the producer failed")
    assert not s3_fs.exists(uri)
    assert bucket_entries(s3_gateway, bucket) == []


@pytest.mark.parametrize(
    ("before", "size", "parts"),
    [
        (0, 5 * MiB, 0),  # exactly one part: one PUT
        (0, 10 * MiB, 2),  # one part straight from the caller's bytes, the last at close
        (0, 10 * MiB + 1, 3),
        (1024, 17 * MiB, 4),  # a buffered start, then whole parts, then a buffered tail
    ],
)
def test_a_long_append_goes_up_in_parts_from_the_callers_bytes(
    s3_gateway: Gateway, bucket: str, before: int, size: int, parts: int
) -> None:
    """Whole parts of a long append are sent without a copy and waited for
    before the append returns: the caller may reuse its buffer at once."""
    fs = own_s3(s3_gateway, part_size=5 * MiB)
    uri = f"s3://{bucket}/long.bin"
    data = bytearray(pattern(0, before + size))
    with fs.new_writable_file(uri) as out:
        out.append(data[:before])
        out.append(data[before:])
        data[:] = bytes(len(data))  # the caller's buffer reused before close
    assert fs.read_file(uri) == pattern(0, before + size)
    etag = str(object_stat(s3_gateway, bucket, "long.bin")["etag"])
    assert etag.endswith(f"-{parts}") if parts else "-" not in etag, etag


@pytest.mark.parametrize("failing", ["create", "parts"])
def test_a_failed_long_append_writes_nothing(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem, failing: str
) -> None:
    """After an append failed (the upload could not start, or its parts
    could not be sent), later appends and close report the failure and
    nothing is written: close used to PUT the first part's bytes as the
    whole object when the upload could not start."""
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, part_size=5 * MiB, max_attempts=1)
    uri = f"s3://{bucket}/failed.bin"
    proxy.inject(["503"] if failing == "create" else ["pass", "503", "503"])
    writer = fs.new_writable_file(uri)
    with pytest.raises(asyncfs.UnavailableError, match="SlowDown"):
        writer.append(pattern(0, 12 * MiB))
    with pytest.raises(asyncfs.UnavailableError, match="SlowDown"):
        writer.append(b"more")  # a failed writer stays failed
    with pytest.raises(asyncfs.UnavailableError, match="SlowDown"):
        writer.close()
    writer.discard()
    assert not s3_fs.exists(uri)
    assert s3_fs.incomplete_writes(f"s3://{bucket}") == []
    assert [line.split()[0] for line, _ in proxy.requests].count("PUT") == (0 if failing == "create" else 2)


def boto3_client(gateway: Gateway) -> Any:
    boto3 = pytest.importorskip("boto3", reason="boto3 (a test extra) looks at the gateway from outside")
    environ = gateway.environ()
    return boto3.client(
        "s3",
        endpoint_url=environ["AWS_ENDPOINT_URL"],
        aws_access_key_id=environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environ["AWS_SECRET_ACCESS_KEY"],
        region_name=environ["AWS_REGION"],
    )


def open_uploads(client: Any, bucket: str) -> list[tuple[str, str]]:
    """(key, upload id) of every multipart upload in progress, as boto3 sees them."""
    pages = client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket)
    return sorted((u["Key"], u["UploadId"]) for page in pages for u in page.get("Uploads", []))


KILLED_WRITER = """
import os, signal, sys, time
import asyncfs

fs = asyncfs.Registry().get("s3")
fs.set_option("part_size", 5 << 20)
writer = fs.new_writable_file(sys.argv[1])
writer.append(os.urandom(12 << 20))  # two parts on their way, one filling
print("writing", flush=True)
time.sleep(60)  # killed here, never closed
"""


def test_a_killed_writers_upload_is_listed_and_aborted(env: asyncfs.Env, s3_gateway: Gateway, bucket: str) -> None:
    """Bug 10: a writer killed mid-upload leaves a multipart upload that holds
    its parts forever and that asyncfs could neither list nor abort."""
    client = boto3_client(s3_gateway)
    target = f"s3://{bucket}/runs/7/checkpoint.bin"
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, target],
        env={**os.environ, **s3_gateway.environ()},
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "writing\n"
            deadline = time.monotonic() + 20
            while not open_uploads(client, bucket):
                assert time.monotonic() < deadline, "the writer started no upload"
                time.sleep(0.1)
        finally:
            child.kill()
    other = client.create_multipart_upload(Bucket=bucket, Key="runs/70")["UploadId"]  # another client's

    async def main() -> None:
        found = await env.incomplete_writes(f"s3://{bucket}/runs/7")
        assert [w.uri for w in found] == [target]  # not runs/70: a folder, not a prefix
        assert abs(found[0].started_nsec - time.time_ns()) < 120e9
        everything = await env.incomplete_writes(f"s3://{bucket}")
        assert [w.uri for w in everything] == [target, f"s3://{bucket}/runs/70"]
        assert (await env.incomplete_writes(f"s3://{bucket}/runs/70"))[0].id == other
        assert await env.abort_incomplete_writes(f"s3://{bucket}/runs", older_than=3600) == []
        aborted = await env.abort_incomplete_writes(f"s3://{bucket}/runs/7")
        assert aborted == found
        assert [key for key, _ in open_uploads(client, bucket)] == ["runs/70"]
        with pytest.raises(asyncfs.NotFoundError):
            await env.filesystem("s3://").abort_incomplete_write(target, found[0].id)
        assert not await env.exists(target)

    anyio.run(main)
    assert not any(e.startswith(":_multipart_runs/7/") for e in bucket_entries(s3_gateway, bucket))


def test_incomplete_writes_are_listed_across_pages(env: asyncfs.Env, s3_gateway: Gateway, bucket: str) -> None:
    """ListMultipartUploads answers 1000 at a time."""
    client = boto3_client(s3_gateway)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: client.create_multipart_upload(Bucket=bucket, Key=f"u/{i:04d}"), range(1003)))

    async def main() -> None:
        found = await env.incomplete_writes(f"s3://{bucket}/u")
        assert [w.uri for w in found] == [f"s3://{bucket}/u/{i:04d}" for i in range(1003)]
        assert len(await env.abort_incomplete_writes(f"s3://{bucket}")) == 1003

    anyio.run(main)
    assert open_uploads(client, bucket) == []


@pytest.mark.parametrize(
    "case",
    [
        (None, "table.csv", "text/csv"),
        (None, "page.HTML", "text/html"),
        (None, "part-0.parquet", "application/vnd.apache.parquet"),
        (None, "weights.bin", "application/octet-stream"),
        (None, "folder.json/no-extension", "application/octet-stream"),
        (b"application/x-custom", "table.csv", "application/x-custom"),
        (b"", "table.csv", "application/octet-stream"),
    ],
)
@pytest.mark.parametrize("size", [100, 6 * MiB], ids=["one PUT", "multipart"])
def test_objects_are_written_with_a_content_type(
    s3_gateway: Gateway, bucket: str, case: tuple[bytes | None, str, str], size: int
) -> None:
    """Guessed from the extension by default (as the AWS CLI and s3fs do),
    or the content_type option's; a server-side copy keeps the source's."""
    option, name, expected = case
    client = boto3_client(s3_gateway)
    options: dict[str, int | bytes] = {"part_size": 5 * MiB}
    if option is not None:
        options["content_type"] = option
    fs = own_s3(s3_gateway, **options)
    fs.write_file(f"s3://{bucket}/{name}", pattern(0, size))
    assert client.head_object(Bucket=bucket, Key=name)["ContentType"] == expected
    fs.copy_file(f"s3://{bucket}/{name}", f"s3://{bucket}/copy-without-extension")
    if size <= 5 * MiB:  # one CopyObject: the source's metadata travels
        assert client.head_object(Bucket=bucket, Key="copy-without-extension")["ContentType"] == expected


ATTRIBUTES = {"content-type": "text/csv; charset=utf-8", "run": "7", "owner": "ml-team", "note": "  two  spaces "}


@pytest.mark.parametrize("how", ["write_file", "open"])
@pytest.mark.parametrize("size", [100, 6 * MiB], ids=["one PUT", "multipart"])
def test_attributes_are_written_as_metadata_and_read_back(
    env: asyncfs.Env, s3_gateway: Gateway, bucket: str, how: str, size: int
) -> None:
    client = boto3_client(s3_gateway)
    uri = f"s3://{bucket}/table"
    data = pattern(0, size)
    fs = env.filesystem("s3://").wrapped
    fs.set_option("part_size", 5 * MiB)

    async def main() -> dict[str, str]:
        if how == "write_file":
            await env.write_file(uri, data, attributes=ATTRIBUTES)
        else:
            async with env.open(uri, "wb", attributes=ATTRIBUTES) as out:
                await out.write(data)
        return await env.attributes(uri)

    try:
        got = anyio.run(main)
    finally:
        fs.set_option("part_size", 8 * MiB)
    head = client.head_object(Bucket=bucket, Key="table")
    assert head["ContentType"] == "text/csv; charset=utf-8"
    assert head["Metadata"] == {"run": "7", "owner": "ml-team", "note": "two spaces"}
    assert got == {"content-type": "text/csv; charset=utf-8", "note": "two spaces", "owner": "ml-team", "run": "7"}


def test_attributes_another_client_wrote_are_read(env: asyncfs.Env, s3_gateway: Gateway, bucket: str) -> None:
    boto3_client(s3_gateway).put_object(Bucket=bucket, Key="k", Body=b"x", Metadata={"Source": "boto3"})
    assert anyio.run(env.attributes, f"s3://{bucket}/k") == {"content-type": "binary/octet-stream", "source": "boto3"}


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"Upper": "x"}, "lowercase letters"),
        ({"k": "caf\u00e9"}, "printable ASCII"),
        ({"k": "a\r\nx-amz-acl: public-read"}, "printable ASCII"),  # no header injection
        ({"": "x"}, "1 to 128"),
        ({"k": "a\0b"}, "NUL"),
    ],
)
def test_attributes_a_store_cannot_keep_are_refused_before_writing(
    env: asyncfs.Env, bucket: str, attributes: dict[str, str], message: str
) -> None:
    uri = f"s3://{bucket}/never"
    with pytest.raises(asyncfs.InvalidArgumentError, match=message):
        anyio.run(partial(env.write_file, uri, b"data", attributes=attributes))
    assert not anyio.run(env.exists, uri)


def test_attributes_of_what_is_not_an_object(env: asyncfs.Env, bucket: str) -> None:
    anyio.run(env.write_file, f"s3://{bucket}/d/f", b"x")
    with pytest.raises(asyncfs.NotFoundError):
        anyio.run(env.attributes, f"s3://{bucket}/missing")
    with pytest.raises(asyncfs.FailedPreconditionError, match="is a directory"):
        anyio.run(env.attributes, f"s3://{bucket}/d")
    with pytest.raises(asyncfs.InvalidArgumentError, match="mode 'w' or 'wb'"):
        anyio.run(partial(env.open(f"s3://{bucket}/d/f", "ab", attributes={"a": "b"}).__aenter__))


def test_a_local_disk_keeps_no_attributes(env: asyncfs.Env, tmp_path: Path) -> None:
    uri = (tmp_path / "f").as_uri()
    with pytest.raises(asyncfs.UnimplementedError, match="new_writable_file_with_attributes"):
        anyio.run(partial(env.write_file, uri, b"x", attributes={"a": "b"}))
    assert list(tmp_path.iterdir()) == []  # nothing left, not even the temporary sibling
    anyio.run(env.write_file, uri, b"x")
    with pytest.raises(asyncfs.UnimplementedError, match="get_file_attributes"):
        anyio.run(env.attributes, uri)


def test_a_local_disk_has_no_incomplete_writes_to_list(env: asyncfs.Env, tmp_path: Path) -> None:
    with pytest.raises(asyncfs.UnimplementedError, match="does not offer get_incomplete_writes"):
        anyio.run(env.incomplete_writes, tmp_path.as_uri())


def test_atomic_writes_need_no_temporary_and_rename(env: asyncfs.Env, s3_gateway: Gateway, bucket: str) -> None:
    fs = env.filesystem("s3://").wrapped
    assert fs.metadata.atomic_writes and not fs.stages_atomic_writes()

    async def main() -> None:
        await env.write_file(f"s3://{bucket}/a", b"first")
        with pytest.raises(ValueError):
            async with env.open(f"s3://{bucket}/a", "wb") as out:
                await out.write(b"half of the second")
                raise ValueError("interrupted")
        assert await env.read_file(f"s3://{bucket}/a") == b"first"

    anyio.run(main)
    assert [e for e in bucket_entries(s3_gateway, bucket)] == [":a"]


def test_append_rewrites_with_server_side_copies(s3_gateway: Gateway, bucket: str) -> None:
    fs = own_s3(s3_gateway, part_size=5 * MiB)
    uri = f"s3://{bucket}/log"
    fs.write_file(uri, pattern(0, 12 * MiB))
    with fs.new_appendable_file(uri) as f:
        assert f.tell() == 12 * MiB
        f.append(pattern(12 * MiB, MiB))
    assert fs.read_file(uri) == pattern(0, 13 * MiB)
    # Two whole parts copied, the 2 MiB tail downloaded and sent with the new MiB.
    assert str(object_stat(s3_gateway, bucket, "log")["etag"]).endswith("-3")


def test_empty_and_ranged_reads(s3_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    s3_fs.write_file(f"s3://{bucket}/empty", b"")
    assert s3_fs.read_file(f"s3://{bucket}/empty") == b""
    data = pattern(0, 3 * MiB)
    s3_fs.write_file(f"s3://{bucket}/data", data)
    with s3_fs.new_random_access_file(f"s3://{bucket}/data") as f:
        assert f.read(MiB + 7, 1000) == data[MiB + 7 : MiB + 1007]
        assert f.read(3 * MiB - 10, 20) == data[-10:]
        with pytest.raises(asyncfs.OutOfRangeError):
            f.read(3 * MiB - 10, 20, strict=True)


def test_opens_use_plain_gets_until_objects_are_too_big_for_one(s3_gateway: Gateway, bucket: str) -> None:
    """A plain GET costs the gateway less than a ranged one; an object bigger
    than read_ahead stops it (its connection is dropped), and the opens after
    that use ranged GETs for a while."""
    proxy = FaultProxy(s3_gateway.endpoint)
    try:
        fs = own_s3(s3_gateway, endpoint=proxy.endpoint)
        small, big = pattern(0, 4096), pattern(0, 3 * MiB)
        fs.write_file(f"s3://{bucket}/small", small)
        fs.write_file(f"s3://{bucket}/big", big)

        def gets(read: Callable[[], bytes], expected: bytes) -> list[bool]:
            """Whether each GET the read sent asked for a range."""
            proxy.inject([])
            proxy.heads.clear()
            assert read() == expected
            return [b"\r\nrange:" in head.lower() for head in proxy.heads if head.startswith(b"GET")]

        assert gets(lambda: fs.read_file(f"s3://{bucket}/small"), small) == [False]
        first_big = gets(lambda: fs.read_file(f"s3://{bucket}/big"), big)
        assert first_big[:2] == [False, True]  # stopped, then its head by range
        assert gets(lambda: fs.read_file(f"s3://{bucket}/small"), small) == [True]  # the window
        assert gets(lambda: fs.read_file(f"s3://{bucket}/big"), big)[0] is True
        assert fs.read_file(f"s3://{bucket}/big") == big
    finally:
        proxy.close()


def test_virtual_hosted_style_falls_back_to_paths_where_it_cannot_work(s3_gateway: Gateway) -> None:
    """Asked for virtual-hosted requests on an IP endpoint, or for a bucket
    with dots (which a wildcard certificate does not cover), the plugin
    names the bucket in the path, as boto3 does; before, the host was
    "bucket.127.0.0.1" and nothing connected."""
    fs = own_s3(s3_gateway, path_style=0)
    for name in (f"plain-{uuid.uuid4().hex[:8]}", f"with.dots.{uuid.uuid4().hex[:8]}"):
        fs.create_dir(f"s3://{name}")
        fs.write_file(f"s3://{name}/k", b"v")
        assert fs.read_file(f"s3://{name}/k") == b"v"
        fs.delete_recursively(f"s3://{name}")


def test_objects_that_look_like_s3_errors_are_just_bytes(s3_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    body = b"<?xml version='1.0'?><Error><Code>NoSuchKey</Code><Message>a file</Message></Error>"
    s3_fs.write_file(f"s3://{bucket}/error.xml", body)
    assert s3_fs.read_file(f"s3://{bucket}/error.xml") == body


def test_a_file_replaced_while_open_fails_the_read(s3_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    uri = f"s3://{bucket}/changing"
    s3_fs.write_file(uri, pattern(0, MiB))
    with s3_fs.new_random_access_file(uri) as f:
        s3_fs.write_file(uri, pattern(MiB, MiB))
        with pytest.raises(asyncfs.FailedPreconditionError, match="PreconditionFailed"):
            f.read(512 * 1024, 1024)  # beyond the head fetched at open: pinned by ETag


# ---- listings, copies, deletes -----------------------------------------------------


def test_pagination_glob_and_batched_delete_over_2600_keys(env: asyncfs.Env, s3_gateway: Gateway, bucket: str) -> None:
    names = [f"k{i:05d}.txt" for i in range(2600)]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(env.write_file, f"s3://{bucket}/d/{name}", name.encode())
        assert sorted(await env.listdir(f"s3://{bucket}/d")) == names
        matches = await env.glob(f"s3://{bucket}/d/k01*.txt")
        assert matches == [f"s3://{bucket}/d/k{i:05d}.txt" for i in range(1000, 2000)]

    anyio.run(main)
    # One listing of the literal prefix, paginated: never a walk.
    proxy = FaultProxy(s3_gateway.endpoint)
    try:
        fs = own_s3(s3_gateway, endpoint=proxy.endpoint)
        proxy.inject([])
        assert len(fs.get_matching_paths(f"s3://{bucket}/d/k*.txt")) == 2600
        lists = [line for line, _ in proxy.requests]
        assert len(lists) == 3 and all("list-type=2" in line and "prefix=d%2Fk" in line for line in lists)
        proxy.inject([])
        fs.delete_recursively(f"s3://{bucket}/d")
        posts = [line for line, _ in proxy.requests if line.startswith("POST")]
        assert len(posts) == 3  # DeleteObjects: 1000 + 1000 + 600 keys
    finally:
        proxy.close()
    assert not env.filesystem("s3://").wrapped.exists(f"s3://{bucket}/d")


def test_server_side_copy_single_and_multipart(s3_gateway: Gateway, bucket: str) -> None:
    fs = own_s3(s3_gateway, part_size=5 * MiB)
    small, large = pattern(0, 1000), pattern(0, 17 * MiB)
    fs.write_file(f"s3://{bucket}/small", small)
    fs.write_file(f"s3://{bucket}/large", large)
    proxy = FaultProxy(s3_gateway.endpoint)
    try:
        via = own_s3(s3_gateway, endpoint=proxy.endpoint, part_size=5 * MiB)
        proxy.inject([])
        via.copy_file(f"s3://{bucket}/large", f"s3://{bucket}/copy")
        sent = [line for line, _ in proxy.requests]
        # No byte of the object crosses the proxy: UploadPartCopy x 4.
        assert sum("partNumber=" in line for line in sent) == 4
    finally:
        proxy.close()
    fs.copy_file(f"s3://{bucket}/small", f"s3://{bucket}/copy-small")
    assert fs.read_file(f"s3://{bucket}/copy") == large
    assert fs.read_file(f"s3://{bucket}/copy-small") == small
    fs.rename_file(f"s3://{bucket}/copy", f"s3://{bucket}/moved")
    assert not fs.exists(f"s3://{bucket}/copy")
    assert fs.get_file_size(f"s3://{bucket}/moved") == len(large)


def test_copy_and_rename_of_a_key_longer_than_any_fixed_buffer(s3_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    """x-amz-copy-source was built in 1,100 bytes: a key whose encoded form
    is longer failed to copy. 128 three-byte characters encode to 1,152
    (and stay within the test gateway's 460-byte object names)."""
    folder = f"s3://{bucket}/long/" + "/".join(["€" * 32] * 4)
    s3_fs.write_file(f"{folder}/a", b"long")
    s3_fs.copy_file(f"{folder}/a", f"{folder}/b")
    s3_fs.rename_file(f"{folder}/b", f"{folder}/c")
    assert s3_fs.read_file(f"{folder}/c") == b"long"
    assert sorted(s3_fs.get_children(folder)) == ["a", "c"]


def test_files_exist_answers_concurrently(env: asyncfs.Env, bucket: str) -> None:
    fs = env.filesystem("s3://").wrapped
    for i in range(0, 50, 2):
        fs.write_file(f"s3://{bucket}/e{i}", b"x")
    uris = [f"s3://{bucket}/e{i}" for i in range(50)]
    assert anyio.run(env.files_exist, uris) == [i % 2 == 0 for i in range(50)]
    # what a HEAD cannot settle is settled as stat settles it: a directory
    # (a prefix), the bucket, the root; a missing bucket is missing
    fs.write_file(f"s3://{bucket}/dir/inside", b"x")
    others = [
        f"s3://{bucket}/dir",
        f"s3://{bucket}",
        "s3://",
        f"s3://missing-{uuid.uuid4().hex[:8]}/k",
        f"s3://{bucket}/di",
    ]
    assert fs.files_exist(others) == [True, True, True, False, False]
    assert [error is None for error in fs.paths_exist(others)] == [True, True, True, False, False]


# ---- failures ---------------------------------------------------------------------------


def test_retries_ride_out_503_drops_and_cut_answers(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    data = pattern(0, 300 * 1024)
    s3_fs.write_file(f"s3://{bucket}/r", data)
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, retry_base_ms=5)
    proxy.inject(["503", "drop", "cut"])
    assert fs.read_file(f"s3://{bucket}/r") == data
    assert [fault for _, fault in proxy.requests][:4] == ["503", "drop", "cut", "pass"]

    proxy.inject(["503", "503"])
    fs.write_file(f"s3://{bucket}/w", b"written through faults")
    assert s3_fs.read_file(f"s3://{bucket}/w") == b"written through faults"


def test_a_small_object_is_opened_and_read_in_one_request(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    """The open's GET brings a small object whole: its size needs no HEAD
    and its reads no request. A bigger one costs its size, then its reads."""
    s3_fs.write_file(f"s3://{bucket}/small", b"a small object")
    s3_fs.write_file(f"s3://{bucket}/big", pattern(0, 100_000))

    async def main() -> tuple[bytes, bytes, int]:
        async with asyncfs.Env(registry=own_s3_registry(s3_gateway, endpoint=proxy.endpoint)) as env:
            async with env.open(f"s3://{bucket}/small", "rb") as f:
                small = await f.read()
                await f.seek(2)
                again = await f.read(5)
            sent = len(proxy.requests)
            async with env.open(f"s3://{bucket}/big", "rb") as f:
                big = await f.read(1000) + await f.read()
            return small + again, big, sent

    small, big, sent = anyio.run(main)
    assert small == b"a small objectsmall" and big == pattern(0, 100_000)
    assert sent == 1 and proxy.requests[0][0].startswith("GET ")
    # the big one: the open's GET (with a ranged one for its first 64 KiB
    # when the plain one stops at the headers), a HEAD, and only the rest
    assert [line.split()[0] for line, _ in proxy.requests[1:]][-2:] == ["HEAD", "GET"]
    assert b"range: bytes=65536-99999" in proxy.heads[-1].lower()


def test_throttling_past_the_attempts_is_unavailable(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, retry_base_ms=5, max_attempts=3)
    proxy.inject(["503"] * 10)
    with pytest.raises(asyncfs.UnavailableError, match=r"SlowDown.*after 3 attempts"):
        fs.read_file(f"s3://{bucket}/r")
    assert len(proxy.requests) == 3
    proxy.inject(["drop"] * 10)
    with pytest.raises(asyncfs.UnavailableError, match="after 3 attempts"):
        fs.stat(f"s3://{bucket}/r")


def test_the_retry_budget_bounds_the_time(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, retry_base_ms=200, max_attempts=50, retry_budget_ms=300)
    proxy.inject(["503"] * 100)
    with pytest.raises(asyncfs.UnavailableError):
        fs.read_file(f"s3://{bucket}/r")
    assert 1 < len(proxy.requests) < 10


def test_a_gateway_that_comes_back_is_waited_for(
    s3_gateway: Gateway, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """With the default retries, a request rides out a gateway that refuses
    connections for a while (a restart): they used to give up in 0.3 s."""
    s3_fs.write_file(f"s3://{bucket}/back", b"here")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fs = own_s3(s3_gateway, endpoint=f"http://127.0.0.1:{port}")  # nothing listens there yet
    back: list[FaultProxy] = []
    timer = threading.Timer(1.5, lambda: back.append(FaultProxy(s3_gateway.endpoint, port=port)))
    timer.start()
    try:
        assert fs.read_file(f"s3://{bucket}/back") == b"here"
    finally:
        timer.join()
        for proxy in back:
            proxy.close()
    assert back and back[0].requests, "the request was answered before the gateway came back"


def test_a_bucket_in_another_region_is_named(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint)
    proxy.inject(["301"] * 3)
    with pytest.raises(asyncfs.FailedPreconditionError, match=r"region 'eu-west-3'.*AWS_REGION"):
        fs.read_file(f"s3://{bucket}/r")
    assert [fault for _, fault in proxy.requests] == ["301"]  # not retried


def test_a_skewed_clock_is_said_and_not_retried(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint)
    proxy.inject(["skewed"] * 3)
    with pytest.raises(asyncfs.FailedPreconditionError, match=r"clock.*RequestTimeTooSkewed"):
        fs.read_file(f"s3://{bucket}/r")
    assert [fault for _, fault in proxy.requests] == ["skewed"]


def test_bad_credentials_name_the_key_id_never_the_secret(s3_gateway: Gateway, bucket: str) -> None:
    secret = "a-wrong-secret-that-must-not-leak"
    fs = own_s3(s3_gateway, secret_access_key=secret.encode())
    with pytest.raises(asyncfs.PermissionDeniedError) as info:
        fs.read_file(f"s3://{bucket}/anything")
    message = str(info.value)
    assert s3_gateway.access_key in message and "SignatureDoesNotMatch" in message
    assert secret not in message and secret not in repr(info.value)
    fs = own_s3(s3_gateway, access_key_id=b"NOSUCHKEYID")
    with pytest.raises(asyncfs.PermissionDeniedError, match=r"NOSUCHKEYID.*InvalidAccessKeyId"):
        fs.get_children(f"s3://{bucket}")
    options = {o.name: o.values for o in fs.configuration()}
    assert options["secret_access_key"] == (b"(set)",)  # write-only


def test_files_exist_raises_a_refused_credential(
    s3_fs: asyncfs.ModularFileSystem, s3_gateway: Gateway, bucket: str
) -> None:
    """With a wrong secret, existing objects are not reported as missing."""
    s3_fs.write_file(f"s3://{bucket}/there", b"x")
    assert s3_fs.files_exist([f"s3://{bucket}/there", f"s3://{bucket}/not-there"]) == [True, False]
    fs = own_s3(s3_gateway, secret_access_key=b"a-wrong-secret")
    with pytest.raises(asyncfs.PermissionDeniedError):
        fs.files_exist([f"s3://{bucket}/there", f"s3://{bucket}/not-there"])


def test_missing_bucket_is_not_found(s3_fs: asyncfs.ModularFileSystem) -> None:
    gone = f"s3://missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(asyncfs.NotFoundError, match="NoSuchBucket"):
        s3_fs.read_file(f"{gone}/key")
    with pytest.raises(asyncfs.NotFoundError):
        s3_fs.get_children(gone)
    with pytest.raises(asyncfs.NotFoundError):
        s3_fs.stat(f"{gone}/key")
    assert not s3_fs.exists(gone)
    assert s3_fs.get_matching_paths(f"{gone}/*") == []


def test_bad_configuration_is_a_typed_error(s3_fs: asyncfs.ModularFileSystem) -> None:
    with pytest.raises(asyncfs.InvalidArgumentError, match="part_size"):
        s3_fs.set_option("part_size", 1024)
    with pytest.raises(asyncfs.NotFoundError, match="no configuration option"):
        s3_fs.set_option("no_such_option", 1)
    with pytest.raises(asyncfs.InvalidArgumentError, match="string"):
        s3_fs.set_option("endpoint", 5)
    with pytest.raises(asyncfs.InvalidArgumentError, match="bucket names"):
        s3_fs.stat("s3://ab/key")


def test_environment_variables_configure_a_new_filesystem(s3_gateway: Gateway) -> None:
    code = (
        "import asyncfs; env = asyncfs.Env(); import anyio\n"
        "async def main():\n"
        "    await env.makedirs('s3://env-configured/x')\n"
        "    await env.write_file('s3://env-configured/x/f', b'from the environment')\n"
        "    print((await env.read_file('s3://env-configured/x/f')).decode())\n"
        "    await env.rmtree('s3://env-configured')\n"
        "anyio.run(main)\n"
    )
    assert python_with_gateway(s3_gateway, code).strip() == "from the environment"


def test_the_stat_cache_forgets_what_the_filesystem_writes(s3_gateway: Gateway, bucket: str) -> None:
    """With stat_cache_ms set, a stat is answered from memory, but a write,
    a rename or a delete through the same filesystem is seen at once; a
    write by another filesystem only once the entry expires."""
    fs = own_s3(s3_gateway, stat_cache_ms=60_000)
    other = own_s3(s3_gateway)
    uri = f"s3://{bucket}/cached"
    fs.write_file(uri, b"1")
    assert fs.stat(uri).length == 1
    fs.write_file(uri, b"22")
    assert fs.stat(uri).length == 2
    other.write_file(uri, b"333")
    assert fs.stat(uri).length == 2  # another writer: not seen before the entry expires
    fs.rename_file(uri, f"{uri}-moved")
    with pytest.raises(asyncfs.NotFoundError):
        fs.stat(uri)
    assert fs.stat(f"{uri}-moved").length == 3
    fs.delete_file(f"{uri}-moved")
    assert not fs.exists(f"{uri}-moved")


def test_generic_transactions_commit_and_roll_back(env: asyncfs.Env, bucket: str) -> None:
    transaction_commits_and_rolls_back(env, f"s3://{bucket}/ckpt")


# ---- create-if-absent, and the transactions' lock on it --------------------------------


def test_mkdir_is_decided_by_the_server(s3_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    """Eight threads make one directory at the same moment: the marker is a
    conditional PUT (If-None-Match: *), so exactly one succeeds, whatever
    the lookups before it saw."""
    for trial in range(5):
        outcomes = make_dir_race(s3_fs, f"s3://{bucket}/race-{trial}")
        assert outcomes == ["exists"] * 7 + ["made"], f"trial {trial}: {outcomes}"


def test_two_processes_never_hold_one_s3_root(
    s3_gateway: Gateway, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """The generic lock was HEAD + LIST, then PUT: two processes could both
    take it, and one's committed file was lost. Now one holds, one waits."""
    root = f"s3://{bucket}/ckpt"
    for trial in range(5):
        outcomes = race(root, native=False, environ=s3_gateway.environ())
        assert sorted(outcomes) == ["conflict", "held"], f"trial {trial}: {outcomes}"
        winner = f"f{outcomes.index('held')}"
        assert s3_fs.read_file(f"{root}/{winner}") == f"written by {root}".encode()


# ---- keys other clients write ---------------------------------------------------------


def test_a_key_with_a_control_character_leaves_its_prefix_listable(
    s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """XML cannot carry a control character: listings ask for URL-encoded
    keys and decode them, as boto3 does."""
    odd = "bell\x07 tab\t+plus%25"
    s3_fs.write_file(f"s3://{bucket}/ctl/{odd}", b"x")
    s3_fs.write_file(f"s3://{bucket}/ctl/plain", b"y")
    assert sorted(s3_fs.get_children(f"s3://{bucket}/ctl")) == sorted([odd, "plain"])
    assert s3_fs.get_matching_paths(f"s3://{bucket}/ctl/bell*") == [f"s3://{bucket}/ctl/{odd}"]
    assert s3_fs.read_file(f"s3://{bucket}/ctl/{odd}") == b"x"
    # DeleteObjects names keys in XML, which cannot carry it: that one goes alone
    assert s3_fs.delete_recursively(f"s3://{bucket}/ctl") == (0, 0)
    assert not s3_fs.exists(f"s3://{bucket}/ctl")


def test_keys_are_sent_as_written_and_dot_dot_never_leaves_a_bucket(
    s3_gateway: Gateway, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """A key holding ".." (another client's) is reached as written, as s3fs
    sends keys; ".." never climbs out of a prefix or a bucket (the bucket
    was cleaned away as a path segment, which broke fsspec DirFileSystem's
    confinement). Keys with "" or "." segments cannot be named by a path:
    listings leave them out, so walking their folder ends."""
    boto3 = pytest.importorskip("boto3", reason="boto3 writes the keys that asyncfs's paths cannot")
    config = pytest.importorskip("botocore.config")

    environ = s3_gateway.environ()
    client = boto3.client(
        "s3",
        endpoint_url=environ["AWS_ENDPOINT_URL"],
        aws_access_key_id=environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environ["AWS_SECRET_ACCESS_KEY"],
        region_name=environ["AWS_REGION"],
        config=config.Config(s3={"addressing_style": "path"}),
    )
    for key in ["odd/../escape", "odd/./dot", "odd//double", "odd/sub/../x", "odd/ok", "escape"]:
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    assert sorted(s3_fs.get_children(f"s3://{bucket}/odd")) == ["..", "ok", "sub"]
    assert s3_fs.read_file(f"s3://{bucket}/odd/../escape") == b"odd/../escape"
    assert s3_fs.read_file(f"s3://{bucket}/odd/sub/../x") == b"odd/sub/../x"
    assert s3_fs.read_file(f"s3://{bucket}/escape") == b"escape"
    assert s3_fs.translate_name(f"s3://{bucket}/../../other-bucket/k") == f"/{bucket}/../../other-bucket/k"
    s3_fs.write_file(f"s3://{bucket}/odd/../written", b"w")
    assert client.get_object(Bucket=bucket, Key="odd/../written")["Body"].read() == b"w"
    assert "written" not in [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    walked = list(s3_fs.walk(f"s3://{bucket}/odd"))
    assert walked == [
        (f"s3://{bucket}/odd", ["..", "sub"], ["ok"]),
        (f"s3://{bucket}/odd/..", [], ["escape", "written"]),
        (f"s3://{bucket}/odd/sub", [".."], []),
        (f"s3://{bucket}/odd/sub/..", [], ["x"]),
    ]


# ---- connections ---------------------------------------------------------------------

# What the scripts below count: the sockets their process has open.
SOCKETS = """
import os

def sockets():
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return found
"""

BOUNDED_SOCKETS = (
    SOCKETS
    + """
import resource, sys, time
import anyio, asyncfs

resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

async def main(bucket):
    base = sockets()  # the event loop's own
    env = asyncfs.Env()
    s3 = env.filesystem("s3://")
    paths = [f"s3://{bucket}/fd/{i}" for i in range(64)]
    await env.write_file(paths[0], b"x")
    await s3.set_option("max_connections", 32)
    async with anyio.create_task_group() as tg:  # 64 x 64 lookups, 16 at a time each: 1024 at once
        for _ in range(64):
            tg.start_soon(env.files_exist, paths)
    after_burst = sockets()
    await s3.set_option("idle_timeout_ms", 100)
    time.sleep(0.3)
    await env.exists(paths[0])  # the pool closes what idled too long
    after_idle = sockets()
    await env.aclose()
    print(after_burst - base, after_idle - base, sockets() - base)

anyio.run(main, sys.argv[1])
"""
)


def test_connections_are_bounded_closed_when_idle_and_at_close(s3_gateway: Gateway, bucket: str) -> None:
    """64 concurrent batch lookups used to leave 3,074 sockets open (EMFILE
    under ulimit -n 1024). Now, with max_connections 32 and ulimit -n 256,
    they all succeed, at most 32 connections are open (three sockets each:
    the connection and curl's wakeup pair), idle ones close after
    idle_timeout_ms, and closing the Env closes the rest."""
    printed = python_with_gateway(s3_gateway, BOUNDED_SOCKETS, bucket)
    after_burst, after_idle, after_close = map(int, printed.split())
    assert after_burst <= 3 * 32
    assert after_idle <= 3
    assert after_close == 0


def test_bursts_of_requests_reuse_the_connections_of_the_burst_before(s3_gateway: Gateway, bucket: str) -> None:
    """Five bulk calls of 64 HEADs each, one after the other, hold 64
    connections, not five sets: curl kept only four idle connections per
    transfer still under way, so as each burst ended all but a few closed
    and the next one opened them again (556 connections for 6,000 GETs,
    64 in flight, before the engine sized curl's cache to max_connections)."""
    fs = own_s3(s3_gateway)
    paths = [f"s3://{bucket}/burst/{i}" for i in range(64)]
    for path in paths:
        fs.write_file(path, b"x")
    for _ in range(5):
        assert all(not isinstance(stats, Exception) for stats in fs.stat_files(paths))
    traffic = traffic_of(fs)
    assert traffic is not None and traffic.connections <= 64 + 1, traffic


IDLE_BULK = (
    SOCKETS
    + """
import sys, time
import anyio, asyncfs

async def main(bucket):
    base = sockets()
    env = asyncfs.Env()
    s3 = env.filesystem("s3://")
    paths = [f"s3://{bucket}/idle/{i}" for i in range(8)]
    await env.write_file(paths[0], b"x")
    await s3.set_option("idle_timeout_ms", 100)
    await env.files_exist(paths)  # a bulk call: its connections stay open, idle
    time.sleep(0.3)
    await env.exists(paths[0])  # a single request, with room to spare
    print(sockets() - base)
    await env.aclose()

anyio.run(main, sys.argv[1])
"""
)


def test_a_single_request_closes_bulk_connections_that_idled_too_long(s3_gateway: Gateway, bucket: str) -> None:
    """Idle bulk-call connections are closed by the idle timeout whatever
    kind of call comes next: a single request (with room for it, so nothing
    needs closing to make room) leaves only its own connection open."""
    assert int(python_with_gateway(s3_gateway, IDLE_BULK, bucket)) <= 3


FORKED_READS = """
import os, sys, threading
import asyncfs

fs = asyncfs.get_filesystem("s3://")
bucket = sys.argv[1]
for i in range(8):
    fs.write_file(f"s3://{bucket}/fork/o{i}", bytes([i]) * 200_000)
threads = [threading.Thread(target=fs.read_file, args=(f"s3://{bucket}/fork/o{i}",)) for i in range(8)]
for thread in threads:  # leaves the parent several idle connections
    thread.start()
for thread in threads:
    thread.join()
uris = [f"s3://{bucket}/fork/o{i}" for i in range(8)]
expected = [bytes([i]) * 200_000 for i in range(8)]
fs.read_files(uris, bytearray(8 << 20))  # and a bulk call's connections, idle too
child = os.fork()
wrong = 0
for round in range(40):
    i = round % 8
    try:
        wrong += fs.read_file(uris[i]) != expected[i]
        if round % 8 == 0:
            wrong += fs.read_files(uris, bytearray(8 << 20))[0] != expected
    except asyncfs.StatusError as exc:
        wrong += 1
        print(exc, file=sys.stderr)
if child == 0:
    os._exit(wrong)
_, code = os.waitpid(child, 0)
print(wrong, os.waitstatus_to_exitcode(code))
"""


def test_a_forked_child_and_its_parent_never_share_a_connection(s3_gateway: Gateway, bucket: str) -> None:
    """Both used the connections the parent had open before the fork, and
    read each other's answers (HTTP/0.9 errors, 30 s stalls). The child now
    starts with an empty pool, bulk calls' connections included."""
    assert python_with_gateway(s3_gateway, FORKED_READS, bucket).split() == ["0", "0"]


def test_prefetch_on_a_network_store_reads_each_object_on_its_own(
    registry: asyncfs.Registry, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """On a network store prefetch takes the per-object path (one request
    each, no group read first): objects smaller and larger than the scratch
    buffer, in order, with a per-object error."""
    import asyncio  # noqa: PLC0415

    uris = [f"s3://{bucket}/p/{i:03d}" for i in range(40)]
    for i, uri in enumerate(uris):
        s3_fs.write_file(uri, pattern(i, 100 + i * 1000))
    uris.append(f"s3://{bucket}/p/missing")

    async def main() -> list[tuple[str, bytes | Exception]]:
        async with asyncfs.Env(registry=registry) as env:
            return [item async for item in env.prefetch(uris, scratch_size=8192, errors="deliver")]

    got = asyncio.run(main())
    assert [path for path, _ in got] == uris
    assert [data for _, data in got[:40]] == [pattern(i, 100 + i * 1000) for i in range(40)]
    assert isinstance(got[40][1], FileNotFoundError)


# ---- many objects per call: read_files ------------------------------------------------


def group_sizes(monkeypatch: pytest.MonkeyPatch, combiner: type) -> list[int]:
    """The sizes of the groups the pool hands a combiner (asyncfs._async.combined),
    as they come: a spy on its __call__."""
    sizes: list[int] = []
    call = combiner.__call__

    def spy(self: object, calls: list[tuple[Any, ...]]) -> Any:
        sizes.append(len(calls))
        return call(self, calls)

    monkeypatch.setattr(combiner, "__call__", spy)
    return sizes


def test_read_files_reads_many_objects_in_one_call_each_with_its_own_outcome(
    s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """One call, all requests in flight together: each object lands in its
    share of the buffer; one bigger than its share is None (read another
    way); what is not an object is that entry's typed error, as a single
    read would raise it."""
    assert s3_fs.offers("read_files")
    small = [f"s3://{bucket}/m/{i:02d}" for i in range(20)]
    for i, uri in enumerate(small):
        s3_fs.write_file(uri, pattern(i, 10 + i * 50))
    s3_fs.write_file(f"s3://{bucket}/m/empty", b"")
    s3_fs.write_file(f"s3://{bucket}/m/big", pattern(0, 5000))
    s3_fs.write_file(f"s3://{bucket}/m/dir/inside", b"x")
    odd = [
        f"s3://{bucket}/m/empty",
        f"s3://{bucket}/m/big",
        f"s3://{bucket}/m/missing",
        f"s3://{bucket}/m/dir",
        f"s3://{bucket}",
        f"s3://missing-{uuid.uuid4().hex[:8]}/key",
    ]
    got, _ = s3_fs.read_files(small + odd, bytearray(26 * 2048))  # a 2 KiB share each
    assert got[:20] == [pattern(i, 10 + i * 50) for i in range(20)]
    empty, big, missing, directory, bucket_root, no_bucket = got[20:]
    assert empty == b""
    assert big is None
    assert isinstance(missing, asyncfs.NotFoundError) and "m/missing" in str(missing)
    assert isinstance(directory, asyncfs.FailedPreconditionError) and "a directory" in str(directory)
    assert isinstance(bucket_root, asyncfs.FailedPreconditionError) and "bucket is a directory" in str(bucket_root)
    assert isinstance(no_bucket, asyncfs.NotFoundError) and "NoSuchBucket" in str(no_bucket)


def test_read_files_rides_out_faults_and_waits_for_connections(
    s3_gateway: Gateway, proxy: FaultProxy, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """Each request of a bulk call is retried on its own (503, a dropped
    connection, a cut answer) while the others go on; with max_connections
    3, 30 objects still all arrive, three at a time, and single requests
    made meanwhile are not starved."""
    uris = [f"s3://{bucket}/f/{i:02d}" for i in range(30)]
    for i, uri in enumerate(uris):
        s3_fs.write_file(uri, pattern(i, 3000 + i))
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, retry_base_ms=5, max_connections=3)
    proxy.inject(["503", "drop", "cut", "pass", "503", "drop"])
    with ThreadPoolExecutor(2) as pool:
        single = pool.submit(lambda: [fs.read_file(uris[i]) for i in range(5)])
        got, _ = fs.read_files(uris, bytearray(30 * 4096))
        assert single.result() == [pattern(i, 3000 + i) for i in range(5)]
    assert got == [pattern(i, 3000 + i) for i in range(30)]
    faults = [fault for _, fault in proxy.requests]
    assert faults.count("503") == 2 and faults.count("drop") == 2 and faults.count("cut") == 1


def test_read_files_fails_each_object_when_requests_cannot_be_sent(s3_gateway: Gateway, bucket: str) -> None:
    fs = own_s3(s3_gateway, endpoint="127.0.0.1:1")  # no scheme: refused before anything is sent
    got, _ = fs.read_files([f"s3://{bucket}/a", f"s3://{bucket}/b"], bytearray(8192))
    assert all(isinstance(item, asyncfs.InvalidArgumentError) and "http://" in str(item) for item in got)


def test_prefetch_of_many_objects_keeps_the_budget_and_the_order(
    registry: asyncfs.Registry, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """Bulk calls (a quarter of in_flight each) deliver every object in
    order, and the bytes held never pass max_bytes (the one file due next
    excepted), even though a call reads before it reserves."""
    import asyncio  # noqa: PLC0415

    uris = [f"s3://{bucket}/b/{i:03d}" for i in range(200)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: s3_fs.write_file(uris[i], pattern(i, 1000 + 37 * i)), range(200)))
    budget = asyncfs.Budget(16 * 1024)

    async def main() -> list[tuple[str, bytes | Exception]]:
        async with asyncfs.Env(registry=registry) as env:
            return [item async for item in env.prefetch(uris, in_flight=32, budget=budget)]

    got = asyncio.run(main())
    assert got == [(uri, pattern(i, 1000 + 37 * i)) for i, uri in enumerate(uris)]
    assert budget.peak <= 16 * 1024 + 1000 + 37 * 199
    assert budget.used == 0


def test_leaving_a_prefetch_of_objects_early_gives_its_budget_back(
    registry: asyncfs.Registry, s3_fs: asyncfs.ModularFileSystem, bucket: str
) -> None:
    """A break, and a cancellation, while bulk calls of objects are in
    flight: once they finish, every byte they reserved is back in the
    Budget the prefetches shared, in order or not."""
    import asyncio  # noqa: PLC0415

    uris = [f"s3://{bucket}/early/{i:03d}" for i in range(160)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: s3_fs.write_file(uris[i], pattern(i, 2000)), range(160)))
    budget = asyncfs.Budget(1 << 30)

    async def main() -> None:
        async with asyncfs.Env(registry=registry) as env:
            for ordered in (True, False):
                await leave_prefetches_early(env, uris, budget, ordered=ordered)

    asyncio.run(main())
    assert budget.used == 0


def test_concurrent_read_file_calls_are_read_together(
    registry: asyncfs.Registry, s3_fs: asyncfs.ModularFileSystem, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """env.read_file calls made together go to the plugin's read_files in
    groups; each caller gets its object, or the error a read of it alone
    would raise. An object bigger than its share is read again alone, and
    the calls after it are not combined for a while."""
    import asyncio  # noqa: PLC0415

    from asyncfs._async import combined as _combined  # noqa: PLC0415

    groups = group_sizes(monkeypatch, _combined.WholeReads)
    uris = [f"s3://{bucket}/c/{i:02d}" for i in range(40)]
    for i, uri in enumerate(uris):
        s3_fs.write_file(uri, pattern(i, 100 + 97 * i))
    s3_fs.write_file(f"s3://{bucket}/c/dir/x", b"x")
    odd = [f"s3://{bucket}/c/missing", f"s3://{bucket}/c/dir"]
    singles = {}
    for uri in odd:
        with pytest.raises(asyncfs.StatusError) as raised:
            s3_fs.read_file(uri)
        singles[uri] = raised.value

    async def main() -> tuple[list[bytes | BaseException], int, bytes, int]:
        async with asyncfs.Env(registry=registry) as env:
            fs = env.filesystem("s3://")
            got = await asyncio.gather(*(env.read_file(uri) for uri in uris + odd), return_exceptions=True)
            paused_before = fs._combined.read_file.paused  # type: ignore[union-attr]
            await env.write_file(f"s3://{bucket}/c/big", pattern(0, 200_000))
            big, _ = await asyncio.gather(env.read_file(f"s3://{bucket}/c/big"), env.read_file(uris[0]))
            return got, paused_before, big, fs._combined.read_file.paused  # type: ignore[union-attr]

    got, paused_before, big, paused_after = asyncio.run(main())
    assert got[:40] == [pattern(i, 100 + 97 * i) for i in range(40)]
    for uri, error in zip(odd, got[40:], strict=True):
        assert type(error) is type(singles[uri]) and str(error) == str(singles[uri])
    assert sum(groups[:-1]) == 42 and max(groups) > 1
    assert paused_before == 0
    assert big == pattern(0, 200_000) and paused_after > 0


def test_stat_files_answers_as_stat_does_for_each_path(s3_fs: asyncfs.ModularFileSystem, bucket: str) -> None:
    """One HEAD per object, all at once; what a HEAD cannot settle (a
    directory, a bucket, the root, nothing there) is settled as stat
    settles it: every entry equals stat's answer or stat's error."""
    assert s3_fs.offers("stat_files")
    s3_fs.write_file(f"s3://{bucket}/s/file", b"12345")
    s3_fs.write_file(f"s3://{bucket}/s/dir/inside", b"x")
    s3_fs.create_dir(f"s3://{bucket}/s/empty")
    uris = [
        f"s3://{bucket}/s/file",
        f"s3://{bucket}/s/dir",
        f"s3://{bucket}/s/empty",
        f"s3://{bucket}",
        "s3://",
        f"s3://{bucket}/s/missing",
        f"s3://{bucket}/s/file/below",
        f"s3://missing-{uuid.uuid4().hex[:8]}/key",
        f"s3://{bucket}/s/a\0b",
    ]
    expected: list[object] = []
    for uri in uris:
        try:
            expected.append(s3_fs.stat(uri))
        except asyncfs.StatusError as error:
            expected.append((type(error), str(error)))
    got = [
        item if not isinstance(item, asyncfs.StatusError) else (type(item), str(item))
        for item in s3_fs.stat_files(uris)
    ]
    assert got == expected
    assert got[0].length == 5 and not got[0].is_directory  # type: ignore[union-attr]


def test_concurrent_stats_are_sent_together(
    registry: asyncfs.Registry, s3_fs: asyncfs.ModularFileSystem, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio  # noqa: PLC0415

    from asyncfs._async import combined as _combined  # noqa: PLC0415

    groups = group_sizes(monkeypatch, _combined.Stats)
    uris = [f"s3://{bucket}/st/{i:02d}" for i in range(30)]
    for i, uri in enumerate(uris):
        s3_fs.write_file(uri, b"x" * i)

    async def main() -> list[asyncfs.FileStatistics | BaseException]:
        async with asyncfs.Env(registry=registry) as env:
            return await asyncio.gather(
                *(env.stat(uri) for uri in [*uris, f"s3://{bucket}/st/missing"]), return_exceptions=True
            )

    got = asyncio.run(main())
    assert [stat.length for stat in got[:30]] == list(range(30))  # type: ignore[union-attr]
    assert isinstance(got[30], asyncfs.NotFoundError)
    assert sum(groups) == 31 and max(groups) == 16


def test_write_files_puts_many_objects_in_one_call(s3_gateway: Gateway, bucket: str) -> None:
    """One PUT per object, all at once, each with the Content-Type a lone
    write gives it; one bigger than part_size goes up as a multipart
    upload; what cannot be written is that entry's error and nothing else
    is held back."""
    fs = own_s3(s3_gateway, part_size=5 * MiB)
    assert fs.offers("write_files")
    uris = [f"s3://{bucket}/w/{i:02d}.json" for i in range(20)]
    datas: list[bytes] = [pattern(i, 50 * i) for i in range(20)]
    uris += [f"s3://{bucket}/w/big.bin", f"s3://{bucket}", f"s3://{bucket}/w/a\0b"]
    datas += [pattern(7, 6 * MiB), b"x", b"y"]
    errors = fs.write_files(uris, datas)
    assert errors[:21] == [None] * 21
    assert isinstance(errors[21], asyncfs.FailedPreconditionError) and "bucket is a directory" in str(errors[21])
    assert isinstance(errors[22], asyncfs.InvalidArgumentError)
    for uri, data in zip(uris[:21], datas[:21], strict=True):
        assert fs.read_file(uri) == data
    assert boto3_client(s3_gateway).head_object(Bucket=bucket, Key="w/03.json")["ContentType"] == "application/json"
    assert fs.incomplete_writes(f"s3://{bucket}/w") == []


def test_concurrent_writes_are_sent_together(
    registry: asyncfs.Registry, s3_fs: asyncfs.ModularFileSystem, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """env.write_file calls made together go to write_files in groups (not
    those with attributes); each caller sees its own outcome."""
    import asyncio  # noqa: PLC0415

    from asyncfs._async import combined as _combined  # noqa: PLC0415

    groups = group_sizes(monkeypatch, _combined.Writes)
    uris = [f"s3://{bucket}/cw/{i:02d}" for i in range(30)]

    async def main() -> list[BaseException | None]:
        async with asyncfs.Env(registry=registry) as env:
            writes = [env.write_file(uri, pattern(i, 10 * i)) for i, uri in enumerate(uris)]
            writes.append(env.write_file(f"s3://{bucket}", b"bucket"))
            writes.append(env.write_file(f"s3://{bucket}/cw/tagged", b"t", attributes={"run": "1"}))
            return await asyncio.gather(*writes, return_exceptions=True)

    got = asyncio.run(main())
    assert got[:30] == [None] * 30 and got[31] is None
    assert isinstance(got[30], asyncfs.FailedPreconditionError)
    assert [s3_fs.read_file(uri) for uri in uris] == [pattern(i, 10 * i) for i in range(30)]
    assert s3_fs.attributes(f"s3://{bucket}/cw/tagged")["run"] == "1"
    assert sum(groups) == 31 and max(groups) == 16
