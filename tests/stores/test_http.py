"""http:// and https://, read-only, on the object-store engine: against
nginx (ranges, strong ETags, autoindex) and Python's http.server (no Range,
no ETag, HTTP/1.0), both serving one folder for the session, and an https
proxy in front of nginx with a CA of the test's own."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from conftest import tls_proxy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fault_proxy import FaultProxy
from support.http_servers import TOKEN, HttpServer, start_python_server

import asyncfs

pytestmark = pytest.mark.usefixtures("http_plugin")


def data(n: int, seed: str = "") -> bytes:
    """n deterministic bytes."""
    block = hashlib.sha256(seed.encode()).digest() * 32  # 1 KiB
    return (block * (n // len(block) + 1))[:n]


@pytest.fixture(scope="module")
def tree(nginx: HttpServer) -> Path:
    """A folder both servers serve: a small file, a 3 MB one, a name with
    a space and a nested folder."""
    root = nginx.root / f"tree-{uuid.uuid4().hex[:8]}"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"hello world")
    (root / "big.bin").write_bytes(data(3_000_000))
    (root / "sub" / "with space.txt").write_bytes(b"spaced")
    (root / "sub" / "deeper" / "z.txt").write_bytes(b"z")
    return root


@pytest.fixture(scope="module")
def secret(nginx: HttpServer) -> str:
    """The URL of a file in nginx's /private/, which wants the token."""
    (nginx.root / "private").mkdir(exist_ok=True)
    (nginx.root / "private" / "secret.txt").write_bytes(b"secret\n")
    return f"{nginx.url}/private/secret.txt"


@pytest.fixture(scope="module")
def python_server(nginx: HttpServer) -> Iterator[HttpServer]:
    server = start_python_server(nginx.root)
    yield server
    server.stop.close()


@pytest.fixture(params=["nginx", "http.server"])
def served(request: pytest.FixtureRequest, nginx: HttpServer, python_server: HttpServer, tree: Path) -> str:
    """The tree's URL on each server."""
    server = nginx if request.param == "nginx" else python_server
    return f"{server.url}/{tree.name}"


@pytest.fixture
def http() -> asyncfs.ModularFileSystem:
    """An http filesystem of its own (options set here stay here)."""
    registry = asyncfs.Registry()
    return registry.get("http")


def test_stat_reads_and_ranges(http: asyncfs.ModularFileSystem, served: str) -> None:
    """Whole and ranged reads give the file's bytes on both servers; on
    http.server, which answers a ranged GET with the whole file, the engine
    skips to the range and stops after it."""
    http.set_option("part_size", 256 * 1024)  # a big read goes as many ranges
    big = data(3_000_000)
    assert http.stat(f"{served}/a.txt").length == 11
    assert http.read_file(f"{served}/a.txt") == b"hello world"
    assert http.read_file(f"{served}/big.bin") == big
    f = http.new_random_access_file(f"{served}/big.bin")
    assert f.read(2_000_000, 500_000) == big[2_000_000:2_500_000]
    assert f.read(100_000, 2_500_000) == big[100_000:2_600_000]
    assert f.read(2_999_990, 100) == big[2_999_990:]  # short at the end
    sub = http.stat(f"{served}/sub")
    assert sub.is_directory and not http.stat(f"{served}/a.txt").is_directory


def test_listing_is_the_index_pages_children(http: asyncfs.ModularFileSystem, served: str) -> None:
    assert sorted(http.get_children(served)) == ["a.txt", "big.bin", "sub"]
    assert sorted(http.get_children(f"{served}/sub")) == ["deeper", "with space.txt"]
    assert http.get_matching_paths(f"{served}/sub/*.txt") == [f"{served}/sub/with space.txt"]
    assert http.isdir(f"{served}/sub/deeper")


def test_missing_paths_and_directories_say_what_they_are(http: asyncfs.ModularFileSystem, served: str) -> None:
    assert not http.exists(f"{served}/missing")
    with pytest.raises(asyncfs.NotFoundError, match="no such file"):
        http.stat(f"{served}/missing")
    with pytest.raises(asyncfs.PathNotDirectoryError):
        http.stat(f"{served}/a.txt/child")
    with pytest.raises(asyncfs.PathIsDirectoryError):
        http.read_file(f"{served}/sub")
    with pytest.raises(asyncfs.PathNotDirectoryError):
        http.get_children(f"{served}/a.txt")


def test_writes_are_unimplemented_and_name_the_scheme(http: asyncfs.ModularFileSystem, served: str) -> None:
    for write in (
        lambda: http.write_file(f"{served}/new", b"x"),
        lambda: http.create_dir(f"{served}/new"),
        lambda: http.delete_file(f"{served}/a.txt"),
        lambda: http.rename_file(f"{served}/a.txt", f"{served}/b.txt"),
    ):
        with pytest.raises(asyncfs.UnimplementedError, match=r"http:// is read-only"):
            write()
    assert http.read_file(f"{served}/a.txt") == b"hello world"


