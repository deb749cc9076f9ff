"""The plugin conformance suite: every case of
shared/reference/conformance-checklist.md, run against every plugin.

A case whose op the plugin does not offer (natively or through a generic
fallback) is skipped with that reason; everything else must give exactly the
listed status code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import PluginUnderTest, put_dir, put_file

from asyncfs import (
    Code,
    DirectoryNotEmptyError,
    EntryKind,
    FailedPreconditionError,
    FileStatistics,
    ModularFileSystem,
    OutOfRangeError,
    PathIsDirectoryError,
    PathNotDirectoryError,
    StatusError,
    UnimplementedError,
)

NF, FP, AE, IA = Code.NOT_FOUND, Code.FAILED_PRECONDITION, Code.ALREADY_EXISTS, Code.INVALID_ARGUMENT
# FAILED_PRECONDITION, with the kind the error says (and the builtin it also is)
ISDIR, NOTDIR, NOTEMPTY = PathIsDirectoryError, PathNotDirectoryError, DirectoryNotEmptyError
_BUILTINS = {ISDIR: IsADirectoryError, NOTDIR: NotADirectoryError}
Expected = Code | type[StatusError]
# The plugins of this repository, whose messages say the kind (a bare path is
# the posix plugin's). Another plugin's message may not (TensorFlow's
# convention is the path alone): its plain FailedPreconditionError passes,
# a wrong kind does not.
OURS = frozenset({"", "file", "mem", "demo", "s3", "http", "gs", "az"})

# The cases that change the tree. A read-only plugin (http) must refuse
# them with UnimplementedError naming its scheme, checked before the case
# is skipped; its other cases read trees made in the folder its server
# serves (make_file, make_dir).
WRITES = frozenset(
    {
        "test_new_writable_file",
        "test_new_appendable_file",
        "test_create_dir",
        "test_recursively_create_dir",
        "test_delete_file",
        "test_delete_dir",
        "test_delete_recursively",
        "test_rename_and_copy",
        "test_rename_dir",
        "test_writable_file_tell_and_close",
        "test_read_what_was_written",
        "test_append_then_read",
    }
)


@pytest.fixture(autouse=True)
def _writes_refused_by_read_only_plugins(request: pytest.FixtureRequest) -> None:
    if request.node.originalname not in WRITES or "plugin" not in request.fixturenames:
        return
    plugin: PluginUnderTest = request.getfixturevalue("plugin")
    if not plugin.read_only:
        return
    fs = request.getfixturevalue("fs")
    root = request.getfixturevalue("root")
    with pytest.raises(UnimplementedError, match=f"{plugin.scheme}://"):
        fs.write_file(f"{root}/refused", b"x")
    with pytest.raises(UnimplementedError, match=f"{plugin.scheme}://"):
        fs.create_dir(f"{root}/refused")
    pytest.skip(f"the {plugin.scheme} plugin is read-only: it refuses writes (checked)")


def _scheme(args: tuple[Any, ...]) -> str:
    uri = str(args[0]) if args else ""
    return uri.partition("://")[0] if "://" in uri else ""


def expect(code: Expected, fn: Callable[..., Any], *args: Any) -> StatusError:
    """fn(*args) fails with the status code, or with FAILED_PRECONDITION of
    the kind given (ISDIR, NOTDIR, NOTEMPTY): except IsADirectoryError and
    the like then catch it, as with the standard library (see OURS)."""
    with pytest.raises(StatusError) as info:
        fn(*args)
    error = info.value
    if isinstance(code, Code):
        assert error.code == code, f"expected {code.name}, got {error!r}"
        return error
    if type(error) is FailedPreconditionError and _scheme(args) not in OURS:
        return error
    assert isinstance(error, code), f"expected {code.__name__}, got {type(error).__name__}: {error}"
    assert isinstance(error, _BUILTINS.get(code, OSError)) and error.errno == code.errno_value, repr(error)
    return error


# Object stores have no directories to require or to collide with: a key's
# prefix is its parent. Checking before every write would cost a listing per
# write, so there a new file needs no parent, may share its name with a
# prefix, and may sit "inside" another object's key. These cases assert that
# behaviour instead (docs/s3.md, "What differs from a local filesystem").
OBJECT_STORES = frozenset({"s3", "gs", "az"})


def expect_unless_object_store(fs: ModularFileSystem, code: Expected, fn: Callable[..., Any], uri: str) -> None:
    if fs.scheme in OBJECT_STORES:
        fn(uri).close()  # accepted
        fs.delete_file(uri)
    else:
        expect(code, fn, uri)


def need(fs: ModularFileSystem, *ops: str) -> None:
    for op in ops:
        if not fs.available(op):
            pytest.skip(f"the {fs.metadata.name} plugin declares it does not offer {op}")


def make_file(fs: ModularFileSystem, uri: str, data: bytes = b"") -> str:
    return put_file(fs, uri, data)  # a read-only plugin's: where its server serves


def make_dir(fs: ModularFileSystem, uri: str) -> str:
    return put_dir(fs, uri)


# ---- translate name ---------------------------------------------------------


# Object stores whose keys keep ".." as a name, as s3fs sends them: no path
# leaves its bucket or a prefix a wrapper confines it to (docs/uris.md). On
# every other plugin ".." climbs, as TensorFlow's TranslateName has it.
KEYS_AS_WRITTEN = frozenset({"s3", "gs", "az"})


def test_translate_name(fs: ModularFileSystem) -> None:
    s = fs.scheme
    if not s:
        pytest.skip("bare paths have no scheme")
    keys = s in KEYS_AS_WRITTEN
    assert fs.translate_name("") == ""
    assert fs.translate_name("/") == "/"
    assert fs.translate_name("//") == "/"
    assert fs.translate_name("a_file") == "a_file"
    assert fs.translate_name("a_dir/..") == ("a_dir/.." if keys else ".")
    for uri in (f"{s}://", f"{s}:///", f"{s}:////"):
        assert fs.translate_name(uri) == "/", uri
    assert fs.translate_name(f"{s}:///./a_file") == "/a_file"
    convoluted = fs.translate_name(f"{s}:///a/convoluted/../path/./to/.//.///a/file")
    assert convoluted == ("/a/convoluted/../path/to/a/file" if keys else "/a/path/to/a/file")


# ---- new writable / appendable / random access file -------------------------


def test_new_writable_file(fs: ModularFileSystem, root: str) -> None:
    make_file(fs, f"{root}/ok")
    expect_unless_object_store(fs, NF, fs.new_writable_file, f"{root}/missing/file")
    expect_unless_object_store(fs, ISDIR, fs.new_writable_file, make_dir(fs, f"{root}/dir"))
    make_file(fs, f"{root}/file")
    expect_unless_object_store(fs, NOTDIR, fs.new_writable_file, f"{root}/file/x")


def test_new_appendable_file(fs: ModularFileSystem, root: str) -> None:
    need(fs, "new_appendable_file")
    fs.new_appendable_file(f"{root}/ok").close()
    expect_unless_object_store(fs, NF, fs.new_appendable_file, f"{root}/missing/file")
    expect(ISDIR, fs.new_appendable_file, make_dir(fs, f"{root}/dir"))
    make_file(fs, f"{root}/created")
    with fs.new_appendable_file(f"{root}/created") as f:
        f.append(b"more")
    make_file(fs, f"{root}/file")
    expect(NOTDIR, fs.new_appendable_file, f"{root}/file/x")


def test_new_random_access_file(fs: ModularFileSystem, root: str) -> None:
    expect(NF, fs.new_random_access_file, f"{root}/missing")
    expect(NF, fs.new_random_access_file, f"{root}/missing_dir/file")
    expect(ISDIR, fs.new_random_access_file, make_dir(fs, f"{root}/dir"))
    fs.new_random_access_file(make_file(fs, f"{root}/created")).close()
    expect(NOTDIR, fs.new_random_access_file, f"{root}/created/x")


# ---- memory region -------------------------------------------------------------


def test_memory_region(fs: ModularFileSystem, root: str) -> None:
    need(fs, "new_read_only_memory_region_from_file")
    new_region = fs.new_read_only_memory_region_from_file
    expect(NF, new_region, f"{root}/missing")
    expect(NF, new_region, f"{root}/missing_dir/file")
    expect(ISDIR, new_region, make_dir(fs, f"{root}/dir"))
    expect(IA, new_region, make_file(fs, f"{root}/empty"))
    expect(NOTDIR, new_region, f"{root}/empty/x")
    with new_region(make_file(fs, f"{root}/four", b"asdf")) as region:
        assert len(region) == 4
        assert bytes(region.data) == b"asdf"


# ---- create dir ------------------------------------------------------------------


def test_create_dir(fs: ModularFileSystem, root: str) -> None:
    fs.create_dir(f"{root}/ok")
    expect(NF, fs.create_dir, f"{root}/no_parent/dir")
    expect(AE, fs.create_dir, make_file(fs, f"{root}/file"))
    expect(AE, fs.create_dir, f"{root}/ok")
    expect(NOTDIR, fs.create_dir, f"{root}/file/x")


def test_recursively_create_dir(fs: ModularFileSystem, root: str) -> None:
    need(fs, "recursively_create_dir")
    fs.recursively_create_dir(f"{root}/ok")
    fs.recursively_create_dir(f"{root}/a/deep/tree/of/dirs")
    assert fs.is_directory(f"{root}/a/deep/tree/of/dirs")
    expect(NOTDIR, fs.recursively_create_dir, make_file(fs, f"{root}/file"))
    fs.recursively_create_dir(f"{root}/ok")  # twice is fine
    expect(NOTDIR, fs.recursively_create_dir, f"{root}/file/x")
    fs.recursively_create_dir(f"{root}/a/deep/other")  # from a nested existing dir
    assert fs.is_directory(f"{root}/a/deep/other")
    expect(NOTDIR, fs.recursively_create_dir, f"{root}/file/x/y/z")  # through a file


# ---- delete file / dir / recursively --------------------------------------------------


def test_delete_file(fs: ModularFileSystem, root: str) -> None:
    fs.delete_file(make_file(fs, f"{root}/file"))
    assert not fs.exists(f"{root}/file")
    make_dir(fs, f"{root}/sub")
    fs.delete_file(make_file(fs, f"{root}/sub/file"))
    expect(NF, fs.delete_file, f"{root}/missing")
    expect(ISDIR, fs.delete_file, f"{root}/sub")
    make_file(fs, f"{root}/other")
    expect(NOTDIR, fs.delete_file, f"{root}/other/x")


def test_delete_dir(fs: ModularFileSystem, root: str) -> None:
    fs.delete_dir(make_dir(fs, f"{root}/dir"))
    assert not fs.exists(f"{root}/dir")
    make_dir(fs, f"{root}/outer")
    fs.delete_dir(make_dir(fs, f"{root}/outer/inner"))
    expect(NF, fs.delete_dir, f"{root}/missing")
    make_file(fs, f"{root}/outer/file")
    expect(NOTEMPTY, fs.delete_dir, f"{root}/outer")
    expect(NOTDIR, fs.delete_dir, f"{root}/outer/file")
    expect(NOTDIR, fs.delete_dir, f"{root}/outer/file/x")


def test_delete_recursively(fs: ModularFileSystem, root: str) -> None:
    need(fs, "delete_recursively")
    assert fs.delete_recursively(make_dir(fs, f"{root}/empty")) == (0, 0)
    make_dir(fs, f"{root}/tree")
    make_dir(fs, f"{root}/tree/sub")
    make_file(fs, f"{root}/tree/a", b"1")
    make_file(fs, f"{root}/tree/sub/b", b"2")
    assert fs.delete_recursively(f"{root}/tree") == (0, 0)
    assert not fs.exists(f"{root}/tree")
    error = expect(NF, fs.delete_recursively, f"{root}/missing")
    assert error.undeleted == (0, 1)  # type: ignore[attr-defined]
    assert fs.delete_recursively(make_file(fs, f"{root}/file")) == (0, 0)
    assert not fs.exists(f"{root}/file")
    make_file(fs, f"{root}/file2")
    expect(NOTDIR, fs.delete_recursively, f"{root}/file2/x")
    make_dir(fs, f"{root}/parent")
    make_dir(fs, f"{root}/parent/child")
    make_file(fs, f"{root}/parent/child/f", b"x")
    assert fs.delete_recursively(f"{root}/parent/child") == (0, 0)
    assert fs.is_directory(f"{root}/parent")
    assert not fs.exists(f"{root}/parent/child")


# ---- rename and copy ----------------------------------------------------------------


@pytest.mark.parametrize("op", ["rename_file", "copy_file"])
def test_rename_and_copy(fs: ModularFileSystem, root: str, op: str) -> None:
    need(fs, op)
    move = getattr(fs, op)
    src, dst = make_file(fs, f"{root}/src", b"source bytes"), f"{root}/dst"
    move(src, dst)
    assert fs.read_file(dst) == b"source bytes"
    assert fs.get_file_size(dst) == len(b"source bytes")
    if op == "rename_file":
        expect(NF, fs.path_exists, src)
    else:
        assert fs.read_file(src) == b"source bytes"

    # overwrite: really create both, then the target holds the source's bytes
    make_file(fs, f"{root}/a", b"AAAA-new")
    make_file(fs, f"{root}/b", b"old")
    move(f"{root}/a", f"{root}/b")
    assert fs.read_file(f"{root}/b") == b"AAAA-new"
    assert fs.stat(f"{root}/b").length == 8

    expect(NF, move, f"{root}/missing", f"{root}/x")
    make_file(fs, f"{root}/c", b"c")
    expect(NF, move, f"{root}/c", f"{root}/no_dir/x")
    make_dir(fs, f"{root}/dir")
    expect(ISDIR, move, f"{root}/dir", f"{root}/y")
    expect(ISDIR, move, f"{root}/c", f"{root}/dir")
    expect(NOTDIR, move, f"{root}/c/x", f"{root}/z")
    expect(NOTDIR, move, f"{root}/c", f"{root}/c/x")
    assert fs.read_file(f"{root}/c") == b"c"


def test_rename_dir(fs: ModularFileSystem, root: str) -> None:
    """asyncfs's rename_dir: native (one atomic step) or, for a plugin
    without it, the core's copy-then-delete, with the same answers."""
    make_dir(fs, f"{root}/tree")
    make_dir(fs, f"{root}/tree/sub")
    make_file(fs, f"{root}/tree/a", b"a bytes")
    make_file(fs, f"{root}/tree/sub/b", b"b bytes")
    fs.rename_dir(f"{root}/tree", f"{root}/moved")
    expect(NF, fs.path_exists, f"{root}/tree")
    assert fs.read_file(f"{root}/moved/a") == b"a bytes"
    assert fs.read_file(f"{root}/moved/sub/b") == b"b bytes"
    assert fs.is_directory(f"{root}/moved/sub")

    make_dir(fs, f"{root}/other")
    expect(AE, fs.rename_dir, f"{root}/moved", f"{root}/other")
    expect(IA, fs.rename_dir, f"{root}/moved", f"{root}/moved/sub/inside")
    expect(NF, fs.rename_dir, f"{root}/missing", f"{root}/x")
    expect(NOTDIR, fs.rename_dir, f"{root}/moved/a", f"{root}/x")
    if fs.scheme not in OBJECT_STORES:  # a key needs no parent there
        expect(NF, fs.rename_dir, f"{root}/moved", f"{root}/no_dir/x")
    assert fs.read_file(f"{root}/moved/sub/b") == b"b bytes"


