"""``python -m asyncfs``: show the loaded plugins and put them to work.

Lists every plugin and scheme with its metadata and the ops it offers, then
writes a small dataset to mem:// and to a temporary file:// folder through the
plugins, reads it back, globs, copies and deletes it, and reports how long
each step took.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

from . import __version__, core_abi_version, default_registry
from .filesystem import FILESYSTEM_OPS, ModularFileSystem

T = TypeVar("T")


def _timed(label: str, count: int, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    rate = f"{count / elapsed:,.0f}/s" if elapsed > 0 else "-"
    print(f"    {label:<28} {count:>6} in {elapsed * 1000:8.1f} ms  ({rate})")
    return result


def _round_trip(fs: ModularFileSystem, root: str, files: int, size: int) -> None:
    payloads = [hashlib.sha256(str(i).encode()).digest() * (size // 32) for i in range(files)]
    uris = [f"{root}/shard-{i // 50:02d}/part-{i:05d}.bin" for i in range(files)]
    fs.recursively_create_dir(root)
    for shard in sorted({uri.rsplit("/", 1)[0] for uri in uris}):
        fs.create_dir(shard)

    def write() -> None:
        for uri, data in zip(uris, payloads, strict=True):
            fs.write_file(uri, data)

    def read() -> int:
        return sum(fs.read_file(uri) == data for uri, data in zip(uris, payloads, strict=True))

    _timed("write files", files, write)
    verified = _timed("read back and verify", files, read)
    assert verified == files, f"{files - verified} files read back wrong"
    exists = _timed("files_exist (one call)", files, lambda: fs.files_exist(uris))
    assert all(exists)
    matches = _timed("glob shard-*/part-*.bin", files, lambda: fs.get_matching_paths(f"{root}/shard-*/part-*.bin"))
    assert len(matches) == files, matches[:3]

    def copy_shard() -> None:
        for uri in uris[:50]:
            fs.copy_file(uri, uri + ".copy")

    _timed("copy one shard", 50, copy_shard)
    _timed("delete recursively", files + 50, lambda: fs.delete_recursively(root))
    print(f"    {files} files of {size} bytes verified; {root} removed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyncfs", description=__doc__)
    parser.add_argument("--files", type=int, default=1000, help="files per scheme (default 1000)")
    parser.add_argument("--size", type=int, default=4096, help="bytes per file (default 4096)")
    parser.add_argument("--plugin", action="append", default=[], help="also load this plugin library")
    args = parser.parse_args(argv)

    registry = default_registry()
    for library in args.plugin:
        registry.load_plugin(library)
    print(f"asyncfs {__version__}, core ABI {core_abi_version()}")
    print(f"  {'scheme':<8} {'plugin':<8} {'version':<8} {'ops offered':<12} library")
    for info in registry.plugins():
        meta = info.metadata
        for scheme in info.schemes:
            fs = registry.get(scheme)
            offered = f"{len(fs.offered_ops())}/{len(FILESYSTEM_OPS)}"
            print(f"  {scheme or '(bare)':<8} {meta.name:<8} {meta.version or '-':<8} {offered:<12} {meta.library}")

    with tempfile.TemporaryDirectory(prefix="asyncfs-main-") as local:
        for root in ("mem:///asyncfs-main", f"file://{local}/dataset"):
            print(f"\n  {root}")
            _round_trip(registry.for_uri(root), root, args.files, args.size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
