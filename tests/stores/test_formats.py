"""The text stores and credential sources hand the plugins: AWS config files
(plugins/s3/s3_formats.c), JSON documents and ISO 8601 times
(plugins/objstore/objstore_formats.c). The C files are compiled on their own
and checked through cffi against the parsers boto3 and Python use:
botocore's own config loader, ``json`` and ``datetime``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import cffi
import hypothesis
import pytest
from conftest import REPO, build_plugin
from hypothesis import example, given
from hypothesis import strategies as st

SOURCE = REPO / "plugins" / "s3" / "s3_formats.c"
ENGINE_SOURCE = REPO / "plugins" / "objstore" / "objstore_formats.c"

CDEF = """
char* s3_ini_get(const char* text, const char* section, const char* key, int* section_found);
char* objstore_json_get(const char* json, size_t len, const char* key);
int objstore_json_member(const char* json, size_t len, const char* key, const char** start, size_t* n);
int objstore_json_next(const char* array, size_t len, size_t* pos, const char** start, size_t* n);
char* objstore_json_string(const char* value, size_t len);
int64_t objstore_parse_time(const char* iso);
int objstore_parse_time_ns(const char* iso, int64_t* ns);
void free(void*);
"""


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not SOURCE.exists():
        pytest.skip("the plugin sources are not here (an installed wheel)")
    folder: Path = tmp_path_factory.mktemp("formats")
    library = build_plugin(
        SOURCE,
        folder / "libformats.so",
        flags=(str(ENGINE_SOURCE), "-I", str(SOURCE.parent), "-I", str(ENGINE_SOURCE.parent)),
    )
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(library))
    yield ffi, lib


def taken(formats: Any, pointer: Any) -> str | None:
    ffi, lib = formats
    if pointer == ffi.NULL:
        return None
    try:
        return ffi.string(pointer).decode()  # type: ignore[no-any-return]
    finally:
        lib.free(pointer)


def ini_get(formats: Any, text: str, section: str, key: str) -> tuple[str | None, bool]:
    ffi, lib = formats
    found = ffi.new("int*")
    value = taken(formats, lib.s3_ini_get(text.encode(), section.encode(), key.encode(), found))
    return value, bool(found[0])


def json_get(formats: Any, document: bytes, key: str) -> str | None:
    _, lib = formats
    return taken(formats, lib.objstore_json_get(document, len(document), key.encode()))


# ---- config files -------------------------------------------------------------------------

NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
CHARACTER = st.characters(codec="utf-8", exclude_characters="\x00\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
VALUE = st.text(alphabet=CHARACTER, max_size=30).map(str.strip)
# a nested value is never empty: it starts with a visible character (drawn,
# not filtered for: rejection made generation too slow on a loaded machine)
NESTED_VALUE = st.tuples(st.characters(categories=["L", "N", "P", "S"]), VALUE).map("".join)
SETTINGS = st.dictionaries(
    NAME, st.one_of(VALUE, st.dictionaries(NAME, NESTED_VALUE, min_size=1, max_size=3)), max_size=5
)


def render(profiles: dict[str, dict[str, Any]], spacing: str, comment: str) -> str:
    lines = [f"{comment} written by the test", ""]
    for name, settings in profiles.items():
        lines.append(f"[{name}]")
        for key, value in settings.items():
            if isinstance(value, dict):
                lines.append(f"{key}{spacing}={spacing}".rstrip())
                lines.extend(f"  {sub}{spacing}={spacing}{v}" for sub, v in value.items())
            else:
                lines.append(f"{key}{spacing}={spacing}{value}")
        lines.append("")
    return "\n".join(lines)


# Each example is a whole file; in CI the machine's two cores are shared with Ceph.
@hypothesis.settings(suppress_health_check=[hypothesis.HealthCheck.too_slow])
@given(
    profiles=st.dictionaries(NAME.map(lambda n: f"profile {n}") | st.just("default"), SETTINGS, max_size=4),
    spacing=st.sampled_from(["", " ", "  ", "\t"]),
    comment=st.sampled_from(["#", ";"]),
)
def test_config_files_read_as_botocore_reads_them(
    formats: Any,
    tmp_path_factory: pytest.TempPathFactory,
    profiles: dict[str, dict[str, Any]],
    spacing: str,
    comment: str,
) -> None:
    """Every key and nested key of every profile, and every absent one,
    reads as botocore's raw_config_parse reads the same file."""
    configloader = pytest.importorskip("botocore.configloader", reason="botocore (boto3) is a test extra")
    text = render(profiles, spacing, comment)
    path = tmp_path_factory.mktemp("ini") / "config"
    path.write_text(text)
    reference = configloader.raw_config_parse(str(path))
    for section, settings in reference.items():
        for key, value in settings.items():
            if isinstance(value, dict):
                for sub, sub_value in value.items():
                    assert ini_get(formats, text, section, f"{key}.{sub}") == (sub_value, True)
            else:
                assert ini_get(formats, text, section, key) == (value, True)
        assert ini_get(formats, text, section, "not_a_key_here") == (None, True)
    assert ini_get(formats, text, "profile not-written", "region") == (None, False)