# ---- exists -------------------------------------------------------------------------


def test_path_exists(fs: ModularFileSystem, root: str) -> None:
    fs.path_exists(make_file(fs, f"{root}/file"))
    fs.path_exists(make_dir(fs, f"{root}/dir"))
    expect(NF, fs.path_exists, f"{root}/missing")
    expect(NOTDIR, fs.path_exists, f"{root}/file/x")


def test_paths_exist(fs: ModularFileSystem, root: str) -> None:
    need(fs, "paths_exist")
    a, b = make_file(fs, f"{root}/a"), make_file(fs, f"{root}/b")
    assert fs.paths_exist([a, b]) == [None, None]
    statuses = fs.paths_exist([make_dir(fs, f"{root}/dir"), a, f"{a}/x", f"{root}/missing"])
    assert not all(s is None for s in statuses)
    assert [s.code if s else Code.OK for s in statuses] == [Code.OK, Code.OK, FP, NF]
    assert fs.paths_exist([]) == []
    assert fs.files_exist([a, f"{root}/missing", f"{a}/x"]) == [True, False, False]


# ---- stat, is directory, size -----------------------------------------------------------


def test_stat(fs: ModularFileSystem, root: str) -> None:
    empty = fs.stat(make_file(fs, f"{root}/empty"))
    assert (empty.length, empty.is_directory) == (0, False)
    assert fs.stat(make_file(fs, f"{root}/four", b"asdf")).length == 4
    directory = fs.stat(make_dir(fs, f"{root}/dir"))
    assert directory.is_directory
    expect(NF, fs.stat, f"{root}/missing")
    expect(NOTDIR, fs.stat, f"{root}/four/x")
    assert empty.mtime_nsec > 0


