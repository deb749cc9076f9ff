"""Where the s3 plugin finds its credentials, as boto3 users configure them:
the environment, profiles in the shared config and credentials files,
credential_process, web identity through STS, container credentials, EC2
instance metadata (IMDSv2), anonymous access, refresh before expiry; and
TLS settings (a CA bundle, no verification). The store is always the real
Ceph gateway, with users and keys made and rotated by ``radosgw-admin``; the
metadata services are small fakes on loopback (tests/support/credential_fakes.py).

Settings and credentials are read when a filesystem starts and when it first
needs keys, so each test builds its own filesystem after setting the
environment, as a new ``Env`` would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from conftest import tls_proxy
from support.ceph_gateway import Gateway
from support.credential_fakes import Keys, MetadataFakes
from support.fault_proxy import FaultProxy

import asyncfs
from asyncfs._native import libraries as _libs

Environ = Callable[..., None]


pytestmark = pytest.mark.usefixtures("s3_plugin")  # every test here needs it


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, s3_gateway: Gateway) -> Environ:
    """A clean AWS environment: no AWS_* variable, a HOME without ~/.aws,
    no instance metadata; the endpoint and region of the gateway. Returns a
    setter for more variables."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_gateway.endpoint)
    monkeypatch.setenv("AWS_REGION", s3_gateway.region)

    def set_more(**variables: str | None) -> None:
        for name, value in variables.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

    return set_more


def new_s3(**options: int | bytes) -> asyncfs.ModularFileSystem:
    """A new s3 filesystem: it reads the environment as it starts."""
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(_libs.library_path("s3"))
    fs = registry.get("s3")
    for name, value in options.items():
        fs.set_option(name, value)
    return fs


