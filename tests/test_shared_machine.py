"""Safe on a shared machine and on hostile data: what another user of the
machine, a planted file or a hostile answer can make asyncfs do. Each
finding of the shared-machine audit has its regression test here (the CLI's
in tests/test_cli.py, the s3 plugin's in tests/test_s3.py). Tests that need a
second user run as a real one: made with useradd when the suite runs as
root, skipped (saying why) otherwise."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import asyncfs

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env() as environment:
        yield environment


# ---- reads sized by the caller ---------------------------------------------------------


async def test_a_read_of_more_than_memory_holds_gives_what_the_file_has(env: asyncfs.Env, tmp_path: Path) -> None:
    (tmp_path / "ten").write_bytes(b"0123456789")
    file = await env.new_random_access_file(str(tmp_path / "ten"))
    try:
        assert await file.read(0, 2**62) == b"0123456789"
        assert await file.read(3, 2**40) == b"3456789"
        with pytest.raises(asyncfs.OutOfRangeError):
            await file.read(0, 2**62, strict=True)
    finally:
        await file.close()
