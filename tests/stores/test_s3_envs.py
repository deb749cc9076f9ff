"""Each Env serves s3:// with a filesystem of its own, as each boto3 or
obstore client is its own: it starts from the environment and follows the
options set on the registry's filesystem, its options are its own (two Envs of one
process can talk to two endpoints), they travel with a pickled Env, and it
lives as long as the Env or the last file opened on it. Pickled alone, it
arrives as the receiving process's registry's, as any filesystem does."""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterator

import anyio
import pytest
from conftest import configure_s3, exit_code_of
from support.ceph_gateway import Gateway

import asyncfs

MiB = 1 << 20


@pytest.fixture
def s3_registry(s3_plugin: None) -> asyncfs.Registry:
    """A registry of its own with the built-in plugins, s3 among them."""
    return asyncfs.Registry()


def part_size(fs: asyncfs.ModularFileSystem) -> int:
    (value,) = fs.get_option("part_size").values
    assert isinstance(value, int)
    return value


def test_each_env_has_its_own_options_starting_from_the_registrys(s3_registry: asyncfs.Registry) -> None:
    shared = s3_registry.get("s3")
    shared.set_option("part_size", 6 * MiB)
    one, two = asyncfs.Env(registry=s3_registry), asyncfs.Env(registry=s3_registry)
    mine, yours = one.filesystem("s3://").wrapped, two.filesystem("s3://").wrapped
    assert len({id(mine), id(yours), id(shared)}) == 3
    assert one.filesystem("s3://b/key").wrapped is mine  # one per Env, not per call
    assert part_size(mine) == part_size(yours) == 6 * MiB

    mine.set_option("part_size", 7 * MiB)
    assert (part_size(mine), part_size(yours), part_size(shared)) == (7 * MiB, 6 * MiB, 6 * MiB)

    # the registry's options reach every Env's, now and later, except
    # where an Env set that option itself
    shared.set_option("part_size", 9 * MiB)
    shared.set_configuration([asyncfs.Option("read_ahead", (1 << 16,))])
    later = asyncfs.Env(registry=s3_registry).filesystem("s3://").wrapped
    assert (part_size(mine), part_size(yours), part_size(later)) == (7 * MiB, 9 * MiB, 9 * MiB)
    assert {fs.get_option("read_ahead").values for fs in (mine, yours, later)} == {(1 << 16,)}
    assert [o.name for o in yours.travelling_options()] == ["part_size", "read_ahead"]


def test_local_filesystems_stay_the_registrys(s3_registry: asyncfs.Registry) -> None:
    """mem:// holds data, not a client's state: every Env on a registry sees
    the same files."""
    one, two = asyncfs.Env(registry=s3_registry), asyncfs.Env(registry=s3_registry)
    assert one.filesystem("mem://").wrapped is two.filesystem("mem://").wrapped is s3_registry.get("mem")

    async def main() -> bytes:
        await one.write_file("mem://envs/shared", b"seen by both")
        return await two.read_file("mem://envs/shared")

    assert anyio.run(main) == b"seen by both"


def test_a_pickled_env_carries_its_own_options_but_not_its_secrets(s3_registry: asyncfs.Registry) -> None:
    env = asyncfs.Env(registry=s3_registry)
    own = env.filesystem("s3://").wrapped
    own.set_option("part_size", 7 * MiB)
    own.set_option("access_key_id", b"AKIDNOTTRAVELLING")
    own.set_option("region", b"eu-west-3")
    blob = pickle.dumps(env)
    assert b"AKIDNOTTRAVELLING" not in blob
    copy = pickle.loads(blob).filesystem("s3://").wrapped
    assert part_size(copy) == 7 * MiB
    assert copy.get_option("region").values == (b"eu-west-3",)
    assert copy.get_option("access_key_id").values != (b"AKIDNOTTRAVELLING",)

    # so does an Env pickled before it used s3://, and one pickled again
    # before the copy used it
    again = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(env))))
    assert part_size(again.filesystem("s3://").wrapped) == 7 * MiB
    fresh = pickle.loads(pickle.dumps(asyncfs.Env(registry=s3_registry)))
    assert part_size(fresh.filesystem("s3://").wrapped) == part_size(s3_registry.get("s3"))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_fork_while_another_thread_sets_an_option_leaves_options_settable(s3_registry: asyncfs.Registry) -> None:
    """A DataLoader forks whenever it likes: a child forked while another
    thread of the parent was setting an option (holding that filesystem's
    options lock) must still set options, on the registry's filesystem and
    an Env's own."""
    shared = s3_registry.get("s3")
    own = asyncfs.Env(registry=s3_registry).filesystem("s3://").wrapped
    holding, release = threading.Event(), threading.Event()

    def set_slowly() -> None:
        with shared._options_lock, own._options_lock:  # as a set_option passing on to own is
            holding.set()
            release.wait(30)

    setter = threading.Thread(target=set_slowly)
    setter.start()
    holding.wait(30)
    try:
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 1
            try:
                shared.set_option("part_size", 6 * MiB)
                own.set_option("read_ahead", 1 << 16)
                code = 0 if (part_size(own), own.get_option("read_ahead").values) == (6 * MiB, (1 << 16,)) else 2
            finally:
                os._exit(code)
        assert exit_code_of(pid, "the child hung on a lock the parent's thread held") == 0
    finally:
        release.set()
        setter.join()