class CephUser:
    """A gateway user of its own, whose keys a test adds and removes."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.uid = f"cred-{uuid.uuid4().hex[:10]}"
        self.keys = [self.new_key(create_user=True)]

    def new_key(self, *, create_user: bool = False) -> Keys:
        access, secret = f"AK{uuid.uuid4().hex[:18].upper()}", uuid.uuid4().hex
        if create_user:
            self.gateway.admin("user", "create", f"--uid={self.uid}", "--display-name=credential tests",
                               f"--access-key={access}", f"--secret={secret}")  # fmt: skip
        else:
            self.gateway.admin("key", "create", f"--uid={self.uid}", "--key-type=s3",
                               f"--access-key={access}", f"--secret={secret}")  # fmt: skip
        return Keys(access, secret)

    def rotate(self) -> Keys:
        """A new key; the old ones are removed."""
        fresh = self.new_key()
        for old in self.keys:
            self.gateway.admin("key", "rm", f"--uid={self.uid}", "--key-type=s3", f"--access-key={old.access_key}")
        self.keys = [fresh]
        return fresh

    def remove(self) -> None:
        self.gateway.admin("user", "rm", f"--uid={self.uid}", "--purge-data")


@pytest.fixture
def user(s3_gateway: Gateway) -> Iterator[CephUser]:
    made = CephUser(s3_gateway)
    yield made
    made.remove()


@pytest.fixture
def fakes(user: CephUser) -> Iterator[MetadataFakes]:
    served = MetadataFakes(user.keys[0])
    yield served
    served.close()


def round_trip(fs: asyncfs.ModularFileSystem, bucket: str | None = None) -> str:
    """Makes a bucket (or uses one), writes and reads an object in it."""
    bucket = bucket or f"cred-{uuid.uuid4().hex[:12]}"
    if not fs.exists(f"s3://{bucket}"):
        fs.create_dir(f"s3://{bucket}")
    payload = uuid.uuid4().bytes
    fs.write_file(f"s3://{bucket}/object", payload)
    assert fs.read_file(f"s3://{bucket}/object") == payload
    return bucket


def write_files(home: Path, config: str = "", credentials: str = "") -> None:
    (home / ".aws").mkdir(exist_ok=True)
    (home / ".aws" / "config").write_text(textwrap.dedent(config))
    (home / ".aws" / "credentials").write_text(textwrap.dedent(credentials))


def profile_keys(name: str, keys: Keys) -> str:
    return f"[{name}]\naws_access_key_id = {keys.access_key}\naws_secret_access_key = {keys.secret_key}\n"


# ---- the environment and the shared files ------------------------------------------------


def test_environment_keys_are_read_per_filesystem(environ: Environ, user: CephUser) -> None:
    """Rotated environment keys reach a new filesystem; one started before
    keeps the keys it read, and its refusal names them."""
    first = user.keys[0]
    environ(AWS_ACCESS_KEY_ID=first.access_key, AWS_SECRET_ACCESS_KEY=first.secret_key)
    before = new_s3()
    bucket = round_trip(before)
    second = user.rotate()
    environ(AWS_ACCESS_KEY_ID=second.access_key, AWS_SECRET_ACCESS_KEY=second.secret_key)
    round_trip(new_s3(), bucket)
    with pytest.raises(asyncfs.PermissionDeniedError, match=f"access key id '{first.access_key}'"):
        before.read_file(f"s3://{bucket}/object")


def test_each_env_of_one_registry_reads_the_environment_as_it_starts(environ: Environ, user: CephUser) -> None:
    """As each boto3 client does: an Env made after the keys rotated uses the
    new ones, on the same registry (the process-wide one, in a service); an
    Env made before keeps the keys it read."""
    registry = asyncfs.Registry(builtins=False)
    registry.load_plugin(_libs.library_path("s3"))
    first = user.keys[0]
    environ(AWS_ACCESS_KEY_ID=first.access_key, AWS_SECRET_ACCESS_KEY=first.secret_key)
    before = asyncfs.Env(registry=registry)
    bucket = round_trip(before.filesystem("s3://").wrapped)
    second = user.rotate()
    environ(AWS_ACCESS_KEY_ID=second.access_key, AWS_SECRET_ACCESS_KEY=second.secret_key)
    after = asyncfs.Env(registry=registry)
    assert anyio.run(after.read_file, f"s3://{bucket}/object")
    with pytest.raises(asyncfs.PermissionDeniedError, match=f"access key id '{first.access_key}'"):
        anyio.run(before.read_file, f"s3://{bucket}/object")


def test_a_profile_gives_keys_region_endpoint_and_addressing(
    environ: Environ, user: CephUser, s3_gateway: Gateway, tmp_path: Path
) -> None:
    """AWS_PROFILE picks a profile; its keys come from the credentials file
    and its region, endpoint_url and nested s3.addressing_style from the
    config file, as boto3 reads them."""
    keys = user.keys[0]
    environ(AWS_ENDPOINT_URL=None, AWS_REGION=None, AWS_PROFILE="ceph")
    write_files(
        tmp_path / "home",
        config=f"""
            [default]
            region = nowhere-1
            [profile ceph]
            region = {s3_gateway.region}
            endpoint_url = {s3_gateway.endpoint}
            s3 =
              addressing_style = path
            """,
        credentials=f"""
            [default]
            aws_access_key_id = NOT-THESE
            aws_secret_access_key = not-these
            [ceph]
            aws_access_key_id = {keys.access_key}
            aws_secret_access_key = {keys.secret_key}
            """,
    )
    fs = new_s3()
    assert fs.get_option("endpoint").values == (s3_gateway.endpoint.encode(),)
    assert fs.get_option("region").values == (s3_gateway.region.encode(),)
    assert fs.get_option("path_style").values == (1,)
    round_trip(fs)


def test_rotated_keys_in_the_credentials_file_reach_a_new_filesystem(
    environ: Environ, user: CephUser, tmp_path: Path
) -> None:
    write_files(
        tmp_path / "home",
        credentials=profile_keys("default", user.keys[0]),
    )
    bucket = round_trip(new_s3())
    fresh = user.rotate()
    write_files(
        tmp_path / "home",
        credentials=profile_keys("default", fresh),
    )
    round_trip(new_s3(), bucket)


def test_environment_keys_come_before_the_profile(environ: Environ, user: CephUser, tmp_path: Path) -> None:
    keys = user.keys[0]
    write_files(tmp_path / "home", credentials="[default]\naws_access_key_id = WRONG\naws_secret_access_key = wrong\n")
    environ(AWS_ACCESS_KEY_ID=keys.access_key, AWS_SECRET_ACCESS_KEY=keys.secret_key)
    round_trip(new_s3())


def test_the_profile_option_switches_profiles(environ: Environ, user: CephUser, tmp_path: Path) -> None:
    keys = user.keys[0]
    write_files(
        tmp_path / "home",
        config="[profile good]\nregion = us-east-1\n",
        credentials=f"[good]\naws_access_key_id = {keys.access_key}\naws_secret_access_key = {keys.secret_key}\n",
    )
    fs = new_s3()
    with pytest.raises(asyncfs.UnauthenticatedError, match="no credentials found"):
        fs.exists("s3://anything")
    fs.set_option("profile", b"good")
    round_trip(fs)


def test_a_profile_that_is_nowhere_says_so(environ: Environ, tmp_path: Path) -> None:
    write_files(tmp_path / "home", config="[profile other]\n")
    environ(AWS_PROFILE="missing")
    with pytest.raises(asyncfs.InvalidArgumentError, match="profile 'missing' is in neither"):
        new_s3().exists("s3://anything")


def test_no_credentials_anywhere_says_so(environ: Environ) -> None:
    """Not an InvalidArgument (HTTP 400) from the store: nothing is sent."""
    fs = new_s3()
    with pytest.raises(asyncfs.UnauthenticatedError, match=r"no credentials found.*instance metadata is disabled"):
        fs.exists("s3://anything")
    with pytest.raises(asyncfs.UnauthenticatedError, match="no secret access key"):
        new_s3(access_key_id=b"ONLY-THE-ID").exists("s3://anything")


def test_unreachable_instance_metadata_is_named(environ: Environ) -> None:
    """Off EC2 the metadata endpoint does not answer: one try, named."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    environ(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=f"http://127.0.0.1:{port}")
    with pytest.raises(asyncfs.UnauthenticatedError, match=f"instance metadata at http://127.0.0.1:{port}"):
        new_s3().exists("s3://anything")


