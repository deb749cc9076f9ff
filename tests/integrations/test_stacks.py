"""asyncfs inside the tools users already run, through the fsspec bridge:
Hugging Face ``datasets``, DuckDB, polars, webdataset and Ray Data, each
the way ``docs/fsspec.md`` shows it. Each test skips, saying so, where its
tool is not installed (the ``stacks`` extra installs them)."""

from __future__ import annotations

import importlib
import io
import tarfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import asyncfs
from asyncfs.env import default_env
from asyncfs.fsspec import AsyncfsFileSystem, filesystem_class
from tests.support.ceph_gateway import Gateway
from tests.support.fault_proxy import FaultProxy

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")


def s3_options(endpoint: str, gateway: Gateway) -> dict[str, Any]:
    return {
        "endpoint": endpoint,
        "access_key_id": gateway.access_key,
        "secret_access_key": gateway.secret_key,
        "region": "us-east-1",
        "path_style": 1,
    }


@pytest.fixture
def s3_folder(s3_gateway: Gateway) -> Iterator[tuple[AsyncfsFileSystem, str, dict[str, Any]]]:
    """(filesystem, a fresh folder as bucket/path, its storage options) on the gateway."""
    options = s3_options(s3_gateway.endpoint, s3_gateway)
    fs = filesystem_class("s3")(**options)
    if not fs.exists("asyncfs-stacks"):
        fs.mkdir("asyncfs-stacks")
    folder = f"asyncfs-stacks/{uuid.uuid4().hex}"
    yield fs, folder, options
    if fs.exists(folder):
        fs.rm(folder, recursive=True)


def hive_dataset(fs: AsyncfsFileSystem, folder: str, years: int = 3, months: int = 4) -> int:
    """A hive-partitioned Parquet dataset (year=/month=/part.parquet) of
    years * months files, 10 rows each; returns the number of rows."""
    for year in range(2020, 2020 + years):
        for month in range(1, months + 1):
            table = pa.table({"v": list(range(10)), "w": [year * 100 + month] * 10})
            sink = io.BytesIO()
            pq.write_table(table, sink)
            fs.pipe_file(f"{folder}/year={year}/month={month}/part.parquet", sink.getvalue())
    return years * months * 10


# ---- the listing cache, counted on the wire -----------------------------------------------------


def test_info_after_a_glob_asks_the_store_nothing(s3_gateway: Gateway) -> None:
    """DuckDB and pyarrow glob a dataset, then ask info, size and modified
    of every file: answered from the listings the glob made, no request."""
    proxy = FaultProxy(s3_gateway.endpoint)
    try:
        fs = filesystem_class("s3")(**s3_options(proxy.endpoint, s3_gateway), skip_instance_cache=True)
        folder = f"asyncfs-stacks-{uuid.uuid4().hex[:8]}"
        fs.mkdir(folder)
        hive_dataset(fs, folder, years=2, months=3)
        fs.invalidate_cache()
        found = fs.glob(f"{folder}/**/*.parquet")
        assert len(found) == 6
        proxy.inject([])
        for name in found:
            assert fs.info(name)["type"] == "file"
            assert fs.size(name) > 0
            assert fs.modified(name).year >= 2026
            assert fs.isfile(name) and fs.exists(name) and not fs.isdir(name)
        assert not fs.exists(f"{folder}/year=2020/month=1/other.parquet")  # its folder was listed: absent
        assert fs.isdir(f"{folder}/year=2020")
        assert proxy.requests == []

        # a write through the same filesystem drops the listings it changes
        fs.pipe_file(f"{folder}/year=2020/month=1/other.parquet", b"x")
        assert fs.exists(f"{folder}/year=2020/month=1/other.parquet")
        assert fs.size(f"{folder}/year=2020/month=1/other.parquet") == 1
        fs.rm(f"{folder}/year=2020/month=1/part.parquet")
        assert not fs.exists(f"{folder}/year=2020/month=1/part.parquet")
        assert len(fs.glob(f"{folder}/**/*.parquet")) == 6
        fs.rm(folder, recursive=True)
        assert not fs.exists(folder)
    finally:
        proxy.close()


