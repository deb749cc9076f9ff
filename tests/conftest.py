"""Shared fixtures: the plugins under test and helpers to build C plugins.

Every test that takes ``fs`` and ``root`` runs once per plugin: the built-in
posix (file://) and memory (mem://) plugins, the example third-party plugin
(demo://, built from plugins/examples/ when a C compiler is present), and any
library given as ``--plugin PATH:SCHEME[:ROOT]``.
"""

from __future__ import annotations

import atexit
import ctypes.util
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from support.azurite import Azurite, azurite_missing_reason, start_azurite
from support.ceph_gateway import Gateway, missing_reason, start_gateway
from support.facade import BlockingFacade
from support.fault_proxy import FaultProxy
from support.gcs_emulator import GcsEmulator, emulator_missing_reason, start_fake_gcs
from support.http_servers import HttpServer, nginx_missing_reason, start_nginx

import asyncfs
from asyncfs._native import libraries as _libs

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"  # files made elsewhere (TensorFlow's records, old pickles)
TEST_PLUGINS = TESTS / "plugins"  # the C sources of the test plugins
SUPPORT = TESTS / "support"  # what the tests and benchmarks run beside asyncfs (importable as support)

# The private plugin copies the loader makes (asyncfs/_plugins/copies.py) go
# to a folder of this run, not the user's cache: the suite builds many
# plugins. The folder goes when the run ends (the copies loaded stay mapped).
if "ASYNCFS_CACHE_DIR" not in os.environ:
    os.environ["ASYNCFS_CACHE_DIR"] = tempfile.mkdtemp(prefix="asyncfs-test-cache-")

    @atexit.register
    def _remove_cache(folder: str = os.environ["ASYNCFS_CACHE_DIR"], owner: int = os.getpid()) -> None:
        if os.getpid() == owner:  # not a forked child's exit
            shutil.rmtree(folder, ignore_errors=True)


def _working_compiler() -> str | None:
    """$CC, else cc or gcc, if it compiles a shared library at all: CI runs
    the installed wheel's tests with CC=false, and no compiler there means
    the tests that build plugins skip rather than fail."""
    candidate = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not candidate:
        return None
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "probe.c"
        source.write_text("int probe(void) { return 0; }\n")
        try:
            done = subprocess.run(
                [candidate, "-shared", "-fPIC", str(source), "-o", str(Path(folder) / "probe.so")],
                check=False,
                capture_output=True,
            )
        except OSError:
            return None
    return candidate if done.returncode == 0 else None


CC = _working_compiler()


def build_plugin(source: Path, output: Path, *defines: str, flags: tuple[str, ...] = ()) -> Path:
    """Compile one C file against the installed header, as a plugin author
    would, with warnings as errors."""
    if CC is None:
        pytest.skip("no C compiler to build test plugins")
    cmd = [CC, "-std=c99", "-Wall", "-Wextra", "-Werror", *flags, "-shared", "-fPIC", "-I", asyncfs.get_include()]
    cmd += [f"-D{d}" for d in defines]
    cmd += [str(source), "-o", str(output)]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"building {source.name} failed:\n{' '.join(cmd)}\n{done.stderr}")
    return output


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--plugin",
        action="append",
        default=[],
        metavar="PATH:SCHEME[:ROOT]",
        help="also run the conformance suite against this plugin library; ROOT is the "
        "URI under which test trees are made (default SCHEME:///asyncfs-conformance)",
    )
    parser.addoption(
        "--without-stores",
        action="store_true",
        help="start no object store (Ceph, the GCS emulators, Azurite): their tests skip. For the runs "
        "under other Python versions (.ci/pythons), which test what differs between versions; the "
        "main run tests the stores",
    )


def require_stores(config: pytest.Config) -> None:
    if config.getoption("--without-stores"):
        pytest.skip("object stores are not started in this run (--without-stores); the main run tests them")


