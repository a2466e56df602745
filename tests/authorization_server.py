"""An OAuth2 / OpenID Connect authorization server for tests: a real HTTP server on 127.0.0.1
(Starlette, served like the test agents) that signs JWTs with RSA keys of its own, serves its
JWKS and its discovery document, and issues tokens to clients (client credentials).

    with authorization_server() as issuer:
        token = issuer.token(sub="alice", scope="a2a:call")
        issuer.rotate()                          # a new signing key, the old one retired
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.servers import running

AUDIENCE = "brass-relay"
DISCOVERY_PATH = "/.well-known/openid-configuration"

_kids = itertools.count(1)


class AuthorizationServer:
    def __init__(self) -> None:
        self.url = ""
        self.keys: list[RSAKey] = []
        self.jwks_fetches = 0
        self.down = False
        """The JWKS answers 503 while true (the fetches still count)."""
        self.rotate(keep_old=False)

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def discovery_url(self) -> str:
        return self.url + DISCOVERY_PATH

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    @property
    def signing_key(self) -> RSAKey:
        return self.keys[-1]

    def rotate(self, *, keep_old: bool = False) -> RSAKey:
        """Signs with a new key from now on; the old keys leave the JWKS unless ``keep_old``."""
        key = RSAKey.generate_key(2048, parameters={"kid": f"key-{next(_kids)}", "use": "sig"})
        self.keys = [*self.keys, key] if keep_old else [key]
        return key

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "alice",
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + 300,
            "scope": "a2a:call",
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def token(
        self, *, key: RSAKey | None = None, header: dict[str, Any] | None = None, **claims: Any
    ) -> str:
        """A token signed by the current key (or ``key``), with the default claims changed
        by ``claims`` (None removes one)."""
        key = key or self.signing_key
        header = {"alg": "RS256", "kid": key.kid, **(header or {})}
        return jwt.encode(header, self.claims(**claims), key)

    def app(self, base_url: str) -> Starlette:
        self.url = base_url.rstrip("/")

        async def discovery(request: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "jwks_uri": self.jwks_url,
                    "token_endpoint": self.url + "/token",
                    "grant_types_supported": ["client_credentials"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                }
            )

        async def key_set(request: Request) -> JSONResponse:
            self.jwks_fetches += 1
            if self.down:
                return JSONResponse({"error": "down"}, status_code=503)
            return JSONResponse({"keys": [key.as_dict(private=False) for key in self.keys]})

        async def token(request: Request) -> JSONResponse:
            form = await request.form()
            if form.get("grant_type") != "client_credentials":
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            client = form.get("client_id") or "client"
            scope = form.get("scope") or "a2a:call"
            access = self.token(sub=str(client), scope=str(scope))
            return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 300})

        return Starlette(
            routes=[
                Route(DISCOVERY_PATH, discovery),
                Route("/jwks", key_set),
                Route("/token", token, methods=["POST"]),
            ]
        )


@contextmanager
def authorization_server() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer()
    with running(server.app):
        yield server
