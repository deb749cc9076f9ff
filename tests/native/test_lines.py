"""asyncfs._streams.lines: split_keep and Handover, in C (asyncfs._speedups) and in
Python, each held to the same answers. The C versions' tests skip, saying
why, where the extension was not built (no CPython headers at install)."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncfs._native import libraries as _libs
from asyncfs._native import speedups as _extension
from asyncfs._streams import lines as _lines

pytestmark = pytest.mark.anyio

IMPLEMENTATIONS = ["python", "c"]


@pytest.fixture(params=["asyncio", "trio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed")
        return ("asyncio", {"loop_factory": uvloop.new_event_loop})
    return request.param


def _speedups() -> Any:
    if _extension.SPEEDUPS is None:
        pytest.skip(_extension.WHY_NOT)
    return _extension.SPEEDUPS


def _split_keep(implementation: str) -> Callable[..., list[Any]]:
    return _lines._split_keep if implementation == "python" else _speedups().split_keep


def _handover(implementation: str) -> Any:
    return _lines._Handover if implementation == "python" else _speedups().Handover


# ---- split_keep ---------------------------------------------------------------------------

LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
texts = st.text(alphabet=st.sampled_from(["a", "é", "€", "😀", *LINE_BREAKS]), max_size=60)


def _expected(chunk: Any, newline: Any) -> list[Any]:
    parts = chunk.split(newline)
    return [part + newline for part in parts[:-1]] + [parts[-1]]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(chunk=texts)
def test_split_keep_cuts_text_after_each_newline_only(implementation: str, chunk: str) -> None:
    """Whatever other line breaks the text holds (str.splitlines breaks at
    eight more), and whatever its characters' widths."""
    lines = _split_keep(implementation)(chunk, "\n")
    assert lines == _expected(chunk, "\n")
    assert "".join(lines) == chunk and all(type(line) is str for line in lines)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(chunk=st.binary(max_size=60), newline=st.sampled_from([b"\n", b"\r", b"\0"]))
def test_split_keep_cuts_bytes_after_each_newline_only(implementation: str, chunk: bytes, newline: bytes) -> None:
    lines = _split_keep(implementation)(chunk, newline)
    assert lines == _expected(chunk, newline)
    assert all(type(line) is bytes for line in lines)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_split_keep_at_the_edges(implementation: str) -> None:
    split_keep = _split_keep(implementation)
    assert split_keep("", "\n") == [""]
    assert split_keep("\n", "\n") == ["\n", ""]
    assert split_keep("a\n\nb", "\n") == ["a\n", "\n", "b"]
    assert split_keep(b"a\r\nb\n", b"\n") == [b"a\r\n", b"b\n", b""]
    assert split_keep("a;b;", ";") == ["a;", "b;", ""]


def test_the_c_split_refuses_what_it_cannot_split() -> None:
    split_keep = _speedups().split_keep
    with pytest.raises(TypeError, match="str chunk and newline, or bytes"):
        split_keep("a\n", b"\n")
    with pytest.raises(TypeError, match="str chunk and newline, or bytes"):
        split_keep(bytearray(b"a\n"), b"\n")
    with pytest.raises(ValueError, match="one character"):
        split_keep("a\r\nb", "\r\n")
    with pytest.raises(ValueError, match="one byte"):
        split_keep(b"a", b"")
    with pytest.raises(TypeError, match="takes a chunk and a newline"):
        split_keep("a")


# ---- Handover -----------------------------------------------------------------------------


class Lines:
    """A source as a stream is one: lines split ahead in groups, each group
    handed to the handover by more(), which returns the group's first."""

    def __init__(self, groups: list[list[str]]) -> None:
        self.groups: Iterator[list[str]] = iter(groups)
        self.calls = 0

    async def more(self, handover: Any) -> str:
        self.calls += 1
        await anyio.sleep(0)  # a real suspension, as a block read is
        for group in self.groups:
            handover.ahead = ahead = iter(group)
            for line in ahead:
                return line
        raise StopAsyncIteration