def mixed_paths(fs: ModularFileSystem, root: str) -> list[str]:
    """An empty file, a file, a directory, a missing path and a path under
    a file: what the ops on many paths answer each in its own way."""
    return [
        make_file(fs, f"{root}/empty"),
        make_file(fs, f"{root}/four", b"asdf"),
        make_dir(fs, f"{root}/dir"),
        f"{root}/missing",
        f"{root}/four/x",
    ]


def test_stat_files(fs: ModularFileSystem, root: str) -> None:
    """asyncfs's stat_files (native, or stat one path after another): each
    entry is what stat answers for its path, or the error stat raises."""
    uris = mixed_paths(fs, root)
    got = fs.stat_files(uris)
    for uri, item in zip(uris[:3], got[:3], strict=True):
        alone = fs.stat(uri)
        assert isinstance(item, FileStatistics) and (item.length, item.is_directory) == (
            alone.length,
            alone.is_directory,
        ), uri
    assert isinstance(got[3], StatusError) and got[3].code == NF and got[3].path == uris[3]
    assert isinstance(got[4], StatusError) and got[4].code == FP
    assert fs.stat_files([]) == []
    # a URI that cannot be a path fails alone, and is never sent
    refused = fs.stat_files([uris[0], f"{root}/a\0b", uris[1]])
    assert isinstance(refused[1], StatusError) and refused[1].code == IA and "NUL" in str(refused[1])
    assert isinstance(refused[0], FileStatistics) and isinstance(refused[2], FileStatistics)


