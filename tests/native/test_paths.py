"""The path rules, one table of cases: the runtime's CleanPath and generic
TranslateName (what the Python core calls), and every built-in plugin's
translate_name, which compile in the same C (plugins/common/plugin_paths.c).
The cases are TensorFlow's CleanPath semantics."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

import asyncfs
from asyncfs._native import paths as _paths

CLEAN_CASES = [
    ("", "."),
    (".", "."),
    ("/", "/"),
    ("//", "/"),
    ("/a/b/c", "/a/b/c"),
    ("a/b/c/", "a/b/c"),
    ("a//b///c", "a/b/c"),
    ("./a/./b/.", "a/b"),
    ("a/b/../c", "a/c"),
    ("a/..", "."),
    ("/..", "/"),
    ("/../a", "/a"),
    ("/a/b/../../..", "/"),
    ("..", ".."),
    ("../../a/..", "../.."),
    ("a/../../b", "../b"),
    ("é/../ü/", "ü"),
]

TRANSLATE_CASES = [
    ("", ""),
    ("file://", "/"),
    ("file:///", "/"),
    ("file:///a/./b/", "/a/b"),
    ("file:///a/../../b", "/b"),
    ("relative/../x", "x"),
]


@pytest.mark.parametrize(("path", "cleaned"), CLEAN_CASES)
def test_clean_path(path: str, cleaned: str) -> None:
    assert _paths.clean_path(path) == cleaned


@pytest.mark.parametrize(("uri", "translated"), TRANSLATE_CASES)
def test_generic_translate_name(uri: str, translated: str) -> None:
    assert _paths.translate_name(uri) == translated


@pytest.mark.parametrize(("uri", "translated"), TRANSLATE_CASES)
def test_posix_plugin_translates_the_same(uri: str, translated: str, registry: asyncfs.Registry) -> None:
    assert registry.get("file").translate_name(uri) == translated


@pytest.mark.parametrize(("path", "cleaned"), [(p, c) for p, c in CLEAN_CASES if p.startswith("/")])
def test_memory_plugin_cleans_the_same(path: str, cleaned: str, registry: asyncfs.Registry) -> None:
    # the host is the first segment of mem:// paths (mem://a/b is /a/b)
    assert registry.get("mem").translate_name("mem://" + path.lstrip("/")) == cleaned


@given(st.lists(st.sampled_from(["a", "b", ".", "..", ""]), max_size=8))
def test_absolute_paths_clean_as_posixpath_normalizes(parts: list[str]) -> None:
    path = "/" + "/".join(parts)
    expected = posixpath.normpath(path)  # keeps a leading "//", as POSIX allows
    assert _paths.clean_path(path) == "/" + expected.lstrip("/")