GROUPS = [["a\n", "b\n", "c\n"], [], ["d\n"], ["e"]]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_handover_gives_every_item_in_order_and_asks_for_more_once_a_group(implementation: str) -> None:
    source = Lines(GROUPS)
    handover = _handover(implementation)(source.more)
    assert handover.__aiter__() is handover
    assert [line async for line in handover] == ["a\n", "b\n", "c\n", "d\n", "e"]
    assert source.calls == 4  # a, d and e came from more(); the fourth ended the loop
    with pytest.raises(StopAsyncIteration):
        await handover.__anext__()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_handover_answers_each_anext_in_the_order_asked(implementation: str) -> None:
    """anext() twice before either is awaited (``async for`` never does):
    each awaitable gives its own item, whichever is awaited first."""
    handover = _handover(implementation)(Lines(GROUPS).more)
    assert await handover.__anext__() == "a\n"
    first, second = handover.__anext__(), handover.__anext__()
    assert await second == "c\n"
    assert await first == "b\n"
    third, fourth = handover.__anext__(), handover.__anext__()  # the group is out: both ask more()
    assert [await third, await fourth] == ["d\n", "e"]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_handover_items_are_what_was_split(implementation: str) -> None:
    """Any object passes unchanged, a tuple included (StopIteration would
    unpack one given as its arguments)."""
    items: list[Any] = [(1, 2), (), None, ("x",), b"y"]

    async def more(handover: Any) -> Any:
        if handover.ahead is not None:
            raise StopAsyncIteration
        handover.ahead = iter(items[1:])
        return items[0]

    assert [item async for item in _handover(implementation)(more)] == items


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_handover_passes_errors_on(implementation: str) -> None:
    def failing() -> Iterator[str]:
        yield "a\n"
        raise OSError("the iterator failed")

    async def more(handover: Any) -> str:
        if handover.ahead is None:
            handover.ahead = failing()
            return "first\n"
        raise TimeoutError("more failed")

    handover = _handover(implementation)(more)
    assert [await handover.__anext__(), await handover.__anext__()] == ["first\n", "a\n"]
    with pytest.raises(OSError, match="the iterator failed"):
        await handover.__anext__()
    with pytest.raises(TimeoutError, match="more failed"):
        await handover.__anext__()


def test_the_c_handover_refuses_bad_input() -> None:
    handover_type = _speedups().Handover
    with pytest.raises(TypeError, match="more must be callable"):
        handover_type(3)
    handover = handover_type(Lines([]).more)
    with pytest.raises(TypeError, match="an iterator or None"):
        handover.ahead = ["a list is not an iterator"]
    handover.ahead = iter(["x"])
    handover.ahead = None
    assert handover.ahead is None
    awaitable = handover.__aiter__().__anext__()  # more(), as ahead is None
    assert awaitable.__class__.__name__ == "coroutine"
    awaitable.close()


async def test_the_c_handover_cannot_give_an_item_twice() -> None:
    handover_type = _speedups().Handover
    handover = handover_type(Lines([]).more)
    handover.ahead = iter(["a", "b", "c"])
    awaitable = handover.__anext__()
    assert await awaitable == "a"
    with pytest.raises(RuntimeError, match="already awaited"):
        await awaitable
    handover.__anext__()  # b, kept by the handover for its await
    second = handover.__anext__()  # c, in an awaitable of its own
    assert await second == "c"
    with pytest.raises(RuntimeError, match="already awaited"):
        await second


def test_the_c_handover_is_collected_with_what_it_holds() -> None:
    """A handover and its source may hold each other (a stream whose
    loop's more() is the stream's own method, kept by the stream): the
    cycle is collected."""
    handover_type = _speedups().Handover

    class Source:
        handover: Any = None

        async def more(self, handover: Any) -> str:
            raise StopAsyncIteration

    source = Source()
    source.handover = handover_type(source.more)
    source.handover.ahead = iter([source])
    gone = weakref.ref(source)
    del source
    gc.collect()
    assert gone() is None


def test_a_line_loop_runs_where_the_extension_was_built() -> None:
    """The C versions load in a fresh interpreter as the streams use them
    (not skipped: a build with CPython's headers must have them)."""
    _speedups()
    code = (
        "import asyncio, asyncfs._streams.lines as l\n"
        "async def more(h):\n"
        "    if h.ahead is not None: raise StopAsyncIteration\n"
        "    h.ahead = iter(l.split_keep('b\\nc\\n', '\\n')[:-1])\n"
        "    return 'a\\n'\n"
        "async def main(): return [x async for x in l.Handover(more)]\n"
        "print(l.Handover.__module__, asyncio.run(main()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != _extension.NO_SPEEDUPS_ENV}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.strip() == "asyncfs._speedups ['a\\n', 'b\\n', 'c\\n']"


def test_a_module_that_will_not_load_leaves_lines_to_python(tmp_path: Path) -> None:
    """A _speedups built for another interpreter or machine (here: not a
    library at all) is named with the reason, and lines are split in Python."""
    libs = tmp_path / "lib"
    shutil.copytree(_libs.lib_dir(), libs)
    for old in libs.glob("_speedups*"):
        old.unlink()
    (libs / "_speedups.abi3.so").write_bytes(b"not a library")
    code = (
        "import asyncfs._native.speedups as x, asyncfs._streams.lines as l\n"
        "print(x.SPEEDUPS is None, l.Handover.__module__)\nprint(x.WHY_NOT)\n"
    )
    env = {**os.environ, _libs.LIB_DIR_ENV: str(libs)}
    env.pop(_extension.NO_SPEEDUPS_ENV, None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    first, why = done.stdout.splitlines()
    assert first == "True asyncfs._streams.lines"
    assert why.startswith(f"{libs / '_speedups.abi3.so'} does not load: ")
