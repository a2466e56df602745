"""Agent Card signatures (A2A 1.0 ``AgentCardSignature``): checking the ones a card carries, and
making the relay's own.

A signature is a JWS in flattened parts, ``{"protected", "signature", "header"?}``, whose payload
(detached, not in the card) is the RFC 8785 (JCS) canonical form of the card without its
``signatures``. The protected header names ``alg``, ``kid`` and ``typ: "JOSE"``, and may give a
``jku``: the URL of the JSON Web Key Set holding the key.

Plain Python, no Django: the JWS work is joserfc's, the canonical form rfc8785's, the 1.0
proto form a2a-sdk's parser's. Finding keys
is the caller's: :func:`verify_card` takes a ``key_set(jku_url)`` callable, which the registry
backs with an SSRF-checked, size-bounded, cached fetch (``registry.jwks``).

Decisions:

- Two payloads are tried for each signature: the card exactly as published (without
  ``signatures``), and the card as the 1.0 proto reads it with empty values dropped, which is
  what a2a-sdk's signer canonicalises. A card signed either way verifies.
- The key set must be at the card's own origin (``jku`` scheme, host and port equal to the
  card URL's, and no redirect off it): a ``jku`` pointing anywhere would let whoever wrote the
  card vouch for it with any key, and another port of a host can be another service. A
  signature without ``jku`` takes the key from ``{card origin}/.well-known/jwks.json``.
- Only asymmetric algorithms are accepted (no ``none``, no HMAC: a shared secret cannot be
  published in a key set).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import rfc8785
from google.protobuf.json_format import MessageToDict, ParseError
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, OKPKey, RSAKey

ALGORITHMS = (
    "ES256",
    "ES384",
    "ES512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "EdDSA",
)
VERIFIED = "verified"
UNSIGNED = "unsigned"
INVALID = "invalid"
WELL_KNOWN_JWKS = "/.well-known/jwks.json"
MAX_SIGNATURES = 8
"""A card with more signatures has only its first eight looked at (each may cost a fetch)."""


class KeySetError(Exception):
    """The key set could not be had or read; the message says why."""


@dataclass(frozen=True)
class SignatureCheck:
    """What the relay found about a card's signatures: ``status`` verified, unsigned or invalid,
    the ``kid`` and ``jku`` of the signature that verified (or of the first one that did not),
    and ``detail`` saying why in words."""

    status: str
    kid: str = ""
    jku: str = ""
    detail: str = ""

    @property
    def verified(self) -> bool:
        return self.status == VERIFIED


def canonical_payloads(document: dict[str, Any], normalized: dict[str, Any] | None) -> list[bytes]:
    """The JCS bytes a signature over ``document`` may cover: the published card without
    ``signatures`` and, when given, its 1.0 proto form with empty values dropped (a2a-sdk's)."""
    payloads = []
    for candidate in (document, _clean_empty(normalized) if normalized else None):
        if not isinstance(candidate, dict):
            continue
        unsigned = {key: value for key, value in candidate.items() if key != "signatures"}
        try:
            payload = rfc8785.dumps(unsigned)
        except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError):
            continue
        if payload not in payloads:
            payloads.append(payload)
    return payloads


def verify_card(
    document: dict[str, Any],
    *,
    card_url: str,
    key_set: Callable[[str], dict[str, Any]],
    normalized: dict[str, Any] | None = None,
) -> SignatureCheck:
    """Checks the ``signatures`` of a card fetched from ``card_url``. Verified when one
    signature verifies with a key from its key set; unsigned when there is none; invalid,
    saying why, otherwise. ``key_set(url)`` returns a JWKS document or raises KeySetError."""
    signatures = document.get("signatures")
    if not signatures:
        return SignatureCheck(UNSIGNED, detail="the card carries no signature")
    if not isinstance(signatures, list):
        return SignatureCheck(INVALID, detail="signatures must be a list")
    payloads = canonical_payloads(document, normalized)
    if not payloads:
        return SignatureCheck(INVALID, detail="the card has no canonical JSON form (RFC 8785)")
    first_failure: SignatureCheck | None = None
    for signature in signatures[:MAX_SIGNATURES]:
        check = _verify_one(signature, payloads, card_url=card_url, key_set=key_set)
        if check.verified:
            return check
        first_failure = first_failure or check
    assert first_failure is not None
    return first_failure


