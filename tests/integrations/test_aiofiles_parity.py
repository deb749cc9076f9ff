"""asyncfs.aiofiles against aiofiles itself.

Every behaviour runs twice on the same files, once through aiofiles and once
through the drop-in (the folder is reset in between), and must give equal
results, equal exceptions (type, errno, filename) and equal files left on
disk. The tests run on pytest-asyncio, in strict mode: each says so.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

real = pytest.importorskip("aiofiles", reason="aiofiles is a test extra: pip install '.[test]'")
pytest.importorskip("pytest_asyncio", reason="pytest-asyncio is a test extra: pip install '.[test]'")

for _module in ("os", "ospath", "tempfile"):  # aiofiles's submodules, as its users import them
    importlib.import_module(f"aiofiles.{_module}")

from asyncfs import aiofiles as ours  # noqa: E402

pytestmark = pytest.mark.asyncio

TEXT = "first line\nsecond\r\nthird\rfourth, ünïcödé ✓ 𝄞\n\n\r\nlast without a newline"
LINES = "".join(f"line {i:06d} {'x' * (i % 97)}\n" for i in range(6000))  # ~330 KiB: several read-ahead chunks
FILES: dict[str, bytes] = {
    "text.txt": TEXT.encode(),
    "latin.txt": "café, naïve, señor\nzweite Zeile\r\n".encode("latin-1"),
    "utf16.txt": "one\ntwo\nthree ✓\n".encode("utf-16"),
    "bom.txt": "\ufeffwith a byte order mark\nsecond\n".encode(),
    "bad.txt": b"good\nbad \xff\xfe byte\nend\n",
    "lines.txt": LINES.encode(),
    "crlf.txt": LINES.replace("\n", "\r\n").encode(),
    "data.bin": bytes(range(256)) * 700,
    "empty": b"",
}

Scenario = Callable[[Any, Path], Awaitable[Any]]


def _reset(root: Path) -> None:
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    for name, data in FILES.items():
        (root / name).write_bytes(data)
    (root / "folder").mkdir()
    (root / "folder" / "inside.txt").write_bytes(b"inside\n")


def _snapshot(root: Path) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            state[name] = ("link", os.readlink(path))
        elif path.is_dir():
            state[name] = "dir"
        else:
            state[name] = path.read_bytes()
    return state


def _outcome(exc: BaseException) -> tuple[Any, ...]:
    return ("raised", type(exc), getattr(exc, "errno", None), getattr(exc, "filename", None))


async def _run(lib: Any, root: Path, scenario: Scenario) -> tuple[Any, dict[str, Any]]:
    _reset(root)
    try:
        result: Any = ("returned", await scenario(lib, root))
    except Exception as exc:
        result = _outcome(exc)
    return result, _snapshot(root)


async def same(root: Path, scenario: Scenario) -> Any:
    """The scenario's result through aiofiles and through the drop-in: equal."""
    expected = await _run(real, root, scenario)
    got = await _run(ours, root, scenario)
    assert got == expected
    return expected[0]


def _steps(*calls: tuple[Any, ...]) -> Callable[[Any], Awaitable[list[Any]]]:
    """Call each (method, *args) on the file in turn; an exception is a
    result too, and the calls go on."""

    async def run(f: Any) -> list[Any]:
        seen: list[Any] = []
        for name, *args in calls:
            try:
                if name == "iterate":
                    seen.append([line async for line in f])
                else:
                    seen.append(await getattr(f, name)(*args))
            except Exception as exc:
                seen.append(_outcome(exc))
        return seen

    return run


def _on(name: str, mode: str, steps: Callable[[Any], Awaitable[list[Any]]], **kwargs: Any) -> Scenario:
    async def scenario(lib: Any, root: Path) -> Any:
        async with lib.open(root / name, mode, **kwargs) as f:
            seen = await steps(f)
            if "b" not in mode and "r" in mode:
                seen.append(f.newlines)
            return seen, f.name == str(root / name), f.mode, f.closed

    return scenario


# ---- reading ------------------------------------------------------------------------