@dataclass(frozen=True)
class PluginUnderTest:
    id: str
    scheme: str
    library: Path | None  # None: built in
    root: str | None  # URI prefix for test trees; None: a temporary local dir
    read_only: bool = False  # its trees are made in the folder a server serves


# What a read-only plugin's test trees are made in: URI -> the local folder
# its server serves there (the root fixture's).
SERVED: dict[str, Path] = {}


def put_file(fs: Any, uri: str, data: bytes = b"") -> str:
    """Writes data at uri through fs (sync, or the async layer's facade),
    or, in a read-only plugin's test tree, where its server serves it."""
    local = served_path(uri)
    if local is not None:
        local.write_bytes(data)
        return uri
    with fs.new_writable_file(uri) as f:
        if data:
            f.append(data)
    return uri


def put_dir(fs: Any, uri: str) -> str:
    """Makes the directory uri, as put_file writes a file."""
    local = served_path(uri)
    if local is not None:
        local.mkdir()
    else:
        fs.create_dir(uri)
    return uri


def served_path(uri: str) -> Path | None:
    """The local file or folder a read-only plugin's URI names, when a
    test tree is being served there; None on any other plugin."""
    for prefix, folder in SERVED.items():
        if uri == prefix or uri.startswith(prefix + "/"):
            return folder / uri[len(prefix) :].lstrip("/")
    return None


def _plugins(config: pytest.Config) -> list[PluginUnderTest]:
    plugins = [
        PluginUnderTest("file", "file", None, None),
        PluginUnderTest("mem", "mem", None, "mem:///conformance"),
        PluginUnderTest("demo", "demo", REPO / "plugins/examples/demo_fs.c", None),
        PluginUnderTest("s3", "s3", None, "s3://asyncfs-conformance"),
        PluginUnderTest("gs", "gs", None, "gs://asyncfs-conformance"),
        PluginUnderTest("az", "az", None, "az://asyncfs-conformance"),
        PluginUnderTest("http", "http", None, None, read_only=True),
    ]
    for spec in config.getoption("--plugin"):
        path, _, rest = spec.partition(":")
        scheme, _, root = rest.partition(":")
        if not scheme:
            raise pytest.UsageError(f"--plugin {spec!r}: expected PATH:SCHEME[:ROOT]")
        plugins.append(PluginUnderTest(scheme, scheme, Path(path), root or f"{scheme}:///asyncfs-conformance"))
    return plugins


LAYERS = ("sync", "asyncio", "trio")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "plugin" in metafunc.fixturenames:
        plugins = _plugins(metafunc.config)
        metafunc.parametrize("plugin", plugins, ids=[p.id for p in plugins], scope="session")
    if "layer" in metafunc.fixturenames:
        metafunc.parametrize("layer", LAYERS, scope="session")


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> asyncfs.Registry:
    """One registry for the session: built-ins plus the example plugin."""
    reg = asyncfs.Registry()
    if CC is not None:
        lib = build_plugin(REPO / "plugins/examples/demo_fs.c", tmp_path_factory.mktemp("demo") / "libdemo_fs.so")
        reg.load_plugin(lib)
    return reg


@pytest.fixture(scope="session")
def s3_gateway(
    tmp_path_factory: pytest.TempPathFactory, s3_plugin: None, pytestconfig: pytest.Config
) -> Iterator[Gateway]:
    """Ceph's S3 gateway on loopback for the session, for the s3 plugin
    (skips, saying why, when Ceph is not installed or the plugin not built)."""
    require_stores(pytestconfig)
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    gateway = start_gateway(tmp_path_factory.mktemp("ceph"))
    yield gateway
    gateway.stop()


def tls_proxy(upstream: str, tmp_path: Path) -> tuple[FaultProxy, Path]:
    """A proxy serving https:// in front of upstream (http://host:port), with a certificate
    from a CA of the test's own (trustme, a test extra: without it the test
    skips); returns the proxy, which the caller closes, and the CA's PEM file."""
    trustme = pytest.importorskip("trustme", reason="trustme (a test extra) makes the test CA")
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return FaultProxy(upstream, tls=context), pem


