"""Glob, both rules: TensorFlow's (the default: wildcards within one path
component) and, with recursive=True, glob.glob's, where ``**`` spans
directory levels. The recursive rule is checked against the standard
library on generated trees and patterns."""

from __future__ import annotations

import asyncio
import glob as stdlib_glob
import itertools
import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncfs

NAMES = st.sampled_from(["a", "b", "ab", ".d", "x.txt"])
PATTERN_PARTS = st.sampled_from(["a", "b", "*", "**", "?", "[ab]", "*.txt", ".d", "a*"])


def make_tree(root: Path, files: list[tuple[str, ...]]) -> None:
    for parts in files:
        path = root.joinpath(*parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue  # a name generated as both a file and a folder


@pytest.mark.skipif(sys.version_info < (3, 11), reason="glob.glob's include_hidden is Python 3.11+")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(st.lists(NAMES, min_size=1, max_size=4).map(tuple), max_size=12),
    pattern=st.lists(PATTERN_PARTS, min_size=1, max_size=4),
)
def test_recursive_glob_is_the_standard_librarys(files: list[tuple[str, ...]], pattern: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        make_tree(root, files)
        full = "/".join([folder, *pattern])
        # glob.glob gives "x/" where a trailing ** matches no level: here
        # that is "x", for a folder only (glob.glob says "x/" for a file x,
        # or an x that does not exist, too), and the folder the walk starts
        # from (the part before any wildcard) is no match
        before = itertools.takewhile(lambda part: not set(part) & set("*?["), pattern)
        start = "/".join([folder, *before]) if "**" in pattern else None
        found_there = stdlib_glob.glob(full, recursive=True, include_hidden=True)
        matches = {path.rstrip("/") for path in found_there if not path.endswith("/") or os.path.isdir(path)}
        expected = {path for path in matches if path != start and os.path.lexists(path)}

        async def ours() -> list[str]:
            async with asyncfs.Env() as env:
                return await env.glob(full, recursive=True)

        found = asyncio.run(ours())
        assert found == sorted(found)
        assert set(found) == expected


@pytest.mark.anyio
async def test_recursive_glob_on_memory_and_the_default_rule() -> None:
    async with asyncfs.Env() as env:
        for path in ("mem:///g/c.txt", "mem:///g/a/c.txt", "mem:///g/a/b/c.txt", "mem:///g/a/b/d.bin"):
            await env.write_file(path, b"1")
        assert await env.glob("mem:///g/**/c.txt", recursive=True) == [
            "mem:///g/a/b/c.txt",
            "mem:///g/a/c.txt",
            "mem:///g/c.txt",
        ]
        # TensorFlow's rule, the default: ** is * within one component
        assert await env.glob("mem:///g/**/c.txt") == ["mem:///g/a/c.txt"]
        assert await env.glob(Path("/nonexistent-asyncfs/**"), recursive=True) == []
