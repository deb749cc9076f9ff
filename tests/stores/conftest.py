"""What the store tests share: a fresh bucket on the session's gateway."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import asyncfs


@pytest.fixture
def bucket(s3_fs: asyncfs.ModularFileSystem) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3_fs.create_dir(f"s3://{name}")
    yield name
    s3_fs.delete_recursively(f"s3://{name}")