def test_a_burst_of_requests_asks_a_failing_source_once(environ: Environ, fakes: MetadataFakes) -> None:
    fakes.imds_broken = True
    environ(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=fakes.endpoint)
    fs = new_s3()
    with pytest.raises(asyncfs.UnavailableError, match=r"instance metadata .* gave no credentials"):
        fs.files_exist([f"s3://anything/{i}" for i in range(64)])
    assert fakes.count("imds token") == 1


# ---- credential_process ------------------------------------------------------------------


def process_config(tmp_path: Path, script: str) -> str:
    path = tmp_path / "creds.py"
    path.write_text(textwrap.dedent(script))
    return f"[default]\ncredential_process = {sys.executable} {path}\n"


def test_credential_process(environ: Environ, user: CephUser, tmp_path: Path) -> None:
    keys = user.keys[0]
    config = process_config(
        tmp_path,
        f"""
        import json
        print(json.dumps({{"Version": 1, "AccessKeyId": "{keys.access_key}",
                          "SecretAccessKey": "{keys.secret_key}"}}))
        """,
    )
    write_files(tmp_path / "home", config=config)
    round_trip(new_s3())


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("import sys; sys.exit(3)", "exited with status 3"),
        ("print('not json')", 'did not print a JSON object with "Version": 1'),
        ('print(\'{"Version": 2, "AccessKeyId": "a", "SecretAccessKey": "b"}\')', '"Version": 1'),
        ('print(\'{"Version": 1, "AccessKeyId": "a"}\')', "gave no access key id and secret"),
        (
            'print(\'{"Version": 1, "AccessKeyId": "a", "SecretAccessKey": "b", "Expiration": "soon"}\')',
            "expiration that is not a time: 'soon'",
        ),
    ],
)
def test_a_failing_credential_process_says_how(environ: Environ, tmp_path: Path, script: str, message: str) -> None:
    write_files(tmp_path / "home", config=process_config(tmp_path, script))
    with pytest.raises(asyncfs.UnauthenticatedError, match=message):
        new_s3().exists("s3://anything")


