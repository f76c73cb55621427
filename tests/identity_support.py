"""Bearer JWTs for tests: keys made here, tokens signed here, a JWKS served on loopback.

Imported as ``from identity_support import …`` (``tests`` is on pytest's ``pythonpath``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

if TYPE_CHECKING:
    from collections.abc import Iterator

ISSUER = "https://login.test/"
AUDIENCE = "toolbound"
ROLE_MAP = '{ "Tools.Call" = "agent", "Tools.Approve" = "approver" }'


class SigningKey:
    """A private key made for the test, with its kid and the JWK of its public half."""

    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        self.alg = "RS256" if kind == "RSA" else "ES256"
        if kind == "RSA":
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.jwk = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.jwk = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwk.update(kid=kid, use="sig", alg=self.alg)

    def public_pem(self) -> bytes:
        """The public key as PEM (what an HS256-confusion attacker signs with)."""
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def token(self, **claims: Any) -> str:
        """A token signed with this key: iss, aud, exp (+5 minutes) unless overridden."""
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private, algorithm=self.alg, headers={"kid": self.kid})


def jwks(*keys: SigningKey) -> dict[str, Any]:
    """The JWKS document of ``keys``' public halves."""
    return {"keys": [k.jwk for k in keys]}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(**claims: Any) -> str:
    """An ``alg: none`` token (no signature at all)."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 300, **claims}
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64(json.dumps(body).encode())}."


def hmac_token(secret: bytes, *, kid: str | None = None, **claims: Any) -> str:
    """An HS256 token whose secret is ``secret`` (for instance a public key's PEM)."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 300, **claims}
    head: dict[str, Any] = {"alg": "HS256", "typ": "JWT"}
    if kid is not None:
        head["kid"] = kid
    signing_input = f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(body).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


class JwksServer:
    """A JWKS document served on 127.0.0.1 from a thread; ``document`` may be swapped."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                body = json.dumps(server.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/jwks.json"

    @contextlib.contextmanager
    def running(self) -> Iterator[JwksServer]:
        """Serve until the block ends."""
        thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join()


def identity_table(source: str, **extra: str) -> str:
    """An ``[[identity.jwt]]`` table trusting ISSUER for AUDIENCE; ``source`` is jwks_url/file."""
    lines = [
        "[[identity.jwt]]",
        f'issuer = "{ISSUER}"',
        f'audience = "{AUDIENCE}"',
        source,
        'tenant_claim = "tid"',
        *(f"{k} = {v}" for k, v in ({"role_map": ROLE_MAP} | extra).items()),
    ]
    return "\n" + "\n".join(lines) + "\n"
