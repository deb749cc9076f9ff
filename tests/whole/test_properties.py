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
import dataclasses
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is a test extra: pip install '.[test]'")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import asyncfs  # noqa: E402
from asyncfs import _uri, tfrecord  # noqa: E402
from asyncfs._native import marshal as _marshal  # noqa: E402
from asyncfs._native import paths as _paths  # noqa: E402
from asyncfs._native import speedups as _extension  # noqa: E402
from asyncfs._native.binding import ffi  # noqa: E402
from asyncfs._sync.entries import FileStatistics  # noqa: E402
from asyncfs.tfrecord import masked_crc32c  # noqa: E402

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
    MOST_ENTRIES = 1000  # under the top, before an example starts afresh
    DEEPEST = 32  # levels below the top, likewise

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
        assume(_paths.clean_path(f"{self.inside}/{rel}").startswith(f"{self.inside}/"))
        return {
            "bare": f"{self.inside}/{rel}",
            "file": f"file://{self.inside}/{rel}",
            "localhost": f"file://localhost{self.inside}/{rel}",
            "host": f"file://somehost{self.inside}/{rel}",
            "relative": rel,
        }[anchor]

    def target(self, rel: str) -> Path:
        """The path a URI built from rel names: its cleaned form."""
        return Path(_paths.clean_path(f"{self.inside}/{rel}"))

    def start(self) -> dict[Path, str]:
        """The snapshot an example starts from. Examples share the sandbox,
        so what one leaves can be another's target; but recursive copies into
        their own subfolders grow it geometrically (a CI run reached 254,605
        files, a local run a tree 2021 levels deep), so past a bound it is
        emptied first."""
        before = self.snapshot()
        deepest = max((len(path.relative_to(self.top).parts) for path in before), default=0)
        if len(before) <= self.MOST_ENTRIES and deepest <= self.DEEPEST:
            return before
        for child in self.inside.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        return self.snapshot()

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
    before = sandbox.start()

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


def _scheme_by_pattern(uri: str) -> str:
    """The scheme as RFC 3986's pattern reads it (what scheme_of answered
    before it remembered the schemes it had seen), or the refusal."""
    match = re.match(r"([a-zA-Z][a-zA-Z0-9+.\-]*)://", uri)
    if match is not None:
        return match.group(1)
    head, sep, _ = uri.partition("://")
    return "refused" if sep and "/" not in head else ""


@SETTINGS
@given(uri=st.builds(str.__add__, st.sampled_from(["mem", "s3", "Z9+.-", "1x", "", "a b", "/x", "gs"]),
                     st.text(alphabet="ab/:.+- ", max_size=10)))  # fmt: skip
def test_the_scheme_is_the_patterns_whether_seen_before_or_not(uri: str) -> None:
    """scheme_of remembers the schemes it found well formed: asked twice
    (the second time from what it remembered), it answers as the pattern."""
    for _ in range(2):
        try:
            got = _uri.scheme_of(uri)
        except asyncfs.InvalidArgumentError:
            got = "refused"
        assert got == _scheme_by_pattern(uri), uri


