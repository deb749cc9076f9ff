"""Marshalling between Python values and the plugin ABI's C values.

Strings go in as UTF-8 (undecodable bytes of local paths round-trip through
surrogateescape); strings and arrays a plugin allocates come back as Python
values and are released with that plugin's own free function.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from itertools import starmap
from typing import Any, TypeVar

from .binding import CData, ffi, runtime
from .speedups import SPEEDUPS

__all__ = [
    "Option",
    "OptionValue",
    "cut_files",
    "decode",
    "encode",
    "free_options",
    "made",
    "option_from_c",
    "option_to_c",
    "take_string",
    "unpack_strings",
]


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# cut_files in C (an extension built before it existed, found through
# ASYNCFS_LIB_DIR, has none)
_cut = getattr(SPEEDUPS, "cut", None)


def _cut_files(buffer: CData, sizes: CData, count: int) -> list[bytes]:
    at = 0
    files = []
    for size in ffi.unpack(sizes, count):
        files.append(ffi.unpack(buffer + at, size))
        at += size
    return files


def cut_files(buffer: CData, sizes: CData, count: int) -> list[bytes]:
    """The first count files of a bulk read, which C left one after another
    in buffer (a ``char *``), cut by their sizes (an ``int64_t`` array): in
    C when the extension was built (``asyncfs._speedups``: 0.2 µs a file
    less, of the 0.8 that the Python around a bulk read of 4 KiB files took)."""
    if count < 0 or count > len(sizes):
        raise ValueError(f"{count} files of {len(sizes)}")
    if _cut is None:
        return _cut_files(buffer, sizes, count)
    return _cut(int(ffi.cast("uintptr_t", buffer)), int(ffi.cast("uintptr_t", sizes)), count)  # type: ignore[no-any-return]


T = TypeVar("T")

# made in C (an extension built before it existed has none)
_made = getattr(SPEEDUPS, "made", None)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
            raise TypeError(f"{cls.__name__} is not a dataclass whose __init__ only sets its fields")
        names = _FIELDS[cls] = tuple(field.name for field in dataclasses.fields(cls))
    return names


def made(cls: type[T], rows: list[tuple[Any, ...]]) -> list[T]:
    """``cls(*row)`` for each row, where cls is a dataclass whose
    ``__init__`` only sets its fields: in C when the extension was built,
    which sets them as a frozen dataclass's ``__init__`` does without
    calling it (three fields: 0.1 µs an instance, against 0.43)."""
    if _made is None:
        return list(starmap(cls, rows))
    return _made(cls, _field_names(cls), rows)  # type: ignore[no-any-return]


def refuse_text(data: object, op: str, uri: str) -> None:
    """A str where bytes are written is a mistake that must say so: the
    caller meant to encode it, or to open the file in text mode."""
    if isinstance(data, str):
        raise TypeError(
            f"{op} {uri}: data must be bytes-like, not str; encode it (data.encode()) "
            "or open the file in a text mode ('w', 'a')"
        )


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def take_string(ptr: CData, free: CData) -> str | None:
    """Copy a plugin-allocated C string and free it; NULL gives None."""
    if ptr == ffi.NULL:
        return None
    try:
        return decode(ffi.string(ptr))
    finally:
        free(ptr)


def unpack_strings(array: CData, count: int, free: CData) -> list[str]:
    """The count strings of a plugin-allocated array, all freed, in two calls
    into C whatever the count (the runtime packs them into one buffer)."""
    if array == ffi.NULL or count <= 0:
        if array != ffi.NULL:
            free(array)
        return []
    rt = runtime()
    total = ffi.new("size_t*")
    packed = rt.ASYNCFS_PackStrings(array, count, free, total)
    if packed == ffi.NULL:
        raise MemoryError("no memory to collect a plugin's strings")
    try:
        raw: bytes = ffi.unpack(packed, int(total[0]))
    finally:
        rt.ASYNCFS_Free(packed)
    return raw[:-1].decode("utf-8", "surrogateescape").split("\0")


# TF_FileStatistics: length and mtime_nsec (int64), is_directory (bool),
# padding to the struct's size.
_STATISTICS = struct.Struct(f"=qq?{ffi.sizeof('TF_FileStatistics') - 17}x")


def unpack_statistics(array: CData, count: int) -> list[tuple[int, int, bool]]:
    """(length, mtime_nsec, is_directory) of each of count plugin-filled
    ``TF_FileStatistics``, read in one pass over their bytes (the caller
    frees the array)."""
    if array == ffi.NULL or count <= 0:
        return []
    return list(_STATISTICS.iter_unpack(ffi.buffer(array, count * _STATISTICS.size)))


OptionValue = int | float | bytes


@dataclass(frozen=True)
class Option:
    """A configuration option of a filesystem: its name, description,
    whether it applies per file, and its values (ints, floats or bytes)."""

    name: str
    values: tuple[OptionValue, ...]
    description: str = ""
    per_file: bool = False

    @property
    def value(self) -> OptionValue:
        """The single value of a one-value option."""
        if len(self.values) != 1:
            raise ValueError(f"option {self.name!r} holds {len(self.values)} values")
        return self.values[0]


_INT, _REAL, _BUFFER = 0, 1, 2


def option_from_c(raw: CData) -> Option:
    value = raw.value
    values: list[OptionValue] = []
    if value != ffi.NULL:
        for i in range(int(value.num_values)):
            item = value.values[i]
            if value.type_tag == _INT:
                values.append(int(item.int_val))
            elif value.type_tag == _REAL:
                values.append(float(item.real_val))
            else:
                values.append(ffi.unpack(item.buffer_val.buf, int(item.buffer_val.buf_length)))
    return Option(
        name=decode(ffi.string(raw.name)) if raw.name != ffi.NULL else "",
        description=decode(ffi.string(raw.description)) if raw.description != ffi.NULL else "",
        per_file=bool(raw.per_file),
        values=tuple(values),
    )


def free_options(options: CData, count: int, free: CData) -> None:
    """Free what a plugin allocated for count options, deep, then the array."""
    for i in range(count):
        raw = options[i]
        value = raw.value
        if value != ffi.NULL:
            if value.type_tag == _BUFFER and value.values != ffi.NULL:
                for j in range(int(value.num_values)):
                    if value.values[j].buffer_val.buf != ffi.NULL:
                        free(value.values[j].buffer_val.buf)
            if value.values != ffi.NULL:
                free(value.values)
            free(value)
        for ptr in (raw.name, raw.description):
            if ptr != ffi.NULL:
                free(ptr)
    free(options)


def option_to_c(option: Option) -> tuple[CData, list[CData]]:
    """A core-owned TF_Filesystem_Option and the buffers it points into."""
    if not option.values:
        raise ValueError(f"option {option.name!r} needs at least one value")
    kinds = {type(v) for v in option.values}
    if len(kinds) != 1 or not kinds <= {int, float, bytes}:
        raise TypeError(f"option {option.name!r}: values must all be int, all float or all bytes")
    kind = kinds.pop()
    keep: list[CData] = []
    raw = ffi.new("TF_Filesystem_Option*")
    name = ffi.new("char[]", encode(option.name))
    description = ffi.new("char[]", encode(option.description))
    value = ffi.new("TF_Filesystem_Option_Value*")
    values = ffi.new("TF_Filesystem_Option_Value_Union[]", len(option.values))
    keep += [name, description, value, values]
    for i, v in enumerate(option.values):
        if kind is int:
            values[i].int_val = v
        elif kind is float:
            values[i].real_val = v
        else:
            assert isinstance(v, bytes)
            buf = ffi.new("char[]", v)
            keep.append(buf)
            values[i].buffer_val.buf = buf
            values[i].buffer_val.buf_length = len(v)
    value.type_tag = {int: _INT, float: _REAL, bytes: _BUFFER}[kind]
    value.num_values = len(option.values)
    value.values = values
    raw.name = name
    raw.description = description
    raw.per_file = int(option.per_file)
    raw.value = value
    return raw, keep