def test_read_files(fs: ModularFileSystem, root: str) -> None:
    """asyncfs's read_files (the plugin's, or open and read one file after
    another): each entry is what read_file answers for its path, or the
    error with the code read_file raises; a file bigger than what it may
    have of the buffer is None (the caller reads it another way). On a
    local filesystem the files lie one after another, and that file ends
    the list; an object store gives each an equal share."""
    uris = [
        *mixed_paths(fs, root),
        make_file(fs, f"{root}/big", b"B" * 5000),
        make_file(fs, f"{root}/after", b"after"),
    ]
    got, _ = fs.read_files(uris, bytearray(4096))
    for uri, item in zip(uris[:5], got[:5], strict=True):
        try:
            alone = fs.read_file(uri)
        except StatusError as error:
            assert isinstance(item, StatusError) and item.code == error.code and item.path == uri, (uri, item)
        else:
            assert item == alone, uri
    assert got[5] is None
    assert got[6:] in ([], [b"after"])
    assert fs.read_files([], bytearray(4096)) == ([], 0.0)


def test_read_file_if_ready(fs: ModularFileSystem, root: str) -> None:
    """read_file_if_ready, made at hand on an event loop's thread: for each
    path, what read_file answers (its bytes, or an error with the same
    code), or None: not at hand, and a worker reads it. A file of 64 KiB or
    more is never read so; a plugin that opens at hand reads a small file
    it just wrote so (memory always; posix on the filesystems it lists)."""
    uris = [*mixed_paths(fs, root), make_file(fs, f"{root}/big", b"B" * (64 << 10))]
    for uri in uris:
        try:
            alone = fs.read_file(uri)
        except StatusError as error:
            try:
                got = fs.read_file_if_ready(uri)
            except StatusError as early:
                assert early.code == error.code and early.path == uri, (uri, early)
            else:
                assert got is None, uri
        else:
            assert fs.read_file_if_ready(uri) in (None, alone), uri
    assert fs.read_file_if_ready(uris[-1]) is None
    if fs.scheme == "mem":
        assert fs.read_file_if_ready(uris[1]) == b"asdf"
    if not fs.offers("new_random_access_file_if_ready"):
        assert fs.read_file_if_ready(uris[1]) is None