def _first_refusal(check: Callable[[], None]) -> str | None:
    try:
        check()
    except (asyncfs.InvalidArgumentError, TypeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def _each_checked(uris: list[str]) -> None:
    """Each of uris checked in full (checked_scheme: no beginning remembered)."""
    for uri in uris:
        _uri.checked_scheme(uri)


uri_lists = st.lists(
    st.builds(
        str.__add__,
        st.sampled_from(["file:///", "file://", "file://localhost/", "file://h/", "FILE:///", "s3://b/", "/", ""]),
        st.text(alphabet="ab/:.\0 ", max_size=8),
    ),
    max_size=6,
)


@SETTINGS
@given(uris=uri_lists)
def test_a_uri_is_refused_whatever_was_checked_before_it(uris: list[str]) -> None:
    """check_uri's shortcut (a URI that begins like one checked before is
    only searched for a NUL) refuses each URI exactly as the full check
    does, with the same error, after any URIs checked before it."""
    for uri in uris:
        assert _first_refusal(lambda uri=uri: _uri.check_uri(uri)) == _first_refusal(
            lambda uri=uri: _uri.checked_scheme(uri)
        ), uri


@SETTINGS
@given(uris=uri_lists)
def test_checking_many_uris_at_once_refuses_what_checking_each_refuses(uris: list[str]) -> None:
    """The bulk check's shortcut (a URI that begins like one that passed is
    only searched for a NUL) refuses exactly the URIs, and the first one,
    that checking each in turn refuses, with the same error."""
    refusal = _first_refusal(lambda: _each_checked(uris))
    assert _first_refusal(lambda: _uri.check_uris(uris)) == refusal
    if refusal is None:  # and what C is handed: them joined
        assert _uri.check_uris(uris) == "\0".join(uris)


@pytest.mark.parametrize("implementation", ["python", "c"])
@SETTINGS
@given(files=st.lists(st.binary(max_size=300), max_size=12), data=st.data())
def test_a_bulk_reads_buffer_is_cut_back_into_its_files(implementation: str, files: list[bytes], data: Any) -> None:
    """What C read one file after another into a buffer comes back as each
    of the first count files' bytes, in C (asyncfs._speedups) as in Python;
    a count beyond the sizes is refused."""
    if implementation == "c" and _extension.SPEEDUPS is None:
        pytest.skip(_extension.WHY_NOT)
    cut = _marshal.cut_files if implementation == "c" else _marshal._cut_files
    count = data.draw(st.integers(0, len(files)))
    buffer = ffi.new("char[]", b"".join(files) or b"\0")
    sizes = ffi.new("int64_t[]", [len(file) for file in files])
    assert cut(buffer, sizes, count) == files[:count]
    with pytest.raises(ValueError, match="files of"):
        _marshal.cut_files(buffer, sizes, len(files) + 1)
    if implementation == "c" and files:
        sizes[0] = -1
        with pytest.raises(ValueError, match="negative size"):
            cut(buffer, sizes, 1)


@pytest.mark.parametrize("implementation", ["python", "c"])
@SETTINGS
@given(rows=st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.booleans())))
def test_statistics_made_in_bulk_are_what_their_class_makes(implementation: str, rows: list[Any]) -> None:
    """A bulk stat's FileStatistics, made in C (asyncfs._speedups) without
    calling __init__, equal, hash, print and refuse changes as the ones
    FileStatistics(*row) makes; rows that do not fit the fields are refused."""
    if implementation == "c" and _extension.SPEEDUPS is None:
        pytest.skip(_extension.WHY_NOT)
    made = _marshal.made if implementation == "c" else (lambda cls, rows: [cls(*row) for row in rows])
    got = made(FileStatistics, rows)
    expected = [FileStatistics(*row) for row in rows]
    assert got == expected
    assert [(type(one), hash(one), repr(one)) for one in got] == [(type(one), hash(one), repr(one)) for one in expected]
    for one in got:
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.length = 0  # type: ignore[misc]
    if implementation == "c":
        with pytest.raises(ValueError, match="one value per field"):
            made(FileStatistics, [(1, 2)])
        with pytest.raises(TypeError, match="not a dataclass"):
            made(int, [(1,)])


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
    before = sandbox.start()
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


# ---- TFRecord framing: the C block parser against the definition --------------------


def _record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def _reference_records(data: bytes, skip_corrupt: bool) -> tuple[list[bytes], int, int | None]:
    """TFRecord reading as the format defines it, one record at a time in
    Python: (records, skipped, offset of the error raised or None)."""
    records: list[bytes] = []
    skipped, at = 0, 0
    while at < len(data):
        if len(data) - at < 12:
            return (records, skipped + 1, None) if skip_corrupt else (records, skipped, at)
        length, crc = struct.unpack_from("<QI", data, at)
        if masked_crc32c(data[at : at + 8]) != crc:
            if not skip_corrupt:
                return records, skipped, at
            skipped += 1
            at = next(
                (
                    i
                    for i in range(at + 1, len(data) - 11)
                    if masked_crc32c(data[i : i + 8]) == struct.unpack_from("<I", data, i + 8)[0]
                ),
                len(data),
            )
            continue
        if len(data) - at - 12 < length + 4:
            return (records, skipped + 1, None) if skip_corrupt else (records, skipped, at)
        body = data[at + 12 : at + 12 + length]
        if masked_crc32c(body) != struct.unpack_from("<I", data, at + 12 + length)[0]:
            if not skip_corrupt:
                return records, skipped, at
            skipped += 1
        else:
            records.append(body)
        at += 16 + length
    return records, skipped, None


@SETTINGS
@given(
    bodies=st.lists(st.binary(max_size=300), max_size=30),
    damage=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 40),
    skip_corrupt=st.booleans(),
)
def test_tfrecords_read_as_the_format_defines(
    loop_and_env: tuple[asyncio.AbstractEventLoop, asyncfs.Env],
    bodies: list[bytes],
    damage: list[tuple[int, int]],
    cut: int,
    skip_corrupt: bool,
) -> None:
    loop, env = loop_and_env
    data = bytearray(b"".join(_record(body) for body in bodies))
    for position, flip in damage:
        if data:
            data[position % len(data)] ^= flip
    data = data[: max(0, len(data) - cut)] if damage else data
    uri = f"mem:///tfrecord-property-{os.getpid()}.tfrecord"

    async def read() -> tuple[list[bytes], int, int | None]:
        await env.write_file(uri, bytes(data))
        reader = tfrecord.TFRecordReader(await env.open(uri, "rb"), skip_corrupt=skip_corrupt)
        records: list[bytes] = []
        try:
            async for record in reader:
                records.append(record)
        except tfrecord.TFRecordCorruptionError as error:
            return records, reader.skipped, error.offset
        return records, reader.skipped, None

    assert loop.run_until_complete(read()) == _reference_records(bytes(data), skip_corrupt)


