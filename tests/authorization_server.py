"""An OAuth2 / OpenID Connect authorization server for tests: a real HTTP server on 127.0.0.1
(Starlette, served like the test agents) that signs JWTs with RSA keys of its own, serves its
JWKS and its discovery document, and issues tokens to clients (client credentials) and in
exchange for a token of its own (RFC 8693 token exchange, at the same /token).

    with authorization_server() as issuer:
        token = issuer.token(sub="alice", scope="a2a:call")
        issuer.rotate()                          # a new signing key, the old one retired

A token exchange takes a ``subject_token`` this server signed (still valid), an ``audience``
and an optional ``scope`` (each scope must be one the subject token holds: ``invalid_scope``
otherwise), and the relay's ``actor_chain`` (actors separated by spaces, oldest first, or an
``actor_token`` of this server's, whose ``sub`` is the one actor). The issued token has the
subject's ``sub``, ``aud`` = the audience, the scopes asked (the subject's when none), and
the actors as nested ``act`` claims as RFC 8693 section 4.1 writes them: the outermost the
current actor (the last), each ``act`` within it the one before.

It also issues opaque tokens and answers for them at its introspection endpoint (RFC 7662,
``/introspect``, the client authenticated with HTTP Basic as ``INTROSPECTION_CLIENT``):

    token = issuer.opaque_token(sub="carol", scope="a2a:call")
    issuer.revoke(token)                     # introspection says "active": false from now on
"""

from __future__ import annotations

import base64
import itertools
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.servers import running

AUDIENCE = "brass-relay"
DISCOVERY_PATH = "/.well-known/openid-configuration"
INTROSPECTION_CLIENT = ("relay-introspector", "introspection-secret-5f0c2a")
"""The client id and secret the introspection endpoint accepts."""

_kids = itertools.count(1)


class AuthorizationServer:
    def __init__(self) -> None:
        self.url = ""
        self.keys: list[RSAKey] = []
        self.jwks_fetches = 0
        self.down = False
        """The JWKS answers 503 while true (the fetches still count)."""
        self.exchange_down = False
        """The token endpoint answers 503 to exchanges while true (they still count)."""
        self.exchanges: list[dict[str, str]] = []
        """Each token exchange asked: its form, the subject token left out."""
        self.exchange_adds: str = ""
        """A scope an exchange adds to the token it issues (a server that broadens)."""
        self.exchange_clients: list[str] = []
        """The client id of each token exchange's HTTP Basic authentication ("" without)."""
        self.opaque: dict[str, dict[str, Any]] = {}
        """The opaque tokens issued, with their claims (revoked ones: ``active`` false)."""
        self.introspections = 0
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

    @property
    def introspection_url(self) -> str:
        return self.url + "/introspect"

    def opaque_token(self, **claims: Any) -> str:
        """An opaque token (random, not a JWT), active, with the default claims changed by
        ``claims`` (None removes one) as introspection answers them."""
        token = secrets.token_urlsafe(24)
        self.opaque[token] = {"active": True, "token_type": "Bearer", **self.claims(**claims)}
        return token

    def revoke(self, token: str) -> None:
        self.opaque[token] = {"active": False}

    def introspected(self, form, client: tuple[str, str]) -> tuple[int, dict[str, Any]]:
        """The answer to an introspection request (status, body): 401 for another client."""
        self.introspections += 1
        if client != INTROSPECTION_CLIENT:
            return 401, {"error": "invalid_client"}
        return 200, self.opaque.get(str(form.get("token") or ""), {"active": False})

    def subject_claims(self, token: str) -> dict[str, Any]:
        """The claims of a valid token this server signed. Raises JoseError."""
        keys = KeySet.import_key_set({"keys": [key.as_dict(private=False) for key in self.keys]})
        claims = jwt.decode(token, keys, algorithms=["RS256"]).claims
        jwt.JWTClaimsRegistry(exp={"essential": True}).validate(claims)
        return claims

    def exchanged(self, form) -> tuple[int, dict[str, Any]]:
        """The answer to an RFC 8693 token exchange (status, body)."""
        self.exchanges.append({k: str(v) for k, v in form.items() if k != "subject_token"})
        if self.exchange_down:
            return 503, {"error": "temporarily_unavailable"}
        try:
            subject = self.subject_claims(str(form.get("subject_token") or ""))
        except (JoseError, ValueError) as error:
            return 400, {"error": "invalid_grant", "error_description": f"subject token: {error}"}
        audience = str(form.get("audience") or "")
        if not audience:
            return 400, {"error": "invalid_request", "error_description": "no audience"}
        held = str(subject.get("scope") or "").split()
        asked = str(form.get("scope") or "").split()
        beyond = [scope for scope in asked if scope not in held]
        if beyond:
            return 400, {"error": "invalid_scope", "error_description": " ".join(beyond)}
        actors = str(form.get("actor_chain") or "").split()
        if form.get("actor_token"):
            try:
                actors.append(self.subject_claims(str(form["actor_token"]))["sub"])
            except (JoseError, ValueError, KeyError):
                return 400, {"error": "invalid_request", "error_description": "actor token"}
        act: dict[str, Any] | None = None
        for actor in actors:  # oldest first: each one wraps those before it
            act = {"sub": actor, **({"act": act} if act else {})}
        issued = self.token(
            sub=subject["sub"],
            aud=audience,
            scope=" ".join([*(asked or held), *self.exchange_adds.split()]),
            act=act,
        )
        return 200, {
            "access_token": issued,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "token_type": "Bearer",
            "expires_in": 300,
        }

    def app(self, base_url: str) -> Starlette:
        self.url = base_url.rstrip("/")

        async def discovery(request: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "jwks_uri": self.jwks_url,
                    "token_endpoint": self.url + "/token",
                    "grant_types_supported": [
                        "client_credentials",
                        "urn:ietf:params:oauth:grant-type:token-exchange",
                    ],
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
            if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange":
                self.exchange_clients.append(_basic_client(request))
                status, body = self.exchanged(form)
                return JSONResponse(body, status_code=status)
            if form.get("grant_type") != "client_credentials":
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            client = form.get("client_id") or "client"
            scope = form.get("scope") or "a2a:call"
            access = self.token(sub=str(client), scope=str(scope))
            return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 300})

        async def introspect(request: Request) -> JSONResponse:
            form = await request.form()
            status, body = self.introspected(form, _basic_credentials(request))
            return JSONResponse(body, status_code=status)

        return Starlette(
            routes=[
                Route(DISCOVERY_PATH, discovery),
                Route("/jwks", key_set),
                Route("/token", token, methods=["POST"]),
                Route("/introspect", introspect, methods=["POST"]),
            ]
        )


def _basic_credentials(request: Request) -> tuple[str, str]:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return "", ""
    client, _, secret = base64.b64decode(value).decode().partition(":")
    return client, secret


def _basic_client(request: Request) -> str:
    return _basic_credentials(request)[0]


@contextmanager
def authorization_server() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer()
    with running(server.app):
        yield server