@pytest.fixture
def proxy(s3_gateway: Gateway) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the gateway (support/fault_proxy.py)."""
    p = FaultProxy(s3_gateway.endpoint)
    yield p
    p.close()


@pytest.fixture
def tls_gateway(s3_gateway: Gateway, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https:// endpoint in front of the gateway (tls_proxy); yields the
    endpoint and the CA's PEM file."""
    proxy, pem = tls_proxy(s3_gateway.endpoint, tmp_path)
    yield proxy.endpoint, pem
    proxy.close()


async def leave_prefetches_early(env: asyncfs.Env, uris: list[str], budget: asyncfs.Budget, *, ordered: bool) -> None:
    """Leave one prefetch of uris by a break after a few files and another
    by a cancellation, both on budget, then wait until the calls they
    started are done (and their results handed to the loop)."""
    received = 0
    async for _ in env.prefetch(uris, in_flight=32, ordered=ordered, budget=budget):
        received += 1
        if received == 3:
            break
    with anyio.move_on_after(0.02):
        async for _ in env.prefetch(uris, in_flight=32, ordered=ordered, budget=budget):
            await anyio.sleep(0.001)
    await settle(env)


async def settle(env: asyncfs.Env) -> None:
    """Wait until neither of env's pools has a call in flight (abandoned
    work included, its result handed to the loop), failing after 30 s."""
    with anyio.fail_after(30):
        while env.pool.stats().in_flight or env.network_pool.stats().in_flight:
            await anyio.sleep(0.005)


def preloadable(malloc: str) -> str:
    """The library to preload for another malloc than libc's: "tcmalloc",
    or "asan" (gcc's AddressSanitizer runtime); skips when it is missing."""
    if malloc == "tcmalloc":
        found = ctypes.util.find_library("tcmalloc_minimal")
        if found is None:
            pytest.skip("tcmalloc is not installed (Debian: libtcmalloc-minimal4)")
        return found
    if CC is None:
        pytest.skip("no C compiler to ask where AddressSanitizer's runtime is")
    asked = subprocess.run([CC, "-print-file-name=libasan.so"], capture_output=True, text=True, check=False)
    asan = Path(asked.stdout.strip())
    if not asan.is_absolute() or not asan.exists():
        pytest.skip("gcc's AddressSanitizer runtime (libasan) is not installed")
    return str(asan.resolve())


_LOCAL_TYPES = {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "ramfs", "overlay"}


def at_hand_here(path: Path) -> bool:
    """Whether a stat or open of path (just made, so cached) should be at
    hand, decided apart from the runtime: Linux 5.12 or later (openat2's
    RESOLVE_CACHED), and a filesystem on the runtime's list, by the type
    /proc/self/mountinfo gives the mount that holds path."""
    if sys.platform != "linux":
        return False
    if tuple(int(part) for part in os.uname().release.split(".")[:2] if part.isdigit()) < (5, 12):
        return False
    where = os.path.realpath(path)
    best, fstype = "", ""
    with open("/proc/self/mountinfo") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # octal escapes of spaces
            inside = where == point or where.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, fstype = point, fields[fields.index("-") + 1]
    return fstype in _LOCAL_TYPES


def open_fds() -> int:
    """How many descriptors this process has open (Linux: /proc/self/fd)."""
    return len(os.listdir("/proc/self/fd"))


def exit_code_of(pid: int, hung: str, seconds: float = 60) -> int:
    """The exit code of child pid (made by os.fork), waited for at most
    seconds: a child still running then is killed and the test fails,
    saying hung."""
    for _ in range(int(seconds / 0.05)):
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(hung)


