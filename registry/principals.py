"""Callers with a bearer token: the trusted issuers, and the principal a verified token is.

A token's principal is stored as an ``ApiKey`` row of its own (made at its first call, named
by issuer and subject, with no secret), so everything keyed on a caller (the tasks it owns,
its rate limit, its stream slots, the admin's revocation, agent and team scopes) works for it
as for a key. Its rights on a call are the row's, narrowed by the token's scopes: a call right
needs the issuer's scope for it (``tokens.Issuer``); admin comes from the admin scope.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import time
from functools import cache

from django.conf import settings
from django.db import IntegrityError, transaction

from registry import introspection, tokens
from registry.identity_models import TokenIssuer
from registry.models import ApiKey
from registry.secrets import API_KEY_PREFIX

logger = logging.getLogger(__name__)

_HASH_MARK = "jwt:"
"""Principal hashes start with this, which no SHA-256 hex digest of a key does."""

_ISSUERS: dict[str, tuple[float, tuple[tokens.Issuer, ...]]] = {}


def trusted_issuers() -> tuple[tokens.Issuer, ...]:
    """The issuers of RELAY_JWT_ISSUERS and the enabled ones of the admin. The admin's are
    read again after RELAY_TARGET_CACHE_SECONDS, at once in the process that changed them."""
    now = time.monotonic()
    cached = _ISSUERS.get("all")
    if cached is not None and now - cached[0] < settings.RELAY_TARGET_CACHE_SECONDS:
        return cached[1]
    issuers = list(setting_issuers())
    for row in TokenIssuer.objects.filter(enabled=True):
        try:
            issuers.append(row.as_issuer())
        except ValueError as error:
            logger.warning("token issuer %s is ignored: %s", row.issuer, error)
    found = tuple(issuers)
    _ISSUERS["all"] = (now, found)
    return found


def setting_issuers() -> tuple[tokens.Issuer, ...]:
    """The issuers of RELAY_JWT_ISSUERS; none when it is malformed (system check relay.E011
    says why at start-up)."""
    try:
        return _parsed(settings.RELAY_JWT_ISSUERS)
    except ValueError:
        return ()


@cache
def _parsed(value: str) -> tuple[tokens.Issuer, ...]:
    return tuple(tokens.issuers_from_setting(value))


def issuers_changed(**kwargs) -> None:
    """A TokenIssuer was saved or deleted: read the issuers and their keys again."""
    _ISSUERS.clear()
    tokens.forget_keys()
    introspection.forget()


def principal_hash(issuer: str, subject: str) -> str:
    """The principal's stand-in for a key hash (64 characters, never a SHA-256 hex digest)."""
    digest = hashlib.sha256(f"{issuer}\x00{subject}".encode()).hexdigest()
    return _HASH_MARK + digest[: 64 - len(_HASH_MARK)]


def principal_prefix(key_hash: str) -> str:
    """What names the principal in lists, logs and rate limits."""
    return "jwt_" + key_hash[len(_HASH_MARK) : len(_HASH_MARK) + 12]


def principal_ensure(verified: tokens.Verified) -> ApiKey:
    """The principal's row, made at its first call."""
    key_hash = principal_hash(verified.issuer.issuer, verified.subject)
    defaults = {
        "name": f"{verified.subject} ({verified.issuer.issuer})"[:100],
        "prefix": principal_prefix(key_hash),
        "token_issuer": verified.issuer.issuer[:500],
        "token_subject": verified.subject[:255],
    }
    try:
        with transaction.atomic():
            principal, _ = ApiKey.objects.get_or_create(key_hash=key_hash, defaults=defaults)
    except IntegrityError:
        # Two first calls at once: the other one made it.
        principal = ApiKey.objects.get(key_hash=key_hash)
    return principal