def _verify_one(
    signature: Any,
    payloads: list[bytes],
    *,
    card_url: str,
    key_set: Callable[[str], dict[str, Any]],
) -> SignatureCheck:
    if not isinstance(signature, dict) or not all(
        isinstance(signature.get(name), str) and signature.get(name)
        for name in ("protected", "signature")
    ):
        return SignatureCheck(INVALID, detail="a signature needs protected and signature strings")
    try:
        header = json.loads(_b64decode(signature["protected"]))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return SignatureCheck(INVALID, detail="the protected header is not base64url JSON")
    if not isinstance(header, dict):
        return SignatureCheck(INVALID, detail="the protected header is not a JSON object")
    kid = str(header.get("kid") or "")[:200]
    alg = header.get("alg")
    jku = header.get("jku") or key_set_url_for(card_url)
    if not isinstance(jku, str):
        return SignatureCheck(INVALID, kid=kid, detail="jku must be a URL")
    jku = jku[:2048]
    if alg not in ALGORITHMS:
        return SignatureCheck(
            INVALID, kid=kid, jku=jku, detail=f"the algorithm {alg!r} is not accepted"
        )
    if not kid:
        return SignatureCheck(INVALID, jku=jku, detail="the protected header names no kid")
    if not same_origin(jku, card_url):
        card_origin = urlunsplit(urlsplit(card_url)[:2] + ("", "", ""))
        return SignatureCheck(
            INVALID,
            kid=kid,
            jku=jku,
            detail=f"the key set {jku} is not at the card's origin ({card_origin})",
        )
    try:
        keys = KeySet.import_key_set(_public_keys(key_set(jku)))
        key = keys.get_by_kid(kid)
    except KeySetError as error:
        return SignatureCheck(INVALID, kid=kid, jku=jku, detail=str(error))
    except (JoseError, ValueError, TypeError, KeyError):
        return SignatureCheck(
            INVALID, kid=kid, jku=jku, detail=f"the key set {jku} has no usable key {kid!r}"
        )
    for payload in payloads:
        compact = f"{signature['protected']}.{_b64encode(payload)}.{signature['signature']}"
        try:
            jws.deserialize_compact(compact, key, algorithms=list(ALGORITHMS))
        except (JoseError, ValueError, TypeError):
            continue
        return SignatureCheck(VERIFIED, kid=kid, jku=jku, detail=f"signed with key {kid!r}")
    return SignatureCheck(
        INVALID,
        kid=kid,
        jku=jku,
        detail=f"the signature with key {kid!r} does not match the card's content",
    )


def sign_card(
    card: dict[str, Any], *, key: ECKey | RSAKey | OKPKey, kid: str, alg: str, jku: str
) -> dict[str, Any]:
    """The card with its signatures (replacing any it had); ``jku`` says where the public key
    is published. The first signs the JCS form of the card as served, without ``signatures``
    (so the 0.3 fields of a hybrid card are covered too); when the card's 1.0 proto form (the
    specification's payload: proto field presence, empty values dropped, as a2a-sdk's
    verifier computes it) is another text, a second signature signs that."""
    unsigned = {name: value for name, value in card.items() if name != "signatures"}
    protected = {"alg": alg, "kid": kid, "typ": "JOSE", "jku": jku}
    payloads = [rfc8785.dumps(unsigned)]
    proto = proto_payload(unsigned)
    if proto is not None and proto not in payloads:
        payloads.append(proto)
    signatures = []
    for payload in payloads:
        compact = jws.serialize_compact(protected, payload, key, algorithms=[alg])
        protected_part, _payload, signature_part = compact.split(".")
        signatures.append({"protected": protected_part, "signature": signature_part})
    return {**unsigned, "signatures": signatures}


def proto_payload(card: dict[str, Any]) -> bytes | None:
    """The JCS form of the card as the 1.0 proto reads it, without signatures and empty
    values (what a2a-sdk signs and verifies); None when the card does not parse."""
    from a2a.client.card_resolver import parse_agent_card  # see registry.cards.parse_card

    try:
        proto = MessageToDict(parse_agent_card(copy.deepcopy(card)))
    except (ParseError, ValueError, TypeError, AttributeError):
        return None
    proto.pop("signatures", None)
    cleaned = _clean_empty(proto)
    if not isinstance(cleaned, dict):
        return None
    try:
        return rfc8785.dumps(cleaned)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError):
        return None


def algorithm_for(key: ECKey | RSAKey | OKPKey) -> str:
    """The JWS algorithm of a private key: ES256/384/512 by curve, RS256, or EdDSA."""
    if isinstance(key, ECKey):
        return {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[key.curve_name]
    if isinstance(key, RSAKey):
        return "RS256"
    return "EdDSA"


def public_jwks(key: ECKey | RSAKey | OKPKey, *, kid: str, alg: str) -> dict[str, Any]:
    """The JSON Web Key Set publishing the public half of ``key``."""
    public = key.as_dict(private=False)
    return {"keys": [{**public, "kid": kid, "alg": alg, "use": "sig"}]}


def key_set_url_for(card_url: str) -> str:
    """Where a card's keys are when its signature gives no jku: the card host's
    ``/.well-known/jwks.json``."""
    parts = urlsplit(card_url)
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN_JWKS, "", ""))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, the port filled in from the scheme; None for
    anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or _DEFAULT_PORTS[parts.scheme]


def same_origin(url: str, other: str) -> bool:
    """Whether two http(s) URLs have the same scheme, host and port."""
    origin = origin_of(url)
    return origin is not None and origin == origin_of(other)


def _public_keys(document: Any) -> dict[str, Any]:
    """The key set with private members and symmetric keys removed (a key set is public)."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise KeySetError("the key set is not a JSON Web Key Set ({'keys': [...]})")
    private = {"d", "p", "q", "dp", "dq", "qi", "k"}
    keys = [
        {name: value for name, value in key.items() if name not in private}
        for key in document["keys"]
        if isinstance(key, dict) and key.get("kty") in ("EC", "RSA", "OKP")
    ]
    return {"keys": keys}


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _clean_empty(value: Any) -> Any:
    """Drops empty strings, lists and objects, recursively (as a2a-sdk's signer does)."""
    if isinstance(value, dict):
        cleaned = {k: c for k, v in value.items() if (c := _clean_empty(v)) is not None}
        return cleaned or None
    if isinstance(value, list):
        cleaned_list = [c for v in value if (c := _clean_empty(v)) is not None]
        return cleaned_list or None
    if isinstance(value, str) and not value:
        return None
    return value
