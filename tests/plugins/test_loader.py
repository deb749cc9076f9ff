"""The loader against deliberately broken plugins, compiled here: each defect
gets its own exception naming the library, the scheme and the item, and a
refused plugin leaves the registry as it was."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import anyio
import pytest
from conftest import TEST_PLUGINS, build_plugin, preloadable

import asyncfs
from asyncfs import (
    ABIMismatchError,
    CoreABIRangeError,
    InvalidSchemeError,
    MissingAllocatorError,
    MissingEntryPointError,
    MissingOperationError,
    MissingTableError,
    PluginAPIMismatchWarning,
    PluginError,
    PluginInitError,
    PluginOpenError,
    SchemeAlreadyRegisteredError,
    UnavailableError,
)

SOURCE = TEST_PLUGINS / "testfs.c"


@pytest.fixture
def build(tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(*defines: str) -> str:
        name = "_".join(d.split("=")[0].lower() for d in defines) or "good"
        # a defect leaves some helper unused: that is the point here
        return str(build_plugin(SOURCE, tmp_path / f"lib{name}.so", *defines, flags=("-Wno-unused-function",)))

    return make


@pytest.fixture
def registry() -> asyncfs.Registry:
    return asyncfs.Registry(builtins=False)


def assert_refused(registry: asyncfs.Registry, library: str, error: type[PluginError], item: str) -> PluginError:
    before = (registry.schemes(), registry.plugins())
    with pytest.raises(error) as info:
        registry.load_plugin(library)
    assert info.value.library == library
    assert info.value.item is not None and item in info.value.item
    assert library in str(info.value)
    assert (registry.schemes(), registry.plugins()) == before
    copy = pickle.loads(pickle.dumps(info.value))  # as a worker process (Dask, multiprocessing) sends it back
    for linked in (info.value.__cause__, info.value.__context__):  # Dask's tblib pickles these too
        assert linked is None or type(pickle.loads(pickle.dumps(linked))) is type(linked)
    assert type(copy) is type(info.value) and str(copy) == str(info.value)
    fields = ("reason", "library", "scheme", "item", "plugin")
    assert [getattr(copy, name) for name in fields] == [getattr(info.value, name) for name in fields]
    if isinstance(info.value, PluginInitError):
        assert isinstance(copy, PluginInitError) and repr(copy.status) == repr(info.value.status)
    return info.value


def test_a_good_plugin_loads(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    info = registry.load_plugin(build())
    assert info.schemes == ("testfs",)
    assert not info.metadata.has_metadata
    fs = registry.get("testfs")
    fs.path_exists("testfs:///here")
    with pytest.raises(FileNotFoundError):
        fs.path_exists("testfs:///elsewhere")


def test_missing_library(registry: asyncfs.Registry, tmp_path: Path) -> None:
    assert_refused(registry, str(tmp_path / "nope.so"), PluginOpenError, "library")


def test_no_entry_point(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    assert_refused(registry, build("BREAK_NO_ENTRY_POINT"), MissingEntryPointError, "TF_InitPlugin")


def test_no_allocator(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    assert_refused(registry, build("BREAK_NO_ALLOCATOR"), MissingAllocatorError, "plugin_memory_allocate")


def test_null_scheme(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    assert_refused(registry, build("BREAK_NULL_SCHEME"), InvalidSchemeError, "scheme")


def test_wrong_abi(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    error = assert_refused(registry, build("BREAK_WRONG_ABI"), ABIMismatchError, "filesystem_ops_abi")
    assert error.scheme == "testfs"
    assert "ABI 7" in str(error)


def test_missing_init(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    error = assert_refused(registry, build("BREAK_MISSING_INIT"), MissingOperationError, "filesystem_ops.init")
    assert error.scheme == "testfs"


def test_missing_cleanup_in_a_file_table(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    library = build("BREAK_MISSING_FILE_CLEANUP")
    assert_refused(registry, library, MissingOperationError, "random_access_file_ops.cleanup")


def test_region_table_without_data(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    library = build("BREAK_REGION_WITHOUT_DATA")
    assert_refused(registry, library, MissingOperationError, "read_only_memory_region_ops.data")


def test_constructor_without_its_table(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    library = build("BREAK_CONSTRUCTOR_WITHOUT_TABLE")
    error = assert_refused(registry, library, MissingTableError, "random_access_file_ops")
    assert "new_random_access_file" in str(error)


def test_failing_init(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    error = assert_refused(registry, build("BREAK_FAILING_INIT"), PluginInitError, "filesystem_ops.init")
    assert isinstance(error, PluginInitError)
    assert isinstance(error.status, UnavailableError)
    assert "backing service is down" in str(error)


@pytest.mark.parametrize("low, high", [(2, 5), (-3, 0)])
def test_metadata_out_of_range(registry: asyncfs.Registry, build, low: int, high: int) -> None:  # type: ignore[no-untyped-def]
    library = build(f"METADATA_MIN={low}", f"METADATA_MAX={high}")
    error = assert_refused(registry, library, CoreABIRangeError, "core_abi")
    assert error.plugin == "testfs"
    assert f"{low}..{high}" in str(error)


def test_metadata_is_read(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    core = asyncfs.core_abi_version()
    info = registry.load_plugin(build(f"METADATA_MIN={core}", f"METADATA_MAX={core}"))
    assert (info.metadata.name, info.metadata.version, info.metadata.author) == ("testfs", "9.9.9", "tests")
    assert info.metadata.bug_report_url == "https://example.invalid/testfs"
    assert (info.metadata.min_core_abi, info.metadata.max_core_abi) == (core, core)


def test_duplicate_scheme(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    library = build()
    registry.load_plugin(library)
    first = registry.get("testfs")
    error = assert_refused(registry, library, SchemeAlreadyRegisteredError, "scheme")
    assert error.scheme == "testfs"
    assert isinstance(error, FileExistsError)
    assert registry.get("testfs") is first
    registry.load_plugin(library, replace=True)
    assert registry.get("testfs") is not first


def test_builtin_scheme_cannot_be_taken_silently(build) -> None:  # type: ignore[no-untyped-def]
    registry = asyncfs.Registry()
    with pytest.raises(SchemeAlreadyRegisteredError, match="'mem'"):
        registry.load_plugin(build('SCHEME="mem"'))
    assert registry.get("mem").metadata.name == "memory"


def test_api_mismatch_warns_and_loads(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    with pytest.warns(PluginAPIMismatchWarning, match="random_access_file_ops"):
        registry.load_plugin(build("OTHER_API"))
    assert "testfs" in registry.schemes()


def test_older_header_loads_without_appended_entries(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        registry.load_plugin(build("OLDER_HEADER", "GATED"))
    fs = registry.get("testfs")
    # the entries past the table sizes the plugin reported read as not offered
    assert not fs.offers("abort_transaction")
    assert fs.offers("path_exists")
    with fs.new_random_access_file("testfs://file") as f:
        assert not f.reads_if_ready
        assert f.read_if_ready(0, 4) is None  # (the entry it left past its table aborts)
        assert f.read(0, 4) == b"gggg"


def test_plugins_use_only_the_runtime(build) -> None:  # type: ignore[no-untyped-def]
    """A plugin resolves TF_* against the runtime: it links nothing else."""
    out = subprocess.run(["nm", "-D", "--undefined-only", build()], capture_output=True, text=True, check=True)
    undefined = {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}
    tf = {name for name in undefined if name.startswith("TF_")}
    assert tf == {"TF_SetStatus"}


PRELOADED = """
import asyncio, sys, asyncfs
async def main():
    async with asyncfs.Env() as env:
        for uri in ("mem:///a/x", f"file://{sys.argv[2]}/x"):
            await env.write_file(uri, b"beside another malloc")
            assert await env.read_file(uri) == b"beside another malloc"