def test_the_listing_cache_is_fsspecs(s3_gateway: Gateway) -> None:
    """use_listings_cache=False asks every time; listings_expiry_time ages
    a listing out; a change made elsewhere shows after invalidate_cache()."""
    options = s3_options(s3_gateway.endpoint, s3_gateway)
    fs = filesystem_class("s3")(**options, skip_instance_cache=True)
    other = filesystem_class("s3")(**options, use_listings_cache=False, skip_instance_cache=True)
    folder = f"asyncfs-stacks-{uuid.uuid4().hex[:8]}"
    fs.mkdir(folder)
    try:
        fs.pipe_file(f"{folder}/a", b"1")
        assert fs.ls(folder, detail=False) == [f"{folder}/a"]
        other.pipe_file(f"{folder}/b", b"2")  # elsewhere: fs still has its listing
        assert fs.ls(folder, detail=False) == [f"{folder}/a"]
        assert not fs.exists(f"{folder}/b")
        assert other.ls(folder, detail=False) == [f"{folder}/a", f"{folder}/b"]
        fs.invalidate_cache(folder)
        assert fs.exists(f"{folder}/b")
        assert fs.ls(folder, detail=False, refresh=True) == [f"{folder}/a", f"{folder}/b"]

        aging = filesystem_class("s3")(**options, listings_expiry_time=0.01, skip_instance_cache=True)
        assert len(aging.ls(folder)) == 2
        other.rm(f"{folder}/b")
        time.sleep(0.05)
        assert aging.ls(folder, detail=False) == [f"{folder}/a"]
    finally:
        fs.rm(folder, recursive=True)


def test_local_stores_keep_no_listings(tmp_path: Path) -> None:
    fs = filesystem_class("file")()
    assert fs.ls(str(tmp_path)) == []
    (tmp_path / "new").write_bytes(b"x")
    assert fs.ls(str(tmp_path), detail=False) == [str(tmp_path / "new")]
    assert len(fs.dircache) == 0


# ---- Hugging Face datasets -------------------------------------------------------------------


@pytest.fixture
def hf_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return pytest.importorskip("datasets", reason="datasets is not installed (the stacks extra)")


def test_datasets_streams_and_loads_an_asyncfs_file_url(tmp_path: Path, hf_offline: Any) -> None:
    """datasets collapses ``asyncfs+file:///d/x`` to ``asyncfs+file://d/x``
    (pathlib does); the bridge reads that as /d/x, as the URL meant."""
    datasets = hf_offline
    pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "a.parquet")
    url = f"asyncfs+file://{tmp_path}/a.parquet"
    streamed = datasets.load_dataset("parquet", data_files=url, streaming=True, split="train")
    assert [row["a"] for row in streamed] == [1, 2, 3]
    loaded = datasets.load_dataset("parquet", data_files=url, split="train", cache_dir=str(tmp_path / "cache"))
    assert loaded["a"] == [1, 2, 3]


def test_datasets_text_streaming_passes_keywords_the_bridge_ignores(tmp_path: Path, hf_offline: Any) -> None:
    """Text streaming hands ``encoding`` and ``errors=None`` to the
    filesystem through storage_options: left out, with a warning."""
    datasets = hf_offline
    (tmp_path / "lines.txt").write_text("one\ntwo\n")
    with pytest.warns(asyncfs.IgnoredOptionWarning, match="'encoding'"):
        streamed = datasets.load_dataset(
            "text", data_files=f"asyncfs+file://{tmp_path}/lines.txt", streaming=True, split="train"
        )
        assert [row["text"] for row in streamed] == ["one", "two"]


