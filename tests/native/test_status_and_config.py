"""The status runtime's errno mapping, the exception tree, and the ABI's
configuration ops as the Python adapter exposes them."""

from __future__ import annotations

import errno
import pickle

import pytest

import asyncfs
from asyncfs import Code, errors
from asyncfs._native.binding import check, ffi, new_status, runtime


@pytest.mark.parametrize(
    "err, code",
    [
        (errno.ENOENT, Code.NOT_FOUND),
        (errno.ENOTDIR, Code.FAILED_PRECONDITION),
        (errno.EISDIR, Code.FAILED_PRECONDITION),
        (errno.ENOTEMPTY, Code.FAILED_PRECONDITION),
        (errno.EEXIST, Code.ALREADY_EXISTS),
        (errno.EACCES, Code.PERMISSION_DENIED),
        (errno.EPERM, Code.PERMISSION_DENIED),
        (errno.EROFS, Code.PERMISSION_DENIED),
        (errno.ENOSPC, Code.RESOURCE_EXHAUSTED),
        (errno.EINVAL, Code.INVALID_ARGUMENT),
        (0, Code.OK),
    ],
)
def test_errno_mapping_is_tensorflows(err: int, code: Code) -> None:
    status = new_status()
    runtime().AF_SetStatusFromIOError(status, err, b"/some/path")
    assert runtime().AF_GetCode(status) == code
    if code != Code.OK:
        assert ffi.string(runtime().AF_Message(status)).startswith(b"/some/path; ")


@pytest.mark.parametrize(
    "cls, builtin",
    [
        (errors.NotFoundError, FileNotFoundError),
        (errors.AlreadyExistsError, FileExistsError),
        (errors.PermissionDeniedError, PermissionError),
        (errors.UnimplementedError, NotImplementedError),
        (errors.InvalidArgumentError, ValueError),
        (errors.DeadlineExceededError, TimeoutError),
        (errors.UnavailableError, ConnectionError),
        (errors.OutOfRangeError, EOFError),
        (errors.PathIsDirectoryError, IsADirectoryError),
        (errors.PathNotDirectoryError, NotADirectoryError),
        (errors.DirectoryNotEmptyError, OSError),
    ],
)
def test_each_error_is_also_its_builtin(cls: type[errors.StatusError], builtin: type[Exception]) -> None:
    error = cls("boom", op="stat", path="mem:///x")
    assert isinstance(error, builtin)
    assert isinstance(error, asyncfs.AsyncFSError)
    assert str(error) == f"stat mem:///x: boom [{cls.code.name}]"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error)
    assert (copy.op, copy.path, copy.undeleted) == ("stat", "mem:///x", None)
    error.undeleted = (3, 1)  # as a recursive delete that failed reports it
    assert pickle.loads(pickle.dumps(error)).undeleted == (3, 1)


def test_every_code_has_one_exception_class() -> None:
    assert set(errors.STATUS_ERRORS) == set(Code) - {Code.OK}


@pytest.mark.parametrize(
    "err, cls",
    [
        (errno.EISDIR, errors.PathIsDirectoryError),
        (errno.ENOTDIR, errors.PathNotDirectoryError),
        (errno.ENOTEMPTY, errors.DirectoryNotEmptyError),
        (errno.EBUSY, errors.FailedPreconditionError),  # none of the three: the plain class
    ],
)
def test_a_failed_precondition_from_an_errno_is_the_kind_the_standard_library_raises(
    err: int, cls: type[errors.StatusError]
) -> None:
    """TensorFlow's convention (errno to FAILED_PRECONDITION, with strerror
    as the message) keeps what the errno said: the builtin and the errno."""
    status = new_status()
    runtime().AF_SetStatusFromIOError(status, err, b"/some/path")
    with pytest.raises(errors.StatusError) as info:
        check(status, "read_file", "/some/path")
    assert type(info.value) is cls
    assert info.value.errno == cls.errno_value  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "message, cls",
    [
        ("path is a directory", errors.PathIsDirectoryError),
        ("delete_file s3://b/k: a directory", errors.PathIsDirectoryError),
        ("source path is not a directory", errors.PathNotDirectoryError),
        ("create_dir s3://b/k/x: the parent is a file", errors.PathNotDirectoryError),
        ("delete_dir s3://b/k: a file", errors.PathNotDirectoryError),
        ("BucketNotEmpty (The bucket you tried to delete is not empty) HTTP 409", errors.DirectoryNotEmptyError),
        ("PreconditionFailed (At least one of the pre-conditions did not hold)", errors.FailedPreconditionError),
        ("file is closed", errors.FailedPreconditionError),
    ],
)
def test_a_failed_precondition_is_the_kind_its_message_names(message: str, cls: type[errors.StatusError]) -> None:
    status = new_status()
    runtime().AF_SetStatus(status, Code.FAILED_PRECONDITION, message.encode())
    with pytest.raises(errors.FailedPreconditionError) as info:
        check(status, "op", "mem:///x")
    assert type(info.value) is cls