for _ in range(200):  # each load initialises the plugin again
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(sys.argv[1])
    assert registry.get("testfs").exists("testfs:///here")
asyncio.run(main())
print(asyncfs._plugins.loader.binding())
"""


@pytest.mark.parametrize(
    ("malloc", "binding"),
    [
        (None, "deep (RTLD_DEEPBIND)"),
        ("tcmalloc", "as usual, not deep: the process's malloc is not libc's"),
        ("asan", "as usual, not deep: a sanitizer runtime is loaded"),
    ],
)
def test_plugins_work_under_a_preloaded_allocator(build, tmp_path: Path, malloc: str | None, binding: str) -> None:  # type: ignore[no-untyped-def]
    """Plugins are deep-bound (RTLD_DEEPBIND), so that TensorFlow's exported
    OpenSSL and curl cannot stand in for their own (test_tensorflow.py),
    except under another malloc than libc's: a deep-bound plugin would free()
    with libc what the runtime allocated (TF_GetTempFileName, which this test
    plugin frees as TensorFlow's GCS plugin does), and a sanitizer runtime
    aborts the process on a deep-bound open."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    if malloc is not None:
        env["LD_PRELOAD"] = preloadable(malloc)
    done = subprocess.run(
        [sys.executable, "-c", PRELOADED, build("TEMP_FILE_NAME"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0 and done.stdout.startswith(binding), done.stderr[-2000:]


# ---- hostile plugins: refused with a typed error, never a crash -----------------


def load_in_child(library: str) -> subprocess.CompletedProcess[str]:
    """Load library into a fresh interpreter's registry; a crash there shows
    as a signal in the return code instead of ending the test run."""
    code = (
        "import sys, asyncfs\n"
        "try:\n"
        "    asyncfs.Registry(builtins=False).load_plugin(sys.argv[1])\n"
        "except asyncfs.PluginError as e:\n"
        "    print(type(e).__name__, e.item, e, sep='|')\n"
        "else:\n"
        "    print('loaded')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, library], check=False, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "defines, error, item",
    [
        (("BREAK_NUM_SCHEMES=0",), "InvalidSchemeError", "num_schemes"),
        (("BREAK_NUM_SCHEMES=-1",), "InvalidSchemeError", "num_schemes"),
        (("BREAK_NUM_SCHEMES=3",), "", ""),  # past the array: refused, whatever lies beyond it
        (("BREAK_NULL_OPS",), "MissingTableError", "ops"),
        (("BREAK_UNREADABLE_SCHEME",), "InvalidSchemeError", "scheme"),
        (('SCHEME="bad fs"',), "InvalidSchemeError", "scheme"),
        (('SCHEME="2fs"',), "InvalidSchemeError", "scheme"),
        (('SCHEME="a/b"',), "InvalidSchemeError", "scheme"),
    ],
)
def test_a_hostile_plugin_is_refused_without_a_crash(build, defines: tuple[str, ...], error: str, item: str) -> None:  # type: ignore[no-untyped-def]
    done = load_in_child(build(*defines))
    assert done.returncode == 0, f"the loader crashed (status {done.returncode}): {done.stderr[-2000:]}"
    kind, refused_item, message = done.stdout.strip().split("|", 2)
    assert kind.endswith("Error") and kind != "loaded", done.stdout
    if error:
        assert (kind, refused_item) == (error, item), message


def test_a_hostile_plugin_leaves_the_registry_as_it_was(registry: asyncfs.Registry, build) -> None:  # type: ignore[no-untyped-def]
    for defines in (("BREAK_NUM_SCHEMES=0",), ("BREAK_NULL_OPS",), ('SCHEME="bad fs"',)):
        with pytest.raises((InvalidSchemeError, MissingTableError)):
            registry.load_plugin(build(*defines))
        assert registry.schemes() == [] and registry.plugins() == []


def test_rfc3986_schemes_load_and_are_reachable(build) -> None:  # type: ignore[no-untyped-def]
    """'bad-fs' is a URI scheme (RFC 3986 allows + - .): it loads, and
    bad-fs:///x reaches it, not the local disk as a relative path."""
    registry = asyncfs.Registry()
    registry.load_plugin(build('SCHEME="my-fs+v1.0"'))
    fs = registry.for_uri("my-fs+v1.0:///here")
    assert fs.scheme == "my-fs+v1.0"
    fs.path_exists("my-fs+v1.0:///here")
    with pytest.raises(asyncfs.UnknownSchemeError):
        registry.for_uri("other-fs:///here")


@pytest.mark.parametrize("count", [-5, 1 << 20])
def test_a_plugin_answering_ok_with_nonsense_is_data_loss(registry: asyncfs.Registry, build, count: int) -> None:  # type: ignore[no-untyped-def]
    registry.load_plugin(build(f"LIAR={count}"))
    fs = registry.get("testfs")
    with pytest.raises(asyncfs.DataLossError, match=r"testfs.c|libliar|plugin's read") as info:
        fs.read_file("testfs:///any")
    assert info.value.path == "testfs:///any"
    with fs.new_random_access_file("testfs:///any") as file, pytest.raises(asyncfs.DataLossError, match="read"):
        file.read(0, 10)
    with pytest.raises(asyncfs.DataLossError, match="get_file_size answered -42"):
        fs.get_file_size("testfs:///any")
    with pytest.raises(asyncfs.DataLossError, match="stat answered -7"):
        fs.stat("testfs:///any")


def test_files_exist_raises_errors_that_are_not_about_existence(build) -> None:  # type: ignore[no-untyped-def]
    """A refused credential or a store that is down is not a missing file."""
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(build())
    fs = registry.get("testfs")
    assert fs.files_exist(["testfs:///here", "testfs:///gone"]) == [True, False]
    with pytest.raises(asyncfs.PermissionDeniedError, match="refused") as info:
        fs.files_exist(["testfs:///here", "testfs:///denied", "testfs:///gone"])
    assert info.value.path == "testfs:///denied"

    async def through_env() -> None:
        async with asyncfs.Env(registry=registry) as env:
            with pytest.raises(asyncfs.PermissionDeniedError):
                await env.files_exist(["testfs:///here", "testfs:///denied"])

    anyio.run(through_env)