def granted(principal: ApiKey, verified: tokens.Verified, *, token: str = "") -> ApiKey:
    """The principal as this call's token allows: each right of the row kept only when the
    token holds the issuer's scope for it; registering needs a register scope to be set. A
    copy for this call alone: it carries the ``token`` itself (``bearer_token``, for agents
    that take the caller's token, ``tasks_app.hop_tokens``) in memory, never stored."""
    issuer = verified.issuer
    caller = copy.copy(principal)
    caller.can_call = principal.can_call and verified.has(issuer.call_scope)
    caller.can_read_registry = principal.can_read_registry and verified.has(issuer.read_scope)
    caller.can_register = (
        principal.can_register
        and bool(issuer.register_scope)
        and verified.has(issuer.register_scope)
    )
    caller.is_admin = principal.is_admin or (
        bool(issuer.admin_scope) and verified.has(issuer.admin_scope)
    )
    caller.token_scopes = verified.scopes
    caller.token_claims = verified.claims
    caller.token_exchange_url = issuer.exchange_url
    caller.bearer_token = token
    return caller


def is_issued_token(bearer: str) -> bool:
    """Whether a bearer credential is an issuer's token rather than one of the relay's API
    keys: a JWT, or, when an issuer introspects opaque tokens, anything without the API
    keys' prefix."""
    if tokens.looks_like_jwt(bearer):
        return True
    if bearer.startswith(API_KEY_PREFIX):
        return False
    return any(issuer.introspection_url for issuer in trusted_issuers())


def verify_bearer(token: str) -> tokens.Verified:
    """The verified token: a JWT of an issuer with keys is checked here (``tokens``); any
    other token is introspected by the issuers with an introspection endpoint (for a JWT,
    only by the issuer its ``iss`` names). Raises tokens.TokenRefused (also when no issuer
    is configured)."""
    issuers = trusted_issuers()
    if not issuers:
        raise tokens.TokenRefused("this relay trusts no token issuer: send an API key")
    signing = tuple(issuer for issuer in issuers if issuer.signs_tokens)
    introspecting = tuple(issuer for issuer in issuers if issuer.introspection_url)
    if tokens.looks_like_jwt(token):
        if not introspecting:
            return tokens.verify_cached(token, signing)
        iss = tokens.unverified_issuer(token)
        named = tuple(issuer for issuer in introspecting if issuer.issuer == iss)
        if not named or any(issuer.issuer == iss for issuer in signing):
            return tokens.verify_cached(token, signing)
        introspecting = named
    if not introspecting:
        raise tokens.TokenRefused("no trusted issuer introspects opaque tokens")
    return introspection.introspect_cached(token, introspecting)


def card_security_schemes() -> dict[str, dict]:
    """The trusted issuers as A2A 1.0 security schemes: ``openIdConnect`` for an issuer with a
    discovery document, ``oauth2`` (client credentials) for one with a token URL, else a
    bearer JWT scheme. Named ``oidc``, ``oidc2``, … in the order of ``trusted_issuers``."""
    schemes: dict[str, dict] = {}
    for index, issuer in enumerate(trusted_issuers()):
        name = "oidc" if index == 0 else f"oidc{index + 1}"
        kind = "JWT" if issuer.signs_tokens else "token"
        description = (
            f"A bearer {kind} issued by {issuer.issuer} for {' or '.join(issuer.audience)}."
        )
        if issuer.discovery_url:
            scheme = {
                "openIdConnectSecurityScheme": {
                    "openIdConnectUrl": issuer.discovery_url,
                    "description": description,
                }
            }
        elif issuer.token_url:
            scopes = {issuer.call_scope: "Call agents and teams"} if issuer.call_scope else {}
            scheme = {
                "oauth2SecurityScheme": {
                    "description": description,
                    "flows": {
                        "clientCredentials": {"tokenUrl": issuer.token_url, "scopes": scopes}
                    },
                }
            }
        else:
            scheme = {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    **({"bearerFormat": "JWT"} if issuer.signs_tokens else {}),
                    "description": description,
                }
            }
        schemes[name] = scheme
    return schemes