def test_both_crc32c_paths_agree_with_google_crc32c() -> None:
    """The runtime checks CRC-32C with SSE4.2 where the CPU has it, and with
    tables otherwise (ARM wheels): the tables run here too, by request."""
    script = (
        "import random, struct, sys\n"
        "from asyncfs._native import binding as _ffi\n"
        "from asyncfs.tfrecord import masked_crc32c\n"
        "rng = random.Random(7)\n"
        "def rec(d):\n"
        "    h = struct.pack('<Q', len(d))\n"
        "    return h + struct.pack('<I', masked_crc32c(h)) + d + struct.pack('<I', masked_crc32c(d))\n"
        "bodies = [rng.randbytes(rng.randrange(300)) for _ in range(300)]\n"
        "data = b''.join(rec(b) for b in bodies)\n"
        "ffi, lib = _ffi.ffi, _ffi.runtime()\n"
        "spans, stop = ffi.new('int64_t[]', 1000), ffi.new('int64_t[3]')\n"
        "n = lib.ASYNCFS_ParseRecords(data, len(data), 1, spans, 500, stop)\n"
        "assert n == 300 and stop[0] == len(data) and stop[1] == 0, (n, stop[0], stop[1])\n"
        "assert [data[spans[2*i]:spans[2*i]+spans[2*i+1]] for i in range(n)] == bodies\n"
        "damaged = bytearray(data); damaged[len(rec(bodies[0])) + 13] ^= 1\n"
        "n = lib.ASYNCFS_ParseRecords(bytes(damaged), len(damaged), 1, spans, 500, stop)\n"
        "assert n == 1 and stop[1] == lib.ASYNCFS_RECORDS_BAD_DATA, (n, stop[1])\n"
        "print('ok')\n"
    )
    for tables in (False, True):
        environment = {k: v for k, v in os.environ.items() if k != "ASYNCFS_CRC32C_TABLES"}
        if tables:
            environment["ASYNCFS_CRC32C_TABLES"] = "1"
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=120, check=False
        )
        assert done.stdout.strip() == "ok", done.stderr[-2000:]


# ---- names that hostile input generates ------------------------------------------------------


@given(bucket=st.from_regex(r"[a-z0-9][a-z0-9.-]{2,20}", fullmatch=True), rel=relative_paths)
@SETTINGS
def test_an_object_store_path_never_leaves_its_bucket(bucket: str, rel: str) -> None:
    """However many ".." a key holds, the plugin's name for it starts with
    its bucket (the rule PLUGIN_NAMES_KEYS; memory's tree rule for contrast
    climbs)."""
    assume("\0" not in rel and "://" not in rel)
    if "s3" not in asyncfs.default_registry().schemes():
        pytest.skip("asyncfs was built without the s3 plugin")
    name = asyncfs.get_filesystem("s3://").translate_name(f"s3://{bucket}/{rel}")
    assert name == f"/{bucket}" or name.startswith(f"/{bucket}/")
    assert all(segment not in ("", ".") for segment in name.split("/")[1:])


@given(plan=st.fixed_dictionaries(
    {
        "staging": st.one_of(st.just(".root.asyncfs-txn.x"), segments),
        "deletes": st.lists(relative_paths, max_size=3),
        "mkdirs": st.lists(relative_paths, max_size=3),
        "moves": st.lists(relative_paths, max_size=3),
    }
))  # fmt: skip
@SETTINGS
def test_a_journal_plan_that_passes_names_only_what_is_inside_its_root(plan: dict[str, Any]) -> None:
    """Whatever a planted journal's plan holds, what recovery would act on
    (when the plan passes) lies below the root, or is the root's staging."""
    from asyncfs._transactions.generic import Siblings, _plan_inside  # noqa: PLC0415

    names = Siblings("/data/root")
    if not _plan_inside(names, plan):
        return
    assert plan["staging"].startswith(".root.asyncfs-txn.") and "/" not in plan["staging"]
    for rel in [*plan["deletes"], *plan["mkdirs"], *plan["moves"]]:
        assert os.path.normpath(f"/data/root/{rel}").startswith("/data/root/")


@given(name=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40))
@SETTINGS
def test_only_asyncfs_own_names_are_hidden(name: str) -> None:
    """Walks and listings hide a name only when it has the shape asyncfs
    gives its temporaries; a staging name of any file is one."""
    assume("/" not in name and "\0" not in name)
    assert _uri.is_internal_name(_uri.staging_name(f"/d/{name}").rpartition("/")[2])
    if "asyncfs-" not in name:
        assert not _uri.is_internal_name(name)