def test_a_credential_process_that_hangs_is_killed_at_its_limit(environ: Environ, tmp_path: Path) -> None:
    """A command that never answers (a prompt nobody sees, a dead network
    call) fails within credential_timeout_ms, named, and is not left
    running."""
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    write_files(tmp_path / "home", config=process_config(tmp_path, script))
    fs = new_s3(credential_timeout_ms=700)
    start = time.monotonic()
    with pytest.raises(
        asyncfs.DeadlineExceededError, match=r"creds\.py' did not finish within credential_timeout_ms=700"
    ):
        fs.exists("s3://anything")
    assert time.monotonic() - start < 10
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


# ---- web identity, container, instance metadata ---------------------------------------------


def test_web_identity_through_sts(environ: Environ, fakes: MetadataFakes, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(fakes.web_identity_token + "\n")
    environ(
        AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file),
        AWS_ROLE_ARN=fakes.role_arn,
        AWS_ENDPOINT_URL_STS=fakes.endpoint,
    )
    round_trip(new_s3())
    assert fakes.count("sts") == 1 and not fakes.refused


def test_web_identity_refused_names_the_role(environ: Environ, fakes: MetadataFakes, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("a-token-sts-does-not-accept")
    environ(
        AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file), AWS_ROLE_ARN=fakes.role_arn, AWS_ENDPOINT_URL_STS=fakes.endpoint
    )
    with pytest.raises(asyncfs.PermissionDeniedError, match=f"role '{fakes.role_arn}'.*AccessDenied"):
        new_s3().exists("s3://anything")


