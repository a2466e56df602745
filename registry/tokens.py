"""Bearer JWTs from trusted issuers: which issuers, their keys, and the check of a token.

An issuer is configured by ``RELAY_JWT_ISSUERS`` (a JSON list) or in the admin
(``TokenIssuer``). Its keys come from its JWKS URL, or from the ``jwks_uri`` of its OpenID
Connect discovery document; both are fetched through the one outbound module (SSRF guard,
timeouts, size bound) and kept in memory for ``RELAY_JWKS_CACHE_SECONDS``. A token signed
with a key id the cached set does not hold makes the set be fetched again (the issuer rotated
its keys), at most once per ``RELAY_JWT_REFRESH_SECONDS`` per issuer, so a stream of tokens
with made-up key ids cannot make the relay hammer the issuer.

``verify`` answers a token's issuer, subject and scopes, or raises ``TokenRefused`` with a
message for the caller. ``verify_cached`` keeps what ``verify`` answered, per process and
keyed by a hash of the token, until the token expires (as agentgateway does): a caller
sending the same token again costs a hash and a lookup, not a signature check. The token
itself is never logged nor kept.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from registry import jwks, signing

DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
"""Asymmetric algorithms only: a relay never shares a secret with an identity provider."""
SYMMETRIC = frozenset({"HS256", "HS384", "HS512"})


class TokenRefused(Exception):
    """A bearer JWT the relay does not accept; the message says why, for the caller."""


@dataclass(frozen=True)
class Issuer:
    """A trusted issuer and how its tokens' claims map to a principal.

    ``audience``: the ``aud`` values accepted (one must be in the token's). The ``*_scope``
    fields name the scope a token needs to call agents, read the registry, register agents,
    or act as an admin; an empty ``call_scope``/``read_scope`` means any valid token may,
    an empty ``register_scope``/``admin_scope`` means no token may."""

    issuer: str
    audience: tuple[str, ...]
    jwks_url: str = ""
    discovery_url: str = ""
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway: int = 30
    subject_claim: str = "sub"
    scopes_claim: str = "scope"
    call_scope: str = ""
    read_scope: str = ""
    register_scope: str = ""
    admin_scope: str = ""
    token_url: str = ""
    exchange_url: str = ""
    """The token-exchange endpoint (RFC 8693) for agents in exchange mode (empty: none)."""
    introspection_url: str = ""
    """The introspection endpoint (RFC 7662) that checks this issuer's opaque tokens (empty:
    none; ``registry.introspection``)."""
    client_id: str = ""
    """The relay's client id at the introspection endpoint (HTTP Basic)."""
    client_secret: str = field(default="", repr=False)
    """Its secret: never logged, shown or compared in a message."""

    def __post_init__(self) -> None:
        if not self.issuer:
            raise ValueError("an issuer needs its 'issuer' (the iss of its tokens)")
        if self.jwks_url and self.discovery_url:
            raise ValueError(f"issuer {self.issuer!r} needs one of 'jwksUrl' or 'discovery'")
        if not (self.jwks_url or self.discovery_url or self.introspection_url):
            raise ValueError(
                f"issuer {self.issuer!r} needs one of 'jwksUrl' or 'discovery' (or an "
                "'introspectionUrl' for opaque tokens)"
            )
        if self.introspection_url and not (self.client_id and self.client_secret):
            raise ValueError(
                f"issuer {self.issuer!r} needs a 'clientId' and a 'clientSecret' for its "
                "'introspectionUrl'"
            )
        if not self.audience or not all(self.audience):
            raise ValueError(f"issuer {self.issuer!r} needs an 'audience'")
        if not self.algorithms:
            raise ValueError(f"issuer {self.issuer!r} allows no algorithm")
        refused = [alg for alg in self.algorithms if alg == "none" or alg in SYMMETRIC]
        if refused:
            raise ValueError(
                f"issuer {self.issuer!r}: algorithm {refused[0]!r} is not accepted "
                f"(asymmetric only: {', '.join(DEFAULT_ALGORITHMS)})"
            )
        if self.leeway < 0:
            raise ValueError(f"issuer {self.issuer!r}: 'leeway' must be 0 or more seconds")

    @property
    def signs_tokens(self) -> bool:
        """Whether its tokens are JWTs the relay checks itself (it has a JWKS or discovery)."""
        return bool(self.jwks_url or self.discovery_url)


