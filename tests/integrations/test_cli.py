"""The asyncfs command line, run as a subprocess as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import anyio
import pytest
from conftest import REPO, build_plugin

import asyncfs as asyncfs_module
from asyncfs import cli
from asyncfs._native import libraries as _libs
from asyncfs._native import speedups as _extension


def asyncfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asyncfs", *args], capture_output=True, text=True, timeout=120, check=False
    )


def ok(*args: str) -> str:
    done = asyncfs(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def user_error(*args: str) -> str:
    """An operation that failed: status 1 and one line, no traceback."""
    done = asyncfs(*args)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "a.txt").write_text("alpha\n")
    (tmp_path / "src" / "sub" / "b.bin").write_bytes(os.urandom(5000))
    return tmp_path


def test_plugins_lists_schemes_and_metadata() -> None:
    out = ok("plugins")
    assert "core ABI 1" in out
    for word in ("posix", "memory", "mem", "file", "native", "1.0.0"):
        assert word in out


def test_plugins_shows_an_unbuilt_s3_plugin_and_why(tmp_path: Path) -> None:
    """An installation built without libcurl & co. has no libasyncfs_s3 but
    the build's note; the listing and a use of s3:// both say what to add."""
    for name in ("runtime", "posix", "memory"):
        (tmp_path / _libs.library_path(name).name).symlink_to(_libs.library_path(name))
    note = "built without the s3 plugin: missing libcurl (Debian/Ubuntu: libcurl4-openssl-dev)"
    (tmp_path / "s3.unavailable").write_text(note + "\n")
    env = {**os.environ, "ASYNCFS_LIB_DIR": str(tmp_path)}
    run = [sys.executable, "-m", "asyncfs"]
    listing = subprocess.run([*run, "plugins"], capture_output=True, text=True, env=env, timeout=60, check=True)
    assert f"unavailable: {note}" in listing.stdout
    use = subprocess.run([*run, "ls", "s3://bucket"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert use.returncode == 1 and "libcurl4-openssl-dev" in use.stderr


def test_ls_stat_cat_glob(tree: Path) -> None:
    src = f"file://{tree}/src"
    assert ok("ls", src).split() == ["a.txt", "sub"]
    long = ok("ls", "-l", src)
    assert "d " in long and "a.txt" in long and " 6 " in long
    assert ok("ls", "-R", src).split() == [f"{src}/a.txt", f"{src}/sub", f"{src}/sub/b.bin"]
    assert "kind: file" in ok("stat", f"{src}/a.txt") and "size: 6" in ok("stat", f"{src}/a.txt")
    assert ok("cat", f"{src}/a.txt", f"{src}/a.txt") == "alpha\nalpha\n"
    assert ok("ls", f"{src}/a.txt").split() == [f"{src}/a.txt"]  # a file lists itself
    assert "6 " in ok("ls", "-l", f"{src}/a.txt")
    assert ok("glob", f"{src}/*/*.bin").split() == [f"{src}/sub/b.bin"]


def test_mkdir_cp_mv_rm_exists(tree: Path) -> None:
    base = f"file://{tree}"
    ok("mkdir", "-p", f"{base}/new/deep/er")
    assert (tree / "new/deep/er").is_dir()
    ok("cp", f"{base}/src/a.txt", f"{base}/new/copy.txt")
    assert (tree / "new/copy.txt").read_text() == "alpha\n"
    ok("cp", "-r", "--progress", "off", f"{base}/src", f"{base}/copied")
    assert (tree / "copied/sub/b.bin").read_bytes() == (tree / "src/sub/b.bin").read_bytes()
    ok("mv", f"{base}/new/copy.txt", f"{base}/new/moved.txt")
    assert not (tree / "new/copy.txt").exists() and (tree / "new/moved.txt").exists()
    out = asyncfs("exists", f"{base}/new/moved.txt", f"{base}/nope")
    assert out.returncode == 1 and out.stdout.split() == ["yes", f"{base}/new/moved.txt", "no", f"{base}/nope"]
    ok("rm", f"{base}/new/moved.txt")
    ok("rm", "-r", f"{base}/copied")
    assert not (tree / "copied").exists()


def test_copy_across_schemes_with_a_third_party_plugin(tree: Path) -> None:
    plugin = build_plugin(REPO / "plugins/examples/demo_fs.c", tree / "libdemo_fs.so")
    done = asyncfs("--plugin", str(plugin), "cp", "-r", f"file://{tree}/src", f"demo://{tree}/via-demo")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar when not on a terminal
    assert (tree / "via-demo/sub/b.bin").read_bytes() == (tree / "src/sub/b.bin").read_bytes()
    assert "demo" in ok("--plugin", str(plugin), "plugins")


def test_user_errors_are_one_line(tree: Path) -> None:
    base = f"file://{tree}"
    assert "cat" in user_error("cat", f"{base}/missing.txt") and "missing.txt" in user_error(
        "cat", f"{base}/missing.txt"
    )
    assert "NOT_FOUND" in user_error("mkdir", f"{base}/no/such/parent")
    assert "use -r" in user_error("rm", f"{base}/src")
    assert "use -r" in user_error("cp", f"{base}/src", f"{base}/x")
    assert "nope.so" in user_error("--plugin", str(tree / "nope.so"), "plugins")
    assert "'zzz'" in user_error("ls", "zzz://anything")
    assert "ALREADY_EXISTS" in user_error("mkdir", f"{base}/src")


def test_demo_runs_and_verifies() -> None:
    out = ok("demo", "--files", "300")
    assert out.count("all verified") == 2
    assert "checkpoint intact" in out


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("asyncfs")
    if not script.exists():
        pytest.skip("asyncfs is not installed into this interpreter's environment")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("asyncfs ")


def test_module_entry_point() -> None:
    assert REPO.exists()
    assert ok("--version").startswith("asyncfs ")


def test_doctor_says_what_was_loaded_from_where() -> None:
    out = ok("doctor")
    assert str(_libs.library_path("runtime")) in out
    for name in ("posix", "memory"):
        assert str(_libs.library_path(name)) in out
    assert "core ABI" in out and "settings:" in out
    assert "plugins bound " in out  # which way: test_loader.py
    assert "lines split and handed over, bulk reads cut into files in " in out


def test_doctor_says_how_lines_are_split() -> None:
    """In C from the built extension, or in Python, and why."""
    in_c = ok("doctor")
    if _extension.SPEEDUPS is not None:
        assert f"lines split and handed over, bulk reads cut into files in C: {_extension.SPEEDUPS.__file__}" in in_c
    in_python = subprocess.run(
        [sys.executable, "-m", "asyncfs", "doctor"],
        capture_output=True, text=True, check=True, env={**os.environ, _extension.NO_SPEEDUPS_ENV: "1"},
    ).stdout  # fmt: skip
    assert "lines split and handed over, bulk reads cut into files in Python: ASYNCFS_NO_SPEEDUPS is set" in in_python
    assert "ASYNCFS_NO_SPEEDUPS=1" in in_python  # among the settings


def test_a_missing_optional_plugin_says_how_to_get_it(tmp_path: Path) -> None:
    """An installation built without s3 (its libraries missing) says so in
    `plugins` and `doctor`, with the two ways to get it."""
    for name in ("runtime", "posix", "memory"):
        source = _libs.library_path(name)
        (tmp_path / source.name).symlink_to(source)
    (tmp_path / "s3.unavailable").write_text("built without the s3 plugin: missing libcurl (test)\n")
    for command in ("plugins", "doctor"):
        done = subprocess.run(
            [sys.executable, "-m", "asyncfs", command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "ASYNCFS_LIB_DIR": str(tmp_path)},
        )
        assert done.returncode == 0, done.stderr
        assert "missing libcurl (test)" in done.stdout
        assert "binary wheel" in done.stdout and "reinstall from source" in done.stdout


# ---- the conventions of gsutil, aws s3 and rclone --------------------------------------


def test_exit_status_is_2_for_usage_errors_only(tree: Path) -> None:
    done = asyncfs("ls", "--no-such-flag", str(tree))
    assert done.returncode == 2 and "usage:" in done.stderr
    assert asyncfs("cat", str(tree / "missing")).returncode == 1


def test_plugin_before_or_after_the_command(tree: Path) -> None:
    plugin = build_plugin(REPO / "plugins/examples/demo_fs.c", tree / "libdemo_fs.so")
    assert ok("--plugin", str(plugin), "ls", f"demo://{tree}/src").split() == ["a.txt", "sub"]
    assert ok("ls", "--plugin", str(plugin), f"demo://{tree}/src").split() == ["a.txt", "sub"]


def test_ls_human_sizes_and_du(tree: Path) -> None:
    src = f"file://{tree}/src"
    assert "4.9K" in ok("ls", "-l", "-h", f"{src}/sub")
    per_folder = [line.split("\t") for line in ok("du", src).splitlines()]
    assert per_folder == [["5000", f"{src}/sub"], ["5006", src]]
    assert ok("du", "-s", "-h", src).split() == ["4.9K", src]
    assert ok("du", f"{src}/a.txt").split() == ["6", f"{src}/a.txt"]


def test_cp_several_sources_patterns_dry_run_and_jobs(tree: Path) -> None:
    src, out = f"file://{tree}/src", f"file://{tree}/out"
    assert ok("cp", "-n", f"{src}/*.txt", f"{out}/").strip() == f"would copy {src}/a.txt -> {out}/a.txt"
    assert not (tree / "out").exists()
    ok("cp", "-r", "-j", "2", f"{src}/*", f"{out}/")
    assert (tree / "out/a.txt").read_text() == "alpha\n"
    assert (tree / "out/sub/b.bin").read_bytes() == (tree / "src/sub/b.bin").read_bytes()
    assert "matched no objects or files" in user_error("cp", f"{src}/*.none", f"{out}/")
    assert "matched no objects or files" in user_error("glob", f"{src}/*.none")
    assert ok("glob", "-r", f"{src}/**/*.bin").split() == [f"{src}/sub/b.bin"]


def test_mv_moves_folders_within_and_across_schemes(tree: Path) -> None:
    base = f"file://{tree}"
    ok("mv", f"{base}/src/sub", f"{base}/moved")
    assert (tree / "moved/b.bin").exists() and not (tree / "src/sub").exists()
    plugin = build_plugin(REPO / "plugins/examples/demo_fs.c", tree / "libdemo_fs.so")
    ok("--plugin", str(plugin), "mv", f"{base}/moved", f"demo://{tree}/across")
    assert (tree / "across/b.bin").exists() and not (tree / "moved").exists()


def test_rm_of_a_filesystems_top_needs_no_preserve_root(tree: Path) -> None:
    assert "--no-preserve-root" in user_error("rm", "-r", "mem:///")
    assert "--no-preserve-root" in user_error("rm", "-r", "file:///")
    assert "--no-preserve-root" in user_error("rm", "-rf", "file:///")  # -f is not the way past it
    ok("rm", "-r", "--no-preserve-root", "mem:///")  # an empty memory filesystem, in its own process
    ok("rm", "-r", f"file://{tree}/src/sub")
    assert not (tree / "src/sub").exists()


@pytest.mark.parametrize("spelling", ["{t}/src/..", "{t}/src/../", "..", ".", "./", "{t}/.", "file://{t}/src/.."])
def test_rm_refuses_dot_and_dot_dot_as_gnu_rm_does(tree: Path, spelling: str) -> None:
    """rm -r DIR/.. would delete DIR's parent (rm -r /tmp/.. all of /):
    refused whatever -f says, before anything is deleted."""
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    done = subprocess.run(
        [sys.executable, "-m", "asyncfs", "rm", "-rf", spelling.format(t=tree)],
        cwd=tree / "src",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "refusing to remove '.' or '..'" in done.stderr
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_rm_refuses_a_top_however_it_is_spelled(tree: Path) -> None:
    depth = len(tree.parts) - 1
    for spelling in [f"{tree}/src/../../" + "../" * depth + "tmp/..//", "/" + "x/../" * 3, "../" * (depth + 3)]:
        message = user_error("rm", "-r", spelling.rstrip("/") + "/")
        assert "refusing" in message or "--no-preserve-root" in message, spelling
    assert tree.exists()


def test_rm_of_a_link_to_a_folder_removes_the_link(tree: Path) -> None:
    (tree / "link").symlink_to(tree / "src")
    ok("rm", str(tree / "link"))
    assert not (tree / "link").is_symlink() and (tree / "src/sub/b.bin").exists()
    assert "is a directory" in user_error("rm", str(tree / "src"))
    ok("rm", "-f", str(tree / "missing"))
    assert "No such file" in user_error("rm", str(tree / "missing"))


def test_cat_cut_short_by_its_reader_ends_quietly(tree: Path) -> None:
    big = tree / "big.bin"
    big.write_bytes(os.urandom(4 << 20))
    reader = subprocess.Popen(["head", "-c", "10"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    done = subprocess.run(
        [sys.executable, "-m", "asyncfs", "cat", str(big), str(big)],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    assert reader.stdin is not None
    reader.stdin.close()
    reader.wait(timeout=60)
    assert done.returncode == 0 and done.stderr == ""


def test_cat_moves_bytes_as_stored_unless_asked_to_decompress(tree: Path) -> None:
    import gzip  # noqa: PLC0415

    (tree / "x.txt.gz").write_bytes(gzip.compress(b"inflated\n"))
    raw = subprocess.run(
        [sys.executable, "-m", "asyncfs", "cat", str(tree / "x.txt.gz")], capture_output=True, timeout=60, check=True
    )
    assert gzip.decompress(raw.stdout) == b"inflated\n"
    assert ok("cat", "--decompress", str(tree / "x.txt.gz")) == "inflated\n"


@pytest.mark.anyio
async def test_cat_writes_standard_output_off_the_event_loop(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that takes its time (``| less``) holds up cat's writes, not
    its event loop: a task beside it ticked through 0.3 s of slow writes
    (written on the loop, it ticked only between them)."""
    big = tree / "big.bin"
    big.write_bytes(os.urandom(3 << 20))  # three writes of 1 MiB

    class SlowReader:
        def __init__(self) -> None:
            self.data = bytearray()

        def write(self, chunk: bytes) -> int:
            time.sleep(0.1)
            self.data += chunk
            return len(chunk)

        def flush(self) -> None:
            pass

    out = SlowReader()
    monkeypatch.setattr(sys, "stdout", types.SimpleNamespace(buffer=out))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with asyncfs_module.Env() as env, anyio.create_task_group() as tg:
        tg.start_soon(tick)
        assert await cli._cat(env, [str(big)], decompress=False) == 0
        tg.cancel_scope.cancel()
    assert out.data == big.read_bytes()
    assert ticks >= 10, ticks