def test_web_identity_from_the_profile(environ: Environ, fakes: MetadataFakes, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(fakes.web_identity_token)
    write_files(
        tmp_path / "home",
        config=f"[default]\nrole_arn = {fakes.role_arn}\nweb_identity_token_file = {token_file}\n",
    )
    environ(AWS_ENDPOINT_URL_STS=fakes.endpoint)
    round_trip(new_s3())
    assert fakes.count("sts") == 1


def test_container_credentials(environ: Environ, fakes: MetadataFakes, tmp_path: Path) -> None:
    token_file = tmp_path / "container-token"
    token_file.write_text(fakes.container_token)
    environ(
        AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{fakes.endpoint}/container/credentials",
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
    )
    round_trip(new_s3())
    assert fakes.count("container") == 1 and not fakes.refused


@pytest.mark.parametrize(
    "uri",
    [
        "http://example.com/credentials",
        "http://localhost:80@attacker.invalid/",  # the host is attacker.invalid
        "http://127.attacker.invalid/",
        "http://169.254.170.2.attacker.invalid/",
        "http://[::1]@attacker.invalid/",
        "ftp://127.0.0.1/credentials",
    ],
)
def test_container_credentials_refuse_a_foreign_host(environ: Environ, uri: str) -> None:
    """The authorization token is never sent to a host that is not https, a
    loopback address or the container agent's, judged by the host the URL
    parses to (botocore's rule), not by how its text begins."""
    environ(AWS_CONTAINER_CREDENTIALS_FULL_URI=uri, AWS_CONTAINER_AUTHORIZATION_TOKEN="secret")
    with pytest.raises(asyncfs.InvalidArgumentError, match="neither https nor a loopback"):
        new_s3().exists("s3://anything")


def test_a_relative_container_uri_must_start_with_a_slash(environ: Environ) -> None:
    """Appended to http://169.254.170.2, ".attacker.invalid/x" would name
    another host."""
    environ(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=".attacker.invalid/x", AWS_CONTAINER_AUTHORIZATION_TOKEN="t")
    with pytest.raises(asyncfs.InvalidArgumentError, match="must start with '/'"):
        new_s3().exists("s3://anything")


def test_instance_metadata_v2_and_the_session_token_travels(
    environ: Environ, fakes: MetadataFakes, s3_gateway: Gateway
) -> None:
    """IMDSv2: a session token first (the fake refuses v1 requests); the
    role's temporary keys sign the requests, with their session token."""
    proxy = FaultProxy(s3_gateway.endpoint)
    try:
        environ(
            AWS_EC2_METADATA_DISABLED=None,
            AWS_EC2_METADATA_SERVICE_ENDPOINT=fakes.endpoint,
            AWS_ENDPOINT_URL=proxy.endpoint,
        )
        round_trip(new_s3())
    finally:
        proxy.close()
    assert fakes.count("imds") == 1 and not fakes.refused
    assert all(b"x-amz-security-token: fake-session-token" in head for head in proxy.heads)


def test_temporary_credentials_refresh_before_they_expire(
    environ: Environ, fakes: MetadataFakes, user: CephUser
) -> None:
    """Keys that expire within 10 minutes are fetched again before the next
    request; until then the ones fetched are reused."""
    environ(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=fakes.endpoint)
    fakes.keys.lifetime_s = 600 + 5  # inside the refresh window in 5 s
    fs = new_s3()
    bucket = round_trip(fs)
    assert fakes.count("imds") == 1  # every request of the round trip, one fetch
    fakes.keys = user.rotate()  # the first keys stop working now
    time.sleep(5.5)
    round_trip(fs, bucket)
    assert fakes.count("imds") == 2


def test_a_failed_refresh_keeps_keys_that_have_not_expired(
    environ: Environ, fakes: MetadataFakes, user: CephUser
) -> None:
    """Keys inside the refresh window but not expired keep working while the
    metadata service is away, and it is asked at most every 3 s meanwhile."""
    environ(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=fakes.endpoint)
    fakes.keys.lifetime_s = 300  # inside the window from the start
    fs = new_s3()
    bucket = round_trip(fs)
    assert fakes.count("imds") == 1
    fakes.close()  # the metadata service goes away
    time.sleep(3.2)
    round_trip(fs, bucket)


# ---- anonymous access ----------------------------------------------------------------------


def test_anonymous_requests_read_public_objects_only(environ: Environ, user: CephUser) -> None:
    boto3 = pytest.importorskip("boto3", reason="boto3 (a test extra) sets the object's ACL")
    keys = user.keys[0]
    environ(AWS_ACCESS_KEY_ID=keys.access_key, AWS_SECRET_ACCESS_KEY=keys.secret_key)
    owner = new_s3()
    bucket = round_trip(owner)
    owner.write_file(f"s3://{bucket}/public", b"for everyone")
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ["AWS_REGION"])
    client.put_object_acl(Bucket=bucket, Key="public", ACL="public-read")
    environ(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None, AWS_SKIP_SIGNATURE="true")
    anonymous = new_s3()
    assert anonymous.get_option("anonymous").values == (1,)
    assert anonymous.read_file(f"s3://{bucket}/public") == b"for everyone"
    with pytest.raises(asyncfs.PermissionDeniedError, match="unsigned \\(anonymous\\) request"):
        anonymous.read_file(f"s3://{bucket}/object")


# ---- TLS -----------------------------------------------------------------------------------


