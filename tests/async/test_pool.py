"""The pool under the loads services put on it: each caller is answered when
its own call is done, a blocked plugin call stalls nothing else, shutdown
is bounded and leaks no handle, and transactions cancelled at any point
leave no lock. A plugin call that blocks is real here: opening a FIFO
through the posix plugin blocks until its other end is opened."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import SUPPORT, exit_code_of, open_fds

import asyncfs
from asyncfs._async import pool as _pool

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO; whatever is blocked opening it is released at the end."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    yield path
    release(path)


def release(path: Path) -> None:
    """Unblock every open of the FIFO that waits for a writer or a reader."""
    for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
        for _ in range(64):
            try:
                os.close(os.open(path, flags))
            except OSError:
                break


@pytest.fixture
async def env() -> AsyncIterator[asyncfs.Env]:
    async with asyncfs.Env(workers=2, close_timeout=5) as environment:
        yield environment


async def read_blocked(env: asyncfs.Env, fifo: Path, finished: list[Path] | None = None) -> None:
    """A read that blocks in the plugin until the FIFO is released (then
    fails: a FIFO cannot be read at an offset)."""
    with contextlib.suppress(asyncfs.AsyncFSError):
        await env.read_file(str(fifo))
    if finished is not None:
        finished.append(fifo)


async def release_until(fifo: Path, finished: list[Path], count: int) -> None:
    """Release the FIFO until count blocked reads have finished: a read
    that reaches open() only after one release needs another."""
    with anyio.fail_after(30):
        while len(finished) < count:
            await anyio.to_thread.run_sync(release, fifo)
            await anyio.sleep(0.02)


def small_files(tmp_path: Path, count: int) -> list[str]:
    folder = tmp_path / "small"
    folder.mkdir()
    for i in range(count):
        (folder / f"f{i}").write_bytes(b"x" * 4096)
    return [str(folder / f"f{i}") for i in range(count)]


async def test_results_arrive_before_a_blocked_batch_mate_finishes(
    env: asyncfs.Env, fifo: Path, tmp_path: Path
) -> None:
    """2000 reads and one read that blocks, all started in one loop
    iteration (one batch): every read is answered while the blocked one is
    still blocked, whatever its place in the batch."""
    paths = small_files(tmp_path, 2000)
    answered: list[str] = []

    finished: list[Path] = []

    async def read(path: str) -> None:
        if path == str(fifo):
            await read_blocked(env, fifo, finished)
        else:
            await env.read_file(path)
        answered.append(path)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read, paths[0])
        tg.start_soon(read, str(fifo))  # blocks in open() until a writer comes
        for path in paths[1:]:
            tg.start_soon(read, path)
        with anyio.fail_after(30):
            while len(answered) < len(paths):
                await anyio.sleep(0.01)
        assert str(fifo) not in answered
        await release_until(fifo, finished, 1)
    assert answered[-1] == str(fifo)


async def test_work_goes_on_when_every_worker_is_blocked(env: asyncfs.Env, fifo: Path) -> None:
    """More blocked calls than workers: spare threads keep the pool going."""
    await env.write_file("mem:///pool-spare.txt", b"still served")
    finished: list[Path] = []
    blocked = env.pool.workers + 2
    async with anyio.create_task_group() as tg:
        for _ in range(blocked):
            tg.start_soon(read_blocked, env, fifo, finished)
        with anyio.fail_after(30):
            while env.pool.threads <= env.pool.workers:  # the monitor starts spares
                await anyio.sleep(0.01)
            assert await env.read_file("mem:///pool-spare.txt") == b"still served"
        await release_until(fifo, finished, blocked)
    await env.rm("mem:///pool-spare.txt")


async def test_a_network_pool_serves_calls_past_blocked_ones(fifo: Path) -> None:
    """While one of its batches drains, a network pool starts a thread only
    for work that waited a look of the monitor: with its first thread
    blocked, the calls after it still run, and so do calls past a second
    blocked one."""
    pool = _pool.WorkerPool(4, network=True)
    fs = asyncfs.get_filesystem("mem://")
    fs.write_file("mem:///network-pool.txt", b"served")
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                for _ in range(2):
                    tasks.start_soon(partial(pool.run, mutating=False), _open_blocked, fifo)
                    await anyio.sleep(0.05)
                    assert await pool.run(fs.read_file, "mem:///network-pool.txt", mutating=False) == b"served"
                assert pool.threads == 3  # one per blocked call, one for the rest
                await anyio.to_thread.run_sync(release, fifo)
    finally:
        pool.shutdown()


def _open_blocked(fifo: Path) -> None:
    """Blocks in the posix plugin until the FIFO gets a writer."""
    with contextlib.suppress(asyncfs.AsyncFSError):
        asyncfs.get_filesystem("file://").read_file(str(fifo))


def test_the_monitor_starts_threads_for_work_that_waited_and_is_left() -> None:
    """What the monitor starts threads for (_Jobs.waited): a batch queued
    before the mark, once each time it was queued, up to the operations it
    has left; not a batch queued after the mark; not an entry queued for a
    helper of a batch that others drained meanwhile."""

    def batch(size: int) -> _pool._Batch:
        return _pool._Batch([_pool._Work(print, (), _pool.Waiter(None), None) for _ in range(size)], print)

    jobs = _pool._Jobs()
    two, drained, late = batch(2), batch(1), batch(1)
    for _ in range(3):  # its own entry and two for helpers: two operations to run
        jobs.put(two)
    for _ in range(2):
        jobs.put(drained)
    drained.join()
    assert drained.take() is not None and drained.left() == 0
    mark = jobs.mark()
    jobs.put(late)
    assert jobs.waited(mark) == 2
    assert jobs.waited(jobs.mark()) == 3
    assert jobs.take(None) is two  # a thread takes one of two's entries
    assert jobs.waited(mark) == 2
    assert two.take() is not None and two.take() is not None  # and drains it
    assert jobs.waited(mark) == 0
    assert jobs.waited(jobs.mark()) == 1


def test_close_is_bounded_with_a_blocked_call_and_names_it(fifo: Path, tmp_path: Path) -> None:
    """A blocked read and a blocked write (a mutation, which is shielded):
    close returns after its timeout, the warning names both calls and their
    URIs, and both callers get UnavailableError rather than waiting forever."""
    outcomes: dict[str, BaseException | None] = {}
    other = tmp_path / "other-fifo"  # a second FIFO, or the two calls would unblock each other
    os.mkfifo(other)

    async def main() -> None:
        env = asyncfs.Env(workers=2)

        async def call(name: str, op: Any) -> None:
            try:
                await op
                outcomes[name] = None
            except BaseException as exc:
                outcomes[name] = exc

        reader = asyncio.ensure_future(call("read", env.read_file(str(fifo))))
        writer = asyncio.ensure_future(call("write", env.write_file(str(other), b"x", atomic=False)))
        await asyncio.sleep(0.2)
        with pytest.warns(asyncfs.AbandonedOperationWarning) as warned:
            abandoned = await env.aclose(timeout=0.5)
        await asyncio.wait_for(asyncio.gather(reader, writer), 10)
        assert sorted(abandoned) == sorted(
            [f"ModularFileSystem.read_file({str(fifo)!r})", f"write_whole({str(other)!r})"]
        )
        assert str(fifo) in str(warned[0].message) and str(other) in str(warned[0].message)

    try:
        asyncio.run(main())
    finally:
        release(other)
    assert isinstance(outcomes["read"], asyncfs.UnavailableError)
    assert isinstance(outcomes["write"], asyncfs.UnavailableError)
    assert "abandoned" in str(outcomes["write"])


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_no_handle_leaks_when_an_env_closes_with_opens_in_flight(tmp_path: Path) -> None:
    """Thousands of opens in flight, their callers cancelled, the Env closed
    at once: every handle a worker opened is closed, the Env open or not."""
    paths = small_files(tmp_path, 2000)

    async def trial() -> None:
        env = asyncfs.Env()

        async def open_and_close(path: str) -> None:
            handle = await env.new_random_access_file(path)
            await handle.close()

        tasks = [asyncio.ensure_future(open_and_close(p)) for p in paths]
        tasks += [asyncio.ensure_future(env.memory_region(p).__aenter__()) for p in paths[:500]]
        await asyncio.sleep(0.002)
        for task in tasks:
            task.cancel()
        await env.aclose()
        await asyncio.gather(*tasks, return_exceptions=True)

    baseline = open_fds()
    for _ in range(3):
        asyncio.run(trial())
        gc.collect()
        for _ in range(100):  # handles released on a thread of their own after close
            if open_fds() == baseline:
                break
            threading.Event().wait(0.05)
        assert open_fds() == baseline


async def test_an_env_used_after_close_says_so(tmp_path: Path) -> None:
    """A call, a prefetch or a transaction on a closed Env raises
    EnvClosedError (a RuntimeError too), saying the Env is closed."""
    env = asyncfs.Env()
    path = small_files(tmp_path, 1)[0]
    assert await env.read_file(path) == b"x" * 4096
    await env.aclose()
    attempts: list[Any] = [
        lambda: env.read_file(path),
        lambda: env.write_file(f"{tmp_path}/new", b"y"),
        lambda: env.prefetch([path]).__anext__(),
        lambda: env.transaction(f"file://{tmp_path}/txn").begin(),
    ]
    for attempt in attempts:
        with pytest.raises(asyncfs.EnvClosedError, match="the Env is closed") as info:
            await attempt()
        assert isinstance(info.value, RuntimeError) and isinstance(info.value, asyncfs.AsyncFSError)
    assert not os.path.exists(f"{tmp_path}/new")


# ---- transactions cancelled at any moment --------------------------------------------


def slow(fn: Any, seconds: float) -> Any:
    def wrapper(*args: Any) -> Any:
        threading.Event().wait(seconds)
        return fn(*args)

    return wrapper


@pytest.mark.parametrize("native", [True, False], ids=["native", "generic"])
@pytest.mark.parametrize("scheme", ["file", "mem"])
async def test_a_cancelled_begin_leaves_no_lock(env: asyncfs.Env, tmp_path: Path, native: bool, scheme: str) -> None:
    root = f"file://{tmp_path}/root" if scheme == "file" else f"mem:///pool-txn-{os.getpid()}-{native}/root"
    txn = env.transaction(root, native=native)
    txn._stage.begin = slow(txn._stage.begin, 0.3)  # type: ignore[method-assign]
    with anyio.move_on_after(0.05):
        await txn.begin()
    assert txn.state == "new"
    # the root is free at once, in this process and for another process
    async with env.transaction(root, native=native, timeout=0.5) as other:
        await other.write_file("a", b"a")
    done = subprocess.run(
        [sys.executable, str(SUPPORT / "txn_holder.py"), root, "native" if native else "generic", "b"],
        input="abort\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if scheme == "file":
        assert done.stdout.split() == ["held", "done"], done.stderr
    if scheme == "file":
        assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


@pytest.mark.parametrize("native", [True, False], ids=["native", "generic"])
async def test_a_slow_begin_is_not_a_conflict(env: asyncfs.Env, tmp_path: Path, native: bool) -> None:
    """The timeout bounds the wait for other transactions, not the work of
    starting this one."""
    txn = env.transaction(f"file://{tmp_path}/root", native=native, timeout=0.05)
    txn._stage.begin = slow(txn._stage.begin, 0.3)  # type: ignore[method-assign]
    async with txn:
        await txn.write_file("a", b"a")
    assert txn.committed


@pytest.mark.parametrize("native", [True, False], ids=["native", "generic"])
async def test_a_caller_cancelled_during_commit_can_tell_it_committed(
    env: asyncfs.Env, tmp_path: Path, native: bool
) -> None:
    root = tmp_path / "root"
    txn = await env.transaction(f"file://{root}", native=native).begin()
    await txn.write_file("a", b"committed")
    txn._stage.commit = slow(txn._stage.commit, 0.3)  # type: ignore[method-assign]
    with anyio.move_on_after(0.05) as scope:
        await txn.commit()
    assert scope.cancelled_caught
    assert txn.committed
    assert (root / "a").read_bytes() == b"committed"
    async with env.transaction(f"file://{root}", native=native, timeout=0.5) as again:  # nothing left locked
        await again.rm("a")


# ---- streams ---------------------------------------------------------------------------


def test_a_whole_stream_read_copies_a_bounded_number_of_times(tmp_path: Path) -> None:
    """Reading 64 MiB with one `await f.read()` touches a few times its size
    in memory (minor page faults, counted by the kernel), not the square of
    its block count; one 64 MiB line in text mode likewise."""
    size = 64 << 20
    (tmp_path / "big.bin").write_bytes(b"x" * size)
    code = f"""