READS = {
    "all": _steps(("read",)),
    "sizes": _steps(("read", 0), ("read", 5), ("read", 1), ("read", 12), ("read", None), ("read",), ("read", 3)),
    "lines": _steps(*[("readline",)] * 9),
    "limited lines": _steps(("readline", 4), ("readline", 0), ("readline", 100), ("readline", -1), ("readline", 2)),
    "readlines": _steps(("readline",), ("readlines",)),
    "readlines hint": _steps(("readlines", 15), ("readlines", 1)),
    "iterate": _steps(("iterate",)),
    "bad argument": _steps(("read", "3"), ("readline", 1.5), ("read", 2)),
}


@pytest.mark.parametrize("name", ["text.txt", "latin.txt", "bom.txt", "lines.txt", "crlf.txt", "empty"])
@pytest.mark.parametrize("reads", READS.values(), ids=READS.keys())
async def test_binary_reads(tmp_path: Path, name: str, reads: Any) -> None:
    await same(tmp_path, _on(name, "rb", reads))


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("text.txt", {"encoding": "utf-8"}),
        ("text.txt", {"encoding": "utf-8", "newline": ""}),
        ("text.txt", {"encoding": "utf-8", "newline": "\n"}),
        ("text.txt", {"encoding": "utf-8", "newline": "\r"}),
        ("text.txt", {"encoding": "utf-8", "newline": "\r\n"}),
        ("latin.txt", {"encoding": "latin-1"}),
        ("utf16.txt", {"encoding": "utf-16"}),
        ("bom.txt", {"encoding": "utf-8-sig"}),
        ("bad.txt", {"encoding": "utf-8"}),
        ("bad.txt", {"encoding": "utf-8", "errors": "replace"}),
        ("bad.txt", {"encoding": "ascii", "errors": "surrogateescape"}),
        ("lines.txt", {"encoding": "utf-8"}),
        ("crlf.txt", {"encoding": "utf-8"}),
        ("crlf.txt", {"encoding": "utf-8", "newline": ""}),
        ("empty", {"encoding": "utf-8"}),
    ],
)
@pytest.mark.parametrize("reads", READS.values(), ids=READS.keys())
async def test_text_reads(tmp_path: Path, name: str, options: dict[str, Any], reads: Any) -> None:
    await same(tmp_path, _on(name, "r", reads, **options))


@pytest.mark.parametrize("buffering", [0, 1, 7, 4096, -1])
async def test_binary_reads_with_each_buffering(tmp_path: Path, buffering: int) -> None:
    steps = _steps(("read", 10), ("readline",), ("readinto", bytearray(20)), ("read",), ("read",))
    await same(tmp_path, _on("text.txt", "rb", steps, buffering=buffering))


