"""Plugins load from private copies bound to asyncfs's runtime
(asyncfs/_plugin_copy.py, docs/plugin-abi.md "Beside TensorFlow"): the copy's
TF_* imports name the runtime's AF_* exports, a TensorFlow framework
dependency names the runtime, $ORIGIN dependencies still load, the original
is never changed, and ELF input the renamer cannot handle is refused with a
typed error, never a crash."""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CC, REPO, build_plugin
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import asyncfs
from asyncfs._native import binding as _ffi
from asyncfs._native import libraries as _libs
from asyncfs._plugins import copies as _plugin_copy
from asyncfs._plugins.elf import DynamicTables, ElfError

MEMORY = _libs.library_path("memory")


def copied(library: Path | str = MEMORY, preload: Callable[[str], object] = print) -> Path:
    """Where the copy asyncfs would load of library lies (library itself
    when it is loaded as it is)."""
    with _plugin_copy.loadable(str(library), _ffi.runtime_provides(), preload) as name:
        return Path(os.readlink(name)) if name.startswith("/proc/self/fd/") else Path(name)


def test_the_runtime_exports_none_of_tensorflows_names() -> None:
    runtime = str(_libs.library_path("runtime"))
    done = subprocess.run(["nm", "-D", "--defined-only", runtime], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("nm is not installed")
    defined = {line.split()[-1] for line in done.stdout.splitlines()}
    assert not {name for name in defined if name.startswith("TF_")}
    assert {f"AF_{name}" for name in _ffi.runtime_provides()} <= defined


def test_a_plugin_loads_from_a_copy_whose_imports_name_the_runtime() -> None:
    original = MEMORY.read_bytes()
    preloaded: list[str] = []
    copy = copied(MEMORY, preloaded.append)
    assert copy != MEMORY and copy.name == MEMORY.name
    assert copy.is_relative_to(os.environ["ASYNCFS_CACHE_DIR"])
    imports = DynamicTables(copy.read_bytes()).imports
    assert "AF_SetStatus" in imports and not any(name.startswith("TF_") for name in imports)
    assert MEMORY.read_bytes() == original  # TensorFlow can still load the original
    assert preloaded == []
    # the same content is the same copy, so two registries share one instance
    assert copied(MEMORY, preloaded.append) == copy


def test_a_damaged_copy_in_the_cache_is_replaced() -> None:
    copy = copied()
    good = copy.read_bytes()
    copy.unlink()  # a new file: the copy this process runs stays mapped, intact
    copy.write_bytes(good[: len(good) // 2])
    assert copied() == copy
    assert copy.read_bytes() == good


def test_an_unwritable_cache_falls_back_to_a_private_temporary_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(_plugin_copy.CACHE_DIR_ENV, str(blocker))
    copy = copied()
    assert not copy.is_relative_to(blocker) and copy.exists()


def test_the_private_temporary_folder_goes_when_the_process_ends(tmp_path: Path) -> None:
    """A process that could not use the cache leaves nothing in /tmp: the
    folder its copies were written to is removed when it exits, and a
    forked child's exit leaves it to the parent."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    script = """
import os, asyncfs
fs = asyncfs.get_filesystem("mem://")
fs.write_file("mem://x", b"ok")
copy = os.readlink(f"/proc/self/fd/{next(iter(asyncfs._plugins.copies._held.values()))}")
child = os.fork()
if child == 0:
    raise SystemExit(0)  # an exit that runs atexit, as a forked worker's may
os.waitpid(child, 0)
print(copy, os.path.exists(copy), fs.read_file("mem://x").decode())
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, _plugin_copy.CACHE_DIR_ENV: str(blocker)},
        capture_output=True,
        text=True,
        check=True,
    )
    copy, there_after_the_child, read = done.stdout.split()
    assert not Path(copy).is_relative_to(blocker)
    assert (there_after_the_child, read) == ("True", "ok")
    assert not Path(copy).parent.parent.exists()


def test_a_file_that_is_not_elf_is_opened_as_given(tmp_path: Path) -> None:
    text = tmp_path / "libtext.so"
    text.write_text("not a library")
    assert copied(text) == text
    with pytest.raises(asyncfs.PluginOpenError, match="cannot open the library"):
        asyncfs.Registry(builtins=False).load_plugin(text)


def test_a_dependency_found_through_origin_loads_from_beside_the_original(tmp_path: Path) -> None:
    """Bundled libraries (auditwheel puts them in $ORIGIN/../<name>.libs) are
    opened from where the original finds them, not from the cache."""
    if CC is None:
        pytest.skip("no C compiler to build test plugins")
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    helper_c = tmp_path / "helper.c"
    helper_c.write_text('const char* helper_scheme(void) { return "helped"; }\n')
    subprocess.run(
        [CC, "-shared", "-fPIC", "-Wl,-soname,libhelper.so", str(helper_c), "-o", str(bundled / "libhelper.so")],
        check=True,
    )
    plugin = build_plugin(
        REPO / "tests/plugins/testfs.c",
        tmp_path / "libhelped.so",
        "SCHEME_FROM_HELPER",
        flags=(f"-L{bundled}", "-Wl,-rpath,$ORIGIN/bundled", "-Wl,--no-as-needed", "-lhelper"),
    )
    assert "libhelper.so" in DynamicTables(plugin.read_bytes()).needed
    assert asyncfs.Registry(builtins=False).load_plugin(plugin).schemes == ("helped",)


# ---- TensorFlow-built plugins ------------------------------------------------------


def tensorflow_folder() -> Path | None:
    """The installed tensorflow package (here or in ASYNCFS_TF_PYTHON's
    interpreter), whose include folder and framework library a
    TensorFlow-built plugin is compiled against."""
    python = os.environ.get("ASYNCFS_TF_PYTHON")
    if python:
        where = "import importlib.util as u; print(u.find_spec('tensorflow').submodule_search_locations[0])"
        done = subprocess.run(
            [python, "-c", where],
            capture_output=True,
            text=True,
            check=False,
        )
        return Path(done.stdout.strip()) if done.returncode == 0 else None
    spec = importlib.util.find_spec("tensorflow")
    return Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None


@pytest.fixture(scope="module")
def tensorflow_built_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/plugins/tf_header_fs.cc compiled as C++ against TensorFlow's own
    header and linked to its libtensorflow_framework.so.2, as TensorFlow's
    ecosystem builds plugins."""
    folder = tensorflow_folder()
    if folder is None or not (folder / "include/tensorflow/c/experimental/filesystem").is_dir():
        pytest.skip("TensorFlow's headers are not installed (set ASYNCFS_TF_PYTHON to a Python that has TensorFlow)")
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler to build a plugin against TensorFlow's C++-only header")
    output = tmp_path_factory.mktemp("tf-built") / "libtf_header_fs.so"
    command = [
        compiler, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        "-I", str(folder / "include"), str(REPO / "tests/plugins/tf_header_fs.cc"),
        f"-L{folder}", "-l:libtensorflow_framework.so.2", "-o", str(output),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return output


def test_a_tensorflow_built_plugin_loads_without_tensorflow(tensorflow_built_plugin: Path) -> None:
    """Its framework dependency names the runtime in the copy, so no
    LD_LIBRARY_PATH is needed and TensorFlow's library is never loaded."""
    assert "libtensorflow_framework.so.2" in DynamicTables(tensorflow_built_plugin.read_bytes()).needed
    script = (
        "import sys, warnings, asyncfs\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    asyncfs.Registry(builtins=False).load_plugin(sys.argv[1])\n"
        "assert [w.category for w in caught] == [asyncfs.PluginAPIMismatchWarning], caught\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libtensorflow_framework' not in maps\n"
        "print('ok')\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "LD_LIBRARY_PATH"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tensorflow_built_plugin)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_conformance_suite_accepts_a_tensorflow_built_plugin(tensorflow_built_plugin: Path, tmp_path: Path) -> None:
    """The README's conformance command: an API-version warning is expected
    of such a plugin, not an error, and every case it implements passes."""
    plugin = f"{tensorflow_built_plugin}:tfdemo:tfdemo://{tmp_path}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/conformance",
            "--plugin",
            plugin,
            "-k",
            "tfdemo",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0 and " passed" in summary and "error" not in summary, done.stdout[-3000:]


# ---- the renamer on hostile input ------------------------------------------------


def _dynsym(data: bytes) -> tuple[int, int]:
    """File offset and size of the .dynsym section (ELF64 little-endian)."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        fields = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        if fields[1] == 11:
            return fields[4], fields[5]
    raise AssertionError("no .dynsym")


def test_a_rename_into_shared_storage_is_refused() -> None:
    """Linkers store a name once for every string it ends: renaming TF_SetStatus
    must not silently rename a symbol that points into its tail."""
    data = bytearray(MEMORY.read_bytes())
    if data[4] != 2 or data[5] != 1:
        pytest.skip("the hand-made case below is laid out for ELF64 little-endian")
    tables = DynamicTables(bytes(data))
    target = next(offset for offset, kinds in tables._refs.items() if tables._text(offset) == "TF_SetStatus")
    at, size = _dynsym(bytes(data))
    for entry in range(at + 24, at + size, 24):  # a defined symbol now named "SetStatus"
        name, _, _, shndx = struct.unpack_from("<IBBH", data, entry)
        if name and shndx:
            struct.pack_into("<I", data, entry, target + 3)
            break
    with pytest.raises(ElfError, match="shared with 'SetStatus'"):
        DynamicTables(bytes(data)).renamed(needed={}, imports={"TF_SetStatus": "AF_SetStatus"})


def test_a_longer_name_is_refused() -> None:
    with pytest.raises(ElfError, match="longer"):
        DynamicTables(MEMORY.read_bytes()).renamed(needed={"libc.so.6": "libc-but-longer.so.6"}, imports={})


ORIGINAL = MEMORY.read_bytes()
_SECTION_TABLE = struct.unpack_from("<Q", ORIGINAL, 0x28)[0] if ORIGINAL[4] == 2 else 0
# where damage matters most: the ELF header, the section table, anywhere
PLACES = st.one_of(
    st.integers(0, 63),
    st.integers(min(_SECTION_TABLE, len(ORIGINAL) - 1), len(ORIGINAL) - 1),
    st.integers(0, len(ORIGINAL) - 1),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(PLACES, st.integers(0, 255)), max_size=40), cut=st.integers(0, len(ORIGINAL)))
@example(edits=[(47, 128)], cut=len(ORIGINAL))  # a section table offset no file can hold
def test_damaged_elf_is_an_elf_error_never_a_crash(edits: list[tuple[int, int]], cut: int) -> None:
    damaged = bytearray(ORIGINAL)
    for at, value in edits:
        damaged[at] = value
    data = bytes(damaged[:cut])
    try:
        tables = DynamicTables(data)
        imports = {name: f"AF_{name[3:]}" for name in tables.imports if name[:3] == "TF_"}
        renamed = tables.renamed(needed={"libc.so.6": "libc.so.6"}, imports=imports)
    except ElfError:
        return
    assert len(renamed) == len(data)


def test_renaming_keeps_everything_else() -> None:
    data = MEMORY.read_bytes()
    tables = DynamicTables(data)
    renames = {name: f"AF_{name[3:]}" for name in tables.imports if name.startswith("TF_")}
    renamed = DynamicTables(tables.renamed(needed={}, imports=renames))
    assert renamed.imports == {renames.get(name, name) for name in tables.imports}
    assert renamed.needed == tables.needed


def test_copies_unused_for_a_month_are_removed_when_another_is_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(_plugin_copy.CACHE_DIR_ENV, str(tmp_path))
    memory = copied()
    stale = tmp_path / "plugins" / ("0" * 32) / "libold.so"
    stale.parent.mkdir()
    stale.write_bytes(b"an old build")
    month_ago = time.time() - _plugin_copy.UNUSED_FOR - 60
    os.utime(stale, (month_ago, month_ago))
    os.utime(memory, (month_ago, month_ago))
    assert copied() == memory  # used: touched
    assert memory.stat().st_mtime > month_ago and stale.exists()
    copied(_libs.library_path("posix"))  # a new copy
    assert not stale.exists() and not stale.parent.exists() and memory.exists()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc/self/fd")
def test_registries_that_load_the_same_plugins_hold_no_more_descriptors() -> None:
    """Each loaded copy is held open by one descriptor for good; a registry
    that loads the same copies again reuses them (a test suite or a service
    that makes many registries would otherwise run out)."""
    asyncfs.Registry()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        asyncfs.Registry().get("mem")
    assert len(os.listdir("/proc/self/fd")) <= before