import asyncio, resource, sys, asyncfs
async def main():
    async with asyncfs.Env() as env:
        for mode in ("rb", "r"):
            async with env.open({str(tmp_path / "big.bin")!r}, mode) as f:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                data = await (f.read() if mode == "rb" else f.readline())
                after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            assert len(data) == {size}
            print((after - before) * resource.getpagesize() / {size})
            del data
asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    binary, text = (float(x) for x in done.stdout.split())
    # linear: the blocks, one join and the result; quadratic touched ~32x
    assert binary < 6, f"a 64 MiB read touched {binary:.1f}x its size"
    assert text < 12, f"a 64 MiB line touched {text:.1f}x its size"


def test_import_asyncfs_loads_only_what_it_needs() -> None:
    code = "import sys, asyncfs; print(' '.join(sorted(m for m in sys.modules if m.startswith('asyncfs'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = set(done.stdout.split())
    assert loaded == {"asyncfs", "asyncfs.errors"}, loaded
    code = "import sys, asyncfs; asyncfs.Env; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = set(done.stdout.split())
    assert not loaded & {
        "asyncfs._streams.streams",
        "asyncfs._streams.tfrecord",
        "asyncfs._streams.compression",
        "asyncfs._transactions.transaction",
    }
    assert "pycparser" not in loaded  # the declarations come pre-parsed


