"""How the s3 plugin cuts objects into parts (plugins/s3/s3_parts.h),
checked against S3's limits without uploading terabytes: the header is
compiled on its own and called through cffi."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cffi
import pytest
from conftest import REPO, build_plugin
from hypothesis import given
from hypothesis import strategies as st

MiB, GiB, TiB = 1 << 20, 1 << 30, 1 << 40
MAX_PARTS, MIN_PART, MAX_PART, MAX_OBJECT = 10_000, 5 * MiB, 5 * GiB, 5 * TiB
HEADER = REPO / "plugins" / "s3" / "s3_parts.h"

CDEF = """
int64_t upload_part_size(int64_t part_size, int number);
int64_t copy_part_size(int64_t part_size, int64_t size);
"""
SOURCE = """
#include "s3_parts.h"
int64_t upload_part_size(int64_t part_size, int number) { return s3_upload_part_size(part_size, number); }
int64_t copy_part_size(int64_t part_size, int64_t size) { return s3_copy_part_size(part_size, size); }
"""


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not HEADER.exists():
        pytest.skip("the plugin sources are not here (an installed wheel)")
    folder: Path = tmp_path_factory.mktemp("parts")
    (folder / "parts.c").write_text(SOURCE)
    engine = REPO / "plugins" / "objstore"  # objstore_parts.h, the growing part sizes
    library = build_plugin(
        folder / "parts.c", folder / "libparts.so", flags=("-I", str(HEADER.parent), "-I", str(engine))
    )
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    yield ffi.dlopen(str(library))


@pytest.mark.parametrize("part_size", [MIN_PART, 8 * MiB, 64 * MiB, GiB, MAX_PART])
def test_a_written_stream_reaches_5_tib_in_10000_valid_parts(parts: object, part_size: int) -> None:
    """The writer used to refuse part 8193 (64 GiB at 8 MiB parts)."""
    sizes = [parts.upload_part_size(part_size, n) for n in range(1, MAX_PARTS + 1)]  # type: ignore[attr-defined]
    assert all(MIN_PART <= size <= MAX_PART for size in sizes)
    assert sizes == sorted(sizes) and sizes[0] == part_size
    assert sum(sizes) >= MAX_OBJECT


@given(
    size=st.integers(min_value=1, max_value=MAX_OBJECT),
    part_size=st.integers(min_value=MIN_PART, max_value=MAX_PART),
)
def test_a_copy_of_any_object_takes_at_most_10000_parts(parts: object, size: int, part_size: int) -> None:
    """Copies above 10000 parts sent invalid part numbers."""
    chosen = parts.copy_part_size(part_size, size)  # type: ignore[attr-defined]
    assert part_size <= chosen <= MAX_PART
    assert -(-size // chosen) <= MAX_PARTS
    assert chosen == part_size or chosen % MiB == 0