def configure_s3(fs: asyncfs.ModularFileSystem, gateway: Gateway) -> None:
    """Point the s3 plugin at the gateway through the ABI's configuration
    ops (the environment variables would do as well)."""
    fs.set_option("endpoint", gateway.endpoint.encode())
    fs.set_option("access_key_id", gateway.access_key.encode())
    fs.set_option("secret_access_key", gateway.secret_key.encode())
    fs.set_option("region", gateway.region.encode())
    fs.set_option("path_style", 1)


@pytest.fixture(scope="session")
def http_plugin() -> None:
    """For a test that needs the http plugin (built with the s3 one)."""
    reason = _libs.unavailable_reason("http")
    if reason is not None:
        pytest.skip(f"the http plugin is not built: {reason}")


@pytest.fixture(scope="session")
def nginx(tmp_path_factory: pytest.TempPathFactory, http_plugin: None) -> Iterator[HttpServer]:
    """nginx on loopback for the session, serving a folder of its own
    (skips, saying why, when nginx is not installed)."""
    reason = nginx_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    served = tmp_path_factory.mktemp("served")
    server = start_nginx(served, tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop.close()


@pytest.fixture(scope="session")
def s3_plugin() -> None:
    """For a test that needs the s3 plugin: where asyncfs was built without
    it (no libcurl headers), the test skips, saying why, whether or not Ceph
    is installed."""
    reason = _libs.unavailable_reason("s3")
    if reason is not None:
        pytest.skip(f"the s3 plugin is not built: {reason}")


@pytest.fixture(scope="session")
def s3_fs(registry: asyncfs.Registry, s3_plugin: None, request: pytest.FixtureRequest) -> asyncfs.ModularFileSystem:
    """The registry's s3 filesystem, configured for the gateway."""
    fs = registry.get("s3")
    configure_s3(fs, request.getfixturevalue("s3_gateway"))
    return fs


@pytest.fixture(scope="session")
def gcs_emulator(pytestconfig: pytest.Config) -> Iterator[GcsEmulator]:
    """fake-gcs-server on loopback for the session (skips, saying why, when
    it is not installed or the gs plugin is not built)."""
    require_stores(pytestconfig)
    reason = _libs.unavailable_reason("gs") or emulator_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    emulator = start_fake_gcs()
    yield emulator
    emulator.stop.close()


def configure_gs(fs: asyncfs.ModularFileSystem, emulator: GcsEmulator) -> None:
    fs.set_option("endpoint", emulator.endpoint.encode())
    fs.set_option("project", b"test")


@pytest.fixture(scope="session")
def gs_fs(registry: asyncfs.Registry, gcs_emulator: GcsEmulator) -> asyncfs.ModularFileSystem:
    """The registry's gs filesystem, configured for the emulator."""
    fs = registry.get("gs")
    configure_gs(fs, gcs_emulator)
    return fs


@pytest.fixture(scope="session")
def azurite(pytestconfig: pytest.Config) -> Iterator[Azurite]:
    """Azurite's blob service on loopback for the session (skips, saying
    why, when it is not installed or the az plugin is not built)."""
    require_stores(pytestconfig)
    reason = _libs.unavailable_reason("az") or azurite_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    emulator = start_azurite()
    yield emulator
    emulator.stop.close()


def configure_az(fs: asyncfs.ModularFileSystem, emulator: Azurite) -> None:
    fs.set_option("connection_string", emulator.connection_string.encode())


@pytest.fixture(scope="session")
def az_fs(registry: asyncfs.Registry, azurite: Azurite) -> asyncfs.ModularFileSystem:
    """The registry's az filesystem, configured for Azurite."""
    fs = registry.get("az")
    configure_az(fs, azurite)
    return fs


@pytest.fixture
def bucket(s3_fs: asyncfs.ModularFileSystem) -> Iterator[str]:
    """A fresh bucket on the session's gateway, removed afterwards."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3_fs.create_dir(f"s3://{name}")
    yield name
    s3_fs.delete_recursively(f"s3://{name}")


@pytest.fixture(scope="session")
def sync_fs(
    plugin: PluginUnderTest, registry: asyncfs.Registry, request: pytest.FixtureRequest
) -> asyncfs.ModularFileSystem:
    if plugin.scheme in ("s3", "gs", "az"):
        return request.getfixturevalue(f"{plugin.scheme}_fs")  # type: ignore[no-any-return]
    if plugin.read_only:
        request.getfixturevalue("nginx")  # skips without it
    if plugin.scheme not in registry.schemes():
        if plugin.library is None or plugin.library.suffix == ".c":
            pytest.skip(f"plugin {plugin.id} is not available (no C compiler)")
        with warnings.catch_warnings():
            # expected of a plugin built against TensorFlow's header (API 0)
            warnings.simplefilter("ignore", asyncfs.PluginAPIMismatchWarning)
            registry.load_plugin(plugin.library)
    return registry.get(plugin.scheme)


@pytest.fixture(scope="session")
def portals() -> Iterator[dict[str, BlockingPortal]]:
    """One event loop thread per async backend, for the whole session."""
    with ExitStack() as stack:
        yield {
            backend: stack.enter_context(start_blocking_portal(backend, backend_options))
            for backend, backend_options in (("asyncio", {}), ("trio", {}))
        }


@pytest.fixture(scope="session")
def env(registry: asyncfs.Registry) -> Iterator[asyncfs.Env]:
    environment = asyncfs.Env(registry=registry, workers=4)
    yield environment
    environment.close()


@pytest.fixture(scope="session")
def fs(
    layer: str,
    sync_fs: asyncfs.ModularFileSystem,
    env: asyncfs.Env,
    portals: dict[str, BlockingPortal],
) -> Any:
    """The plugin under test through the sync adapter, or through the async
    layer on asyncio or trio behind a blocking facade, so that the same
    conformance cases check all three."""
    if layer == "sync":
        return sync_fs
    return BlockingFacade(env.filesystem(f"{sync_fs.scheme}://"), portals[layer])


@pytest.fixture
def root(plugin: PluginUnderTest, sync_fs: asyncfs.ModularFileSystem, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty directory URI on the plugin under test (on a
    read-only one, a folder its server serves, which tests fill through
    served_path)."""
    if plugin.read_only:
        server: HttpServer = request.getfixturevalue("nginx")
        name = uuid.uuid4().hex
        (server.root / name).mkdir()
        uri = f"{plugin.scheme}://{server.host}/{name}"
        SERVED[uri] = server.root / name
        yield uri
        del SERVED[uri]
        shutil.rmtree(server.root / name, ignore_errors=True)
    elif plugin.root is None:
        local = tempfile.mkdtemp(prefix="asyncfs-conf-")
        uri = f"{plugin.scheme}://{local}"
        yield uri
        shutil.rmtree(local, ignore_errors=True)
    else:
        uri = f"{plugin.root}/{uuid.uuid4().hex}"
        sync_fs.recursively_create_dir(uri)
        yield uri
        sync_fs.delete_recursively(uri)


@pytest.fixture(params=["file", "mem"])
def base(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty folder URI on the process-wide registry's file:// and
    mem:// (for tests that go through asyncfs.Env())."""
    if request.param == "file":
        yield f"file://{tmp_path}"
        return
    folder = f"mem:///test-{uuid.uuid4().hex}"
    mem = asyncfs.get_filesystem("mem://")
    mem.recursively_create_dir(folder)
    yield folder
    mem.delete_recursively(folder)


def pytest_report_header(config: pytest.Config) -> str:
    # the free space is printed because a nearly full disk fails tests far
    # from its cause (Ceph's monitor refuses to start, writes fail)
    free = shutil.disk_usage(tempfile.gettempdir()).free / (1 << 30)
    return (
        f"asyncfs {asyncfs.__version__}, python {sys.version.split()[0]}, cc {CC}, "
        f"{free:.1f} GiB free in {tempfile.gettempdir()}"
    )
