"""Holds one transaction open for a test in another process.

    python txn_holder.py ROOT native|generic FILE [together]

Begins a transaction on ROOT (printing "held", or "conflict" when another
process holds an overlapping root), writes FILE in it, then waits for a
line on standard input: "commit" or "abort". Prints "done" at the end.
With "together", it first prints "ready" and waits for a "go" line, so
that several holders can be released into begin() at the same moment.

Tests drive it through :class:`Holder` and :func:`race`.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys

import asyncfs


async def main(root: str, native: bool, name: str, together: bool) -> None:
    async with asyncfs.Env(workers=2) as env:
        txn = env.transaction(root, native=native, timeout=0.5)
        if together:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
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


class Holder:
    """A transaction held open by another process (this script). With
    together, it waits for :meth:`go` before it begins."""

    def __init__(
        self, root: str, native: bool, name: str, *, environ: dict[str, str] | None = None, together: bool = False
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", __file__, root, "native" if native else "generic", name]
            + (["together"] if together else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(environ or {})},
        )
        self.state = self._line() if not together else ""
        if together:
            assert self._line() == "ready"

    def _line(self, timeout: float = 60) -> str:
        """The holder's next line; a holder silent for timeout seconds is a
        failure (with its threads' stacks, dumped to the test's stderr by
        faulthandler), not a test that never ends."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=10)
            raise AssertionError(f"the transaction holder said nothing for {timeout} s (its stacks are on stderr)")
        return self.process.stdout.readline().strip()

    def _say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def go(self) -> None:
        self._say("go")

    def outcome(self) -> str:
        """After go(): "held" or "conflict"."""
        self.state = self._line()
        return self.state

    def finish(self, order: str = "commit") -> None:
        assert self.process.stdin is not None
        with self.process:
            if self.state == "held":
                self._say(order)
                assert self._line() == "done"
            self.process.stdin.close()
            assert self.process.wait(timeout=60) == 0


def race(root: str, native: bool, *, environ: dict[str, str] | None = None, holders: int = 2) -> list[str]:
    """Releases several processes into begin() on root at once; each that
    gets it commits its own file (``f<i>``). Returns their outcomes."""
    started = [Holder(root, native, f"f{i}", environ=environ, together=True) for i in range(holders)]
    for holder in started:
        holder.go()
    outcomes = [holder.outcome() for holder in started]
    for holder in started:
        holder.finish()
    return outcomes


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] == "native", sys.argv[3], sys.argv[4:] == ["together"]))