@pytest.mark.parametrize(
    ("text", "section", "key", "expected"),
    [
        ("[profile  dev]\nregion = eu-west-1\n", "profile dev", "region", "eu-west-1"),
        ("[dev]\nREGION = x\n", "dev", "region", "x"),  # keys are case-insensitive
        ("[dev]\nregion: x\n", "dev", "region", "x"),
        ("[dev]\n  # indented comment\nregion = x\n", "dev", "region", "x"),
        ("[dev]\nregion = a\nregion = b\n", "dev", "region", "b"),
        ("[dev]\ns3 = \n  addressing_style = path\nregion = r\n", "dev", "s3.addressing_style", "path"),
        ("[dev]\ns3 = \n  addressing_style = path\nregion = r\n", "dev", "region", "r"),
        ("[dev]\ns3 = x\n", "dev", "s3.addressing_style", None),  # not a nested block
        ("[a]\nregion = 1\n[b]\nregion = 2\n", "b", "region", "2"),
        ("[dev]\r\nregion = crlf\r\n", "dev", "region", "crlf"),
        ("[dev]\nregion = has = equals\n", "dev", "region", "has = equals"),
        ("[dev]\nno separator here\nregion = x\n", "dev", "region", "x"),
    ],
)
def test_config_file_cases(formats: Any, text: str, section: str, key: str, expected: str | None) -> None:
    assert ini_get(formats, text, section, key)[0] == expected


# ---- JSON ----------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
# (a member is asked for by a C string: a name with a NUL in it cannot be asked for,
# "\x00" would be ""; nor is a lone surrogate text, which UTF-8 cannot hold, and
# which the reader refuses as an escape: see the test after the next)
KEYS = st.sampled_from(["AccessKeyId", "SecretAccessKey", "Token", "Expiration", "Version"]) | st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8
)


def expected_member(document: dict[str, Any], key: str) -> str | None:
    if key not in document:
        return None
    value = document[key]
    if isinstance(value, str):
        return value if "\x00" not in value else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return None


@given(
    document=st.dictionaries(KEYS, VALUES, max_size=6),
    key=KEYS,
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
)
@example(document={"Token": '\U0001f600 "quoted" \\ / \t'}, key="Token", ascii_only=True, indent=None)
@example(document={"\x00": [], "AccessKeyId": ""}, key="AccessKeyId", ascii_only=False, indent=None)
@example(document={"Token\x00": "no", "Token": "yes"}, key="Token", ascii_only=True, indent=None)
def test_json_members_read_as_python_reads_them(
    formats: Any, document: dict[str, Any], key: str, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only, indent=indent).encode("utf-8", "surrogatepass")
    try:
        text.decode()
    except UnicodeDecodeError:
        return  # a lone surrogate in the generated text: not a document anyone sends
    got = json_get(formats, text, key)
    if got is not None and key in document and isinstance(document[key], float):
        assert float(got) == document[key]
    else:
        assert got == expected_member(document, key)


@given(text=st.binary(max_size=60) | st.text(alphabet='{}[]":,\\ tfnrue0123456789.-+Ea', max_size=40).map(str.encode))
@example(text=b'{"a": "b"} x')
@example(text=b'{"a": 01}')
@example(text=b'{"a": NaN}')
@example(text=b'{"a": "\\ud800"}')
@example(text=b'{"a": "b",}')
def test_json_that_is_not_one_object_gives_nothing(formats: Any, text: bytes) -> None:
    """Whatever our reader accepts, Python's accepts too, with the same value."""
    for key in ("a", "AccessKeyId"):
        got = json_get(formats, text, key)
        if got is None:
            continue
        document = json.loads(text)
        assert isinstance(document, dict)
        assert got == expected_member(document, key) or float(got) == document[key]


def json_member(formats: Any, document: bytes, key: str) -> bytes | None:
    ffi, lib = formats
    start, n = ffi.new("const char**"), ffi.new("size_t*")
    found = lib.objstore_json_member(document, len(document), key.encode(), start, n)
    return ffi.buffer(start[0], n[0])[:] if found == 1 else None


def json_elements(formats: Any, array: bytes) -> list[bytes] | None:
    ffi, lib = formats
    pos, start, n = ffi.new("size_t*"), ffi.new("const char**"), ffi.new("size_t*")
    out = []
    while (rc := lib.objstore_json_next(array, len(array), pos, start, n)) == 1:
        out.append(ffi.buffer(start[0], n[0])[:])
    return out if rc == 0 else None


@given(
    document=st.dictionaries(KEYS, VALUES | st.lists(VALUES | st.dictionaries(KEYS, VALUES), max_size=4), max_size=6),
    key=KEYS,
    indent=st.sampled_from([None, 0, 2]),
)
@example(document={"items": [{"name": "a/b c"}, {"name": "\u00e9"}], "prefixes": []}, key="items", indent=None)
def test_json_members_and_elements_are_the_text_python_reads(
    formats: Any, document: dict[str, Any], key: str, indent: int | None
) -> None:
    """A listing's arrays are walked element by element: each member's text,
    and each element's, parses to what Python parses the whole to; a string
    element decodes as Python decodes it."""
    text = json.dumps(document, indent=indent).encode()
    member = json_member(formats, text, key)
    if key not in document:
        assert member is None
        return
    assert member is not None and json.loads(member) == document[key]
    if isinstance(document[key], list):
        elements = json_elements(formats, member)
        assert elements is not None and [json.loads(e) for e in elements] == document[key]
        for element, value in zip(elements, document[key], strict=True):
            if isinstance(value, str) and "\x00" not in value:
                assert taken(formats, formats[1].objstore_json_string(element, len(element))) == value


