"""Plugin calls release the GIL, and the built-in plugins are thread-safe."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import asyncfs


def test_two_threads_are_inside_plugin_calls_at_once(tmp_path: Path) -> None:
    """Opening a FIFO blocks until the other end opens it. One thread opens
    it for reading and one for writing, both through the posix plugin: each
    call can only return once the other thread is inside its own call, which
    is impossible if a call held the GIL (the test would hang, and fail on
    the join timeout instead)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fs = asyncfs.get_filesystem("file://")
    results: dict[str, object] = {}
    written = threading.Event()

    def reader() -> None:
        try:
            with fs.new_random_access_file(str(fifo)):
                results["reader"] = "opened"
                written.wait(timeout=30)  # keep our end open for the append
        except Exception as exc:
            results["reader"] = exc

    def writer() -> None:
        try:
            with fs.new_writable_file(str(fifo)) as f:
                results["writer"] = "opened"
                f.append(b"through the pipe")
        except Exception as exc:
            results["writer"] = exc
        finally:
            written.set()

    threads = [threading.Thread(target=reader, daemon=True), threading.Thread(target=writer, daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {"reader": "opened", "writer": "opened"}


@pytest.mark.parametrize("scheme", ["mem", "file"])
def test_concurrent_writers_and_readers(scheme: str, tmp_path: Path) -> None:
    fs = asyncfs.get_filesystem(f"{scheme}://")
    base = f"mem:///threads-{os.getpid()}" if scheme == "mem" else f"file://{tmp_path}"
    fs.recursively_create_dir(base)

    def work(i: int) -> bytes:
        uri = f"{base}/d{i % 8}/f{i}"
        fs.recursively_create_dir(f"{base}/d{i % 8}")
        payload = bytes([i % 256]) * (1000 + i)
        fs.write_file(uri, payload)
        with fs.new_appendable_file(uri) as f:
            f.append(b"!")
        return fs.read_file(uri)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(400)))
    for i, data in enumerate(results):
        assert data == bytes([i % 256]) * (1000 + i) + b"!"
    assert len(fs.get_matching_paths(f"{base}/d*/f*")) == 400
    assert fs.delete_recursively(base) == (0, 0)


def test_memory_region_survives_rewrite_and_delete() -> None:
    """mem:// regions are the content itself, copy-on-write: rewriting or
    deleting the file leaves an open region's bytes as they were."""
    fs = asyncfs.get_filesystem("mem://")
    uri = f"mem:///region-{os.getpid()}"
    fs.write_file(uri, b"original")
    region = fs.new_read_only_memory_region_from_file(uri)
    fs.write_file(uri, b"replaced!")
    with fs.new_appendable_file(uri) as f:
        f.append(b" and more")
    fs.delete_file(uri)
    assert bytes(region.data) == b"original"
    region.close()
    with pytest.raises(ValueError):
        region.data  # noqa: B018


def test_copy_shares_until_written() -> None:
    fs = asyncfs.get_filesystem("mem://")
    src, dst = f"mem:///cow-{os.getpid()}-a", f"mem:///cow-{os.getpid()}-b"
    fs.write_file(src, b"shared")
    fs.copy_file(src, dst)
    with fs.new_appendable_file(dst) as f:
        f.append(b"+dst")
    assert fs.read_file(src) == b"shared"
    assert fs.read_file(dst) == b"shared+dst"
