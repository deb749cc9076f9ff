"""Where az requests get their credentials: connection strings (Azurite's
development form too) and the environment, a SAS, and Entra ID tokens from
a client secret, workload identity's federated token and managed identity;
tokens fetched again before they expire; and a clear error naming what was
tried when nothing gives one. The token services and the metadata service
are small fakes on loopback; requests that carry a bearer token go to a
fake storage endpoint that records each Authorization (Azurite takes
tokens only over HTTPS with its OAuth mode)."""

from __future__ import annotations

import base64
import functools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.azurite import ACCOUNT, KEY, Azurite

import asyncfs


class Fakes:
    """Entra ID's token endpoint, the instance metadata service and a blob
    endpoint, on one loopback server: tokens are "tok-N", in order."""

    def __init__(self) -> None:
        self.lifetime = 3600
        self.issued = 0
        self.forms: list[dict[str, str]] = []
        self.metadata: list[tuple[str, dict[str, str]]] = []  # (query's resource, headers)
        self.authorizations: list[str] = []
        fakes = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _json(self, document: dict[str, object]) -> None:
                body = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _token(self) -> dict[str, object]:
                fakes.issued += 1
                return {"access_token": f"tok-{fakes.issued}", "expires_in": fakes.lifetime, "token_type": "Bearer"}

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                fakes.forms.append({k: v[0] for k, v in form.items()} | {"path": self.path})
                self._json(self._token())

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/metadata/identity/oauth2/token":
                    query = {k: v[0] for k, v in parse_qs(url.query).items()}
                    fakes.metadata.append((query.get("resource", ""), dict(self.headers.items()) | query))
                    token = self._token()
                    token["expires_in"] = str(token["expires_in"])  # a string, as Azure's IMDS sends it
                    self._json(token)
                    return
                fakes.authorizations.append(self.headers.get("Authorization", ""))
                body = b"<?xml version='1.0'?><EnumerationResults><Blobs/><NextMarker/></EnumerationResults>"
                self.send_response(200)  # a listing: empty
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_HEAD(self) -> None:  # the blob endpoint: nothing is there
                fakes.authorizations.append(self.headers.get("Authorization", ""))
                self.send_response(404)
                self.send_header("x-ms-error-code", "BlobNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    service = Fakes()
    yield service
    service.close()


def token_fs(fakes: Fakes, **options: str | int) -> asyncfs.ModularFileSystem:
    """An az filesystem whose requests go to the fake blob endpoint, with
    no key, SAS or connection string (whatever the environment says)."""
    fs = asyncfs.Registry().get("az")
    base = {"connection_string": "", "account_key": "", "sas_token": "", "tenant_id": "", "client_id": ""}
    base |= {"client_secret": "", "federated_token_file": "", "retry_base_ms": 1}
    base |= {"account": "acct", "endpoint": f"{fakes.url}/acct", "authority_host": fakes.url}
    for name, value in (base | options).items():
        fs.set_option(name, value.encode() if isinstance(value, str) else value)
    return fs


def missing(fs: asyncfs.ModularFileSystem) -> None:
    with pytest.raises(asyncfs.NotFoundError):
        fs.stat("az://cont/x")


def test_a_client_secret_is_exchanged_for_a_token(fakes: Fakes) -> None:
    fs = token_fs(fakes, tenant_id="tenant-1", client_id="app-1", client_secret="s3cr&t")
    missing(fs)
    missing(fs)
    assert set(fakes.authorizations) == {"Bearer tok-1"}  # kept while it lives
    [form] = fakes.forms
    assert form["path"] == "/tenant-1/oauth2/v2.0/token"
    assert form["grant_type"] == "client_credentials"
    assert (form["client_id"], form["client_secret"]) == ("app-1", "s3cr&t")
    assert form["scope"] == "https://storage.azure.com/.default"
    assert fs.get_option("credential_source").value.decode().startswith("Entra ID client secret (client app-1")


def test_workload_identity_sends_the_federated_token(fakes: Fakes, tmp_path: Path) -> None:
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text("eyJhbGciOi.federated.jwt\n")
    fs = token_fs(fakes, tenant_id="tenant-2", client_id="app-2", federated_token_file=str(token_file))
    missing(fs)
    [form] = fakes.forms
    assert form["client_assertion"] == "eyJhbGciOi.federated.jwt"
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert "client_secret" not in form
    assert set(fakes.authorizations) == {"Bearer tok-1"}


def test_managed_identity_asks_the_metadata_service(fakes: Fakes) -> None:
    fs = token_fs(fakes, msi_endpoint=f"{fakes.url}/metadata/identity/oauth2/token", client_id="user-assigned")
    missing(fs)
    [(resource, asked)] = fakes.metadata
    assert resource == "https://storage.azure.com"
    assert asked["Metadata"] == "true" and asked["client_id"] == "user-assigned"
    assert set(fakes.authorizations) == {"Bearer tok-1"}
    assert fs.get_option("credential_source").value.decode().startswith("managed identity")


def test_a_token_about_to_expire_is_fetched_again(fakes: Fakes) -> None:
    fakes.lifetime = 200  # less than the 240 s a token must still have
    fs = token_fs(fakes, tenant_id="t", client_id="c", client_secret="s")
    missing(fs)
    assert fakes.authorizations == [f"Bearer tok-{n}" for n in range(1, len(fakes.authorizations) + 1)]
    assert len(fakes.forms) == len(fakes.authorizations) > 1  # a fresh one for every request


def test_the_token_option_is_sent_as_it_is(fakes: Fakes) -> None:
    missing(token_fs(fakes, token="given-token"))
    assert set(fakes.authorizations) == {"Bearer given-token"}
    assert fakes.forms == [] and fakes.metadata == []


def test_nothing_found_says_what_was_tried_and_is_not_asked_again_at_once(fakes: Fakes) -> None:
    fakes.server.shutdown()  # nothing answers at the metadata address: refused at once
    fakes.server.server_close()
    fs = token_fs(fakes, msi_endpoint=f"{fakes.url}/metadata/identity/oauth2/token", max_attempts=1)
    for _ in range(2):
        with pytest.raises(asyncfs.UnauthenticatedError) as info:
            fs.stat("az://cont/x")
        message = str(info.value)
        for tried in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"):
            assert tried in message
        assert "managed identity" in message and "anonymous=1" in message
    assert fs.get_option("credential_source").value.decode().startswith("none found: az: no credentials")


def test_anonymous_sends_no_authorization(fakes: Fakes) -> None:
    missing(token_fs(fakes, anonymous=1))
    assert set(fakes.authorizations) == {""}


# ---- keys and connection strings, on Azurite ----------------------------------------------


def test_the_development_connection_string(azurite: Azurite) -> None:
    """UseDevelopmentStorage=true is Azurite's well-known account and key
    (DevelopmentStorageProxyUri: where it listens, here not port 10000)."""
    root = azurite.endpoint.rsplit("/", 1)[0]
    fs = asyncfs.Registry().get("az")
    fs.set_option("connection_string", f"UseDevelopmentStorage=true;DevelopmentStorageProxyUri={root}".encode())
    fs.create_dir("az://dev-store")
    fs.write_file("az://dev-store/x", b"x")
    assert fs.read_file("az://dev-store/x") == b"x"
    assert fs.get_option("credential_source").value.decode() == (
        f"Shared Key of account {ACCOUNT} (the connection string)"
    )
    fs.delete_recursively("az://dev-store")


@pytest.mark.parametrize("account_variable", ["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"])
@pytest.mark.parametrize("key_variable", ["AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY"])
def test_the_account_and_key_from_the_environment(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch, account_variable: str, key_variable: str
) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv(account_variable, ACCOUNT)
    monkeypatch.setenv(key_variable, KEY)
    fs = asyncfs.Registry().get("az")  # made now: reads the environment
    fs.set_option("endpoint", azurite.endpoint.encode())
    fs.create_dir("az://from-env")
    assert fs.exists("az://from-env")
    fs.delete_dir("az://from-env")
    assert fs.get_option("credential_source").value.decode() == f"Shared Key of account {ACCOUNT} (the options)"


def test_the_connection_string_from_the_environment(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "another")  # the connection string wins
    fs = asyncfs.Registry().get("az")
    fs.create_dir("az://from-env-string")
    assert fs.exists("az://from-env-string")
    fs.delete_dir("az://from-env-string")


# ---- connection strings, parsed (property-based) ------------------------------------------

_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=3, max_size=24)
_KEYS = st.binary(min_size=16, max_size=64).map(lambda raw: base64.b64encode(raw).decode())


