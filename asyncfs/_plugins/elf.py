"""The strings of an ELF shared library's dynamic tables, read and renamed in
place: just what the loader needs to load a plugin from a copy whose imports
and dependencies name asyncfs's runtime (:mod:`.copies`).

A rename never moves anything: the new string is no longer than the old one
and is written over it, NUL-padded. Linkers share storage between strings (a
symbol name may be the tail of a longer one), so a rename that would change a
string anything else points into is refused with :class:`ElfError`.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Iterator, Mapping

__all__ = ["DynamicTables", "ElfError"]

_SHT_DYNAMIC, _SHT_DYNSYM = 6, 11
_SHT_GNU_VERDEF, _SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 14, 15, 29
_DYNAMIC_STRINGS = {_DT_NEEDED: "needed", _DT_SONAME: "soname", _DT_RPATH: "rpath", _DT_RUNPATH: "runpath"}


class ElfError(ValueError):
    """The file is not an ELF shared library this module can read, or a
    rename cannot be done in place."""


class DynamicTables:
    """The dynamic string table of one ELF file and every reference into it:
    the dependencies (``DT_NEEDED``), search paths, the dynamic symbols and
    the version tables."""

    def __init__(self, data: bytes) -> None:
        try:
            self._read(data)
        except (struct.error, IndexError, OverflowError) as exc:
            raise ElfError(f"truncated or malformed ELF file ({exc})") from None

    @property
    def needed(self) -> tuple[str, ...]:
        """The libraries the file depends on, in order."""
        return tuple(self._text(offset) for offset in self._needed)

    @property
    def search_path(self) -> tuple[str, ...]:
        """The folders its dependencies are searched in first (``DT_RUNPATH``,
        else ``DT_RPATH``), unexpanded."""
        return tuple(entry for offset in self._paths for entry in self._text(offset).split(":") if entry)

    @property
    def imports(self) -> frozenset[str]:
        """The names of the symbols it needs from other libraries."""
        return frozenset(self._text(offset) for offset, kinds in self._refs.items() if kinds == {"import"})

    def renamed(self, *, needed: Mapping[str, str], imports: Mapping[str, str]) -> bytes:
        """The file with the dependencies in ``needed`` and the imported
        symbols in ``imports`` renamed (old name to new, the new no longer)."""
        out = bytearray(self._data)
        for renames, kinds in ((needed, {"needed", "version file"}), (imports, {"import"})):
            for offset, kinds_here in self._refs.items():
                if kinds_here & kinds and (old := self._text(offset)) in renames:
                    self._rename(out, offset, old, renames[old], kinds)
        return bytes(out)

    # ---- reading -----------------------------------------------------------

    def _read(self, data: bytes) -> None:
        if data[:4] != b"\x7fELF":
            raise ElfError("not an ELF file")
        elf_class, encoding = data[4], data[5]
        if elf_class not in (1, 2) or encoding not in (1, 2):
            raise ElfError(f"unknown ELF class {elf_class} or data encoding {encoding}")
        end = "<" if encoding == 1 else ">"
        wide = elf_class == 2
        if wide:
            (shoff,) = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
            section = struct.Struct(end + "IIQQQQIIQQ")
            symbol, name_at, shndx_at = struct.Struct(end + "IBBHQQ"), 0, 3
            dynamic = struct.Struct(end + "qQ")
        else:
            (shoff,) = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
            section = struct.Struct(end + "IIIIIIIIII")
            symbol, name_at, shndx_at = struct.Struct(end + "IIIBBH"), 0, 5
            dynamic = struct.Struct(end + "iI")
        if shnum == 0 or shentsize < section.size:
            raise ElfError("the file has no section headers (stripped with sstrip?)")
        # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
        sections = [section.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        by_type = {s[1]: s for s in reversed(sections)}
        if _SHT_DYNAMIC not in by_type:
            raise ElfError("the file has no dynamic section (not a shared library)")
        strtab = sections[by_type[_SHT_DYNAMIC][6]]
        self._data = data
        self._strings_at = strtab[4]
        self._strings = data[strtab[4] : strtab[4] + strtab[5]]
        if len(self._strings) != strtab[5]:
            raise ElfError("the dynamic string table runs past the end of the file")
        refs: dict[int, set[str]] = {}
        self._needed: list[int] = []
        runpath: list[int] = []
        rpath: list[int] = []
        for tag, value in _entries(data, by_type[_SHT_DYNAMIC], dynamic):
            kind = _DYNAMIC_STRINGS.get(tag)
            if kind is not None:
                refs.setdefault(value, set()).add(kind)
                {_DT_NEEDED: self._needed, _DT_RUNPATH: runpath, _DT_RPATH: rpath}.get(tag, []).append(value)
        self._paths = runpath or rpath
        if _SHT_DYNSYM in by_type:
            for entry in _entries(data, by_type[_SHT_DYNSYM], symbol)[1:]:
                if entry[name_at]:
                    refs.setdefault(entry[name_at], set()).add("import" if entry[shndx_at] == 0 else "symbol")
        if _SHT_GNU_VERNEED in by_type:
            _version_needs(data, end, by_type[_SHT_GNU_VERNEED], refs)
        if _SHT_GNU_VERDEF in by_type:
            _version_definitions(data, end, by_type[_SHT_GNU_VERDEF], refs)
        for offset in refs:
            self._text(offset)  # every reference lies inside the table
        self._refs = refs
        self._offsets = sorted(refs)

    def _text(self, offset: int) -> str:
        end = self._strings.find(b"\0", offset) if offset < len(self._strings) else -1
        if end < 0:
            raise ElfError(f"a string at offset {offset} runs past the dynamic string table")
        return self._strings[offset:end].decode("utf-8", "surrogateescape")

    # ---- renaming ------------------------------------------------------------

    def _rename(self, out: bytearray, offset: int, old: str, new: str, kinds: set[str]) -> None:
        encoded = new.encode("utf-8", "surrogateescape")
        size = len(old.encode("utf-8", "surrogateescape"))
        if len(encoded) > size or b"\0" in encoded:
            raise ElfError(f"cannot rename {old!r} to {new!r} in place: the new name is longer")
        other = self._refs[offset] - kinds
        if other:
            raise ElfError(f"cannot rename {old!r}: the same string also names a {sorted(other)[0]}")
        # anything else pointing into the string, or at a string ending in it
        start = self._strings.rfind(b"\0", 0, offset) + 1
        first = bisect_left(self._offsets, start)
        for shared in self._offsets[first : bisect_left(self._offsets, offset + size + 1)]:
            if shared != offset:
                raise ElfError(f"cannot rename {old!r}: its storage is shared with {self._text(shared)!r}")
        at = self._strings_at + offset
        out[at : at + size] = encoded.ljust(size, b"\0")


def _entries(data: bytes, section: tuple[int, ...], layout: struct.Struct) -> list[tuple[int, ...]]:
    offset, size = section[4], section[5]
    if offset + size > len(data):
        raise ElfError("a dynamic table runs past the end of the file")
    usable = size - size % layout.size
    return list(layout.iter_unpack(data[offset : offset + usable]))


def _chain(data: bytes, at: int, count: int, layout: str) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(offset, fields) of the entries of a version table's linked list:
    at most count, each one's last field the distance to the next (0 ends
    it, whatever count says)."""
    for _ in range(count):
        fields = struct.unpack_from(layout, data, at)
        yield at, fields
        if fields[-1] == 0:
            return
        at += fields[-1]


def _version_needs(data: bytes, end: str, section: tuple[int, ...], refs: dict[int, set[str]]) -> None:
    for at, (_, count, file, aux, _) in _chain(data, section[4], section[7], end + "HHIII"):  # sh_info entries
        refs.setdefault(file, set()).add("version file")
        for _, (_, _, _, name, _) in _chain(data, at + aux, count, end + "IHHII"):
            refs.setdefault(name, set()).add("version")


def _version_definitions(data: bytes, end: str, section: tuple[int, ...], refs: dict[int, set[str]]) -> None:
    for at, (_, _, _, count, _, aux, _) in _chain(data, section[4], section[7], end + "HHHHIII"):
        for _, (name, _) in _chain(data, at + aux, count, end + "II"):
            refs.setdefault(name, set()).add("version")