def test_a_file_replaced_during_a_read_fails_instead_of_mixing(
    http: asyncfs.ModularFileSystem, nginx: HttpServer, tree: Path
) -> None:
    """nginx's strong ETag pins the ranged reads after the open: a file
    replaced in between fails with a clear error (412)."""
    path = tree / "changing.bin"
    path.write_bytes(data(1_000_000, "one"))
    f = http.new_random_access_file(f"{nginx.url}/{tree.name}/changing.bin")
    assert f.read(500_000, 1000) == data(1_000_000, "one")[500_000:501_000]
    path.write_bytes(data(1_000_000, "two"))
    os.utime(path, (1, 1))  # another mtime, so another ETag, whatever the clock's resolution
    with pytest.raises(asyncfs.FailedPreconditionError, match="changed since it was opened"):
        f.read(600_000, 1000)


def test_token_and_headers_go_to_the_origin_only(
    http: asyncfs.ModularFileSystem, nginx: HttpServer, secret: str
) -> None:
    """nginx's /private/ wants the bearer token; a redirect on the same
    origin keeps it, one to another host (localhost for 127.0.0.1) does not
    get it; a redirect loop ends after max_redirects."""
    with pytest.raises(asyncfs.UnauthenticatedError, match="401"):
        http.read_file(secret)
    with pytest.raises(asyncfs.UnauthenticatedError):
        http.exists(secret)  # not False: only a 404 is absence
    http.set_option("bearer_token", TOKEN.encode())
    assert http.read_file(secret) == b"secret\n"
    assert http.read_file(f"{nginx.url}/redirect/here") == b"secret\n"
    with pytest.raises(asyncfs.UnauthenticatedError):
        http.read_file(f"{nginx.url}/redirect/elsewhere")
    http.set_option("max_redirects", 3)
    with pytest.raises(asyncfs.UnavailableError, match="more than 3 redirects"):
        http.read_file(f"{nginx.url}/redirect/loop")


def test_requests_ask_for_the_bytes_as_stored_with_the_configured_headers(
    http: asyncfs.ModularFileSystem, python_server: HttpServer, tree: Path
) -> None:
    http.set_option("headers", b"X-Team: data\nX-Trace: 7")
    python_server.seen.clear()
    assert http.read_file(f"{python_server.url}/{tree.name}/a.txt") == b"hello world"
    sent = python_server.seen[-1]
    assert sent["Accept-Encoding"] == "identity"
    assert (sent["X-Team"], sent["X-Trace"]) == ("data", "7")


def test_https_with_the_settings_ca(nginx: HttpServer, tree: Path, tmp_path: Path) -> None:
    proxy, pem = tls_proxy(nginx.url, tmp_path)
    try:
        https = asyncfs.Registry().get("https")
        url = f"{proxy.endpoint}/{tree.name}/a.txt"
        with pytest.raises(asyncfs.UnavailableError):  # not trusted: the system's CAs
            https.read_file(url)
        https.set_option("ca_bundle", str(pem).encode())
        assert https.read_file(url) == b"hello world"
    finally:
        proxy.close()


def test_the_async_layer_reads_many_files_at_once(nginx: HttpServer, tree: Path) -> None:
    """One task per request, 80 at once: combined into read_files calls."""
    uris = [f"{nginx.url}/{tree.name}/a.txt"] * 40 + [f"{nginx.url}/{tree.name}/sub/with space.txt"] * 40

    async def main() -> list[bytes]:
        results: list[bytes] = [b""] * len(uris)

        async def one(env: asyncfs.Env, i: int) -> None:
            results[i] = await env.read_file(uris[i])

        async with asyncfs.Env() as env, anyio.create_task_group() as tg:
            for i in range(len(uris)):
                tg.start_soon(one, env, i)
        return results

    assert anyio.run(main) == [b"hello world"] * 40 + [b"spaced"] * 40


def test_fsspec_and_pandas_read_through_the_bridge(nginx: HttpServer, tree: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    pytest.importorskip("asyncfs.fsspec")  # registers the protocols

    with fsspec.open(f"asyncfs+{nginx.url}/{tree.name}/a.txt", "rb") as f:
        assert f.read() == b"hello world"
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"x": list(range(1000)), "y": [str(i) for i in range(1000)]})
    frame.to_parquet(tree / "frame.parquet")
    assert pd.read_parquet(f"asyncfs+{nginx.url}/{tree.name}/frame.parquet").equals(frame)


# ---- reading ahead, and the caches ---------------------------------------------------------


def ranges_asked(proxy: FaultProxy) -> list[tuple[int, int]]:
    """The byte ranges of the proxied GETs that asked for one, in order."""
    asked = []
    for head in proxy.heads:
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"range":
                first, _, last = value.strip().removeprefix(b"bytes=").partition(b"-")
                asked.append((int(first), int(last)))
    return asked


