"""The object-store engine (plugins/objstore), seen through the s3 store
in front of a fault proxy: its retry timer, its timeouts, its one thread
per process (shared by every filesystem, gone when idle), a bulk call
cancelled mid-flight, and fork while transfers are in flight. The s3 tests hold
the rest of what the engine does for a store (bounded connections, idle
ones closed, retries across a gateway restart, bulk calls)."""

from __future__ import annotations

import time

import pytest
from support.ceph_gateway import Gateway
from support.fault_proxy import FaultProxy
from test_s3 import SOCKETS, own_s3, python_with_gateway

import asyncfs

pytestmark = pytest.mark.usefixtures("s3_gateway")


def test_a_retry_waits_as_long_as_retry_after_asks(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    """A 429 with Retry-After: 1 is tried again a second later, not after
    the few milliseconds the backoff alone would wait."""
    s3_fs.write_file(f"s3://{bucket}/later", b"here")
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, retry_base_ms=5)
    proxy.inject(["429"])
    assert fs.read_file(f"s3://{bucket}/later") == b"here"
    assert [fault for _, fault in proxy.requests][:2] == ["429", "pass"]
    assert proxy.times[1] - proxy.times[0] >= 0.95


def test_retry_after_beyond_the_budget_fails_at_once(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    """A server asking for more time than the retry budget has left gets
    no second request: the call fails now, saying why."""
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, retry_base_ms=5, retry_budget_ms=500)
    proxy.inject(["429"] * 5)
    began = time.monotonic()
    with pytest.raises(asyncfs.UnavailableError, match="SlowDown"):
        fs.read_file(f"s3://{bucket}/later")
    assert time.monotonic() - began < 0.9
    assert len(proxy.requests) == 1


def test_a_server_that_stalls_times_out(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    """A server that takes the request and never answers fails it after
    read_timeout_ms with a DeadlineExceededError that names the object."""
    proxy.stall_seconds = 4.0
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, read_timeout_ms=1000, max_attempts=1)
    proxy.inject(["stall"])
    began = time.monotonic()
    with pytest.raises(asyncfs.DeadlineExceededError, match=f"GET s3://{bucket}/stalled"):
        fs.read_file(f"s3://{bucket}/stalled")
    assert 0.9 <= time.monotonic() - began < 3.5


def test_a_bulk_call_rides_out_a_stall_among_its_requests(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    """One of a bulk call's requests stalls and is tried again after the
    read timeout; the others are answered meanwhile, on the same thread."""
    uris = [f"s3://{bucket}/bulk/{i}" for i in range(8)]
    for i, uri in enumerate(uris):
        s3_fs.write_file(uri, bytes([i]) * 10)
    proxy.stall_seconds = 3.0
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint, read_timeout_ms=1000, retry_base_ms=5)
    proxy.inject(["stall"])
    assert fs.files_exist(uris) == [True] * 8
    assert len(proxy.requests) == 9


FORK_IN_FLIGHT = """
import os, sys, threading
import asyncfs

bucket, endpoint = sys.argv[1], sys.argv[2]
fs = asyncfs.get_filesystem("s3://")
fs.write_file(f"s3://{bucket}/fork-in-flight", b"before the fork")
fs.set_option("endpoint", endpoint.encode())
fs.set_option("read_timeout_ms", 1000)
fs.set_option("retry_base_ms", 5)
got = []
reader = threading.Thread(target=lambda: got.append(fs.read_file(f"s3://{bucket}/fork-in-flight")))
reader.start()  # its first try stalls at the proxy: in flight on the engine's thread
threading.Event().wait(0.3)
child = os.fork()
if child == 0:  # no engine thread here: the child starts its own
    ok = fs.read_file(f"s3://{bucket}/fork-in-flight") == b"before the fork"
    ok = ok and fs.files_exist([f"s3://{bucket}/fork-in-flight"] * 4) == [True] * 4
    os._exit(0 if ok else 1)
_, code = os.waitpid(child, 0)
reader.join()
print(os.waitstatus_to_exitcode(code), got == [b"before the fork"])
"""


def test_fork_with_a_transfer_in_flight(s3_gateway: Gateway, proxy: FaultProxy, bucket: str) -> None:
    """The parent's request in flight at the fork completes in the parent;
    the child, whose copy of the engine has no thread, sends its own."""
    proxy.stall_seconds = 2.0
    proxy.inject(["stall"])  # the read's first try stalls (the write went straight to the gateway)
    assert python_with_gateway(s3_gateway, FORK_IN_FLIGHT, bucket, proxy.endpoint).split() == ["0", "True"]


