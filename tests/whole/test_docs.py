"""Every ``python`` code block of the README and docs/ runs: a doc example
that fails is a failing test.

Each block runs in a fresh interpreter, with top-level ``await`` allowed, in
a namespace that holds the placeholders the prose uses (``env``,
``payload``, ``weights``, ``uris``, ``train_on``, ``options``: the s3
plugin's options for the gateway, ...). Absolute
``file://`` paths move under a temporary folder (made and filled with the
inputs the examples read), ``s3://bucket`` is a bucket on the test gateway,
``http://127.0.0.1:8080/`` the session's nginx, and ``./libmyfs.so`` is the
example plugin, built there.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, build_plugin
from support.ceph_gateway import Gateway
from support.http_servers import HttpServer

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(str(document.relative_to(REPO)), line, match.group(1)))
    return found


RUNNER = r"""
import ast, asyncio, io, json, sys
spec = json.loads(sys.stdin.read())
import asyncfs

async def main():
    env = asyncfs.Env()
    for name, value in spec["s3"].items():
        env.registry.get("s3").set_option(name, value.encode() if isinstance(value, str) else value)
    namespace = {
        "asyncfs": asyncfs, "asyncio": asyncio, "io": io, "env": env,
        "payload": b"payload bytes", "weights": b"weights", "meta": b"{}", "line": b"a line\n",
        "example_bytes": b"an example", "uris": spec["uris"], "train_on": lambda data: None,
        "options": spec["s3"],
    }
    code = compile(spec["code"], spec["name"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        await result
    await env.aclose()

if "asyncio.run(" in spec["code"]:
    exec(compile(spec["code"], spec["name"], "exec"), {"__name__": "__main__"})
else:
    asyncio.run(main())
print("ok")
"""


IMPORTS = re.compile(r"^(?:import|from) ([A-Za-z_][A-Za-z0-9_]*)", re.M)


def missing_module(code: str) -> str | None:
    """The first module a block imports that is not installed (a tool
    the docs show asyncfs inside: Ray, DuckDB, ...), or None."""
    for name in IMPORTS.findall(code):
        if importlib.util.find_spec(name) is None:
            return name
    return None


@pytest.mark.parametrize("block", blocks(), ids=str)
def test_the_example_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    missing = missing_module(block.code)
    if missing is not None:
        pytest.skip(f"{missing} is not installed (the example runs asyncfs inside it)")
    code = re.sub(r"file:///(datasets|ckpt|tmp|data)/", rf"file://{tmp_path}/\1/", block.code)
    # the inputs the examples read
    for i in range(3):
        (tmp_path / "datasets" / f"d0{i}").mkdir(parents=True)
        (tmp_path / "datasets" / f"d0{i}" / "f1.txt").write_text("data")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.csv").write_text("a,b\n1,2\n")
    (tmp_path / "ckpt" / "step-100").mkdir(parents=True)
    (tmp_path / "ckpt" / "step-100" / "stale.tmp").write_text("stale")
    s3: dict[str, str | int] = {}
    if "s3://" in code:
        gateway: Gateway = request.getfixturevalue("s3_gateway")
        bucket = f"docs-{uuid.uuid4().hex[:12]}"
        s3_fs = request.getfixturevalue("s3_fs")
        s3_fs.create_dir(f"s3://{bucket}")
        s3_fs.write_file(f"s3://{bucket}/blob.bin", bytes(range(256)) * 64)
        code = code.replace("s3://bucket/", f"s3://{bucket}/")
        s3 = {
            "endpoint": gateway.endpoint,
            "access_key_id": gateway.access_key,
            "secret_access_key": gateway.secret_key,
            "region": gateway.region,
            "path_style": 1,
        }
    if "gs://" in code:  # Google Cloud Storage: the session's fake-gcs-server
        emulator = request.getfixturevalue("gcs_emulator")
        bucket = f"docs-{uuid.uuid4().hex[:12]}"
        emulator.create_bucket(bucket)
        code = code.replace("my-bucket", bucket).replace("http://127.0.0.1:4443", emulator.endpoint)
    if "az://my-container" in code or "asyncfs+az://" in code:  # Azure: the session's Azurite
        azurite = request.getfixturevalue("azurite")
        container = f"docs-{uuid.uuid4().hex[:12]}"
        request.getfixturevalue("az_fs").create_dir(f"az://{container}")
        root = azurite.endpoint.rsplit("/", 1)[0]  # without the account
        code = code.replace("my-container", container).replace("http://127.0.0.1:10000", root)
    if "http://127.0.0.1:8080/" in code:  # a web server: the session's nginx
        server: HttpServer = request.getfixturevalue("nginx")
        (server.root / "data").mkdir(exist_ok=True)
        (server.root / "data" / "part-0.csv").write_text("a,b\n1,2\n")
        code = code.replace("http://127.0.0.1:8080/", f"{server.url}/")
    if "./libmyfs.so" in code:
        build_plugin(REPO / "plugins/examples/demo_fs.c", tmp_path / "libmyfs.so")
    spec = {
        "code": code,
        "name": str(block),
        "uris": [f"file://{tmp_path}/datasets/d0{i}/f1.txt" for i in range(3)],
        "s3": s3,
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), f"{block} failed:\n{done.stderr[-3000:]}"