_SETTING_FIELDS = {
    "issuer": "issuer",
    "audience": "audience",
    "jwksUrl": "jwks_url",
    "discovery": "discovery_url",
    "algorithms": "algorithms",
    "leeway": "leeway",
    "subjectClaim": "subject_claim",
    "scopesClaim": "scopes_claim",
    "callScope": "call_scope",
    "readScope": "read_scope",
    "registerScope": "register_scope",
    "adminScope": "admin_scope",
    "tokenUrl": "token_url",
    "exchangeUrl": "exchange_url",
    "introspectionUrl": "introspection_url",
    "clientId": "client_id",
    "clientSecret": "client_secret",
}


def issuers_from_setting(value: Any) -> list[Issuer]:
    """The issuers of ``RELAY_JWT_ISSUERS`` (a JSON list, or its text). Raises ValueError
    naming the entry and the field that is wrong."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "[]")
        except ValueError as error:
            raise ValueError(f"RELAY_JWT_ISSUERS is not JSON: {error}") from error
    if not isinstance(value, list):
        raise ValueError("RELAY_JWT_ISSUERS must be a JSON list of issuers")
    issuers = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ValueError(f"RELAY_JWT_ISSUERS[{index}] is not an object")
        unknown = sorted(set(entry) - set(_SETTING_FIELDS))
        if unknown:
            raise ValueError(
                f"RELAY_JWT_ISSUERS[{index}] has unknown fields {unknown}; "
                f"known: {sorted(_SETTING_FIELDS)}"
            )
        fields = {_SETTING_FIELDS[name]: item for name, item in entry.items()}
        for name in ("audience", "algorithms"):
            if isinstance(fields.get(name), str):
                fields[name] = (fields[name],)
            if name in fields:
                fields[name] = tuple(fields[name])
        try:
            issuers.append(Issuer(**fields))
        except (TypeError, ValueError) as error:
            raise ValueError(f"RELAY_JWT_ISSUERS[{index}]: {error}") from error
    return issuers


def looks_like_jwt(token: str) -> bool:
    """A compact JWS (three base64url parts, the first a JSON object): not an API key."""
    return token.count(".") == 2 and token.startswith("eyJ")


def unverified_issuer(token: str) -> str:
    """The ``iss`` a JWT claims, unchecked (to choose how to check it); "" when it has none
    or is not well formed."""
    try:
        iss = _unverified(token)[1].get("iss")
    except TokenRefused:
        return ""
    return iss if isinstance(iss, str) else ""


@dataclass(frozen=True)
class Verified:
    """A token's issuer, the subject its mapping names, its scopes, and its claims (for the
    access rules; the token itself is not kept)."""

    issuer: Issuer
    subject: str
    scopes: frozenset[str] = field(default_factory=frozenset)
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def has(self, scope: str) -> bool:
        """Whether the token holds ``scope``; an empty scope is held by every token."""
        return not scope or scope in self.scopes


def verify(token: str, issuers: Iterable[Issuer], *, now: float | None = None) -> Verified:
    """The verified token: signature by a current key of its issuer, algorithm allowed,
    ``iss`` trusted, ``aud`` accepted, ``exp`` not passed and ``nbf`` reached (with the
    issuer's leeway). Raises TokenRefused saying which check failed."""
    header, unverified = _unverified(token)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg.lower() == "none":
        raise TokenRefused("unsigned tokens (alg 'none') are not accepted")
    iss = unverified.get("iss")
    issuer = next((item for item in issuers if item.issuer == iss), None)
    if issuer is None:
        raise TokenRefused(f"the token's issuer {str(iss)[:200]!r} is not one this relay trusts")
    if alg not in issuer.algorithms:
        raise TokenRefused(
            f"the token's algorithm {alg[:20]!r} is not accepted for issuer {issuer.issuer!r} "
            f"(accepted: {', '.join(issuer.algorithms)})"
        )
    key_set = _key_set_with(issuer, header.get("kid"))
    try:
        decoded = jwt.decode(token, key_set, algorithms=[alg])
    except BadSignatureError:
        raise TokenRefused("the token's signature does not verify") from None
    except JoseError as error:
        raise TokenRefused(f"the token cannot be verified: {error.description or error}") from None
    claims = decoded.claims
    _check_claims(issuer, claims, now)
    subject = claims.get(issuer.subject_claim)
    if not isinstance(subject, str) or not subject:
        raise TokenRefused(f"the token has no {issuer.subject_claim!r} claim naming its subject")
    return Verified(
        issuer=issuer,
        subject=subject,
        scopes=scopes_of(claims, issuer.scopes_claim),
        claims=dict(claims),
    )


_VERIFIED: OrderedDict[bytes, tuple[float, Verified]] = OrderedDict()
"""Tokens verified lately, by the SHA-256 of the token: (when it expires, what it is)."""
_VERIFIED_MAX = 4096
_VERIFIED_LOCK = threading.Lock()


def verify_cached(token: str, issuers: tuple[Issuer, ...]) -> Verified:
    """``verify``, answered from memory for a token verified before that has not expired and
    whose issuer is still among ``issuers``. A refusal is not kept: it is said again, at the
    cost of a check, as its reason may change (keys rotate, clocks reach ``nbf``)."""
    digest = hashlib.sha256(token.encode()).digest()
    now = time.time()
    with _VERIFIED_LOCK:
        entry = _VERIFIED.get(digest)
        if entry is not None:
            _VERIFIED.move_to_end(digest)
    if entry is not None and now < entry[0] and entry[1].issuer in issuers:
        return entry[1]
    verified = verify(token, issuers, now=now)
    expires = verified.claims.get("exp")
    if isinstance(expires, int | float) and not isinstance(expires, bool):
        with _VERIFIED_LOCK:
            _VERIFIED[digest] = (float(expires), verified)
            while len(_VERIFIED) > _VERIFIED_MAX:
                _VERIFIED.popitem(last=False)
    return verified


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        header_part, payload_part, _ = token.split(".")
        header = json.loads(_b64(header_part))
        payload = json.loads(_b64(payload_part))
    except ValueError:
        raise TokenRefused("the bearer token is not a well-formed JWT") from None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise TokenRefused("the bearer token is not a well-formed JWT")
    return header, payload


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _check_claims(issuer: Issuer, claims: dict[str, Any], now: float | None) -> None:
    registry = jwt.JWTClaimsRegistry(
        now=int(now if now is not None else time.time()),
        leeway=issuer.leeway,
        iss={"essential": True, "value": issuer.issuer},
        aud={"essential": True, "values": list(issuer.audience)},
        exp={"essential": True},
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError:
        raise TokenRefused("the token has expired") from None
    except MissingClaimError as error:
        raise TokenRefused(f"the token lacks a required claim: {error.description}") from None
    except InvalidClaimError as error:
        claim = getattr(error, "claim", "")
        if claim == "aud":
            raise TokenRefused(
                f"the token's audience is not this relay (accepted: {', '.join(issuer.audience)})"
            ) from None
        if claim == "nbf":
            raise TokenRefused("the token is not valid yet (nbf)") from None
        raise TokenRefused(f"the token's {claim or 'claims'} is not valid") from None
    except JoseError as error:
        raise TokenRefused(f"the token's claims are not valid: {error.description}") from None


def scopes_of(claims: dict[str, Any], name: str) -> frozenset[str]:
    """Scopes as OAuth2 sends them (one space-separated string) or as a list (``scp``,
    Keycloak's roles)."""
    value: Any = claims
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


# --- Key sets -----------------------------------------------------------------------------------


@dataclass
class _Keys:
    key_set: KeySet
    kids: frozenset[str]
    fetched_at: float
    refreshed_at: float


_KEYS: dict[str, _Keys] = {}
_FAILED: dict[str, tuple[float, str]] = {}
"""Issuers whose keys could not be had lately, with why: asked again after
RELAY_JWT_REFRESH_SECONDS, not on every call."""
_LOCK = threading.Lock()


def forget_keys() -> None:
    """Drops every cached key set and verified token (tests; an admin change of an issuer)."""
    with _LOCK:
        _KEYS.clear()
        _FAILED.clear()
    with _VERIFIED_LOCK:
        _VERIFIED.clear()


def _key_set_with(issuer: Issuer, kid: Any) -> KeySet:
    """The issuer's key set, holding ``kid`` when the token names one: fetched when not
    cached or stale, and fetched again (rate-limited) when ``kid`` is not in it."""
    now = time.monotonic()
    with _LOCK:
        keys = _KEYS.get(issuer.issuer)
    fresh = keys is not None and now - keys.fetched_at < settings.RELAY_JWKS_CACHE_SECONDS
    if fresh and (kid is None or kid in keys.kids):
        return keys.key_set
    if keys is not None and fresh:
        # An unknown key id: the issuer may have rotated its keys.
        if now - keys.refreshed_at < settings.RELAY_JWT_REFRESH_SECONDS:
            raise TokenRefused(_unknown_kid(kid, issuer))
        keys.refreshed_at = now
        keys = _fetch(issuer, now, refreshing=True)
    else:
        keys = _fetch(issuer, now)
    if kid is not None and kid not in keys.kids:
        raise TokenRefused(_unknown_kid(kid, issuer))
    return keys.key_set


def _unknown_kid(kid: Any, issuer: Issuer) -> str:
    return f"no key with id {str(kid)[:100]!r} in the key set of issuer {issuer.issuer!r}"


def _fetch(issuer: Issuer, now: float, *, refreshing: bool = False) -> _Keys:
    with _LOCK:
        failed = _FAILED.get(issuer.issuer)
    if failed is not None and now - failed[0] < settings.RELAY_JWT_REFRESH_SECONDS:
        raise TokenRefused(failed[1])
    try:
        return _fetched(issuer, now, refreshing)
    except TokenRefused as error:
        with _LOCK:
            _FAILED[issuer.issuer] = (now, str(error))
        raise


def _fetched(issuer: Issuer, now: float, refreshing: bool) -> _Keys:
    try:
        url = issuer.jwks_url or _jwks_uri(issuer)
        document = jwks.download_document(url)
        key_set = KeySet.import_key_set(_verification_keys(document))
    except signing.KeySetError as error:
        raise TokenRefused(f"the keys of issuer {issuer.issuer!r} cannot be had: {error}") from None
    except (JoseError, ValueError, TypeError, KeyError) as error:
        raise TokenRefused(
            f"the key set of issuer {issuer.issuer!r} is not a usable JWKS: {error}"
        ) from None
    kids = frozenset(key.kid for key in key_set.keys if key.kid)
    # Only a fetch for an unknown key id counts against the refresh limit.
    refreshed_at = now if refreshing else float("-inf")
    keys = _Keys(key_set=key_set, kids=kids, fetched_at=now, refreshed_at=refreshed_at)
    with _LOCK:
        _KEYS[issuer.issuer] = keys
        _FAILED.pop(issuer.issuer, None)
    return keys


def _verification_keys(document: dict[str, Any]) -> dict[str, Any]:
    """The JWKS's signing keys: keys for encryption (``use: enc``) and symmetric keys are
    left out (a verifier that took them could be fooled with HS256)."""
    keys = document.get("keys")
    if not isinstance(keys, list):
        raise ValueError("it has no 'keys' list")
    usable = [
        key
        for key in keys
        if isinstance(key, dict) and key.get("use", "sig") == "sig" and key.get("kty") != "oct"
    ]
    return {"keys": usable}


def _jwks_uri(issuer: Issuer) -> str:
    """The ``jwks_uri`` of the issuer's discovery document, whose ``issuer`` must be it."""
    document = jwks.download_document(issuer.discovery_url)
    if document.get("issuer") != issuer.issuer:
        raise signing.KeySetError(
            f"the discovery document names issuer {str(document.get('issuer'))[:200]!r}, "
            f"not {issuer.issuer!r}"
        )
    uri = document.get("jwks_uri")
    if not isinstance(uri, str) or not uri:
        raise signing.KeySetError("the discovery document has no jwks_uri")
    return uri