async def test_readinto_read1_peek(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        seen = []
        async with lib.open(root / "data.bin", "rb") as f:
            buffer = bytearray(1000)
            seen.append(await f.readinto(buffer))
            seen.append(bytes(buffer))
            seen.append(len(await f.peek(10)) > 0)
            seen.append(await f.read1(7))
            seen.append(await f.read1())
            seen.append(await f.readinto(memoryview(bytearray(3))))
            seen.append(await f.tell())
        return seen

    await same(tmp_path, scenario)


SEEKS = {
    "binary": (
        "rb",
        _steps(("seek", 5), ("read", 3), ("seek", -2, 1), ("read", 4), ("seek", -3, 2), ("read",), ("tell",)),
    ),
    "binary errors": ("rb", _steps(("seek", -1), ("seek", 0, 3), ("seek", "x"), ("tell",), ("read", 2))),
    "past the end": ("rb", _steps(("seek", 10**6), ("read",), ("tell",), ("seek", 0), ("read", 4))),
    "text": ("r", _steps(("readline",), ("tell",), ("read", 3), ("seek", 0), ("readline",), ("seek", 0, 2), ("read",))),
    "text refusals": ("r", _steps(("seek", 3, 1), ("seek", -1, 2), ("seek", -1), ("tell",))),
}


@pytest.mark.parametrize(("mode", "steps"), SEEKS.values(), ids=SEEKS.keys())
async def test_seek_and_tell(tmp_path: Path, mode: str, steps: Any) -> None:
    await same(tmp_path, _on("text.txt", mode, steps))


async def test_a_text_tell_cookie_returns_to_the_same_place(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        async with lib.open(root / "text.txt", encoding="utf-8") as f:
            await f.readline()
            await f.readline()
            await f.read(4)
            cookie = await f.tell()
            ahead = await f.read(9)
            await f.seek(cookie)
            return cookie, ahead, await f.read(9), await f.readline()

    await same(tmp_path, scenario)


# ---- writing ------------------------------------------------------------------------


def _writes(name: str, mode: str, *calls: tuple[Any, ...], **kwargs: Any) -> Scenario:
    return _on(name, mode, _steps(*calls), **kwargs)


WRITES = {
    "w text": ("new.txt", "w", [("write", "hello\n"), ("writelines", ["a", "b\n", "ü✓\n"]), ("tell",), ("flush",)]),
    "w newline crlf": ("new.txt", "w", [("write", "a\nb\n")], {"newline": "\r\n"}),
    "w newline cr": ("new.txt", "w", [("write", "a\nb\r\n")], {"newline": "\r"}),
    "w latin-1": ("new.txt", "w", [("write", "café\n")], {"encoding": "latin-1"}),
    "w unencodable": ("new.txt", "w", [("write", "ok "), ("write", "✓"), ("write", " after")], {"encoding": "ascii"}),
    "w utf-16": ("new.txt", "w", [("write", "one\n"), ("write", "two\n")], {"encoding": "utf-16"}),
    "w over existing": ("text.txt", "w", [("write", "replaced")]),
    "wb": (
        "new.bin",
        "wb",
        [("write", b"\x00\x01"), ("write", bytearray(b"ab")), ("write", memoryview(b"cd")), ("tell",)],
    ),
    "wb big": ("new.bin", "wb", [("write", b"x" * 300_000), ("write", b"y" * 10), ("tell",)]),
    "wb many": ("new.bin", "wb", [("write", bytes([i % 256]) * 999) for i in range(200)]),
    "wb wrong type": ("new.bin", "wb", [("write", "text"), ("write", 5), ("write", b"ok")]),
    "w wrong type": ("new.txt", "w", [("write", b"bytes"), ("write", 5), ("write", "ok")]),
    "a text": ("text.txt", "a", [("write", "\nappended"), ("tell",)]),
    "ab": ("data.bin", "ab", [("write", b"tail"), ("tell",)]),
    "a utf-16 continues": ("utf16.txt", "a", [("write", "four\n")], {"encoding": "utf-16"}),
    "x new": ("new.txt", "x", [("write", "made")]),
    "x existing": ("text.txt", "x", [("write", "never")]),
    "xb new": ("new.bin", "xb", [("write", b"made")]),
    "w reads": ("new.txt", "w", [("write", "x"), ("read",), ("readline",), ("seek", 0), ("write", "y")]),
    "r writes": ("text.txt", "r", [("write", "x"), ("writelines", ["y"]), ("truncate",), ("read", 5)]),
    "rb truncate": ("data.bin", "rb", [("truncate", 3), ("read", 2)]),
    "w truncate": (
        "text.txt",
        "w",
        [("write", "0123456789"), ("truncate", 4), ("tell",), ("write", "ab"), ("truncate",)],
    ),
    "w seek": ("new.txt", "w", [("write", "abcdef"), ("seek", 2), ("write", "XY"), ("seek", 0, 2), ("write", "!")]),
    "wb seek": (
        "new.bin",
        "wb",
        [("write", b"abcdef"), ("seek", 2), ("write", b"XY"), ("seek", -1, 2), ("write", b"!")],
    ),
    "line buffered": ("new.txt", "w", [("write", "a"), ("write", "b\nc")], {"buffering": 1}),
    "unbuffered": ("new.bin", "wb", [("write", b"raw"), ("write", b"!" * 100_000), ("tell",)], {"buffering": 0}),
}


@pytest.mark.parametrize("case", WRITES.values(), ids=WRITES.keys())
async def test_writes(tmp_path: Path, case: tuple[Any, ...]) -> None:
    name, mode, calls, *rest = case
    await same(tmp_path, _writes(name, mode, *calls, **(rest[0] if rest else {})))


@pytest.mark.parametrize("mode", ["r+", "w+", "a+", "r+b", "w+b", "a+b", "x+"])
async def test_read_and_write_modes(tmp_path: Path, mode: str) -> None:
    steps = _steps(
        ("write", "new" if "b" not in mode else b"new"),
        ("seek", 0),
        ("read", 6),
        ("tell",),
        ("write", "?" if "b" not in mode else b"?"),
        ("truncate", 8),
        ("seek", 0),
        ("read",),
    )
    await same(tmp_path, _on("text.txt" if "x" not in mode else "new.txt", mode, steps))


async def test_a_line_buffered_file_shows_each_line_as_it_is_written(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        seen = []
        async with lib.open(root / "log.txt", "w", buffering=1) as f:
            for i in range(3):
                await f.write(f"line {i}\n")
                seen.append((root / "log.txt").read_text())
        return seen

    assert (await same(tmp_path, scenario))[1][-1] == "line 0\nline 1\nline 2\n"


async def test_flush_hands_everything_to_the_file(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        async with lib.open(root / "out.bin", "wb") as f:
            await f.write(b"a" * 100)
            before = (root / "out.bin").read_bytes()
            await f.flush()
            return before, (root / "out.bin").read_bytes()

    await same(tmp_path, scenario)


# ---- opening --------------------------------------------------------------------------

OPENS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "missing": ("nope.txt", "r", {}),
    "missing folder": ("no/such/file", "w", {}),
    "a folder": ("folder", "r", {}),
    "a folder for writing": ("folder", "wb", {}),
    "bad mode": ("text.txt", "rw", {}),
    "unknown mode letter": ("text.txt", "rz", {}),
    "U mode": ("text.txt", "rU", {}),
    "binary encoding": ("text.txt", "rb", {"encoding": "utf-8"}),
    "binary errors": ("text.txt", "rb", {"errors": "strict"}),
    "binary newline": ("text.txt", "rb", {"newline": "\n"}),
    "unbuffered text": ("text.txt", "r", {"buffering": 0}),
    "unknown encoding": ("text.txt", "r", {"encoding": "no-such-codec"}),
    "unknown encoding, w": ("new.txt", "w", {"encoding": "no-such-codec"}),
    "bad newline": ("text.txt", "r", {"newline": "\t"}),
    "bad newline type": ("text.txt", "r", {"newline": 5}),
    "bad buffering": ("text.txt", "rb", {"buffering": "big"}),
    "bad encoding type": ("text.txt", "r", {"encoding": 5}),
}


@pytest.mark.parametrize(("name", "mode", "options"), OPENS.values(), ids=OPENS.keys())
async def test_open_refuses_what_open_refuses(tmp_path: Path, name: str, mode: str, options: dict[str, Any]) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        async with lib.open(root / name, mode, **options) as f:
            return await f.read() if "r" in mode else f.mode

    await same(tmp_path, scenario)


async def test_open_takes_a_descriptor_and_an_opener(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        fd = os.open(root / "text.txt", os.O_RDONLY)
        async with lib.open(fd, "rb", closefd=False) as f:
            first = (await f.read(5), f.name == fd)
        os.close(fd)

        def opener(path: str, flags: int) -> int:
            return os.open(path, flags | os.O_APPEND)

        async with lib.open(root / "text.txt", "w", opener=opener) as f:
            await f.write("via opener")
        return first

    await same(tmp_path, scenario)


async def test_await_without_async_with(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        f = await lib.open(root / "text.txt", "rb")
        data = await f.read(5)
        await f.close()
        return data, f.closed

    await same(tmp_path, scenario)


async def test_calls_on_a_closed_file(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        seen = []
        for mode in ("r", "rb", "w", "wb"):
            f = await lib.open(root / ("text.txt" if "r" in mode else "new"), mode)
            await f.close()
            await f.close()  # twice is fine
            seen.append(await _steps(("read",), ("readline",), ("write", "x"), ("seek", 0), ("tell",))(f))
        return seen

    await same(tmp_path, scenario)


async def test_attributes(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        seen = []
        for mode, options in [("r", {"encoding": "utf-8", "errors": "replace"}), ("rb", {}), ("w", {}), ("ab", {})]:
            async with lib.open(root / "text.txt", mode, **options) as f:
                seen.append([f.name == str(root / "text.txt"), f.mode, f.closed, isinstance(f.fileno(), int)])
                seen.append([await f.isatty(), await f.seekable(), await f.writable()])
                if "b" in mode:
                    seen.append([f.readable(), type(f.raw).__name__, f.raw.name == str(root / "text.txt")])
                else:
                    seen.append([await f.readable(), f.encoding, f.errors, f.line_buffering])
        return seen

    await same(tmp_path, scenario)


async def test_the_file_classes_match(tmp_path: Path) -> None:
    (tmp_path / "f").touch()
    for mode, buffering in [("r", -1), ("rb", -1), ("wb", -1), ("r+b", -1), ("rb", 0), ("w", 1)]:
        theirs = await real.open(tmp_path / "f", mode, buffering=buffering)
        mine = await ours.open(tmp_path / "f", mode, buffering=buffering)
        assert type(mine).__name__ == type(theirs).__name__
        await theirs.close()
        await mine.close()


# ---- os, os.path, tempfile, the standard streams -------------------------------------


async def test_os_functions(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        seen: list[Any] = []

        async def call(fn: Any, *args: Any, **kwargs: Any) -> None:
            try:
                seen.append(await fn(*args, **kwargs))
            except Exception as exc:
                seen.append(_outcome(exc))

        o = lib.os
        info = await o.stat(root / "text.txt")
        seen.append((info.st_size, info.st_mode, info == os.stat(root / "text.txt")))
        await call(o.stat, root / "nope")
        await call(o.rename, root / "text.txt", root / "renamed.txt")
        await call(o.rename, root / "nope", root / "other")
        await call(o.renames, root / "renamed.txt", root / "deep" / "er" / "renamed.txt")
        await call(o.replace, root / "latin.txt", root / "bom.txt")
        await call(o.remove, root / "empty")
        await call(o.unlink, root / "empty")
        await call(o.mkdir, root / "made")
        await call(o.mkdir, root / "made")
        await call(o.makedirs, root / "made" / "a" / "b")
        await call(o.makedirs, root / "made" / "a" / "b", exist_ok=True)
        await call(o.makedirs, root / "made" / "a" / "b")
        await call(o.rmdir, root / "made" / "a" / "b")
        await call(o.rmdir, root / "folder")
        await call(o.removedirs, root / "made" / "a")
        await call(o.link, root / "data.bin", root / "hard.bin")
        await call(o.symlink, "data.bin", root / "soft.bin")
        await call(o.readlink, root / "soft.bin")
        await call(o.readlink, root / "data.bin")
        seen.append(sorted(await o.listdir(root)))
        await call(o.listdir, root / "nope")
        with await o.scandir(root) as entries:
            seen.append(sorted((e.name, e.is_dir(), e.is_symlink()) for e in entries))
        await call(o.access, root / "data.bin", os.R_OK)
        await call(o.access, root / "nope", os.F_OK)
        seen.append(await o.getcwd() == os.getcwd())
        seen.append((await o.statvfs(root)).f_bsize > 0)
        with open(root / "data.bin", "rb") as source, open(root / "copy.bin", "wb") as target:
            await call(o.sendfile, target.fileno(), source.fileno(), 10, 1000)
        return seen

    await same(tmp_path, scenario)


async def test_os_path_functions(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        os.symlink("text.txt", root / "link")
        p = lib.ospath
        seen: list[Any] = []
        for name in ("text.txt", "folder", "link", "nope"):
            path = root / name
            for fn in (p.exists, p.isfile, p.isdir, p.islink, p.ismount, p.getsize, p.getmtime, p.getatime, p.getctime):
                try:
                    answer = await fn(path)
                    seen.append(answer == getattr(os.path, fn.__name__)(path))  # times differ between runs
                except Exception as exc:
                    seen.append(_outcome(exc))
        seen.append(await p.samefile(root / "link", root / "text.txt"))
        with open(root / "text.txt") as a, open(root / "link") as b:
            seen.append(await p.sameopenfile(a.fileno(), b.fileno()))
        seen.append(await p.abspath("relative") == os.path.abspath("relative"))
        return seen

    await same(tmp_path, scenario)


async def test_temporary_files(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        seen: list[Any] = []
        t = lib.tempfile
        async with t.TemporaryFile(dir=root) as f:
            await f.write(b"unnamed")
            await f.seek(0)
            seen.append(await f.read())
        async with t.TemporaryFile("w+", dir=root, encoding="utf-8") as f:
            await f.write("text ✓\n")
            await f.seek(0)
            seen.append([line async for line in f])
        async with t.NamedTemporaryFile(dir=root, prefix="named-", suffix=".tmp") as f:
            await f.write(b"named")
            await f.flush()
            seen.append((Path(f.name).read_bytes(), Path(f.name).parent == root))
            name = f.name
        seen.append(os.path.exists(name))
        async with t.NamedTemporaryFile("w", dir=root, delete=False) as f:
            await f.write("kept")
            name = f.name
            seen.append(getattr(f, "delete", "no such attribute"))
        seen.append(Path(name).read_text())
        os.unlink(name)
        async with t.SpooledTemporaryFile(max_size=10, dir=root) as f:
            await f.write(b"small")
            seen.append(f._file._rolled)
            await f.write(b" and now too big")
            seen.append(f._file._rolled)
            await f.seek(0)
            seen.append((await f.read(), await f.tell()))
        async with t.SpooledTemporaryFile(mode="w+", encoding="utf-8") as f:
            await f.writelines(["a\n", "b\n"])
            await f.seek(0)
            seen.append((await f.readline(), await f.readlines(), f.closed))
        async with t.TemporaryDirectory(dir=root, prefix="folder-") as name:
            seen.append((os.path.isdir(name), Path(name).parent == root))
            (Path(name) / "inside").write_text("x")
        seen.append(os.path.exists(name))
        return seen

    await same(tmp_path, scenario)


async def test_standard_streams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for lib in (real, ours):
        await lib.stdout.write(f"to stdout via {lib.__name__}\n")
        await lib.stdout.flush()
        await lib.stderr.write("to stderr\n")
        await lib.stdout_bytes.write(b"bytes\n")
        await lib.stdout_bytes.flush()
    out, err = capsys.readouterr()
    assert out.count("to stdout") == 2 and err.count("to stderr") == 2


async def test_the_mode_of_io_unsupported_operation(tmp_path: Path) -> None:
    async def scenario(lib: Any, root: Path) -> Any:
        async with lib.open(root / "text.txt", "rb") as f:
            try:
                await f.write(b"x")
            except io.UnsupportedOperation as exc:
                return str(exc)
        return None

    await same(tmp_path, scenario)


def _is_coroutine_function(fn: Any) -> bool:
    """What decides whether a function's result is awaited: ``inspect``'s
    check from Python 3.12 (it honours markcoroutinefunction), asyncio's
    before (which unittest.mock uses there)."""
    if sys.version_info >= (3, 12):
        return inspect.iscoroutinefunction(fn)
    return asyncio.iscoroutinefunction(fn)


async def test_the_functions_are_coroutine_functions_that_raise_where_awaited(tmp_path: Path) -> None:
    """A plain local path's stat returns the pool's call itself, with no
    coroutine of its own: the functions must still look like aiofiles's
    ``async def`` to the checks that decide whether to await them
    (unittest.mock's autospec among them), and a bad argument must still
    raise where the call is awaited, not where it is made."""
    for module in ("os", "ospath"):
        for name in getattr(ours, module).__all__:
            theirs = getattr(getattr(real, module), name, None)
            if callable(theirs) and not isinstance(theirs, type):
                assert _is_coroutine_function(getattr(getattr(ours, module), name)) == _is_coroutine_function(theirs)
    stat = mock.create_autospec(ours.os.stat, return_value="stat'ed")
    assert await stat(tmp_path) == "stat'ed"  # an async mock, as of aiofiles's own

    async def scenario(lib: Any, root: Path) -> Any:
        seen = []
        for fn in (lib.os.stat, lib.ospath.exists, lib.ospath.getsize):
            for bad in (3.5, None, b"a\0b", "a\0b", root / "text.txt\0"):
                pending = fn(bad)  # nothing raised yet
                try:
                    seen.append(await pending)
                except Exception as exc:
                    seen.append(_outcome(exc))
        return seen

    await same(tmp_path, scenario)