def test_delivery_is_bounded_by_time() -> None:
    """The constants the docs promise (docs/async.md)."""
    assert _pool.DELIVERY_INTERVAL <= 0.001
    assert _pool.STUCK_AFTER <= 0.1


# ---- fork ---------------------------------------------------------------------------------

_forked_env: asyncfs.Env | None = None


def _read_in_child(path: str) -> bytes:
    assert _forked_env is not None
    return asyncio.run(_forked_env.read_file(path))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_an_env_used_before_a_fork_works_in_the_child(tmp_path: Path) -> None:
    """The child gets a fresh pool (no threads of the parent's, no lock a
    parent thread held); the parent's Env keeps working too."""
    import multiprocessing  # noqa: PLC0415

    global _forked_env
    path = tmp_path / "data.bin"
    path.write_bytes(b"read in the child")
    _forked_env = asyncfs.Env(workers=2)
    try:
        assert asyncio.run(_forked_env.read_file(str(path))) == b"read in the child"  # threads started
        with multiprocessing.get_context("fork").Pool(2) as workers:
            results = workers.map_async(_read_in_child, [str(path)] * 8, chunksize=1).get(timeout=60)
        assert results == [b"read in the child"] * 8
        assert asyncio.run(_forked_env.read_file(str(path))) == b"read in the child"
    finally:
        _forked_env.close()
        _forked_env = None


def _keep_calls_in_flight(env: asyncfs.Env, root: str, stop: threading.Event) -> None:
    """On a thread of its own: memory-plugin calls (which hold the tree lock)
    and transactions (the transaction table's lock), back to back."""

    async def main() -> None:
        i = 0
        while not stop.is_set():
            await env.write_file(f"{root}/{i % 8}", b"x" * (8 << 20))
            await env.read_file(f"{root}/{i % 8}")
            async with env.transaction(f"{root}/txn") as txn:
                await txn.write_file(f"{root}/txn/{i % 4}", b"y")
            i += 1

    asyncio.run(main())