@settings(max_examples=200, deadline=None)
@given(
    name=_NAMES,
    key=_KEYS,
    order=st.permutations(["AccountName", "AccountKey", "DefaultEndpointsProtocol", "EndpointSuffix"]),
    upper=st.booleans(),
    trailing=st.booleans(),
)
def test_a_connection_string_in_any_order_and_case_names_its_account(
    name: str, key: str, order: list[str], upper: bool, trailing: bool
) -> None:
    """Keys in any order and case, a key's "=" padding kept, a trailing ";"
    or none: the account and its Shared Key are what the string says."""
    values = {"AccountName": name, "AccountKey": key, "DefaultEndpointsProtocol": "https"}
    values["EndpointSuffix"] = "core.windows.net"
    text = ";".join(f"{k.upper() if upper else k}={values[k]}" for k in order) + (";" if trailing else "")
    fs = _bare()
    fs.set_option("connection_string", text.encode())
    assert fs.get_option("credential_source").value.decode() == f"Shared Key of account {name} (the connection string)"


@functools.cache
def _bare() -> asyncfs.ModularFileSystem:
    """One filesystem for every example (a registry each would hold a
    loaded copy of every plugin per example)."""
    fs = asyncfs.Registry().get("az")
    for option in ("account", "account_key", "sas_token", "endpoint"):
        fs.set_option(option, b"")
    return fs


@settings(max_examples=100, deadline=None)
@given(name=_NAMES, sas=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789=&%-", min_size=1, max_size=80))
def test_a_connection_string_with_a_sas_uses_the_sas(name: str, sas: str) -> None:
    fs = _bare()
    fs.set_option(
        "connection_string", f"BlobEndpoint=https://{name}.blob.core.windows.net/;SharedAccessSignature=?{sas}".encode()
    )
    assert (
        fs.get_option("credential_source").value.decode() == f"a SAS token for account {name} (the connection string)"
    )