def test_datasets_save_and_load_on_s3_with_one_storage_options(
    s3_folder: tuple[AsyncfsFileSystem, str, dict[str, Any]], hf_offline: Any
) -> None:
    """datasets adds storage_options["hf"] to the caller's dict; the same
    dict then serves save_to_disk and load_from_disk."""
    datasets = hf_offline
    fs, folder, options = s3_folder
    storage_options = dict(options)
    data = datasets.Dataset.from_dict({"x": list(range(50)), "y": [str(i) for i in range(50)]})
    with warnings.catch_warnings():  # whether this datasets adds "hf" depends on its version
        warnings.simplefilter("ignore", asyncfs.IgnoredOptionWarning)
        data.save_to_disk(f"asyncfs+s3://{folder}/saved", storage_options=storage_options)
        again = datasets.load_from_disk(f"asyncfs+s3://{folder}/saved", storage_options=storage_options)
        assert again["x"] == list(range(50))
        storage_options["hf"] = {"token": None, "endpoint": "https://huggingface.co"}  # as datasets 2.x-4.x add it
        data.save_to_disk(f"asyncfs+s3://{folder}/again", storage_options=storage_options)
    assert datasets.load_from_disk(f"asyncfs+s3://{folder}/again", storage_options=options)["y"][7] == "7"
    assert fs.exists(f"{folder}/saved/dataset_info.json")


# ---- DuckDB, polars, webdataset ---------------------------------------------------------------