def test_is_directory(fs: ModularFileSystem, root: str) -> None:
    need(fs, "is_directory")
    assert fs.is_directory(make_dir(fs, f"{root}/dir"))
    expect(NOTDIR, fs.is_directory, make_file(fs, f"{root}/file"))
    expect(NF, fs.is_directory, f"{root}/missing")
    expect(NOTDIR, fs.is_directory, f"{root}/file/x")


def test_get_file_size(fs: ModularFileSystem, root: str) -> None:
    need(fs, "get_file_size")
    assert fs.get_file_size(make_file(fs, f"{root}/empty")) == 0
    assert fs.get_file_size(make_file(fs, f"{root}/four", b"asdf")) == 4
    expect(ISDIR, fs.get_file_size, make_dir(fs, f"{root}/dir"))
    expect(NF, fs.get_file_size, f"{root}/missing")
    expect(NOTDIR, fs.get_file_size, f"{root}/four/x")


# ---- children and glob -----------------------------------------------------------------


def test_get_children(fs: ModularFileSystem, root: str) -> None:
    make_dir(fs, f"{root}/dir")
    names = ["a", "b", "c_dir", "d.txt"]
    for name in names:
        (make_dir if name.endswith("_dir") else make_file)(fs, f"{root}/dir/{name}")
    assert sorted(fs.get_children(f"{root}/dir")) == names
    assert fs.get_children(make_dir(fs, f"{root}/empty")) == []
    expect(NOTDIR, fs.get_children, f"{root}/dir/a")
    expect(NF, fs.get_children, f"{root}/missing")
    expect(NOTDIR, fs.get_children, f"{root}/dir/a/x")