def test_an_untrusted_certificate_is_refused_at_once(
    environ: Environ, s3_gateway: Gateway, tls_gateway: tuple[str, Path]
) -> None:
    endpoint, _ = tls_gateway
    environ(
        AWS_ACCESS_KEY_ID=s3_gateway.access_key, AWS_SECRET_ACCESS_KEY=s3_gateway.secret_key, AWS_ENDPOINT_URL=endpoint
    )
    started = time.monotonic()
    with pytest.raises(asyncfs.UnavailableError, match=r"[Cc]ertificate"):
        new_s3().exists("s3://anything")
    assert time.monotonic() - started < 5  # not retried as if the network failed


@pytest.mark.parametrize("how", ["AWS_CA_BUNDLE", "ca_bundle option", "profile ca_bundle", "verify_tls=0"])
def test_a_ca_bundle_or_no_verification_reaches_a_tls_gateway(
    environ: Environ, s3_gateway: Gateway, tls_gateway: tuple[str, Path], tmp_path: Path, how: str
) -> None:
    endpoint, pem = tls_gateway
    environ(
        AWS_ACCESS_KEY_ID=s3_gateway.access_key, AWS_SECRET_ACCESS_KEY=s3_gateway.secret_key, AWS_ENDPOINT_URL=endpoint
    )
    options: dict[str, int | bytes] = {}
    if how == "AWS_CA_BUNDLE":
        environ(AWS_CA_BUNDLE=str(pem))
    elif how == "profile ca_bundle":
        write_files(tmp_path / "home", config=f"[default]\nca_bundle = {pem}\n")
    elif how == "ca_bundle option":
        options["ca_bundle"] = str(pem).encode()
    else:
        options["verify_tls"] = 0
    round_trip(new_s3(**options))


def _payload_hashes(proxy: FaultProxy, key: str = "object") -> set[str]:
    """The x-amz-content-sha256 of the PUTs of key the proxy saw."""
    hashes = set()
    for head in proxy.heads:
        if head.startswith(b"PUT /") and f"/{key} ".encode() in head.split(b"\r\n", 1)[0]:
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"x-amz-content-sha256":
                    hashes.add(value.strip().decode())
    return hashes


@pytest.mark.parametrize(
    "case",
    [
        ("https", "default", "unsigned"),  # TLS guards the body: neither end hashes it
        ("http", "default", "signed"),  # in the clear, the signature covers the body
        ("https", "profile", "signed"),  # s3.payload_signing_enabled = true
        ("https", "sign_payload=1", "signed"),
        ("http", "sign_payload=0", "unsigned"),
    ],
)
def test_bodies_are_signed_as_boto3_signs_them(
    environ: Environ, s3_gateway: Gateway, tmp_path: Path, case: tuple[str, str, str]
) -> None:
    """A body's SHA-256 is signed over http:// and not over https://, as
    boto3 does, unless the profile or the option says otherwise; the
    gateway accepts both and the object is the same."""
    scheme, how, expected = case
    endpoint = s3_gateway.endpoint
    proxy, pem = tls_proxy(endpoint, tmp_path) if scheme == "https" else (FaultProxy(endpoint), None)
    try:
        environ(
            AWS_ACCESS_KEY_ID=s3_gateway.access_key,
            AWS_SECRET_ACCESS_KEY=s3_gateway.secret_key,
            AWS_ENDPOINT_URL=proxy.endpoint,
            AWS_CA_BUNDLE=str(pem) if pem is not None else None,
        )
        options: dict[str, int | bytes] = {}
        if how == "profile":
            write_files(tmp_path / "home", config="[default]\ns3 =\n  payload_signing_enabled = True\n")
        elif how != "default":
            options["sign_payload"] = int(how.rpartition("=")[2])
        round_trip(new_s3(**options))
        hashes = _payload_hashes(proxy)
    finally:
        proxy.close()
    assert len(hashes) == 1
    assert ("unsigned" if hashes == {"UNSIGNED-PAYLOAD"} else "signed") == expected, hashes