UNPICKLE_TWICE = """
import pickle, sys
import asyncfs
blob = sys.stdin.buffer.read()
first, second = pickle.loads(blob), pickle.loads(blob)
shared = first.wrapped is second.wrapped is asyncfs.get_filesystem("s3://")
print(shared, first.wrapped.get_option("part_size").values[0])
"""


def test_the_copies_tasks_receive_of_an_envs_filesystem_share_one(s3_registry: asyncfs.Registry) -> None:
    """A Dask task's argument is unpickled once per task: the copies of an
    Env's s3 filesystem a worker receives are the worker registry's, with
    the options that travelled, and so share its connections."""
    own = asyncfs.Env(registry=s3_registry).filesystem("s3://")
    own.wrapped.set_option("part_size", 7 * MiB)
    done = subprocess.run(
        [sys.executable, "-c", UNPICKLE_TWICE], input=pickle.dumps(own), capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["True", str(7 * MiB)]


@pytest.fixture
def hanging_endpoint() -> Iterator[str]:
    """An endpoint that takes connections (the kernel's backlog does) and
    never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_two_envs_of_one_registry_talk_to_two_endpoints(
    s3_registry: asyncfs.Registry, s3_gateway: Gateway, hanging_endpoint: str
) -> None:
    """One Env's requests hang on a dead endpoint while the other's, on the
    gateway, finish: setting an endpoint on one Env no longer moves the
    other."""
    bucket = f"envs-{uuid.uuid4().hex[:10]}"
    good, stuck = asyncfs.Env(registry=s3_registry), asyncfs.Env(registry=s3_registry)
    configure_s3(good.filesystem("s3://").wrapped, s3_gateway)
    hung = stuck.filesystem("s3://").wrapped
    configure_s3(hung, s3_gateway)
    hung.set_option("endpoint", hanging_endpoint.encode())
    hung.set_option("read_timeout_ms", 3000)
    hung.set_option("max_attempts", 1)

    async def main() -> tuple[float, list[BaseException]]:
        await good.makedirs(f"s3://{bucket}")
        uris = [f"s3://{bucket}/{i}" for i in range(50)]
        for uri in uris:
            await good.write_file(uri, uri.encode())
        failures: list[BaseException] = []

        async def hangs(i: int) -> None:
            try:
                await stuck.read_file(f"s3://{bucket}/{i}")
            except asyncfs.AsyncFSError as error:
                failures.append(error)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(hangs, i)
            await anyio.sleep(0.2)  # the stuck reads are waiting on their socket
            started = time.monotonic()
            assert await asyncio.gather(*map(good.read_file, uris)) == [uri.encode() for uri in uris]
            took = time.monotonic() - started
            assert not failures
        await good.rmtree(f"s3://{bucket}")
        return took, failures

    try:
        took, failures = anyio.run(main)
    finally:
        good.close()
        stuck.close()
    assert took < 3.0  # well before the stuck reads time out
    assert len(failures) == 8
    assert all(isinstance(f, asyncfs.DeadlineExceededError) for f in failures), failures


def test_an_envs_filesystem_lives_as_long_as_its_open_files(s3_registry: asyncfs.Registry, s3_gateway: Gateway) -> None:
    """Dropping an Env cleans its s3 filesystem up (the plugin's cleanup op:
    its connections and credentials go), but only after the last file
    opened on it is closed: a file never reads through a freed client."""
    bucket = f"envs-{uuid.uuid4().hex[:10]}"
    env = asyncfs.Env(registry=s3_registry)
    own = env.filesystem("s3://").wrapped
    configure_s3(own, s3_gateway)
    own.create_dir(f"s3://{bucket}")
    own.write_file(f"s3://{bucket}/kept", b"read after the Env is gone")
    file = own.new_random_access_file(f"s3://{bucket}/kept")
    writer = own.new_writable_file(f"s3://{bucket}/written")
    alive = weakref.ref(own)
    env.close()
    del env, own
    gc.collect()
    assert alive() is not None
    assert file.read(0, 100) == b"read after the Env is gone"
    writer.append(b"closed after the Env is gone")
    writer.close()
    file.close()
    del file, writer
    gc.collect()
    assert alive() is None

    check = s3_registry.get("s3")
    configure_s3(check, s3_gateway)
    assert check.read_file(f"s3://{bucket}/written") == b"closed after the Env is gone"
    check.delete_recursively(f"s3://{bucket}")