def _in_forked_child(env: asyncfs.Env) -> int:
    async def main() -> bool:
        await env.write_file("mem:///child/a", b"written in the child")
        async with env.transaction("mem:///child/txn") as txn:
            await txn.write_file("mem:///child/txn/b", b"b")
        return await env.read_file("mem:///child/a") == b"written in the child" and await env.exists(
            "mem:///child/txn/b"
        )

    try:
        return 0 if asyncio.run(main()) else 1
    except BaseException:  # reported through the exit code
        return 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_fork_while_plugin_calls_are_in_flight() -> None:
    """A DataLoader forks whenever it likes: a lock a parent's plugin call held
    at that instant must not be held forever in the child (plugin_fork.h)."""
    env = asyncfs.Env(workers=2)
    # Python's own hazard, not asyncfs's: a module that a thread is importing
    # when another forks stays locked in the child. Import everything first.
    assert _in_forked_child(env) == 0
    stop = threading.Event()
    busy = [threading.Thread(target=_keep_calls_in_flight, args=(env, f"mem:///busy{n}", stop)) for n in range(2)]
    for thread in busy:
        thread.start()
    try:
        for attempt in range(30):
            pid = os.fork()
            if pid == 0:
                os._exit(_in_forked_child(env))
            hung = f"fork {attempt}: the child hung on a lock its parent's call held"
            assert exit_code_of(pid, hung, seconds=30) == 0, f"fork {attempt}: the child failed"
    finally:
        stop.set()
        for thread in busy:
            thread.join()
        env.close()


# ---- pickled to worker processes ---------------------------------------------------------


def _read_everywhere(env: asyncfs.Env, fs: asyncfs.ModularFileSystem, afs: Any, paths: list[str]) -> list[bytes]:
    """In a worker: read the dataset through each unpickled object."""

    async def main() -> list[bytes]:
        through_env = [await env.read_file(p) for p in paths]
        through_async = [await afs.read_file(p) for p in paths]
        await env.aclose()
        return through_env + through_async

    return [*asyncio.run(main()), *(fs.read_file(p) for p in paths)]


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_env_and_filesystems_pickle_to_worker_processes(tmp_path: Path, method: str) -> None:
    """An Env, a ModularFileSystem and an AsyncModularFileSystem travel to
    ProcessPoolExecutor workers by pickle (as Dask and Ray send them) and
    read a file:// dataset there; each is rebuilt by recipe, lazily."""
    import multiprocessing  # noqa: PLC0415
    import pickle  # noqa: PLC0415
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"{method} is not available on this platform")
    paths = small_files(tmp_path, 6)
    env = asyncfs.Env(workers=2, copy_chunk=1 << 20)
    fs = asyncfs.get_filesystem("file://")
    afs = env.filesystem("file://")
    rebuilt = pickle.loads(pickle.dumps(env))
    assert rebuilt._options == env._options
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as workers:
        done = workers.submit(_read_everywhere, env, fs, afs, [f"file://{p}" for p in paths])
        assert done.result(timeout=120) == [b"x" * 4096] * 18
    env.close()


SHOW_S3_OPTIONS = """
import pickle, sys
env, fs = pickle.loads(sys.stdin.buffer.read())
s3 = env.registry.get("s3")
print(s3.get_option("region").value.decode(), fs.get_option("read_ahead").value)
print(sorted(o.name for o in s3.travelling_options()), sorted(o.name for o in fs.travelling_options()))
"""


