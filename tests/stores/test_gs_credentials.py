"""Where gs requests get their bearer token: a service account's signed JWT,
an authorized_user's refresh token, the GCE metadata server, the testing
variable; refreshed before expiry; and a clear error naming what was tried
when none gives one. The token services are small fakes on loopback (the
JWT's RS256 signature is checked with the service account's public key);
the storage requests go through an https:// proxy in front of
fake-gcs-server, which records the Authorization each carries."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from conftest import tls_proxy
from support.gcs_emulator import GcsEmulator

import asyncfs

EMAIL = "loader@asyncfs-test.iam.gserviceaccount.com"


class TokenService:
    """Google's token endpoint and the metadata server's token, faked."""

    def __init__(self, public_key: object, lifetime: int = 3600) -> None:
        self.public_key = public_key
        self.lifetime = lifetime
        self.served: list[str] = []  # tokens handed out, in order
        self.refused: list[str] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                service.answer(self, service.exchange(form))

            def do_GET(self) -> None:
                ok = (
                    self.path == "/computeMetadata/v1/instance/service-accounts/default/token"
                    and self.headers.get("Metadata-Flavor") == "Google"
                )
                service.answer(self, "gce" if ok else None)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def exchange(self, form: dict[str, list[str]]) -> str | None:
        grant = form.get("grant_type", [""])[0]
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return "sa" if self.valid_jwt(form["assertion"][0]) else None
        if grant == "refresh_token" and form.get("refresh_token") == ["the-refresh-token"]:
            return "user" if form.get("client_secret") == ["the-client-secret"] else None
        return None

    def valid_jwt(self, jwt: str) -> bool:
        padding = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.padding")
        hashes = pytest.importorskip("cryptography.hazmat.primitives.hashes")
        head, body, signature = jwt.split(".")

        def decoded(part: str) -> bytes:
            return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

        try:
            self.public_key.verify(  # type: ignore[attr-defined]
                decoded(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except Exception as error:  # any failure is a refusal, recorded
            self.refused.append(f"signature: {error!r}")
            return False
        claims = json.loads(decoded(body))
        header = json.loads(decoded(head))
        good = (
            header["alg"] == "RS256"
            and claims["iss"] == EMAIL
            and claims["aud"] == f"{self.url}/token"
            and claims["exp"] - claims["iat"] == 3600
            and "cloud-platform" in claims["scope"]
        )
        if not good:
            self.refused.append(f"claims: {header} {claims}")
        return good

    def answer(self, handler: BaseHTTPRequestHandler, kind: str | None) -> None:
        if kind is None:
            handler.send_response(401)
            handler.end_headers()
            return
        token = f"{kind}-{len(self.served) + 1}"
        self.served.append(token)
        body = json.dumps({"access_token": token, "expires_in": self.lifetime, "token_type": "Bearer"}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def key() -> object:
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def service(key: object) -> Iterator[TokenService]:
    fake = TokenService(key.public_key())  # type: ignore[attr-defined]
    yield fake
    fake.close()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in (
        "STORAGE_EMULATOR_HOST",
        "GOOGLE_AUTH_TOKEN_FOR_TESTING",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GCE_METADATA_HOST",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    return monkeypatch


@pytest.fixture
def https_store(gcs_emulator: GcsEmulator, tmp_path: Path) -> Iterator[tuple[object, Path]]:
    proxy, pem = tls_proxy(gcs_emulator.endpoint, tmp_path)
    with contextlib.suppress(urllib.error.HTTPError):  # 409: made by an earlier test
        gcs_emulator.create_bucket("creds")
    yield proxy, pem
    proxy.close()


def store_fs(https_store: tuple[object, Path], **options: bytes | int) -> asyncfs.ModularFileSystem:
    proxy, pem = https_store
    fs = asyncfs.Registry().get("gs")
    fs.set_option("endpoint", proxy.endpoint.encode())  # type: ignore[attr-defined]
    fs.set_option("ca_bundle", str(pem).encode())
    for name, value in options.items():
        fs.set_option(name, value)
    return fs


def bearers(https_store: tuple[object, Path]) -> list[str]:
    proxy = https_store[0]
    out = []
    for head in proxy.heads:  # type: ignore[attr-defined]
        for line in head.decode("latin-1").split("\r\n"):
            if line.lower().startswith("authorization:"):
                out.append(line.split(":", 1)[1].strip())
    return out


def service_account_file(tmp_path: Path, key: object, token_uri: str) -> Path:
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    pem = key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path = tmp_path / "service-account.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "asyncfs-test",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": EMAIL,
                "token_uri": token_uri,
            }
        )
    )
    return path


def test_a_service_account_signs_a_jwt_for_its_token(
    clean_env: pytest.MonkeyPatch, https_store: tuple[object, Path], service: TokenService, key: object, tmp_path: Path
) -> None:
    clean_env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(tmp_path, key, f"{service.url}/token")))
    fs = store_fs(https_store)
    fs.write_file("gs://creds/sa", b"signed")
    assert fs.read_file("gs://creds/sa") == b"signed"
    assert service.refused == []
    assert service.served == ["sa-1"]  # asked once, kept for its life
    assert set(bearers(https_store)) == {"Bearer sa-1"}


def test_a_token_is_fetched_again_before_it_expires(
    clean_env: pytest.MonkeyPatch, https_store: tuple[object, Path], service: TokenService, key: object, tmp_path: Path
) -> None:
    """A token with less than four minutes to live is replaced before use."""
    service.lifetime = 200
    fs = store_fs(
        https_store, credentials_file=str(service_account_file(tmp_path, key, f"{service.url}/token")).encode()
    )
    fs.write_file("gs://creds/short", b"x")
    fs.stat("gs://creds/short")
    assert service.served == ["sa-1", "sa-2"]
    assert bearers(https_store) == ["Bearer sa-1", "Bearer sa-2"]


def test_gclouds_application_default_file_with_a_refresh_token(
    clean_env: pytest.MonkeyPatch, https_store: tuple[object, Path], service: TokenService, tmp_path: Path
) -> None:
    folder = tmp_path / "gcloud"
    folder.mkdir()
    (folder / "application_default_credentials.json").write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "the-client",
                "client_secret": "the-client-secret",
                "refresh_token": "the-refresh-token",
                "token_uri": f"{service.url}/token",
            }
        )
    )
    clean_env.setenv("CLOUDSDK_CONFIG", str(folder))
    fs = store_fs(https_store)
    fs.write_file("gs://creds/user", b"u")
    assert service.served == ["user-1"]
    assert bearers(https_store) == ["Bearer user-1"]


def test_the_metadata_server(
    clean_env: pytest.MonkeyPatch, https_store: tuple[object, Path], service: TokenService
) -> None:
    clean_env.delenv("NO_GCE_CHECK")
    clean_env.setenv("GCE_METADATA_HOST", service.url.removeprefix("http://"))
    fs = store_fs(https_store)
    fs.write_file("gs://creds/gce", b"g")
    assert service.served == ["gce-1"]
    assert bearers(https_store) == ["Bearer gce-1"]


def test_the_testing_variable_comes_before_files(
    clean_env: pytest.MonkeyPatch, https_store: tuple[object, Path], service: TokenService, key: object, tmp_path: Path
) -> None:
    clean_env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(tmp_path, key, f"{service.url}/token")))
    clean_env.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "for-testing")
    fs = store_fs(https_store)
    fs.write_file("gs://creds/t", b"t")
    assert service.served == []
    assert bearers(https_store) == ["Bearer for-testing"]


def test_nothing_found_names_every_source_tried(clean_env: pytest.MonkeyPatch) -> None:
    fs = asyncfs.Registry().get("gs")
    with pytest.raises(asyncfs.UnauthenticatedError) as info:
        fs.read_file("gs://some-bucket/some-key")
    message = str(info.value)
    for source in ("token option", "GOOGLE_AUTH_TOKEN_FOR_TESTING", "GOOGLE_APPLICATION_CREDENTIALS", "NO_GCE_CHECK"):
        assert source in message


def test_off_gce_the_metadata_probe_gives_up_quickly(clean_env: pytest.MonkeyPatch) -> None:
    """Nothing listens where the metadata server would be: the error says so
    in about a second, not after the engine's whole retry budget."""
    clean_env.delenv("NO_GCE_CHECK")
    clean_env.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # discard: nothing answers
    fs = asyncfs.Registry().get("gs")
    started = time.monotonic()
    with pytest.raises(asyncfs.UnauthenticatedError, match="metadata server"):
        fs.stat("gs://some-bucket/some-key")
    assert time.monotonic() - started < 10


def test_doctor_says_where_the_credentials_come_from(
    clean_env: pytest.MonkeyPatch, service: TokenService, key: object, tmp_path: Path
) -> None:
    """The read-only option credential_source, which asyncfs doctor prints
    for every network plugin, asks the chain and names its choice."""
    fs = asyncfs.Registry().get("gs")
    assert "NO_GCE_CHECK" in fs.get_option("credential_source").value.decode()
    fs.set_option("credentials_file", str(service_account_file(tmp_path, key, f"{service.url}/token")).encode())
    assert fs.get_option("credential_source").value.decode().startswith(f"service account {EMAIL}")
    clean_env.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "t")
    done = subprocess.run([sys.executable, "-m", "asyncfs", "doctor"], capture_output=True, text=True, check=True)
    assert "credentials: GOOGLE_AUTH_TOKEN_FOR_TESTING" in done.stdout
    with pytest.raises(asyncfs.StatusError):
        fs.set_option("credential_source", b"x")  # read-only