SHARED_THREAD = """
import os, sys, time
import asyncfs

bucket = sys.argv[1]
threads = lambda: len(os.listdir("/proc/self/task"))
asyncfs.default_registry()  # its plugins loaded (and the thread that forwards their log lines started)
base = threads()
made = []
for i in range(10):
    fs = asyncfs.get_filesystem("s3://").new_instance()
    fs.set_option("connect_timeout_ms", 1000 + i)  # each its own settings
    fs.set_option("idle_timeout_ms", 300)
    made.append(fs)
    fs.files_exist([f"s3://{bucket}/none-{j}" for j in range(8)])
busy = threads() - base
time.sleep(1.0)  # idle past idle_timeout_ms: the connections close and the thread leaves
idle = threads() - base
made[0].read_file(f"s3://{bucket}/here")  # and the next request starts it again
print(busy, idle, threads() - base)
"""


def test_every_filesystem_shares_one_engine_thread_which_leaves_when_idle(
    s3_gateway: Gateway, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    """Ten filesystems of the plugin with different settings: one engine
    thread drives all their requests; idle, it leaves; a request brings it
    back. (Each filesystem had its own thread: ten.)"""
    s3_fs.write_file(f"s3://{bucket}/here", b"x")
    busy, idle, again = map(int, python_with_gateway(s3_gateway, SHARED_THREAD, bucket).split())
    assert (busy, idle, again) == (1, 0, 1)


BULK_CANCELLED = (
    SOCKETS
    + """
import sys, anyio, asyncfs

bucket, endpoint = sys.argv[1], sys.argv[2]

async def main():
    base = sockets()
    env = asyncfs.Env()
    s3 = env.filesystem("s3://")
    await s3.set_option("endpoint", endpoint)
    await s3.set_option("read_timeout_ms", 1500)
    uris = [f"s3://{bucket}/bulk/{i}" for i in range(48)]
    with anyio.move_on_after(0.5) as scope:  # one request stalls: the bulk call is still out
        await env.files_exist(uris)
    cancelled = scope.cancelled_caught
    with anyio.fail_after(30):  # the abandoned call finishes on its worker
        while env.network_pool.stats().in_flight:
            await anyio.sleep(0.01)
    after_call = await env.files_exist(uris[:4])
    await env.aclose()  # closes the idle connections
    print(cancelled, after_call == [True] * 4, sockets() - base)

anyio.run(main)
"""
)


def test_a_bulk_call_cancelled_mid_flight_leaks_no_handle_or_socket(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    """A files_exist of 48 objects, one of whose requests stalls, cancelled
    while in flight: its requests finish on the engine, the filesystem
    keeps serving, and once the Env closes no socket is left open."""
    for i in range(48):
        s3_fs.write_file(f"s3://{bucket}/bulk/{i}", b"x")
    proxy.stall_seconds = 3.0
    proxy.inject(["pass"] * 5 + ["stall"])
    printed = python_with_gateway(s3_gateway, BULK_CANCELLED, bucket, proxy.endpoint).split()
    assert printed == ["True", "True", "0"]


def test_stat_files_settles_what_a_head_did_not_find_in_two_bulk_rounds(
    s3_gateway: Gateway, proxy: FaultProxy, bucket: str, s3_fs: asyncfs.ModularFileSystem
) -> None:
    """Directories (a marker, or only keys below), missing objects, one
    below a file and one in a missing bucket: stat_files answers each as
    stat does, with one HEAD each, then one one-key listing for each the
    HEAD did not find, then one HEAD of the parent of each nested missing
    one; no request twice, none on a thread of its own."""
    s3_fs.write_file(f"s3://{bucket}/file", b"12345")
    s3_fs.create_dir(f"s3://{bucket}/marked")
    s3_fs.write_file(f"s3://{bucket}/implied/below", b"x")
    uris = [
        f"s3://{bucket}/file",
        f"s3://{bucket}/marked",
        f"s3://{bucket}/implied",
        f"s3://{bucket}/missing",
        f"s3://{bucket}/file/below",
        f"s3://{bucket}/deeper/missing",
        "s3://no-such-bucket-here/x",
    ]
    fs = own_s3(s3_gateway, endpoint=proxy.endpoint)
    proxy.inject([])
    bulk = fs.stat_files(uris)
    sent = [line for line, _ in proxy.requests]
    alone = []
    for uri in uris:
        try:
            alone.append(s3_fs.stat(uri))
        except asyncfs.StatusError as error:
            alone.append(error)
    for one, other in zip(bulk, alone, strict=True):
        if isinstance(other, asyncfs.StatusError):
            assert type(one) is type(other) and str(one) == str(other)
        else:
            assert (one.length, one.is_directory) == (other.length, other.is_directory)  # type: ignore[union-attr]
    assert isinstance(bulk[4], asyncfs.FailedPreconditionError)
    assert isinstance(bulk[3], asyncfs.NotFoundError) and isinstance(bulk[6], asyncfs.NotFoundError)
    heads = [line for line in sent if line.startswith("HEAD")]
    lists = [line for line in sent if line.startswith("GET") and "list-type=2" in line]
    assert len(heads) == 7 + 2  # each path once, then the parents of file/below and deeper/missing
    assert len(lists) == 6  # each path whose HEAD found nothing (all but file)
    assert len(sent) == len(heads) + len(lists)