def test_options_travel_with_a_pickle_but_secrets_only_when_asked(s3_plugin: None) -> None:
    """Dask and Ray workers get the endpoint, region and tuning set in the
    client; keys set there stay there unless set with travels=True."""
    import pickle  # noqa: PLC0415

    registry = asyncfs.Registry()
    s3 = registry.get("s3")
    s3.set_option("region", b"eu-west-3")
    s3.set_option("secret_access_key", b"hunter2-stays-home")
    s3.set_option("access_key_id", b"AKIA-STAYS-HOME")
    s3.set_option("session_token", b"token-asked-to-travel", travels=True)
    s3.set_option("read_ahead", 1 << 16)
    env = asyncfs.Env(registry=registry)
    blob = pickle.dumps((env, s3))
    assert b"hunter2-stays-home" not in blob and b"AKIA-STAYS-HOME" not in blob
    assert b"token-asked-to-travel" in blob
    done = subprocess.run(
        [sys.executable, "-c", SHOW_S3_OPTIONS], input=blob, capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    values, names = done.stdout.decode().splitlines()
    assert values == "eu-west-3 65536"
    travelled = "['read_ahead', 'region', 'session_token']"
    assert names == f"{travelled} {travelled}"
    env.close()


def test_a_pickled_env_brings_its_third_party_plugins(tmp_path: Path) -> None:
    """A registry's third-party plugins travel by library path."""
    import pickle  # noqa: PLC0415

    from conftest import REPO, build_plugin  # noqa: PLC0415

    library = build_plugin(REPO / "plugins/examples/demo_fs.c", tmp_path / "libdemo_fs.so")
    registry = asyncfs.Registry()
    registry.load_plugin(library)
    env = asyncfs.Env(registry=registry)
    code = "import pickle, sys\nenv = pickle.loads(sys.stdin.buffer.read())\nprint(' '.join(env.schemes()))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(env), capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "demo" in done.stdout.decode().split()
    env.close()


# ---- calls combined into one -------------------------------------------------------------


class Upper:
    """A combiner that upper-cases each call's string, failing "bad" alone,
    and records the groups it was given."""

    limit = 3

    def __init__(self, delay: float = 0.0) -> None:
        self.groups: list[list[str]] = []
        self.delay = delay

    def __call__(self, calls: list[tuple[Any, ...]]) -> list[tuple[Any, BaseException | None]]:
        self.groups.append([text for (text,) in calls])
        if self.delay:
            threading.Event().wait(self.delay)
        return [(None, ValueError(text)) if text == "bad" else (text.upper(), None) for (text,) in calls]


def alone(text: str) -> str:
    if text == "bad":
        raise ValueError(text)
    return "alone:" + text


async def test_calls_naming_a_combiner_run_together_up_to_its_limit() -> None:
    """Seven calls made in one loop iteration go as two groups of three and
    one call left alone (which runs as itself); each caller gets its own
    result or its own error."""
    pool = _pool.WorkerPool(2)
    combine = Upper()
    texts = ["a", "b", "bad", "d", "e", "f", "g"]
    got: dict[str, str | Exception] = {}

    async def call(text: str) -> None:
        try:
            got[text] = await pool.run(alone, text, mutating=False, combine=combine)
        except ValueError as exc:
            got[text] = exc

    try:
        async with anyio.create_task_group() as tg:
            for text in texts:
                tg.start_soon(call, text)
    finally:
        pool.shutdown()
    assert [len(group) for group in combine.groups] == [3, 3]  # tasks start in the backend's order
    (left,) = set(texts) - {text for group in combine.groups for text in group}
    for text in texts:
        if text == "bad":
            assert isinstance(got[text], ValueError)
        else:
            assert got[text] == ("alone:" + text if text == left else text.upper())


@pytest.mark.parametrize("kind", ["reads", "writes", "opens"])
async def test_a_member_cancelled_while_its_group_runs(kind: str) -> None:
    """A reader cancelled while its group runs is answered at once; a
    writer (shielded) waits for the group, then sees the cancellation; what
    the group opened for an opener that left is discarded. Either way the
    others get their results."""
    mutating = kind == "writes"
    pool = _pool.WorkerPool(2)
    combine = Upper(delay=0.3)
    got: dict[str, str] = {}
    outcome: list[str] = []
    discarded: list[str] = []
    discard = discarded.append if kind == "opens" else None

    async def call(text: str, scope: anyio.CancelScope) -> None:
        with scope:
            got[text] = await pool.run(alone, text, mutating=mutating, combine=combine, discard=discard)
        outcome.append(f"{text}:{'cancelled' if scope.cancelled_caught else 'done'}")

    scopes = {text: anyio.CancelScope() for text in "xyz"}
    try:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for text, scope in scopes.items():
                    tg.start_soon(call, text, scope)
                await anyio.sleep(0.05)
                scopes["y"].cancel()
                await anyio.sleep(0.01)
                assert outcome == ([] if mutating else ["y:cancelled"])
            while discard is not None and not discarded:
                await anyio.sleep(0.01)
    finally:
        pool.shutdown()
    assert sorted(outcome) == ["x:done", "y:cancelled", "z:done"]
    assert got == {"x": "X", "z": "Z"}
    assert [sorted(group) for group in combine.groups] == [["x", "y", "z"]]
    assert discarded == (["Y"] if kind == "opens" else [])


class LeavesWaits:
    """A combiner that answers each call at once, except those starting
    with "wait", which it leaves to run by themselves (_pool.ALONE)."""

    limit = 16

    def __init__(self) -> None:
        self.groups: list[list[str]] = []

    def __call__(self, calls: list[tuple[Any, ...]]) -> list[tuple[Any, BaseException | None]]:
        self.groups.append([text for (text,) in calls])
        return [(_pool.ALONE, None) if text.startswith("wait") else (text.upper(), None) for (text,) in calls]


async def test_a_call_its_combiner_leaves_alone_holds_up_none_of_the_others() -> None:
    """A call the combiner leaves to run by itself (one that may wait long,
    a FIFO's open) runs as a call of its own: the others of its group are
    answered while it waits, and it is answered when it is done."""
    pool = _pool.WorkerPool(2)
    combine = LeavesWaits()
    gate = threading.Event()
    answered: list[str] = []

    def waits(text: str) -> str:
        if text.startswith("wait"):
            gate.wait(10)
            return "alone:" + text
        return "lone:" + text  # not reached: the combiner answers these

    async def call(text: str) -> None:
        answered.append(await pool.run(waits, text, mutating=False, combine=combine))

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for text in ("a", "wait1", "b", "c"):
                    tg.start_soon(call, text)
                while len(answered) < 3:
                    await anyio.sleep(0.01)
                assert sorted(answered) == ["A", "B", "C"]
                gate.set()
    finally:
        gate.set()
        pool.shutdown()
    assert answered[-1] == "alone:wait1"
    assert [sorted(group) for group in combine.groups] == [["a", "b", "c", "wait1"]]


async def test_calls_run_soon_together_go_as_one_call() -> None:
    """run_soon_together: the items of one loop iteration reach fn in one
    list (in order); those of the next iteration in another."""
    pool = _pool.WorkerPool(2)
    calls: list[list[int]] = []
    done = threading.Event()

    def record(items: list[int]) -> None:
        calls.append(list(items))
        if len(calls) == 2:
            done.set()

    try:
        for i in range(5):
            pool.run_soon_together(record, i)
        await anyio.sleep(0.01)
        pool.run_soon_together(record, 5)
        with anyio.fail_after(5):
            while not done.is_set():
                await anyio.sleep(0.01)
    finally:
        pool.shutdown()
    assert calls == [[0, 1, 2, 3, 4], [5]]


@pytest.mark.parametrize("when", ["before its batch left", "after the pool shut down"])
async def test_calls_nobody_waits_for_run_when_the_pool_shuts_down(when: str) -> None:
    """run_soon and run_soon_together (a reader's close) are never dropped:
    queued in a batch that leaves after the pool shut down, or made after
    that, they run on a thread of their own, and nobody is told of an
    error (nobody waits for them: an unread error would be reported as
    never retrieved)."""
    pool = _pool.WorkerPool(2)
    await pool.run(len, "started", mutating=False)  # the pool's threads are running
    ran: list[object] = []
    done = threading.Event()

    def record(item: object) -> None:
        ran.append(item)
        if len(ran) == 3:
            done.set()

    if when == "before its batch left":
        pool.run_soon(record, "one")
        pool.run_soon_together(lambda items: [record(item) for item in items], "two")
        pool.run_soon(record, "three")
        pool.shutdown()  # on the loop's thread: the batch leaves after it
    else:
        pool.shutdown()
        pool.run_soon(record, "one")
        pool.run_soon_together(lambda items: [record(item) for item in items], "two")
        pool.run_soon(record, "three")
    with anyio.fail_after(5):
        while not done.is_set():
            await anyio.sleep(0.01)
    await anyio.sleep(0.05)  # the batch's failure, had there been one, reaches the loop
    assert sorted(map(str, ran)) == ["one", "three", "two"]


async def test_read_ahead_starts_while_its_caller_computes() -> None:
    """submit (read-ahead) hands its call to a worker at once, so a caller
    that goes on computing without giving the loop a turn (splitting lines,
    checking records) finds it done when it asks. Batched like an awaited
    call, it would wait for the loop's next turn: it would start only when
    its result was wanted. Calls made beside it still go as one batch."""
    pool = _pool.WorkerPool(2)
    started = threading.Event()
    try:
        pending = pool.submit(started.set)
        assert pending is not None
        assert started.wait(5), "the read-ahead waited for the loop's turn"  # the loop is busy here
        assert await pending.result() is None
        assert await pool.run(lambda: 42, mutating=False) == 42
        before = pool.stats().wakeups
        assert sorted(await _run_at_once(pool, 8)) == list(range(8))
        assert pool.stats().wakeups - before <= 2  # one batch (its delivery may be split in two)
    finally:
        pool.shutdown()


async def _run_at_once(pool: _pool.WorkerPool, count: int) -> list[int]:
    """count calls of pool made in one loop iteration, their results."""
    results: list[int] = []

    async def one(i: int) -> None:
        results.append(await pool.run(lambda: i, mutating=False))

    async with anyio.create_task_group() as tasks:
        for i in range(count):
            tasks.start_soon(one, i)
    return results


@pytest.mark.parametrize("mutating", [False, True], ids=["reads", "writes"])
async def test_calls_over_the_cap_start_as_room_frees_and_cancelled_ones_never(mutating: bool) -> None:
    """With one slot taken by a slow call, the calls behind it wait for
    room (reads parked whole, writes in their tasks). Those cancelled while
    waiting never run; the rest run one slot at a time."""
    pool = _pool.WorkerPool(2, max_in_flight=1)
    ran: list[str] = []
    gate = threading.Event()

    def slow() -> str:
        gate.wait(5)
        return "slow"

    def record(text: str) -> str:
        ran.append(text)
        return text

    got: dict[str, str] = {}

    async def call(text: str, scope: anyio.CancelScope) -> None:
        with scope:
            got[text] = await pool.run(record, text, mutating=mutating)

    scopes = {text: anyio.CancelScope() for text in "abcd"}
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial_run, pool, slow, got)
                await anyio.sleep(0.05)
                for text, scope in scopes.items():
                    tg.start_soon(call, text, scope)
                await anyio.sleep(0.05)
                assert ran == []  # no room yet
                scopes["b"].cancel()
                scopes["d"].cancel()
                await anyio.sleep(0.01)
                gate.set()
        stats = pool.stats()
    finally:
        pool.shutdown()
    assert sorted(ran) == ["a", "c"] and got == {"slow": "slow", "a": "a", "c": "c"}  # trio starts tasks in any order
    assert stats.peak_in_flight == 1 and stats.in_flight == 0


