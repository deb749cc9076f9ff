"""What the remote-store suites (s3, gs, http) share: clients timed in
turns, CPU per request of the client and of the server beside it, and the
verdict of a row against a peer."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from .harness import Row, best_async

Clients = dict[str, Callable[[], Awaitable[Any]]]


class Cpu:
    """CPU time per request spent by this process (the client: its event
    loop and all its threads) and by the server's processes (pids, on the
    same cores), for each client, over the turns counted under
    :meth:`counting`."""

    def __init__(self, pids: list[int] | None = None, peer: str = "obstore") -> None:
        self.pids = pids or []
        self._peer = peer
        self._spent: dict[str, list[float]] = {}  # client -> [client s, server s, requests]
        self.client_ratios: dict[str, float] = {}  # row -> asyncfs's client CPU / the peer's

    def _server(self) -> float:
        ticks = 0
        for pid in self.pids:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    @contextlib.contextmanager
    def counting(self, name: str, requests: int) -> Iterator[None]:
        client, server = time.process_time(), self._server()
        yield
        spent = self._spent.setdefault(name, [0.0, 0.0, 0])
        spent[0] += time.process_time() - client
        spent[1] += self._server() - server
        spent[2] += requests

    def note(self, row: Row, server: str = "server") -> None:
        """Each client's CPU per request on row (and the server's, with
        pids): with a client costing nothing, the server's own CPU bounds
        what asyncfs could reach against the peer."""
        per_request = {
            name: (client / requests * 1e6, spent / requests * 1e6)
            for name, (client, spent, requests) in self._spent.items()
            if requests
        }
        self._spent = {}
        if not per_request:
            return
        if not self.pids:
            row.notes.append(
                "client CPU per request (µs): " + ", ".join(f"{n} {c:.0f}" for n, (c, _) in per_request.items())
            )
            return
        costs = ", ".join(f"{n} {c:.0f} + {s:.0f}" for n, (c, s) in per_request.items())
        row.notes.append(f"CPU per request, client + {server} (µs): {costs}")
        if "asyncfs" in per_request and self._peer in per_request and per_request["asyncfs"][1] > 0:
            ceiling = sum(per_request[self._peer]) / per_request["asyncfs"][1]
            self.client_ratios[row.work] = per_request["asyncfs"][0] / per_request[self._peer][0]
            row.notes.append(
                f"with a client costing nothing, the {server}'s own CPU would allow at most {ceiling:.2f}× {self._peer}"
            )

    def rows(self, target: float) -> list[Row]:
        """The client's CPU per request against the peer's (lower is
        better), for each row noted so far."""
        out = []
        for work, ratio in self.client_ratios.items():
            row = Row(f"client CPU per request, {work}", f"× {self._peer}'s")
            row.results = {"asyncfs": ratio}
            row.ratio = ratio
            row.target = f"≤ {target}× {self._peer}'s"
            row.verdict = f"{ratio:.2f}× ({'met' if ratio <= target else 'missed'})"
            out.append(row)
        return out


def in_turns(
    clients: Clients,
    rounds: int,
    *,
    cpu: Cpu | None = None,
    requests: int = 0,
    after: Callable[[str], None] | None = None,
    runners: dict[str, Callable[[Callable[[], Awaitable[Any]]], float]] | None = None,
) -> dict[str, float]:
    """Each client's best time over rounds in which the clients take turns,
    so that drift in the server falls on all of them alike; a client with
    a runner of its own (s3fs's session) is timed by it. after(name) runs,
    untimed, after each turn; with cpu, each turn counts requests there."""
    times: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, make in clients.items():
            with cpu.counting(name, requests) if cpu is not None else contextlib.nullcontext():
                runner = (runners or {}).get(name)
                times[name].append(runner(make) if runner is not None else best_async(make, 1))
            if after is not None:
                after(name)
    return {name: min(seconds) for name, seconds in times.items()}


def verdict(row: Row, target: float, peer: str | None = None) -> None:
    """row's ratio against peer, or against the faster peer when None."""
    peers = {name: value for name, value in row.results.items() if name != "asyncfs"}
    if peer is not None:
        peers = {name: value for name, value in peers.items() if name == peer}
    if not peers or "asyncfs" not in row.results:
        row.verdict = f"{peer or 'no peer'} not measured"
        return
    best_peer = max(peers, key=lambda name: peers[name])
    ratio = row.ratio = row.results["asyncfs"] / peers[best_peer]
    which = best_peer if peer is not None or len(peers) == 1 else f"{best_peer}, the faster peer"
    row.verdict = f"{ratio:.2f}× {which} ({'met' if ratio >= target else 'missed'})"


# ---- the standard rows of an object store's suite --------------------------------------------

# (operation, what the row says, its unit, whether it counts requests, target)
STANDARD = (
    ("get", "GET {small} × 4 KiB, {in_flight} in flight", "objects/s", True, 1.2),
    ("prefetch", "prefetch {prefetch} × 4 KiB, {in_flight} in flight", "objects/s", True, 1.2),
    ("put", "PUT {small} × 4 KiB, {in_flight} in flight", "objects/s", True, 1.2),
    ("head", "HEAD {small} (stat), {in_flight} in flight", "objects/s", True, 1.2),
    ("list", "LIST {listed} keys (one folder)", "keys/s", False, 1.2),
    ("put_big", "PUT {big} MiB", "MiB/s", False, 1.0),
    ("get_big", "GET {big} MiB", "MiB/s", False, 1.0),
)


def standard_rows(
    label: str,
    counts: dict[str, int],
    clients: dict[str, Clients],
    notes: dict[str, str],
    *,
    repeat: int,
    cpu: Cpu,
    server: str,
    before: dict[str, Callable[[], None]] | None = None,
) -> list[Row]:
    """The rows every store's suite measures, each with the clients that
    can do its operation (clients[operation]: name -> work), timed in turns;
    counts: small, prefetch, listed, big (bytes), in_flight. before[op]
    runs untimed before that row (the object a GET reads)."""
    rows: list[Row] = []
    words = {**counts, "big": counts["big"] // (1 << 20)}
    units = {"get": "small", "prefetch": "prefetch", "put": "small", "head": "small", "list": "listed"}
    for op, title, unit, counted, target in STANDARD:
        if op not in clients:
            continue
        if before is not None and op in before:
            before[op]()
        row = Row(f"{label} {title.format(**words)}", unit)
        amount = counts[units[op]] if op in units else counts["big"] / (1 << 20)
        requests = int(amount) if counted else 0
        times = in_turns(clients[op], repeat, cpu=cpu if counted else None, requests=requests)
        row.results = {name: amount / seconds for name, seconds in times.items()}
        if counted:
            cpu.note(row, server)
        row.notes.append(notes.get(op, f"best of {repeat} rounds, the clients in turn"))
        row.target = f"≥ {target}× the faster peer"
        verdict(row, target)
        rows.append(row)
    return rows