def test_a_lone_surrogate_escape_makes_a_document_malformed(formats: Any) -> None:
    """JSON may escape a lone surrogate ("\\ud800"), which is no character
    and has no UTF-8: the reader refuses the whole document, as it does any
    other malformed one, rather than answer from part of it. A pair is one
    character, read as Python reads it."""
    assert json_member(formats, b'{"a": 1, "\\ud800": 2}', "a") is None
    assert json_member(formats, b'{"a": "\\udc00"}', "a") is None
    paired = json.dumps({"a": "\U0001f600", "\U0001f600": 2}).encode()
    assert json_member(formats, paired, "\U0001f600") == b"2"
    assert json.loads(json_member(formats, paired, "a") or b"") == "\U0001f600"


def test_json_nesting_is_bounded(formats: Any) -> None:
    deep = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b', "b": "x"}'
    assert json_get(formats, deep, "b") is None  # refused, not a stack overflow
    assert json_get(formats, b'{"a": ' + b"[" * 50 + b"]" * 50 + b', "b": "x"}', "b") == "x"


# ---- times ---------------------------------------------------------------------------------


@given(
    moment=st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(timezone.utc)
    ),
    offset_minutes=st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
    style=st.sampled_from(["Z", "offset", "offset-colon", "fraction"]),
)
@example(moment=datetime(6326, 1, 1, 0, 0, 0, 999985, tzinfo=timezone.utc), offset_minutes=0, style="Z")
def test_times_read_as_datetime_reads_them(formats: Any, moment: datetime, offset_minutes: int, style: str) -> None:
    _, lib = formats
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    if style == "Z":
        text = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    elif style == "fraction":
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    else:
        text = local.isoformat(timespec="seconds")
        if style == "offset":
            text = text[:-3] + text[-2:]
    # Whole seconds since the epoch, exactly: a float timestamp rounds up
    # near year 6000 (CI found 6326-01-01T00:00:00.999985 as ...401).
    expected = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(seconds=1)
    assert lib.objstore_parse_time(text.encode()) == expected


def parse_ns(formats: Any, text: str) -> int | None:
    ffi, lib = formats
    out = ffi.new("int64_t*")
    return int(out[0]) if lib.objstore_parse_time_ns(text.encode(), out) == 0 else None


@given(
    moment=st.datetimes(
        min_value=datetime(1678, 1, 1), max_value=datetime(2262, 4, 10), timezones=st.just(timezone.utc)
    ),
    style=st.sampled_from(["Z", "fraction", "millis", "offset"]),
)
def test_times_in_nanoseconds_keep_their_fraction(formats: Any, moment: datetime, style: str) -> None:
    """The listing times of S3 ("...T10:15:52.070Z") keep their fraction:
    nanoseconds as datetime reads the text, whole microseconds here."""
    if style == "Z":
        text, moment = moment.strftime("%Y-%m-%dT%H:%M:%SZ"), moment.replace(microsecond=0)
    elif style == "millis":
        moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    elif style == "offset":
        text = moment.astimezone(timezone(timedelta(hours=-5, minutes=-30))).isoformat()
    else:
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expected = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000
    assert parse_ns(formats, text) == expected
    assert lib_seconds(formats, text) == expected // 10**9  # the same time, the fraction dropped


def lib_seconds(formats: Any, text: str) -> int:
    return int(formats[1].objstore_parse_time(text.encode()))


def test_times_in_nanoseconds_cut_digits_past_the_ninth_and_refuse_what_int64_cannot_hold(formats: Any) -> None:
    assert parse_ns(formats, "1970-01-01T00:00:01.1234567891234Z") == 1_123_456_789
    assert parse_ns(formats, "1970-01-01T00:00:00.5Z") == 500_000_000
    assert parse_ns(formats, "1969-12-31T23:59:59.5Z") == -500_000_000
    assert parse_ns(formats, "2262-04-12T00:00:00Z") is None  # past 2^63 ns
    assert parse_ns(formats, "1677-09-20T00:00:00Z") is None
    assert lib_seconds(formats, "2262-04-12T00:00:00Z") > 0  # seconds hold it
    assert parse_ns(formats, "2026-11-23T10:00:00.Z") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2026-11-23",
        "2026-13-01T00:00:00Z",
        "2026-11-23T25:00:00Z",
        "2026-11-23T10:00:00Zjunk",
        "2026-11-23T10:00:00.Z",
        "soon",
    ],
)
def test_times_that_are_not_times_give_minus_one(formats: Any, text: str) -> None:
    _, lib = formats
    assert lib.objstore_parse_time(text.encode()) == -1