async def partial_run(pool: _pool.WorkerPool, fn: Any, got: dict[str, str]) -> None:
    got["slow"] = await pool.run(fn, mutating=False)


async def test_reads_waiting_for_room_when_the_pool_shuts_down_are_failed() -> None:
    """A read parked for room when the pool shuts down is answered with an
    error naming why, instead of waiting forever on a queue nobody serves."""
    pool = _pool.WorkerPool(1, max_in_flight=1)
    gate = threading.Event()
    outcomes: list[str] = []

    async def parked() -> None:
        try:
            await pool.run(str, "never", mutating=False)
            outcomes.append("ran")
        except asyncfs.UnavailableError as exc:
            outcomes.append(str(exc))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial_run, pool, lambda: gate.wait(5), {})
            await anyio.sleep(0.05)
            tg.start_soon(parked)
            await anyio.sleep(0.05)
            closer = threading.Thread(target=pool.shutdown)
            closer.start()
            await anyio.sleep(0.05)
            gate.set()
            await anyio.to_thread.run_sync(closer.join)
    assert len(outcomes) == 1 and "waited for room" in outcomes[0], outcomes


@pytest.mark.parametrize("kind", ["computing", "waiting", "computing on the network pool"])
async def test_slow_calls_that_compute_run_on_as_many_threads_as_there_are_cores(kind: str) -> None:
    """Slow calls that keep a core busy in C (hashing here; reading small
    files from the page cache in use) end up on at most as many threads as
    there are cores, since more would only take turns on them; the other
    threads leave once two calls computed (one can mislead: see
    test_calls_that_wait_and_compute_a_little_keep_many_workers), after
    their first or second call. Slow calls that wait (a sleep here; a
    store's latency in use) keep every worker, as do the calls of the
    network stores' pool, whatever they do."""
    cores = _pool.available_cores()
    pool = _pool.WorkerPool(cores + 3, network=kind.endswith("pool"))
    data = bytes(4 << 20)

    def compute() -> int:
        hashlib.sha256(data).digest()  # the GIL is let go while it hashes
        return threading.get_ident()

    def wait() -> int:
        time.sleep(0.003)
        return threading.get_ident()

    try:
        with anyio.fail_after(30):
            threads = await pool.run_many(
                wait if kind == "waiting" else compute, [()] * (8 * (cores + 3)), mutating=False
            )
    finally:
        pool.shutdown()
    if kind == "computing":
        assert len([thread for thread, calls in Counter(threads).items() if calls > 2]) <= cores, Counter(threads)
    else:
        assert len([thread for thread, calls in Counter(threads).items() if calls > 1]) > cores, Counter(threads)