WORKERS = """
import asyncio, multiprocessing, pickle, sys
import asyncfs

def write(blob, key):
    env = pickle.loads(blob)
    asyncio.run(env.write_file(f"s3://{sys.argv[1]}/{key}", key.encode()))

if __name__ == "__main__":
    env = asyncfs.Env()
    asyncio.run(env.write_file(f"s3://{sys.argv[1]}/parent", b"parent"))  # resolved before the fork
    blob = pickle.dumps(env)
    for method in ("spawn", "forkserver", "fork"):
        worker = multiprocessing.get_context(method).Process(target=write, args=(blob, method))
        worker.start()
        worker.join(120)
        assert worker.exitcode == 0, (method, worker.exitcode)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="fork and forkserver workers: Linux")
def test_bodies_over_tls_go_unsigned_in_the_workers_users_start(
    environ: Environ, s3_gateway: Gateway, tmp_path: Path
) -> None:
    """The rule holds where users run asyncfs: an Env pickled to spawned and
    forkserver workers (DataLoader, Dask), and one used in a forked child
    after its parent resolved the configuration. Each worker reads the
    environment or inherits its parent's filesystem; none signs a body
    sent over TLS."""
    proxy, pem = tls_proxy(s3_gateway.endpoint, tmp_path)
    try:
        environ(
            AWS_ACCESS_KEY_ID=s3_gateway.access_key,
            AWS_SECRET_ACCESS_KEY=s3_gateway.secret_key,
            AWS_ENDPOINT_URL=proxy.endpoint,
            AWS_CA_BUNDLE=str(pem),
        )
        bucket = round_trip(new_s3())
        script = tmp_path / "workers.py"
        script.write_text(WORKERS)
        done = subprocess.run(
            [sys.executable, str(script), bucket], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr
        hashes = {key: _payload_hashes(proxy, key) for key in ("parent", "spawn", "forkserver", "fork")}
        fs = new_s3()
        written = [fs.read_file(f"s3://{bucket}/{key}") for key in hashes]
    finally:
        proxy.close()
    assert hashes == {key: {"UNSIGNED-PAYLOAD"} for key in hashes}
    assert written == [key.encode() for key in hashes]


def test_a_payload_signing_setting_that_is_not_a_boolean_is_refused(environ: Environ, tmp_path: Path) -> None:
    write_files(tmp_path / "home", config="[default]\ns3 =\n  payload_signing_enabled = sometimes\n")
    with pytest.raises(asyncfs.InvalidArgumentError, match="payload_signing_enabled='sometimes'"):
        new_s3().exists("s3://anything")


# ---- settings that are wrong ---------------------------------------------------------------


def test_an_endpoint_without_a_scheme_is_refused(environ: Environ, s3_gateway: Gateway) -> None:
    environ(
        AWS_ACCESS_KEY_ID="A", AWS_SECRET_ACCESS_KEY="B", AWS_ENDPOINT_URL=s3_gateway.endpoint.removeprefix("http://")
    )
    with pytest.raises(asyncfs.InvalidArgumentError, match="does not start with http:// or https://"):
        new_s3().exists("s3://anything")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("AWS_MAX_ATTEMPTS", "ten", "AWS_MAX_ATTEMPTS='ten' is not an integer"),
        ("AWS_S3_ADDRESSING_STYLE", "virtual-hosted", "is neither 'path' nor 'virtual'"),
        ("AWS_SKIP_SIGNATURE", "yes please", "AWS_SKIP_SIGNATURE='yes please' is neither true nor false"),
    ],
)
def test_a_malformed_environment_value_is_refused_by_name(
    environ: Environ, s3_gateway: Gateway, variable: str, value: str, message: str
) -> None:
    """Not silently replaced by the default: every request says what to fix."""
    environ(AWS_ACCESS_KEY_ID=s3_gateway.access_key, AWS_SECRET_ACCESS_KEY=s3_gateway.secret_key, **{variable: value})
    with pytest.raises(asyncfs.InvalidArgumentError, match=message):
        new_s3().exists("s3://anything")