@pytest.fixture
def nginx_proxy(nginx: HttpServer) -> Iterator[FaultProxy]:
    """A proxy in front of nginx that records each request."""
    proxy = FaultProxy(nginx.url)
    yield proxy
    proxy.close()


def test_sequential_reads_fetch_a_growing_window(
    http: asyncfs.ModularFileSystem, nginx_proxy: FaultProxy, tree: Path
) -> None:
    """Reading a 3 MB file 64 KiB at a time, in order, asks for a window
    that doubles with each sequential read: a handful of GETs, not 46."""
    f = http.new_random_access_file(f"{nginx_proxy.endpoint}/{tree.name}/big.bin")
    got = b"".join(f.read(offset, 65536) for offset in range(0, 3_000_000, 65536))
    assert got == data(3_000_000)
    assert len(nginx_proxy.requests) <= 8, nginx_proxy.requests


def test_the_block_cache_fetches_each_block_once(
    http: asyncfs.ModularFileSystem, nginx_proxy: FaultProxy, tree: Path
) -> None:
    """Parquet's pattern, footer then columns, from two opens of one file:
    with the block cache on, no block is asked for twice."""
    http.set_option("block_cache_bytes", 8 << 20)
    http.set_option("block_size", 64 * 1024)
    uri = f"{nginx_proxy.endpoint}/{tree.name}/big.bin"
    big = data(3_000_000)
    reads = [(2_999_992, 8), (2_900_000, 99_992), (100_000, 300_000), (1_500_000, 200_000), (2_950_000, 10)]
    for _ in range(2):
        f = http.new_random_access_file(uri)
        for offset, n in reads:
            assert f.read(offset, n) == big[offset : offset + n]
    asked = [(first, last) for first, last in ranges_asked(nginx_proxy) if first > 0]  # not the opens' heads
    blocks = [b for first, last in asked for b in range(first // 65536, last // 65536 + 1)]
    assert blocks and len(blocks) == len(set(blocks)), sorted(blocks)


def test_a_cached_stat_is_answered_without_a_request(
    http: asyncfs.ModularFileSystem, nginx_proxy: FaultProxy, tree: Path
) -> None:
    http.set_option("stat_cache_ms", 60_000)
    uri = f"{nginx_proxy.endpoint}/{tree.name}/a.txt"
    assert http.stat(uri).length == http.stat(uri).length == 11
    assert [line.split()[0] for line, _ in nginx_proxy.requests] == ["HEAD"]
    http.flush_caches()  # forgets it
    assert http.stat(uri).length == 11
    assert len(nginx_proxy.requests) == 2


def test_sequential_reads_through_the_block_cache_read_blocks_ahead(
    http: asyncfs.ModularFileSystem, nginx_proxy: FaultProxy, tree: Path
) -> None:
    """With the cache on, a sequential read's window is fetched as blocks
    beyond the read (kept, not copied into it): the bytes stay right and
    the later reads find them."""
    http.set_option("block_cache_bytes", 16 << 20)
    http.set_option("block_size", 64 * 1024)
    f = http.new_random_access_file(f"{nginx_proxy.endpoint}/{tree.name}/big.bin")
    got = b"".join(f.read(offset, 20_000) for offset in range(0, 3_000_000, 20_000))
    assert got == data(3_000_000)
    asked = [(first, last) for first, last in ranges_asked(nginx_proxy) if first > 0]
    blocks = [b for first, last in asked for b in range(first // 65536, last // 65536 + 1)]
    assert len(blocks) == len(set(blocks)) and len(asked) < 20, asked


# Names a directory may hold, with what an index page must escape or
# percent-encode: spaces, %, #, ?, &, quotes, <, >, +, ; and non-ASCII
# letters (nginx and http.server each escape their own way).
NAMES = st.text(
    st.characters(codec="utf-8", exclude_characters="/\0\n\r\t", exclude_categories=("Cs", "Cc")),
    min_size=1,
    max_size=12,
).filter(lambda name: not name.startswith("."))  # nginx's autoindex leaves hidden files out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.sets(NAMES, min_size=1, max_size=6))
def test_an_index_page_lists_every_name_as_stored(
    http: asyncfs.ModularFileSystem, nginx: HttpServer, python_server: HttpServer, names: set[str]
) -> None:
    """The HTML index parser (plugins/http/http_index.c), on the index
    pages nginx and http.server make of a folder of hostile names: each
    name once, decoded to the bytes stored, nothing else."""
    folder = nginx.root / f"names-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    try:
        for name in names:
            (folder / name).write_bytes(b"x")
        for server in (nginx, python_server):
            assert sorted(http.get_children(f"{server.url}/{folder.name}")) == sorted(names), server.url
    finally:
        shutil.rmtree(folder)
