"""``IdentityProvider``: an OpenID Connect provider's signing keys, served for real on loopback.

It answers ``/.well-known/openid-configuration`` (naming its ``jwks_uri``) and ``/jwks.json``
from a thread of the calling process, counts the requests for each, and signs tokens with its
keys (PyJWT). Keys can be added and withdrawn while it serves, as a provider rotating keys does.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class IdentityProvider:
    def __init__(self, audience: str = "brokergate") -> None:
        self.audience = audience
        self.keys: dict[str, tuple[str, PrivateKey]] = {}  # kid → algorithm, private key
        self.requests: Counter[str] = Counter()  # path → how many times it was asked for
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.jwks_url = self.issuer + "/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> IdentityProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_key(self, kid: str, algorithm: str = "RS256") -> PrivateKey:
        key: PrivateKey = (
            ec.generate_private_key(ec.SECP256R1())
            if algorithm == "ES256"
            else rsa.generate_private_key(public_exponent=65537, key_size=2048)
        )
        self.keys[kid] = (algorithm, key)
        return key

    def withdraw_key(self, kid: str) -> None:
        del self.keys[kid]

    def jwks(self) -> dict[str, Any]:
        published = []
        for kid, (algorithm, key) in self.keys.items():
            codec = ECAlgorithm if isinstance(key, ec.EllipticCurvePrivateKey) else RSAAlgorithm
            jwk = json.loads(codec.to_jwk(key.public_key()))
            published.append({**jwk, "kid": kid, "alg": algorithm, "use": "sig"})
        return {"keys": published}

    def claims(self, subject: str, *, lifetime_s: float = 3600, **more: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.issuer, "aud": self.audience, "sub": subject, "iat": now, "exp": now + lifetime_s}
        return {**base, **more}

    def token(self, subject: str, *, kid: str | None = None, lifetime_s: float = 3600, **claims: Any) -> str:
        """A token for ``subject`` signed with key ``kid`` (the first one by default); ``claims``
        add to or replace the usual ones (``None`` removes one)."""
        kid = kid if kid is not None else next(iter(self.keys))
        algorithm, key = self.keys[kid]
        body = {
            k: v for k, v in self.claims(subject, lifetime_s=lifetime_s, **claims).items() if v is not None
        }
        return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.requests[self.path] += 1
                if self.path == "/.well-known/openid-configuration":
                    document: dict[str, Any] = {"issuer": provider.issuer, "jwks_uri": provider.jwks_url}
                elif self.path == "/jwks.json":
                    document = provider.jwks()
                else:
                    self.send_error(404)
                    return
                body = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
