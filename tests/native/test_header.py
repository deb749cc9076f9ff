"""The header is the contract: it compiles as C99 and C++, and its layout is
TensorFlow's (shared/reference/plugin-abi-facts.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import asyncfs
from asyncfs._native.binding import ffi

TF_FILESYSTEM_OPS = [
    "init", "cleanup", "new_random_access_file", "new_writable_file", "new_appendable_file",
    "new_read_only_memory_region_from_file", "create_dir", "recursively_create_dir", "delete_file",
    "delete_dir", "delete_recursively", "rename_file", "copy_file", "path_exists", "paths_exist", "stat",
    "is_directory", "get_file_size", "translate_name", "get_children", "get_matching_paths", "flush_caches",
    "start_transaction", "end_transaction", "add_to_transaction", "get_transaction_for_path",
    "get_or_start_transaction_for_path", "decode_transaction_token", "get_filesystem_configuration",
    "set_filesystem_configuration", "get_filesystem_configuration_option",
    "set_filesystem_configuration_option", "get_filesystem_configuration_keys",
]  # fmt: skip

TU = """
#include <asyncfs/filesystem_interface.h>
int check(void) {
  TF_FilesystemPluginOps ops;
  TF_SetFilesystemVersionMetadata(&ops);
  return (int)ops.filesystem_ops_size;
}
"""


@pytest.mark.parametrize(
    "compiler, flags",
    [("gcc", ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]), ("g++", ["-Wall", "-Wextra", "-Werror"])],
)
def test_header_compiles(tmp_path: Path, compiler: str, flags: list[str]) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    source = tmp_path / ("tu.c" if compiler == "gcc" else "tu.cpp")
    source.write_text(TU)
    cmd = [compiler, *flags, "-I", asyncfs.get_include(), "-c", str(source), "-o", str(tmp_path / "tu.o")]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def fields(ctype: str) -> list[str]:
    return [name for name, _ in ffi.typeof(ctype).fields]


def test_filesystem_ops_are_tensorflows_33_then_the_appended_ones() -> None:
    appended = [
        "abort_transaction",
        "rename_dir",
        "get_children_stats",
        "get_incomplete_writes",
        "abort_incomplete_write",
        "new_writable_file_with_attributes",
        "get_file_attributes",
        "read_files",
        "stat_files",
        "write_files",
        "landing_path",
        "new_random_access_file_if_ready",
        "get_children_kinds",
        "copy_entry",
        "new_temporary_file",
        "replace_file",
        "stat_if_ready",
    ]
    assert fields("TF_FilesystemOps") == [*TF_FILESYSTEM_OPS, *appended]
    for entry, name in enumerate(appended, start=33):
        assert ffi.offsetof("TF_FilesystemOps", name) == entry * ffi.sizeof("void*")


def test_tables_and_handles_match_tensorflow() -> None:
    # TensorFlow's two entries, then asyncfs's appended read_if_ready (API 1)
    assert fields("TF_RandomAccessFileOps") == ["cleanup", "read", "read_if_ready"]
    assert ffi.offsetof("TF_RandomAccessFileOps", "read_if_ready") == 2 * ffi.sizeof("void*")
    assert fields("TF_WritableFileOps") == ["cleanup", "append", "tell", "flush", "sync", "close"]
    assert fields("TF_ReadOnlyMemoryRegionOps") == ["cleanup", "data", "length"]
    assert fields("TF_TransactionToken") == ["token", "owner"]
    assert fields("TF_FileStatistics") == ["length", "mtime_nsec", "is_directory"]
    assert fields("TF_Filesystem_Option") == ["name", "description", "per_file", "value"]
    assert fields("TF_Filesystem_Option_Value") == ["type_tag", "num_values", "values"]
    assert fields("TF_FilesystemPluginInfo") == [
        "num_schemes", "ops", "plugin_memory_allocate", "plugin_memory_free",
    ]  # fmt: skip
    quartets = [
        f"{table}_ops{suffix}"
        for table in ("filesystem", "random_access_file", "writable_file", "read_only_memory_region")
        for suffix in ("_abi", "_api", "_size", "")
    ]
    assert fields("TF_FilesystemPluginOps") == ["scheme", *quartets]
    for handle, inner in [
        ("TF_RandomAccessFile", "plugin_file"),
        ("TF_WritableFile", "plugin_file"),
        ("TF_ReadOnlyMemoryRegion", "plugin_memory_region"),
        ("TF_Filesystem", "plugin_filesystem"),
    ]:
        assert fields(handle) == [inner]


def test_status_codes_match_tensorflow() -> None:
    rt = asyncfs._native.binding.runtime()
    for code in asyncfs.Code:
        assert getattr(rt, f"TF_{code.name}") == code.value


def test_the_preparsed_declarations_match_the_headers(tmp_path: Path) -> None:
    """asyncfs/_native/cdef.py is generated from the headers' CDEF regions;
    after a header change, `python -m asyncfs._native.cdef_build` brings it
    up to date."""
    from asyncfs._native import cdef_build as _cdef_build  # noqa: PLC0415

    if not _cdef_build.RUNTIME_HEADER.exists():
        pytest.skip("the runtime's header is in the source tree only: run from a source checkout")

    committed = (Path(asyncfs.__file__).parent / "_native" / "cdef.py").read_text(encoding="utf-8")
    fresh = _cdef_build.generate(tmp_path / "cdef.py")
    assert committed == fresh, "asyncfs/_native/cdef.py is stale: run python -m asyncfs._native.cdef_build"


def test_the_stat_fields_python_reads_are_the_runtimes() -> None:
    from asyncfs._native import local  # noqa: PLC0415

    assert local.STAT_FIELDS == asyncfs._native.binding.runtime().ASYNCFS_STAT_FIELDS


def test_why_a_record_parse_stopped_is_the_runtimes() -> None:
    from asyncfs._native.records import Stop  # noqa: PLC0415

    rt = asyncfs._native.binding.runtime()
    assert {stop.name: stop.value for stop in Stop} == {
        name: getattr(rt, f"ASYNCFS_RECORDS_{name}") for name in ("MORE", "BAD_LENGTH", "BAD_DATA")
    }


def test_the_installed_headers_are_what_plugin_authors_build_against() -> None:
    """Only the ABI: the runtime's own calls (runtime_core.h), which plugins
    must never call, stay in the source tree."""
    include = Path(asyncfs.get_include())
    assert sorted(p.relative_to(include).as_posix() for p in include.rglob("*") if p.is_file()) == [
        "asyncfs/filesystem_interface.h"
    ]
