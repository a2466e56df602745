"""The token an agent gets on a caller's behalf, per hop (the agent's delegation mode):

- ``none``: the agent's stored credential, as the registry holds it (nothing here).
- ``pass``: the caller's own bearer JWT, when its ``aud`` names the agent's audience;
  otherwise the call is refused.
- ``exchange``: a token of the agent's own, from a token-exchange endpoint (RFC 8693): the
  caller's JWT is the subject token, the agent's audience the ``audience``, the scopes asked
  only those the caller holds, and ``actor_chain`` names who acts for the caller, oldest
  first: this relay, the team, and each member that handed on before (the routing trace).
  The endpoint writes that chain as nested ``act`` claims (RFC 8693 section 4.1: the current
  actor outermost). An answer whose token is not for the agent or holds a scope the caller's
  does not is refused, never sent.

A refusal raises ``HopRefused`` (PermissionDenied) or, for an endpoint that cannot be
reached or fails, ``HopUnavailable`` (Unavailable): the agent is not called. The caller's
token lives on the call context, in memory only (``CallContext.caller_token``); a task taken
over by another relay process has none, so its hops to such agents are refused. Tokens are
never logged, stored, or put in an error's message; exchanged ones are kept in memory until
shortly before they expire.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings

from relay_project import outbound
from tasks_app import delegation as relay_delegation
from tasks_app.protocol.errors import PermissionDenied, Unavailable

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
NONE, PASS, EXCHANGE = "none", "pass", "exchange"
EXPIRY_MARGIN_SECONDS = 10.0
"""An exchanged token is exchanged again this long before it expires."""
_CACHED_TOKENS = 1024
_MAX_ANSWER_BYTES = 64 * 1024


class HopRefused(PermissionDenied):
    """The agent takes a delegated token and this call cannot give it one."""


class HopUnavailable(Unavailable):
    """The token-exchange endpoint could not be reached, or failed."""


@dataclass(frozen=True)
class Delegation:
    """An agent's delegation mode and its settings (``registry.Agent.delegation_*``)."""

    agent_id: str
    mode: str = NONE
    audience: str = ""
    token_url: str = ""
    scopes: tuple[str, ...] = ()
    narrow: bool = True

    @classmethod
    def of(cls, agent, url: str) -> Delegation:
        """The agent's delegation; its audience defaults to ``url`` (the agent's own)."""
        return cls(
            agent_id=agent.pk,
            mode=agent.delegation_mode or NONE,
            audience=agent.delegation_audience or url,
            token_url=agent.delegation_token_url,
            scopes=tuple(agent.delegation_scopes.replace(",", " ").split()),
            narrow=agent.delegation_narrow,
        )

    @property
    def delegates(self) -> bool:
        return self.mode in (PASS, EXCHANGE)


def actor_chain(ctx) -> tuple[str, ...]:
    """Who acts for the caller on this call, oldest first: this relay, the teams the call
    went through, and the members that handed on before it (``ctx.actors``)."""
    teams = tuple(entry for entry in ctx.delegation if entry.startswith("team:"))
    return (f"relay:{relay_delegation.relay_id()}", *teams, *ctx.actors)


async def authorization(delegation: Delegation, ctx) -> dict[str, str]:
    """The ``Authorization`` header the agent gets for this call (empty in mode none).
    Raises HopRefused or HopUnavailable."""
    if not delegation.delegates:
        return {}
    name = f"agent {delegation.agent_id!r}"
    token = ctx.caller_token
    if not token:
        raise HopRefused(
            f"{name} takes the caller's token (delegation mode {delegation.mode}) and this "
            "call has none: the caller sent an API key, or the task is followed by a relay "
            "process that took it over (a caller's token is never stored)"
        )
    claims = getattr(ctx.caller, "token_claims", None) or {}
    if delegation.mode == PASS:
        if delegation.audience not in _audiences(claims):
            raise HopRefused(
                f"{name} takes the caller's token only when its aud names "
                f"{delegation.audience!r}, and the caller's does not"
            )
        return {"Authorization": f"Bearer {token}"}
    return {"Authorization": f"Bearer {await _exchanged(delegation, ctx, token, claims)}"}


