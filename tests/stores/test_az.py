"""az:// on Azurite, started by the test session on loopback: what the
conformance suite does not cover. Writes in one Put Blob and in blocks,
read back byte for byte; reads pinned to the ETag the open saw; names that
need encoding; the abfs:// URL forms; directories decided by the server;
transactions; blobs written by azure-storage-blob and adlfs read by asyncfs
and the other way round; a SAS; adlfs's storage_options on the bridge; and
a wrong key's error (the token chain: test_az_credentials.py)."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import cffi
import pytest
from conftest import REPO, build_plugin
from support.azurite import ACCOUNT, KEY, Azurite
from support.races import make_dir_race, transaction_commits_and_rolls_back

import asyncfs
from asyncfs.fsspec.names import plugin_options

# names that a URL, XML or a shell would each mangle some other way
ODD = ["sp ace.txt", "q?uestion", "hash#tag", "per%25cent", "plus+sign", "ünï€ødé", 'quo"te', "amp&lt;"]


@pytest.fixture
def container(az_fs: asyncfs.ModularFileSystem) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:12]}"
    az_fs.create_dir(f"az://{name}")
    yield name
    az_fs.delete_recursively(f"az://{name}")


def own_az(azurite: Azurite, **options: int | bytes) -> asyncfs.ModularFileSystem:
    fs = asyncfs.Registry().get("az")
    fs.set_option("connection_string", azurite.connection_string.encode())
    for name, value in options.items():
        fs.set_option(name, value)
    return fs


def pattern(n: int) -> bytes:
    return bytes((i * 7 + i // 251) % 256 for i in range(n))


@pytest.mark.parametrize("piece", [300_000, 1 << 30], ids=["pieces", "one-append"])
@pytest.mark.parametrize("size", [0, 1, 1024 * 1024, 1024 * 1024 + 1, 2 * 1024 * 1024, 5 * 1024 * 1024 + 17])
def test_writes_in_one_request_and_in_blocks_read_back_exactly(
    azurite: Azurite, container: str, size: int, piece: int
) -> None:
    """Above upload_threshold a file goes up as blocks while it is written,
    committed at close; below, as one Put Blob. A long append's whole
    blocks go from the caller's bytes (one-append), the rest from the
    writer's buffer."""
    fs = own_az(azurite, upload_threshold=1024 * 1024, block_size=1024 * 1024)
    data = pattern(size)
    uri = f"az://{container}/blocks/{size}-{piece}"
    with fs.new_writable_file(uri) as f:
        for at in range(0, size, piece):
            f.append(data[at : at + piece])
        assert f.tell() == size
        assert size <= 1024 * 1024 or not fs.exists(uri)  # blocks are in, yet nothing is visible
    assert fs.stat(uri).length == size
    assert fs.read_file(uri) == data
    with fs.new_random_access_file(uri) as r:  # ranged reads after the open's
        assert r.read(size // 3, 1000) == data[size // 3 : size // 3 + 1000]


def test_block_sizes_reach_the_service_limit(tmp_path: Path) -> None:
    """The plugin's block arithmetic (plugins/az/az_blocks.h, compiled on its
    own): blocks double every 500 up to 4000 MiB, so that 50,000 of them
    hold an object near the service's limit (190.7 TiB) from the default
    8 MiB, and never one block above the limit."""
    header = REPO / "plugins" / "az" / "az_blocks.h"
    if not header.exists():
        pytest.skip("the plugin sources are not here (an installed wheel)")
    (tmp_path / "blocks.c").write_text(
        '#include "az_blocks.h"\nint64_t block_size(int64_t first, int n) { return az_block_size(first, n); }\n'
    )
    flags = ("-I", str(header.parent), "-I", str(REPO / "plugins" / "objstore"))
    library = build_plugin(tmp_path / "blocks.c", tmp_path / "libblocks.so", flags=flags)
    ffi = cffi.FFI()
    ffi.cdef("int64_t block_size(int64_t first, int n);")
    blocks = ffi.dlopen(str(library))
    mib, tib = 1 << 20, 1 << 40
    sizes = [blocks.block_size(8 * mib, n) for n in range(1, 50_001)]
    assert sizes[0] == sizes[499] == 8 * mib and sizes[500] == 16 * mib
    assert max(sizes) == 4000 * mib and sizes == sorted(sizes)
    assert sum(sizes) > 175 * tib
    assert sum(blocks.block_size(mib, n) for n in range(1, 50_001)) > 165 * tib  # from the smallest option too


def test_write_files_puts_small_blobs_at_once_and_big_ones_in_blocks(azurite: Azurite, container: str) -> None:
    """The bulk write (what concurrent write_file calls become): one Put
    Blob each up to the threshold, all in flight; a bigger one in blocks;
    each path's own outcome (a container is no file)."""
    fs = own_az(azurite, upload_threshold=1024 * 1024, block_size=1024 * 1024)
    uris = [f"az://{container}/bulk/{i}" for i in range(20)] + [f"az://{container}/bulk/big", f"az://{container}"]
    datas = [pattern(100 + i) for i in range(20)] + [pattern(3 * 1024 * 1024 + 5), b"not a file"]
    errors = fs.write_files(uris, datas)
    assert errors[:-1] == [None] * 21
    assert isinstance(errors[-1], asyncfs.FailedPreconditionError) and "container" in str(errors[-1])
    for uri, data in zip(uris[:-1], datas, strict=False):
        assert fs.read_file(uri) == data


def test_a_file_dropped_without_close_leaves_nothing(azurite: Azurite, container: str) -> None:
    fs = own_az(azurite, upload_threshold=1024 * 1024, block_size=1024 * 1024)
    uri = f"az://{container}/dropped"
    f = fs.new_writable_file(uri)
    f.append(pattern(3 * 1024 * 1024))  # blocks are sent
    del f
    gc.collect()
    assert not fs.exists(uri)


def test_a_blob_replaced_mid_read_fails_instead_of_mixing(azurite: Azurite, container: str) -> None:
    fs = own_az(azurite, read_ahead=64 * 1024)
    uri = f"az://{container}/moving"
    fs.write_file(uri, pattern(1024 * 1024))
    with fs.new_random_access_file(uri) as r:
        assert r.read(0, 100) == pattern(100)
        fs.write_file(uri, b"y" * (1024 * 1024))
        with pytest.raises(asyncfs.FailedPreconditionError, match="changed"):
            r.read(512 * 1024, 100)


def test_append_rewrites_the_blob(az_fs: asyncfs.ModularFileSystem, container: str) -> None:
    uri = f"az://{container}/log"
    az_fs.write_file(uri, b"first\n")
    with az_fs.new_appendable_file(uri) as f:
        assert f.tell() == 6
        f.append(b"second\n")
    assert az_fs.read_file(uri) == b"first\nsecond\n"


def test_odd_names_round_trip_and_list(az_fs: asyncfs.ModularFileSystem, container: str) -> None:
    for name in ODD:
        az_fs.write_file(f"az://{container}/odd/{name}", name.encode())
    assert sorted(az_fs.get_children(f"az://{container}/odd")) == sorted(ODD)
    for name in ODD:
        assert az_fs.read_file(f"az://{container}/odd/{name}") == name.encode()
        assert az_fs.stat(f"az://{container}/odd/{name}").length == len(name.encode())
    az_fs.rename_file(f"az://{container}/odd/{ODD[0]}", f"az://{container}/odd/{ODD[1]}-renamed")
    assert az_fs.read_file(f"az://{container}/odd/{ODD[1]}-renamed") == ODD[0].encode()
    assert az_fs.delete_recursively(f"az://{container}/odd") == (0, 0)
    assert not az_fs.exists(f"az://{container}/odd")


def test_the_abfs_forms_name_the_same_blobs(az_fs: asyncfs.ModularFileSystem, container: str) -> None:
    """abfs[s]://container@account.dfs.core.windows.net/path (and the .blob.
    host) reach the configured account's blobs when the account is the
    configured one."""
    az_fs.write_file(f"az://{container}/a/b.txt", b"hello")
    for scheme in ("abfs", "abfss", "az"):
        for host in (f"{ACCOUNT}.dfs.core.windows.net", f"{ACCOUNT}.blob.core.windows.net"):
            assert az_fs.read_file(f"{scheme}://{container}@{host}/a/b.txt") == b"hello"
    assert az_fs.get_children(f"abfs://{container}@{ACCOUNT}.dfs.core.windows.net/a") == ["b.txt"]


def test_az_without_an_account_says_how_to_name_one() -> None:
    fs = asyncfs.Registry().get("az")
    fs.set_option("connection_string", b"")
    fs.set_option("account", b"")
    with pytest.raises(asyncfs.InvalidArgumentError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        fs.stat("az://data/x")


def test_listings_page(azurite: Azurite, container: str) -> None:
    """More blobs than one page holds: every page is asked for (NextMarker)."""
    fs = own_az(azurite)
    names = [f"k{i:04d}" for i in range(1203)]
    fs.write_files([f"az://{container}/many/{n}" for n in names], [b"x"] * len(names))
    assert sorted(fs.get_children(f"az://{container}/many")) == names
    assert len(fs.get_matching_paths(f"az://{container}/many/k1*")) == 203
    assert fs.delete_recursively(f"az://{container}/many") == (0, 0)


def test_create_dir_is_decided_by_the_server(az_fs: asyncfs.ModularFileSystem, container: str) -> None:
    """The marker is a Put Blob with If-None-Match: * (Azurite answers 409
    to the losers): of eight creators, exactly one makes it."""
    for trial in range(3):
        outcomes = make_dir_race(az_fs, f"az://{container}/race-{trial}")
        assert outcomes == ["exists"] * 7 + ["made"], f"trial {trial}: {outcomes}"


def test_generic_transactions_commit_and_roll_back(
    env: asyncfs.Env, az_fs: asyncfs.ModularFileSystem, container: str
) -> None:
    transaction_commits_and_rolls_back(env, f"az://{container}/ckpt")


def test_a_wrong_key_is_refused_with_the_services_words(azurite: Azurite, container: str) -> None:
    """A signature made with another key: the error code the service sends
    (x-ms-error-code, a HEAD's only word on it) and what to check. (Azurite
    says AuthorizationFailure; Azure says AuthenticationFailed, which is an
    UnauthenticatedError.)"""
    fs = asyncfs.Registry().get("az")
    fs.set_option("connection_string", azurite.connection_string.replace(KEY, "A" * 86 + "==").encode())
    for call in (fs.stat, fs.get_children):
        with pytest.raises(asyncfs.PermissionDeniedError, match="AuthorizationFailure: check the account key"):
            call(f"az://{container}/x")


# ---- other clients on the same blobs -----------------------------------------------------


def _service(azurite: Azurite) -> object:
    blob = pytest.importorskip("azure.storage.blob", reason="azure-storage-blob checks interop")
    return blob.BlobServiceClient.from_connection_string(azurite.connection_string)


def test_azure_storage_blob_and_asyncfs_read_each_other(
    az_fs: asyncfs.ModularFileSystem, azurite: Azurite, container: str
) -> None:
    theirs = _service(azurite).get_container_client(container)  # type: ignore[attr-defined]
    for name in ODD:
        data = pattern(1000) + name.encode()
        theirs.upload_blob(f"from-azure/{name}", data)
        assert az_fs.read_file(f"az://{container}/from-azure/{name}") == data
        az_fs.write_file(f"az://{container}/from-asyncfs/{name}", data)
        assert theirs.download_blob(f"from-asyncfs/{name}").readall() == data
    assert sorted(b.name for b in theirs.list_blobs(name_starts_with="from-asyncfs/")) == sorted(
        f"from-asyncfs/{n}" for n in ODD
    )
    big = pattern(5 * 1024 * 1024 + 3)  # blocks, committed by asyncfs
    own_az(azurite, upload_threshold=1024 * 1024, block_size=1024 * 1024).write_file(f"az://{container}/big", big)
    assert theirs.download_blob("big").readall() == big


def test_adlfs_and_asyncfs_read_each_other(az_fs: asyncfs.ModularFileSystem, azurite: Azurite, container: str) -> None:
    adlfs = pytest.importorskip("adlfs", reason="adlfs checks interop")
    theirs = adlfs.AzureBlobFileSystem(connection_string=azurite.connection_string, skip_instance_cache=True)
    for name in ODD[:5]:
        data = pattern(3000) + name.encode()
        theirs.pipe(f"{container}/from-adlfs/{name}", data)
        assert az_fs.read_file(f"az://{container}/from-adlfs/{name}") == data
        az_fs.write_file(f"az://{container}/from-asyncfs/{name}", data)
        assert theirs.cat(f"{container}/from-asyncfs/{name}") == data


def test_a_sas_token_alone_is_enough(azurite: Azurite, container: str) -> None:
    blob = pytest.importorskip("azure.storage.blob", reason="azure-storage-blob makes the SAS")
    sas = blob.generate_container_sas(
        ACCOUNT,
        container,
        account_key=KEY,
        permission=blob.ContainerSasPermissions(read=True, write=True, list=True, delete=True, create=True),
        expiry=datetime.now(timezone.utc) + timedelta(hours=1),
    )
    fs = asyncfs.Registry().get("az")
    fs.set_option("connection_string", b"")
    for name, value in {"account": ACCOUNT, "endpoint": azurite.endpoint, "sas_token": "?" + sas}.items():
        fs.set_option(name, value.encode())
    fs.write_file(f"az://{container}/by-sas", b"signed")
    assert fs.read_file(f"az://{container}/by-sas") == b"signed"
    assert fs.get_children(f"az://{container}") == ["by-sas"]
    assert fs.get_option("credential_source").value.decode().startswith(f"a SAS token for account {ACCOUNT}")


# ---- the fsspec bridge, with adlfs's storage_options ------------------------------------


def test_pandas_through_the_bridge_with_adlfs_options(azurite: Azurite, container: str) -> None:
    """storage_options written for adlfs work unchanged, under asyncfs+az://
    and asyncfs+abfs://."""
    pd = pytest.importorskip("pandas", reason="pandas reads through the bridge")
    pytest.importorskip("pyarrow", reason="pandas writes parquet with pyarrow")
    options = {"connection_string": azurite.connection_string}
    frame = pd.DataFrame({"n": range(100), "s": [f"row {i}" for i in range(100)]})
    frame.to_parquet(f"asyncfs+az://{container}/frames/a.parquet", storage_options=options)
    back = pd.read_parquet(f"asyncfs+abfs://{container}/frames/a.parquet", storage_options=options)
    assert back.equals(frame)


def test_adlfs_option_names() -> None:
    given = {"account_name": "acct", "account_key": "k", "anon": False, "account_host": "acct.blob.core.windows.net"}
    assert plugin_options("az", given) == {
        "account": "acct",
        "account_key": "k",
        "anonymous": 0,
        "endpoint": "https://acct.blob.core.windows.net",
    }
    assert plugin_options("abfs", {"sas_token": "sv=1", "tenant_id": None}) == {"sas_token": "sv=1"}
    with pytest.raises(asyncfs.InvalidArgumentError, match="credential"):
        plugin_options("az", {"credential": object()})
