"""fsspec's own test suite for implementations (``fsspec.tests.abstract``:
copy, get, put, open, pipe) run against the bridge on file://, mem:// and,
with Ceph, s3://."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fsspec", reason="fsspec is not installed (pip install 'asyncfs[fsspec]')")

from fsspec.tests import abstract
from support.ceph_gateway import Gateway

from asyncfs.fsspec import AsyncfsFileSystem, filesystem_class

SUITES = {
    "Copy": abstract.AbstractCopyTests,
    "Get": abstract.AbstractGetTests,
    "Put": abstract.AbstractPutTests,
    "Open": abstract.AbstractOpenTests,
    "Pipe": abstract.AbstractPipeTests,
}


class FileFixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls) -> AsyncfsFileSystem:
        return filesystem_class("file")()

    @pytest.fixture
    def fs_path(self, tmpdir: Any) -> str:
        return str(tmpdir)


class MemFixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls) -> AsyncfsFileSystem:
        return filesystem_class("mem")()

    @pytest.fixture
    def fs_path(self, fs: AsyncfsFileSystem) -> Iterator[str]:
        path = f"fsspec-{uuid.uuid4().hex}"
        fs.makedirs(path)
        yield path
        fs.rm(path, recursive=True)


class S3Fixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls, s3_gateway: Gateway) -> Iterator[AsyncfsFileSystem]:
        fs = filesystem_class("s3")(
            endpoint=s3_gateway.endpoint,
            access_key_id=s3_gateway.access_key,
            secret_access_key=s3_gateway.secret_key,
            region=s3_gateway.region,
            path_style=1,
            skip_instance_cache=True,
        )
        if not fs.exists("asyncfs-fsspec"):
            fs.mkdir("asyncfs-fsspec")
        yield fs

    @pytest.fixture
    def fs_path(self, fs: AsyncfsFileSystem) -> Iterator[str]:
        path = f"asyncfs-fsspec/{uuid.uuid4().hex}"
        yield path
        if fs.exists(path):
            fs.rm(path, recursive=True)


for _store, _fixtures in {"File": FileFixtures, "Mem": MemFixtures, "S3": S3Fixtures}.items():
    for _name, _suite in SUITES.items():
        _cls = f"Test{_store}{_name}"
        globals()[_cls] = type(_cls, (_suite, _fixtures), {"__module__": __name__})
