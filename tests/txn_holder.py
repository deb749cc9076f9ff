"""Holds one transaction open for a test in another process.

    python txn_holder.py ROOT native|generic FILE

Begins a transaction on ROOT (printing "held", or "conflict" when another
process holds an overlapping root), writes FILE in it, then waits for a
line on standard input: "commit" or "abort". Prints "done" at the end.
"""

from __future__ import annotations

import asyncio
import sys

import asyncfs


async def main(root: str, native: bool, name: str) -> None:
    async with asyncfs.Env(workers=2) as env:
        txn = env.transaction(root, native=native, timeout=0.5)
        try:
            await txn.begin()
        except asyncfs.TransactionConflictError:
            print("conflict", flush=True)
            return
        print("held", flush=True)
        await txn.write_file(name, f"written by {root}".encode())
        order = await asyncio.to_thread(sys.stdin.readline)
        if order.strip() == "commit":
            await txn.commit()
        else:
            await txn.abort()
        print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] == "native", sys.argv[3]))