def test_get_children_stats(fs: ModularFileSystem, root: str) -> None:
    """asyncfs's get_children_stats (native, or the core's listing plus a
    stat per child): each child once, with what stat says of it, and
    get_children's answers for what is not a directory."""
    make_dir(fs, f"{root}/dir")
    make_file(fs, f"{root}/dir/a", b"")
    make_file(fs, f"{root}/dir/b.txt", b"x" * 1234)
    make_dir(fs, f"{root}/dir/c_dir")
    make_file(fs, f"{root}/dir/c_dir/inner", b"inside")
    listing = dict(fs.get_children_stats(f"{root}/dir"))
    assert sorted(listing) == sorted(fs.get_children(f"{root}/dir")) == ["a", "b.txt", "c_dir"]
    for name, stats in listing.items():
        alone = fs.stat(f"{root}/dir/{name}")
        assert (stats.length, stats.is_directory) == (alone.length, alone.is_directory), name
        if fs.scheme not in OBJECT_STORES:
            assert stats.mtime_nsec == alone.mtime_nsec, name
        elif not stats.is_directory:  # LIST says milliseconds, HEAD whole seconds; a prefix has no time
            assert abs(stats.mtime_nsec - alone.mtime_nsec) < 1_000_000_000, name
    assert listing["b.txt"].length == 1234 and listing["c_dir"].is_directory
    assert fs.get_children_stats(make_dir(fs, f"{root}/empty")) == []
    expect(NOTDIR, fs.get_children_stats, f"{root}/dir/a")
    expect(NF, fs.get_children_stats, f"{root}/missing")