async def test_a_call_stuck_in_a_batch_limited_to_the_cores_stalls_nothing_else() -> None:
    """A batch of computing calls runs on as many threads as there are
    cores (one, here); when one of its calls hangs, the thread that takes
    over its batch-mates is not turned away by that limit."""
    pool = _pool.WorkerPool(2)
    pool.cores = 1
    gate = threading.Event()
    data = bytes(4 << 20)
    done: list[int] = []

    def compute(i: int) -> None:
        hashlib.sha256(data).digest()
        done.append(i)

    async def run(fn: Any, *args: Any) -> None:
        await pool.run(fn, *args, mutating=False)

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(run, compute, i)
                tg.start_soon(run, gate.wait, 20)
                for i in range(4, 8):
                    tg.start_soon(run, compute, i)
                with anyio.fail_after(10):
                    while len(done) < 8:
                        await anyio.sleep(0.01)
                assert not gate.is_set()  # all eight finished while the call still hung
                gate.set()
    finally:
        gate.set()
        pool.shutdown()
    assert sorted(done) == list(range(8))


async def test_calls_that_wait_and_compute_a_little_keep_many_workers() -> None:
    """With many more workers than cores, calls that mostly wait (5 ms in
    a sleep, as a store's latency) and compute a little after (hashing, as
    marshalling a listing) are not taken for computing calls: they keep
    their threads, where two would make them many times slower. The first
    hash of the data, which faults its pages in, costs about three times
    the others: one such call alone does not limit the batch (it did, in
    about half the runs)."""
    cores = _pool.available_cores()
    workers = 8 * cores + 16
    pool = _pool.WorkerPool(workers)
    data = bytes(256 << 10)

    def wait_then_compute() -> int:
        time.sleep(0.005)
        hashlib.sha256(data).digest()
        return threading.get_ident()

    try:
        with anyio.fail_after(60):
            threads = await pool.run_many(wait_then_compute, [()] * (4 * workers), mutating=False)
    finally:
        pool.shutdown()
    went_on = [thread for thread, calls in Counter(threads).items() if calls > 1]
    assert len(went_on) > 2 * cores, Counter(threads)


@pytest.mark.parametrize("outliers", [(1, 2), (5, 9)], ids=["the first two calls", "two calls later on"])
async def test_a_few_calls_that_compute_do_not_limit_a_batch_that_waits(outliers: tuple[int, int]) -> None:
    """A batch of calls that wait keeps its workers when two of its calls
    spend 3 ms on a core (a garbage collection or page faults in the
    worker): that limited such a batch to two threads of 32 in a CI run of
    test_calls_that_wait_and_compute_a_little_keep_many_workers, and in
    every run of this test (the two threads ran 32 to 49 calls each). What
    most of a batch's slow calls did decides, and a limit that the first
    ones set is lifted once as many waited, calling its threads back."""
    cores = _pool.available_cores()
    workers = 8 * cores + 16
    pool = _pool.WorkerPool(workers)
    data = bytes(4 << 20)
    started = iter(range(1, 1 << 20))
    lock = threading.Lock()

    def wait_or_compute() -> int:
        with lock:
            call = next(started)
        if call in outliers:
            deadline = time.thread_time() + 0.003
            while time.thread_time() < deadline:
                hashlib.sha256(data).digest()
        time.sleep(0.005)
        return threading.get_ident()

    try:
        with anyio.fail_after(60):
            threads = await pool.run_many(wait_or_compute, [()] * (4 * workers), mutating=False)
    finally:
        pool.shutdown()
    assert max(Counter(threads).values()) <= len(threads) // 8, Counter(threads)


async def test_a_slow_stores_calls_a_task_each_keep_in_flight_running() -> None:
    """Reads of a store with 20 ms of latency (the memory plugin's
    latency_us), a task each under a semaphore of 32, as services call:
    the calls of each loop iteration start together, with no wait for the
    first of them to prove slow, and the probe for a busy loop is not
    fooled by the other workers, whose waits ended together. Calls ran
    9.1-9.9 at a time on average over the reads' span before, 26.8-27.7
    after (asyncio and trio, 3.11 and 3.13, three to five runs each). (The
    count running at each call's start, which this test first asserted,
    depends on whether rounds of 32 end together: its median was 18 in a
    run of 3.13 on a busy machine that averaged as high as the others.)"""
    fs = asyncfs.get_filesystem("mem://")
    fs.recursively_create_dir("mem:///slow-store")
    fs.write_file("mem:///slow-store/f", bytes(4096))
    pool = _pool.WorkerPool(32)
    lock = threading.Lock()
    steps: list[tuple[float, int]] = []  # (when, +1 at a call's start, -1 at its end)

    def read() -> None:
        with lock:
            steps.append((time.perf_counter(), 1))
        fs.read_file("mem:///slow-store/f")
        with lock:
            steps.append((time.perf_counter(), -1))

    semaphore = anyio.Semaphore(32)

    async def one() -> None:
        async with semaphore:
            await pool.run(read, mutating=False)

    fs.set_option("latency_us", 20000)
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:  # gather's way, on trio too
                for _ in range(320):
                    tasks.start_soon(one)
    finally:
        fs.set_option("latency_us", 0)
        pool.shutdown()
    steps.sort()
    running, area, last = 0, 0.0, steps[0][0]
    for when, step in steps:
        area += running * (when - last)
        running, last = running + step, when
    average = area / (steps[-1][0] - steps[0][0])
    assert average >= 18, f"{average:.1f} calls running on average"