def test_duckdb_queries_a_hive_dataset_on_s3(s3_folder: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (the stacks extra)")
    fs, folder, _ = s3_folder
    rows = hive_dataset(fs, folder)
    con = duckdb.connect()
    con.register_filesystem(fs)
    query = (
        f"SELECT count(*), sum(v), count(DISTINCT month) FROM "
        f"read_parquet('asyncfs+s3://{folder}/**/*.parquet', hive_partitioning = true) WHERE year = 2021"
    )
    assert con.execute(query).fetchone() == (rows // 3, 45 * 4, 4)
    con.close()


def test_polars_through_file_objects(s3_folder: tuple[AsyncfsFileSystem, str, dict[str, Any]]) -> None:
    pl = pytest.importorskip("polars", reason="polars is not installed (the stacks extra)")
    fs, folder, _ = s3_folder
    frame = pl.DataFrame({"a": list(range(1000)), "b": [f"r{i}" for i in range(1000)]})
    with fs.open(f"{folder}/f.parquet", "wb") as f:
        frame.write_parquet(f)
    with fs.open(f"{folder}/f.parquet", "rb") as f:
        assert pl.read_parquet(f).equals(frame)
    with fs.open(f"{folder}/f.csv", "wb") as f:
        frame.write_csv(f)
    with fs.open(f"{folder}/f.csv", "rb") as f:
        assert pl.read_csv(f).equals(frame)


def test_webdataset_reads_shards_through_a_gopen_handler(
    s3_folder: tuple[AsyncfsFileSystem, str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler docs/fsspec.md shows: webdataset opens every shard URL
    through asyncfs."""
    wds = pytest.importorskip("webdataset", reason="webdataset is not installed (the stacks extra)")
    fs, folder, options = s3_folder
    for shard in range(2):
        sink = io.BytesIO()
        with tarfile.open(fileobj=sink, mode="w") as tar:
            for i in range(5):
                payload = f"sample {shard}-{i}".encode()
                info = tarfile.TarInfo(f"{shard:02d}{i:04d}.txt")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
        fs.pipe_file(f"{folder}/shard-{shard}.tar", sink.getvalue())

    def asyncfs_gopen(url: str, mode: str = "rb", bufsize: int = 8192, **kw: Any) -> Any:
        return fsspec.open(url, mode, **options).open()

    schemes = importlib.import_module("webdataset.gopen").gopen_schemes  # the package's gopen is its function
    monkeypatch.setitem(schemes, "asyncfs+s3", asyncfs_gopen)
    urls = [f"asyncfs+s3://{folder}/shard-{shard}.tar" for shard in range(2)]
    samples = [s["txt"].decode() for s in wds.WebDataset(urls, shardshuffle=False)]
    assert samples == [f"sample {shard}-{i}" for shard in range(2) for i in range(5)]


# ---- Ray Data -------------------------------------------------------------------------------------


@pytest.fixture
def ray() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="ray is not installed (the stacks extra)")
    pytest.importorskip("ray.data", reason="ray[data] is not installed (the stacks extra)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray's own, of its own settings
def test_ray_data_writes_and_reads_through_the_filesystem_argument(
    ray: Any, s3_folder: tuple[AsyncfsFileSystem, str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented way: filesystem= the bridge's filesystem, on s3 and
    on file; the data is where the URL says, nothing lands on the local
    disk under the working directory."""
    monkeypatch.chdir(tmp_path)
    fs, folder, _ = s3_folder
    ray.data.range(100).write_parquet(f"asyncfs+s3://{folder}/out", filesystem=fs)
    assert fs.ls(f"{folder}/out")
    assert ray.data.read_parquet(f"asyncfs+s3://{folder}/out", filesystem=fs).sum("id") == sum(range(100))

    local = filesystem_class("file")()
    target = tmp_path / "local-out"
    ray.data.range(10).write_parquet(f"asyncfs+file://{target}", filesystem=local)
    assert ray.data.read_parquet(f"asyncfs+file://{target}", filesystem=local).count() == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local-out"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray's own, of its own settings
def test_ray_data_cannot_see_another_process_memory(ray: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mem:// is each process's own: Ray's workers do not see what the
    driver wrote, and say so loudly instead of reading a local path."""
    monkeypatch.chdir(tmp_path)
    fs = filesystem_class("mem")()
    folder = f"ray-{uuid.uuid4().hex[:8]}"
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [1]}), sink)
    fs.pipe_file(f"{folder}/a.parquet", sink.getvalue())
    with pytest.raises(Exception, match=f"FileNotFoundError: {folder}"):
        ray.data.read_parquet(f"asyncfs+mem://{folder}", filesystem=fs).take_all()
    assert list(tmp_path.iterdir()) == []


# ---- construction, as fsspec's filesystems take it -----------------------------------------------


@given(st.lists(st.text(st.characters(blacklist_characters="/\0", codec="utf-8"), min_size=1, max_size=8), max_size=4))
@example(["."]).via("CI found it: pathlib drops the dot")
def test_a_file_url_is_absolute_with_its_slashes_collapsed_or_not(parts: list[str]) -> None:
    """``asyncfs+file:///d/x``, ``asyncfs+file://d/x`` (pathlib's and so
    datasets' collapse of it) and ``asyncfs+file://localhost/d/x`` all name
    /d/x; only a bare relative path is relative to the working directory."""
    path = "/" + "/".join(parts)
    cls = filesystem_class("file")
    expected = path.rstrip("/") or "/"
    assert cls._strip_protocol(f"asyncfs+file://{path}") == expected
    assert cls._strip_protocol(f"asyncfs+file:{path}".replace(":/", "://", 1)) == expected
    assert cls._strip_protocol(f"asyncfs+file://localhost{path}") == expected
    # as datasets' xPath has it: pathlib also drops "." segments (the same folder)
    collapsed = "/" + "/".join(part for part in parts if part != ".")
    assert cls._strip_protocol(str(Path(f"asyncfs+file://{path}"))) == (collapsed.rstrip("/") or "/")


def test_unknown_keywords_are_left_out_with_one_warning_and_none_is_the_default() -> None:
    with pytest.warns(asyncfs.IgnoredOptionWarning, match=r"asyncfs\+mem ignores 'encoding', 'hf':") as seen:
        fs = filesystem_class("mem")(encoding="utf-8", errors=None, hf={"token": None}, latency_us=None)
    assert len(seen) == 1
    assert fs._options == {}
    assert fs.env is default_env()  # nothing reached a plugin: no filesystem of its own


def test_bridge_filesystems_with_one_option_set_share_one_env() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", asyncfs.IgnoredOptionWarning)
        made = [filesystem_class("mem")(latency_us=3, hf={"n": n}) for n in range(10)]
    assert len({id(fs.env) for fs in made}) == 1
    assert made[0].env is not default_env()
    assert made[0].env.filesystem("mem://").wrapped.get_option("latency_us").value == 3


def test_set_option_takes_str_as_the_bridge_does(s3_plugin: None) -> None:
    fs = asyncfs.default_registry().get("s3").new_instance()
    fs.set_option("endpoint", "http://127.0.0.1:7480")
    assert fs.get_option("endpoint").value == b"http://127.0.0.1:7480"
    fs.set_option("path_style", True)
    assert fs.get_option("path_style").value == 1
    with pytest.raises(asyncfs.InvalidArgumentError, match=r"option 'region' must be a str.*not list"):
        fs.set_option("region", ["eu"])  # type: ignore[arg-type]