def test_check_names_the_operation_and_path() -> None:
    status = new_status()
    runtime().AF_SetStatus(status, Code.NOT_FOUND, b"no such thing")
    with pytest.raises(FileNotFoundError) as info:
        check(status, "read_file", "mem:///gone")
    assert info.value.filename == "mem:///gone"
    assert info.value.errno == errno.ENOENT
    assert "read_file mem:///gone: no such thing" in str(info.value)


def test_unknown_scheme_is_a_clear_error() -> None:
    with pytest.raises(asyncfs.UnknownSchemeError, match=r"'nope'.*registered"):
        asyncfs.get_filesystem("nope://x")


def test_memory_plugin_configuration() -> None:
    fs = asyncfs.get_filesystem("mem://")
    assert fs.configuration_keys() == ["latency_us"]
    assert fs.get_option("latency_us").value == 0
    fs.set_option("latency_us", 250)
    try:
        assert fs.get_option("latency_us").value == 250
        assert [o.name for o in fs.configuration()] == ["latency_us"]
    finally:
        fs.set_option("latency_us", 0)
    with pytest.raises(asyncfs.InvalidArgumentError, match="latency_us"):
        fs.set_option("latency_us", -1)
    with pytest.raises(asyncfs.InvalidArgumentError):
        fs.set_option("latency_us", 1.5)
    with pytest.raises(asyncfs.NotFoundError, match="no_such_option"):
        fs.set_option("no_such_option", 1)
    with pytest.raises(asyncfs.NotFoundError):
        fs.get_option("no_such_option")


def test_posix_plugin_configuration(tmp_path: object) -> None:
    fs = asyncfs.get_filesystem("file://")
    assert fs.configuration_keys() == ["sync_on_close"]
    fs.set_configuration([asyncfs.Option("sync_on_close", (1,))])
    try:
        fs.write_file(f"{tmp_path}/durable", b"synced on close")
        assert fs.read_file(f"{tmp_path}/durable") == b"synced on close"
    finally:
        fs.set_option("sync_on_close", 0)


def test_missing_required_op_names_it(registry: asyncfs.Registry) -> None:
    demo = registry.get("demo")  # the example plugin offers only the core ops
    assert not demo.offers("new_appendable_file")
    with pytest.raises(asyncfs.UnimplementedError, match="does not offer new_appendable_file") as info:
        demo.new_appendable_file("demo:///tmp/x")
    assert isinstance(info.value, NotImplementedError)
    with pytest.raises(NotImplementedError, match="new_read_only_memory_region_from_file"):
        demo.new_read_only_memory_region_from_file("demo:///tmp/x")
    # optional ops fall back to generic code instead
    assert not demo.offers("get_matching_paths") and demo.available("get_matching_paths")


@pytest.mark.parametrize(
    "message, said",
    [
        (b"stat az://cont/blob: no such file or directory", "stat az://cont/blob: no such file or directory"),
        (b"az://cont/blob: no such file or directory", "stat az://cont/blob: no such file or directory"),
        (b"az://cont/blob; no such file or directory", "stat az://cont/blob: no such file or directory"),
        (b"stat az://cont/other: no such file", "stat az://cont/blob: stat az://cont/other: no such file"),
        # the request that failed is news: kept
        (b"GET az://cont/blob: Timeout was reached", "stat az://cont/blob: GET az://cont/blob: Timeout was reached"),
    ],
)
def test_a_message_names_its_path_once(message: bytes, said: str) -> None:
    """A plugin's message that starts with the path the error names anyway,
    alone or after the op's name, says it once."""
    status = new_status()
    runtime().AF_SetStatus(status, Code.NOT_FOUND, message)
    with pytest.raises(FileNotFoundError) as info:
        check(status, "stat", "az://cont/blob")
    assert str(info.value).startswith(said)
