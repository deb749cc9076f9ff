"""Small fakes of the services AWS credentials come from, on loopback:
EC2 instance metadata (IMDSv2: a session token from a PUT, then the role and
its credentials), the ECS/EKS container credentials endpoint (an
Authorization token), and STS's AssumeRoleWithWebIdentity. Each hands out
whatever keys the test sets in ``keys`` (the real Ceph gateway's, so the
requests signed with them go to the real store) and counts what it served.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

__all__ = ["Keys", "MetadataFakes"]

ROLE = "asyncfs-test-role"
IMDS_TOKEN = "imds-session-token-1"


@dataclass
class Keys:
    access_key: str
    secret_key: str
    session_token: str = "fake-session-token"
    lifetime_s: float = 6 * 3600  # from when they are served

    def expiration(self) -> str:
        when = datetime.fromtimestamp(time.time() + self.lifetime_s, timezone.utc)
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class MetadataFakes:
    keys: Keys
    container_token: str = "container-authorization-token"
    web_identity_token: str = "a-web-identity-jwt"
    role_arn: str = "arn:aws:iam::123456789012:role/asyncfs"
    served: dict[str, int] = field(default_factory=dict)  # what -> times
    refused: list[str] = field(default_factory=list)
    imds_broken: bool = False  # the role's credentials answer 500

    def __post_init__(self) -> None:
        fakes = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_PUT(self) -> None:
                fakes._imds_token(self)

            def do_GET(self) -> None:
                if self.path.startswith("/latest/meta-data/iam/security-credentials/"):
                    fakes._imds_credentials(self)
                elif self.path == "/container/credentials":
                    fakes._container(self)
                else:
                    fakes._answer(self, 404, "text/plain", b"not here")

            def do_POST(self) -> None:
                fakes._sts(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, what: str) -> int:
        with self._lock:
            return self.served.get(what, 0)

    # ---- the protocols -------------------------------------------------------------

    def _answer(self, handler: BaseHTTPRequestHandler, status: int, kind: str, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _serve(self, what: str) -> dict[str, str]:
        with self._lock:
            self.served[what] = self.served.get(what, 0) + 1
            keys = self.keys
        return {
            "AccessKeyId": keys.access_key,
            "SecretAccessKey": keys.secret_key,
            "Token": keys.session_token,
            "Expiration": keys.expiration(),
        }

    def _refuse(self, handler: BaseHTTPRequestHandler, status: int, why: str) -> None:
        with self._lock:
            self.refused.append(why)
        self._answer(handler, status, "text/plain", why.encode())

    def _imds_token(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path != "/latest/api/token" or "X-aws-ec2-metadata-token-ttl-seconds" not in handler.headers:
            self._refuse(handler, 400, "IMDSv2 token request without a TTL")
            return
        with self._lock:
            self.served["imds token"] = self.served.get("imds token", 0) + 1
        self._answer(handler, 200, "text/plain", IMDS_TOKEN.encode())

    def _imds_credentials(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
            self._refuse(handler, 401, "IMDS request without the session token (IMDSv1)")
            return
        role = handler.path.rsplit("/", 1)[1]
        if role == "":
            self._answer(handler, 200, "text/plain", ROLE.encode())
        elif role == ROLE and self.imds_broken:
            self._answer(handler, 500, "text/plain", b"metadata service trouble")
        elif role == ROLE:
            document = {
                "Code": "Success",
                "LastUpdated": "2026-11-23T00:00:00Z",
                "Type": "AWS-HMAC",
                **self._serve("imds"),
            }
            self._answer(handler, 200, "application/json", json.dumps(document, indent=2).encode())
        else:
            self._answer(handler, 404, "text/plain", b"no such role")

    def _container(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.headers.get("Authorization") != self.container_token:
            self._refuse(handler, 401, "container credentials without the authorization token")
            return
        document = {"RoleArn": self.role_arn, **self._serve("container")}
        self._answer(handler, 200, "application/json", json.dumps(document).encode())

    def _sts(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        form = {k: v[0] for k, v in parse_qs(handler.rfile.read(length).decode()).items()}
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
            self._refuse(handler, 400, f"not AssumeRoleWithWebIdentity: {form}")
            return
        if form.get("WebIdentityToken") != self.web_identity_token or form.get("RoleArn") != self.role_arn:
            with self._lock:
                self.refused.append("wrong web identity token or role")
            body = (
                "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                "<Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>"
            )
            self._answer(handler, 403, "text/xml", body.encode())
            return
        served = self._serve("sts")
        body = (
            "<AssumeRoleWithWebIdentityResponse xmlns='https://sts.amazonaws.com/doc/2011-06-15/'>"
            "<AssumeRoleWithWebIdentityResult><Credentials>"
            f"<SessionToken>{served['Token']}</SessionToken>"
            f"<SecretAccessKey>{served['SecretAccessKey']}</SecretAccessKey>"
            f"<Expiration>{served['Expiration']}</Expiration>"
            f"<AccessKeyId>{served['AccessKeyId']}</AccessKeyId>"
            f"</Credentials><SubjectFromWebIdentityToken>{form.get('RoleSessionName')}</SubjectFromWebIdentityToken>"
            "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
        )
        self._answer(handler, 200, "text/xml", body.encode())
