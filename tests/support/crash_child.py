"""Runs transactions on one root until killed (see test_transaction_crash).

Each transaction reads the committed manifest through the transaction,
deletes some files, writes new or replaced ones, and writes the manifest of
every file's checksum, so that any committed state can be checked whole.

    python crash_child.py ROOT native|generic SEED
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys

import asyncfs

NAMES = ["a.bin", "b.bin", "c/d.bin", "c/e/f.bin", "g.bin", "h/i.bin", "h/j.bin"]


async def main(root: str, native: bool, seed: int) -> None:
    rng = random.Random(seed)
    async with asyncfs.Env(workers=2) as env:
        print("ready", flush=True)
        while True:
            async with env.transaction(root, native=native) as txn:
                try:
                    manifest = json.loads(await txn.read_file("MANIFEST.json"))
                except FileNotFoundError:
                    manifest = {"generation": 0, "files": {}}
                files = manifest["files"]
                for name in rng.sample(sorted(files), k=min(len(files), rng.randint(0, 2))):
                    await txn.rm(name)
                    del files[name]
                for _ in range(rng.randint(1, 4)):
                    name = rng.choice(NAMES)
                    data = rng.randbytes(rng.randint(0, 32 << 10))
                    await txn.write_file(name, data)
                    files[name] = hashlib.sha256(data).hexdigest()
                manifest["generation"] += 1
                await txn.write_file("MANIFEST.json", json.dumps(manifest).encode())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] == "native", int(sys.argv[3])))