def test_get_children_kinds(fs: ModularFileSystem, root: str) -> None:
    """asyncfs's get_children_kinds (API 8; the core's answer from the
    statistics for plugins without it): what get_children_stats says, and
    for files and folders a kind that agrees with their statistics."""
    make_dir(fs, f"{root}/dir")
    make_file(fs, f"{root}/dir/a", b"abc")
    make_dir(fs, f"{root}/dir/sub")
    kinds = {
        name: (stats.length, stats.is_directory, kind) for name, stats, kind in fs.get_children_kinds(f"{root}/dir")
    }
    assert kinds == {"a": (3, False, EntryKind.FILE), "sub": (0, True, EntryKind.DIRECTORY)}
    assert fs.get_children_kinds(make_dir(fs, f"{root}/empty")) == []
    expect(NOTDIR, fs.get_children_kinds, f"{root}/dir/a")
    expect(NF, fs.get_children_kinds, f"{root}/missing")


def test_get_matching_paths(fs: ModularFileSystem, root: str) -> None:
    need(fs, "get_matching_paths")
    assert fs.get_matching_paths(f"{root}/*") == []  # an empty tree
    for name in ("aa", "ab", "ba"):
        make_file(fs, f"{root}/{name}")
    make_dir(fs, f"{root}/adir")
    make_file(fs, f"{root}/adir/inner")
    assert fs.get_matching_paths(f"{root}/a?") == [f"{root}/aa", f"{root}/ab"]
    assert fs.get_matching_paths(f"{root}/a*") == [f"{root}/aa", f"{root}/ab", f"{root}/adir"]
    assert fs.get_matching_paths(root) == [root]
    assert fs.get_matching_paths(f"{root}/ba") == [f"{root}/ba"]
    assert fs.get_matching_paths(f"{root}/x?y*") == []
    assert f"{root}/adir/inner" not in fs.get_matching_paths(f"{root}/*")  # * stays in its component
    assert fs.get_matching_paths(f"{root}/*/inner") == [f"{root}/adir/inner"]


# ---- files ---------------------------------------------------------------------------------


def test_writable_file_tell_and_close(fs: ModularFileSystem, root: str) -> None:
    with fs.new_writable_file(f"{root}/file") as f:
        assert f.tell() == 0
        f.append(b"asdf")
        assert f.tell() == 4
        f.flush()
        f.sync()
    assert f.closed


def test_read_what_was_written(fs: ModularFileSystem, root: str) -> None:
    make_file(fs, f"{root}/file", b"asdf")
    with fs.new_random_access_file(f"{root}/file") as f:
        assert f.read(0, 4) == b"asdf"


def test_append_then_read(fs: ModularFileSystem, root: str) -> None:
    need(fs, "new_appendable_file")
    make_file(fs, f"{root}/file", b"asdf")
    with fs.new_appendable_file(f"{root}/file") as f:
        f.append(b"qwer")
    with fs.new_random_access_file(f"{root}/file") as f:
        assert f.read(0, 8) == b"asdfqwer"
        assert f.read(4, 4) == b"qwer"


def test_short_read_is_out_of_range(fs: ModularFileSystem, root: str) -> None:
    make_file(fs, f"{root}/file", b"asdf")
    with fs.new_random_access_file(f"{root}/file") as f:
        with pytest.raises(OutOfRangeError):
            f.read(0, 5, strict=True)
        assert f.read(0, 5) == b"asdf"  # and the 4 bytes are returned
        buffer = bytearray(5)
        assert f.read_into(0, buffer) == 4
        assert bytes(buffer[:4]) == b"asdf"