async def test_a_follow_runs_the_next_call_on_the_same_worker_in_its_slot() -> None:
    """submit_to's follow: once a call succeeded, its worker runs the call
    the follow answers in its place, with no trip through the loop; every
    result reaches the sink, and the chain's one in-flight slot is released
    once, at its end. A call that fails ends the chain, and so does a sink
    closed meanwhile: its results go to on_drop, and the follow is not
    asked again."""
    pool = _pool.WorkerPool(4)
    dropped: list[Any] = []
    release = threading.Event()
    asked: list[int] = []

    def step(n: int) -> tuple[int, int]:
        if n == 3:
            raise ValueError("three")
        if n == 11:
            release.wait(10)
        return n, threading.get_ident()

    def follow(tag: int, result: tuple[int, int]) -> tuple[int, tuple[int]] | None:
        asked.append(tag)
        return tag + 1, (tag + 1,)

    try:
        with anyio.fail_after(30):
            sink = pool.sink()
            await pool.submit_to(sink, 0, step, 0, follow=follow)
            got = [await sink.next() for _ in range(4)]
            assert [tag for tag, _, _ in got] == [0, 1, 2, 3]
            assert len({thread for _, (_, thread), _ in got[:3]}) == 1  # one worker ran the chain
            assert isinstance(got[3][2], ValueError)
            assert asked == [0, 1, 2]  # not after the failure
            assert pool.stats().in_flight == 0

            closing = pool.sink(lambda tag, result, error: dropped.append(tag))
            await pool.submit_to(closing, 10, step, 10, follow=follow)
            assert (await closing.next())[0] == 10  # 11 now waits in the worker
            closing.close()
            release.set()
            while pool.stats().in_flight:
                await anyio.sleep(0.01)
    finally:
        release.set()
        pool.shutdown()
    assert dropped == [11]
    assert asked == [0, 1, 2, 10]  # not for 11: nobody wants what would follow it


def test_the_pool_keeps_no_event_loop_alive() -> None:
    """A program that calls asyncio.run (or trio.run) per task, as Celery
    workers and test suites do, gets each loop freed when it ends: the pool
    keeps no loop it served (it kept every one, 4 KiB each, before), and its
    counters still count their operations."""
    trio = pytest.importorskip("trio", reason="trio is not installed")
    pool = _pool.WorkerPool(2)
    try:
        gone: list[Any] = []
        for _ in range(5):
            loop = asyncio.new_event_loop()
            assert loop.run_until_complete(pool.run(len, b"abc", mutating=False)) == 3
            loop.close()
            gone.append(weakref.ref(loop))
            del loop

        async def in_trio() -> None:
            gone.append(weakref.ref(trio.lowlevel.current_trio_token()))
            assert await pool.run(len, b"ab", mutating=False) == 2

        for _ in range(3):
            trio.run(in_trio)
        gc.collect()
        assert [ref() for ref in gone] == [None] * 8
        assert pool.stats().operations == 8
    finally:
        pool.shutdown()


def test_a_loop_that_lives_on_keeps_no_pool_alive() -> None:
    """A service that makes an Env (a pool) per request on one long-lived
    loop gets each pool freed once it is shut down and dropped."""
    loop = asyncio.new_event_loop()
    try:
        pools = []
        for _ in range(3):
            pool = _pool.WorkerPool(1)
            assert loop.run_until_complete(pool.run(len, b"abc", mutating=False)) == 3
            pool.shutdown()
            pools.append(weakref.ref(pool))
            del pool
        deadline = time.monotonic() + 5  # each pool's monitor thread leaves within its period
        while any(ref() is not None for ref in pools) and time.monotonic() < deadline:
            time.sleep(0.02)
            gc.collect()
        assert [ref() for ref in pools] == [None] * 3
    finally:
        loop.close()


def test_a_loop_that_lives_on_keeps_nothing_of_the_envs_it_served(tmp_path: Path) -> None:
    """Each pool used to leave a finalizer on every loop it served (about
    300 bytes, freed only with the loop), so a service making an Env per
    request on one loop grew by that much per request, for good."""
    (path,) = small_files(tmp_path, 1)

    def finalizers() -> int:
        gc.collect()
        return sum(isinstance(o, weakref.finalize) for o in gc.get_objects())

    async def one_request() -> None:
        env = asyncfs.Env(workers=1)
        assert await env.read_file(path) == b"x" * 4096
        await env.aclose()

    async def main() -> int:
        await one_request()
        before = finalizers()
        for _ in range(20):
            await one_request()
        deadline = time.monotonic() + 5  # a pool goes once its monitor thread has left
        while finalizers() > before and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return finalizers() - before

    assert asyncio.run(main()) <= 0


def test_an_env_dropped_without_close_lets_its_threads_go() -> None:
    """As with concurrent.futures' executors: the pool's threads hold it
    weakly, so an Env (a pool) that a program forgets to close stops its
    threads when it is garbage-collected (30 such Envs left 150 threads
    running before)."""

    def ours() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("asyncfs-") and t.ident not in before]

    before = {t.ident for t in threading.enumerate()}

    async def use_and_drop() -> None:
        for _ in range(5):
            env = asyncfs.Env(workers=2)
            assert await env.exists(os.getcwd())
            del env

    asyncio.run(use_and_drop())
    deadline = time.monotonic() + 5
    while ours() and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    assert ours() == []
