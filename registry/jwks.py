"""Keys for card signatures: fetching the key sets that cards point at, and the relay's own
signing key.

Key sets are fetched through the one outbound module (SSRF guard, timeouts, redirects), bounded
to ``RELAY_JWKS_MAX_BYTES``, and kept in Django's cache for ``RELAY_JWKS_CACHE_SECONDS`` (a key
set that could not be had is remembered for a tenth of that, so a dead host is not asked on every
card). The relay signs the cards it serves when ``RELAY_CARD_SIGNING_KEY`` holds a PEM private
key (EC P-256/384/521, RSA or Ed25519), or the path of a file holding one; its public half is
served at ``/.well-known/jwks.json``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from django.core.cache import cache as django_cache
from joserfc.jwk import ECKey, OKPKey, RSAKey, import_key

from registry import signing
from registry.fetching import FetchedCard
from relay_project import outbound

_CACHE_PREFIX = "relay:jwks:"


def fetch_key_set(url: str, *, client: httpx.Client | None = None) -> dict[str, Any]:
    """The JWKS at ``url``, from the cache when fresh. Raises signing.KeySetError saying why
    it could not be had (unsafe address, unreachable, not JSON, too large)."""
    cache_key = _CACHE_PREFIX + hashlib.sha256(url.encode()).hexdigest()
    cached = django_cache.get(cache_key)
    if cached is not None:
        if "error" in cached:
            raise signing.KeySetError(cached["error"])
        return cached["keys"]
    ttl = settings.RELAY_JWKS_CACHE_SECONDS
    try:
        document = download_document(url, client)
    except signing.KeySetError as error:
        django_cache.set(cache_key, {"error": str(error)}, max(ttl / 10, 1))
        raise
    django_cache.set(cache_key, {"keys": document}, ttl)
    return document


def download_document(url: str, client: httpx.Client | None = None) -> dict[str, Any]:
    """The JSON object at ``url`` (a key set, a discovery document), fetched through the
    outbound module and bounded to RELAY_JWKS_MAX_BYTES. Raises signing.KeySetError."""
    try:
        outbound.check_url_shape(url)
    except outbound.UnsafeURLError as error:
        raise signing.KeySetError(f"the key set URL is refused: {error}") from error
    owns = client is None
    client = client or outbound.client()
    try:
        body = _get_within_origin(client, url)
    except outbound.UnsafeURLError as error:
        raise signing.KeySetError(f"the key set URL is refused: {error}") from error
    except outbound.ResponseTooLargeError as error:
        raise signing.KeySetError(
            f"the key set {url} is larger than {error.limit} bytes"
        ) from error
    except httpx.HTTPError as error:
        raise signing.KeySetError(
            f"cannot fetch the key set {url}: {error or type(error).__name__}"
        ) from error
    finally:
        if owns:
            client.close()
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise signing.KeySetError(f"the key set {url} is not JSON") from error
    if not isinstance(document, dict):
        raise signing.KeySetError(f"the key set {url} is not a JSON object")
    return document


def _get_within_origin(client: httpx.Client, url: str) -> bytes:
    """The body at ``url``, following redirects only within its origin: a key set that
    redirects to another port or host is not the card origin's key set."""
    location = url
    for _ in range(settings.RELAY_MAX_REDIRECTS + 1):
        request = client.build_request("GET", location, headers={"Accept": "application/json"})
        response = client.send(request, stream=True, follow_redirects=False)
        try:
            if response.is_redirect:
                location = urljoin(location, response.headers["Location"])
                if not signing.same_origin(location, url):
                    raise signing.KeySetError(
                        f"the key set {url} redirects off its origin, to {location}"
                    )
                continue
            if response.status_code >= 400:
                raise signing.KeySetError(f"the key set {url} answered HTTP {response.status_code}")
            return outbound.read_limited(response, settings.RELAY_JWKS_MAX_BYTES)
        finally:
            response.close()
    raise signing.KeySetError(f"the key set {url} redirects too often")


def check_card_signature(
    fetched: FetchedCard, *, client: httpx.Client | None = None
) -> signing.SignatureCheck:
    """Checks the signatures of a fetched card, fetching key sets as needed."""
    return signing.verify_card(
        fetched.document,
        card_url=fetched.url,
        normalized=fetched.card.normalized,
        key_set=lambda url: fetch_key_set(url, client=client),
    )


# --- The relay's own key ----------------------------------------------------------------------


@dataclass(frozen=True)
class RelayKey:
    key: ECKey | RSAKey | OKPKey
    kid: str
    alg: str

    def jwks(self) -> dict[str, Any]:
        return signing.public_jwks(self.key, kid=self.kid, alg=self.alg)


class SigningKeyError(ValueError):
    """RELAY_CARD_SIGNING_KEY is set but holds no usable private key."""


def relay_key() -> RelayKey | None:
    """The relay's signing key, or None when RELAY_CARD_SIGNING_KEY is empty."""
    value = settings.RELAY_CARD_SIGNING_KEY
    return _load(value) if value else None


@cache
def _load(value: str) -> RelayKey:
    text = value.strip()
    if not text.startswith("-----BEGIN"):
        try:
            text = Path(text).read_text()
        except OSError as error:
            raise SigningKeyError(
                "RELAY_CARD_SIGNING_KEY is neither a PEM key nor a readable file"
            ) from error
    pem = text.encode()
    try:
        private = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise SigningKeyError("RELAY_CARD_SIGNING_KEY holds no unencrypted private key") from error
    if isinstance(private, ec.EllipticCurvePrivateKey):
        key = import_key(pem, "EC")
    elif isinstance(private, rsa.RSAPrivateKey):
        key = import_key(pem, "RSA")
    elif isinstance(private, ed25519.Ed25519PrivateKey):
        key = import_key(pem, "OKP")
    else:
        raise SigningKeyError("RELAY_CARD_SIGNING_KEY must be an EC, RSA or Ed25519 key")
    return RelayKey(key=key, kid=key.thumbprint(), alg=signing.algorithm_for(key))


_SIGNED: OrderedDict[tuple[str, str, str], list[dict[str, str]]] = OrderedDict()
_SIGNED_MAX = 1024
_SIGNED_LOCK = threading.Lock()


def sign_served_card(card: dict[str, Any], *, jku: str) -> dict[str, Any]:
    """The card signed with the relay's key, or as it is when the relay has none.

    Signing costs milliseconds (the proto form is parsed for the second signature), and the
    same card is served again and again, so the signatures of the last 1024 cards served are
    kept in memory, keyed by the card's content, the key and the jku."""
    key = relay_key()
    if key is None:
        return card
    unsigned = {name: value for name, value in card.items() if name != "signatures"}
    text = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    cache_key = (hashlib.sha256(text.encode()).hexdigest(), key.kid, jku)
    with _SIGNED_LOCK:
        signatures = _SIGNED.get(cache_key)
        if signatures is not None:
            _SIGNED.move_to_end(cache_key)
    if signatures is None:
        signed = signing.sign_card(unsigned, key=key.key, kid=key.kid, alg=key.alg, jku=jku)
        signatures = signed["signatures"]
        with _SIGNED_LOCK:
            _SIGNED[cache_key] = signatures
            while len(_SIGNED) > _SIGNED_MAX:
                _SIGNED.popitem(last=False)
    return {**unsigned, "signatures": [dict(signature) for signature in signatures]}
