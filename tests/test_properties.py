"""Property-based: random paths, URIs and bytes thrown at the sync adapter
and at the async Env never crash the process, fail only with a typed
asyncfs error, and never write or delete outside a sandbox folder.

Every local path generated is anchored in the sandbox (absolute, file://,
file://localhost, a file:// host, or relative to a working directory inside
it) and kept only when its cleaned form stays there: what is tested is that
nothing reaches a target other than the one named. ASYNCFS_HYPOTHESIS_EXAMPLES
bounds the examples per test (CI keeps the default).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is a test extra: pip install '.[test]'")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import asyncfs  # noqa: E402
from asyncfs import _uri  # noqa: E402

EXAMPLES = int(os.environ.get("ASYNCFS_HYPOTHESIS_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

segments = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=10),
    st.sampled_from(["", ".", "..", "\0", "a\0b", " ", "*", "?", "[", "]", ":", "://", "file:", "\\", "~", "-"]),
    st.binary(min_size=1, max_size=6).map(lambda b: b.decode("utf-8", "surrogateescape")),
)
relative_paths = st.lists(segments, min_size=1, max_size=5).map("/".join)
anchors = st.sampled_from(["bare", "file", "localhost", "host", "relative"])
data = st.binary(max_size=64)


class Sandbox:
    def __init__(self, top: Path) -> None:
        self.top = top
        self.inside = top / "sandbox"
        self.outside = top / "outside"
        self.inside.mkdir(exist_ok=True)
        self.outside.mkdir(exist_ok=True)
        (self.outside / "canary.txt").write_bytes(b"must survive")
        (self.outside / "folder").mkdir(exist_ok=True)
        (self.outside / "folder" / "inner.txt").write_bytes(b"must survive too")

    def uri(self, anchor: str, rel: str) -> str:
        # kept only when the cleaned path stays in the sandbox
        assume(_uri.clean_path(f"{self.inside}/{rel}").startswith(f"{self.inside}/"))
        return {
            "bare": f"{self.inside}/{rel}",
            "file": f"file://{self.inside}/{rel}",
            "localhost": f"file://localhost{self.inside}/{rel}",
            "host": f"file://somehost{self.inside}/{rel}",
            "relative": rel,
        }[anchor]

    def target(self, rel: str) -> Path:
        """The path a URI built from rel names: its cleaned form."""
        return Path(_uri.clean_path(f"{self.inside}/{rel}"))

    def snapshot(self) -> dict[Path, str]:
        """Every file and folder under the top, down to the bytes."""
        return {
            path: hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for path in self.top.rglob("*")
        }

    def check(self, before: dict[Path, str], targets: list[Path]) -> None:
        """Only the named targets, what is below them, and the folders above
        them (made for them) may have changed."""
        after = self.snapshot()
        changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
        for path in changed:
            assert any(path == t or t in path.parents or path in t.parents for t in targets), (
                f"{path} changed, but the operation named only {targets}"
            )


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    monkeypatch.chdir(box.inside)  # relative paths resolve inside it
    yield box


def attempt(call: Callable[[], Any]) -> None:
    """Run call: a result or a typed asyncfs error are both fine."""
    with contextlib.suppress(asyncfs.AsyncFSError):
        call()


def sync_ops(fs: asyncfs.ModularFileSystem, uri: str, other: str, payload: bytes) -> list[Callable[[], Any]]:
    return [
        lambda: fs.write_file(uri, payload),
        lambda: fs.read_file(uri),
        lambda: fs.delete_file(uri),
        lambda: fs.delete_recursively(uri),
        lambda: fs.recursively_create_dir(uri),
        lambda: fs.create_dir(uri),
        lambda: fs.rename_file(uri, other),
        lambda: fs.copy_file(other, uri),
        lambda: fs.files_exist([uri, other]),
        lambda: fs.get_children(uri),
        lambda: fs.get_matching_paths(uri + "*"),
        lambda: fs.stat(uri),
    ]


@SETTINGS
@given(anchor=anchors, rel=relative_paths, other_rel=relative_paths, payload=data, pick=st.integers(0, 11))
def test_the_sync_adapter_stays_in_the_sandbox(  # noqa: PLR0917 (hypothesis passes keywords)
    sandbox: Sandbox, anchor: str, rel: str, other_rel: str, payload: bytes, pick: int
) -> None:
    uri = sandbox.uri(anchor, rel)
    other = sandbox.uri("bare", other_rel)
    before = sandbox.snapshot()

    def call() -> None:
        fs = asyncfs.get_filesystem(uri)
        sync_ops(fs, uri, other, payload)[pick]()

    attempt(call)
    sandbox.check(before, [sandbox.target(rel), sandbox.target(other_rel)])


@SETTINGS
@given(
    scheme=st.sampled_from(["mem://", "mem:///", "bad fs://", "Z9+.-://", "1x://", "://", "s3x://"]), rel=relative_paths
)
def test_random_uris_get_a_typed_answer(scheme: str, rel: str) -> None:
    uri = f"{scheme}{rel}"
    if uri.startswith("mem:"):
        uri = f"mem:///properties/{rel}"

    def call() -> None:
        fs = asyncfs.get_filesystem(uri)
        for op in sync_ops(fs, uri, f"{uri}.other", b"x"):
            attempt(op)

    attempt(call)


@pytest.fixture
def loop_and_env() -> Iterator[tuple[asyncio.AbstractEventLoop, asyncfs.Env]]:
    loop = asyncio.new_event_loop()
    env = asyncfs.Env(workers=2)
    yield loop, env
    loop.run_until_complete(env.aclose())
    loop.close()


@SETTINGS
@given(anchor=anchors, rel=relative_paths, other_rel=relative_paths, payload=data, pick=st.integers(0, 9))
def test_the_async_env_stays_in_the_sandbox(  # noqa: PLR0917 (hypothesis passes keywords)
    sandbox: Sandbox,
    loop_and_env: tuple[asyncio.AbstractEventLoop, asyncfs.Env],
    anchor: str,
    rel: str,
    other_rel: str,
    payload: bytes,
    pick: int,
) -> None:
    loop, env = loop_and_env
    uri = sandbox.uri(anchor, rel)
    other = sandbox.uri("bare", other_rel)
    before = sandbox.snapshot()
    ops = [
        lambda: env.write_file(uri, payload),
        lambda: env.append(uri, payload),
        lambda: env.rm(uri),
        lambda: env.rmtree(uri),
        lambda: env.makedirs(uri),
        lambda: env.rename(uri, other),
        lambda: env.copy(other, uri, recursive=True),
        lambda: env.read_file(uri),
        lambda: env.glob(uri + "/*"),
        lambda: env.files_exist([uri, other]),
    ]
    attempt(lambda: loop.run_until_complete(ops[pick]()))
    sandbox.check(before, [sandbox.target(rel), sandbox.target(other_rel)])