async def _exchanged(delegation: Delegation, ctx, token: str, claims: dict[str, Any]) -> str:
    name = f"agent {delegation.agent_id!r}"
    url = delegation.token_url or getattr(ctx.caller, "token_exchange_url", "")
    if not url:
        raise HopRefused(
            f"{name} takes an exchanged token and neither it nor the caller's issuer names a "
            "token-exchange endpoint"
        )
    held = frozenset(getattr(ctx.caller, "token_scopes", frozenset()))
    missing = [scope for scope in delegation.scopes if scope not in held]
    if missing and not delegation.narrow:
        raise HopRefused(
            f"{name} needs the scopes {' '.join(missing)!r}, which the caller's token lacks"
        )
    scopes = tuple(scope for scope in delegation.scopes if scope in held)
    chain = actor_chain(ctx)
    key = _cache_key(url, token, delegation.audience, scopes, chain)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    form = {
        "grant_type": GRANT_TYPE,
        "subject_token": token,
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        "audience": delegation.audience,
        "actor_chain": " ".join(chain),
    }
    if scopes:
        form["scope"] = " ".join(scopes)
    answer = await _post(name, url, form)
    issued = answer.get("access_token")
    if not isinstance(issued, str) or not issued:
        raise HopRefused(f"{name}: the token-exchange endpoint answered no access_token")
    issued_claims = _unverified_claims(issued)
    if issued_claims is not None and delegation.audience not in _audiences(issued_claims):
        raise HopRefused(f"{name}: the exchanged token is not for {delegation.audience!r}")
    granted = _granted_scopes(answer, issued_claims, scopes)
    broader = sorted(granted - held) if claims else []
    if broader:
        raise HopRefused(
            f"{name}: the exchanged token holds scopes the caller's does not "
            f"({' '.join(broader)}); it is not sent"
        )
    _cache.put(key, issued, _expires_at(answer, issued_claims))
    return issued


async def _post(name: str, url: str, form: dict[str, str]) -> dict[str, Any]:
    auth = None
    if settings.RELAY_TOKEN_EXCHANGE_CLIENT_ID:
        auth = httpx.BasicAuth(
            settings.RELAY_TOKEN_EXCHANGE_CLIENT_ID, settings.RELAY_TOKEN_EXCHANGE_CLIENT_SECRET
        )
    try:
        async with outbound.async_client() as client:
            response = await client.post(url, data=form, auth=auth)
            body = await outbound.aread_limited(response, _MAX_ANSWER_BYTES)
    except outbound.UnsafeURLError as error:
        raise HopRefused(
            f"{name}: the token-exchange endpoint may not be called: {error}"
        ) from None
    except (httpx.HTTPError, outbound.ResponseTooLargeError, TimeoutError) as error:
        raise HopUnavailable(
            f"{name}: the token-exchange endpoint cannot be reached ({type(error).__name__})"
        ) from None
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if response.status_code >= 500 or not isinstance(answer, dict):
        raise HopUnavailable(
            f"{name}: the token-exchange endpoint failed (HTTP {response.status_code})"
        )
    if response.status_code != 200:
        # RFC 6749 section 5.2: error and error_description say why (no token in them).
        error = str(answer.get("error") or "error")[:100]
        description = str(answer.get("error_description") or "")[:300]
        raise HopRefused(
            f"{name}: the token-exchange endpoint refused the exchange ({error}"
            + (f": {description}" if description else "")
            + ")"
        )
    return answer


def _audiences(claims: dict[str, Any]) -> tuple[str, ...]:
    aud = claims.get("aud")
    if isinstance(aud, str):
        return (aud,)
    if isinstance(aud, list):
        return tuple(item for item in aud if isinstance(item, str))
    return ()


def _unverified_claims(token: str) -> dict[str, Any] | None:
    """The claims of a JWT, unverified (the agent verifies it; the relay only checks that
    it is no broader than asked). None for a token that is not a JWT (opaque)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def _granted_scopes(
    answer: dict[str, Any], claims: dict[str, Any] | None, asked: tuple[str, ...]
) -> frozenset[str]:
    """The scopes of the issued token: its ``scope`` claim, else the answer's ``scope``, else
    those asked (RFC 8693 section 2.2.1: omitted when identical)."""
    for source in (claims or {}, answer):
        value = source.get("scope")
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(item for item in value if isinstance(item, str))
    return frozenset(asked)


def _expires_at(answer: dict[str, Any], claims: dict[str, Any] | None) -> float:
    now = time.time()
    ends = [now + 60.0]
    expires_in = answer.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        ends = [now + float(expires_in)]
    exp = (claims or {}).get("exp")
    if isinstance(exp, int | float) and not isinstance(exp, bool):
        ends.append(float(exp))
    return min(ends) - EXPIRY_MARGIN_SECONDS


def _cache_key(url: str, token: str, audience: str, scopes, chain) -> str:
    text = "\x00".join((url, token, audience, " ".join(scopes), " ".join(chain)))
    return hashlib.sha256(text.encode()).hexdigest()


class _TokenCache:
    """Exchanged tokens by a digest of what was asked, until shortly before they expire."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= time.time():
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: str, token: str, expires_at: float) -> None:
        if expires_at <= time.time():
            return
        with self._lock:
            self._entries[key] = (expires_at, token)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_cache = _TokenCache(_CACHED_TOKENS)


def forget_tokens() -> None:
    """Drops every exchanged token kept (tests)."""
    _cache.clear()
