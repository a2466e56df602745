"""Opaque bearer tokens, checked at their issuer's introspection endpoint (RFC 7662).

An issuer with an ``introspection_url`` (``tokens.Issuer``) takes the tokens the relay cannot
check itself: ``POST token=…&token_type_hint=access_token`` with the relay's client id and
secret in HTTP Basic (``client_secret_basic``), through the one outbound module (SSRF guard,
timeouts), the answer bounded in size. An answer ``"active": true`` whose ``iss`` (when given)
is the issuer, whose ``aud`` (when given) names an accepted audience and whose ``exp`` has not
passed maps to a principal as a JWT's claims do (the issuer's subject and scopes claims); any
other answer refuses the token (``tokens.TokenRefused``).

Answers are kept per process, keyed by the SHA-256 of the token and the issuer, for
``RELAY_INTROSPECTION_CACHE_SECONDS`` and never past the token's ``exp``: a token revoked at
its issuer is refused once its entry lapses. Neither the token nor the secret is logged, kept
beyond that entry's hash, or put in a message. Written with httpx rather than Authlib's
``OAuth2Client.introspect_token``: that client would open its own connections, outside the
outbound module's SSRF guard; the request itself is one form post.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from typing import Any

import httpx
from django.conf import settings

from registry import tokens
from relay_project import outbound

MAX_ANSWER_BYTES = 64 * 1024
_CACHED = 4096

_ANSWERS: OrderedDict[tuple[bytes, str], tuple[float, tokens.Verified | str]] = OrderedDict()
"""(token hash, issuer) -> (until when, the verified token or the refusal's message)."""
_LOCK = threading.Lock()


def forget() -> None:
    """Drops every kept answer (tests; an admin change of an issuer)."""
    with _LOCK:
        _ANSWERS.clear()


def introspect_cached(token: str, issuers: tuple[tokens.Issuer, ...]) -> tokens.Verified:
    """The token as the first of ``issuers`` that calls it active says, each asked in order
    (an answer kept from lately counts as asked). Raises tokens.TokenRefused when none does,
    with the last refusal's reason."""
    digest = hashlib.sha256(token.encode()).digest()
    refusal = "the token is not active"
    for issuer in issuers:
        answer = _kept(digest, issuer)
        if answer is None:
            answer, until = _asked(token, issuer)
            _keep(digest, issuer, answer, until)
        if isinstance(answer, tokens.Verified):
            return answer
        refusal = answer
    raise tokens.TokenRefused(refusal)


def _kept(digest: bytes, issuer: tokens.Issuer) -> tokens.Verified | str | None:
    key = (digest, issuer.issuer)
    with _LOCK:
        entry = _ANSWERS.get(key)
        if entry is not None and time.time() < entry[0]:
            _ANSWERS.move_to_end(key)
            answer = entry[1]
            # A kept token whose issuer changed since (a new mapping) is asked again.
            if not isinstance(answer, tokens.Verified) or answer.issuer == issuer:
                return answer
    return None


def _keep(digest: bytes, issuer: tokens.Issuer, answer: tokens.Verified | str, until: float):
    if until <= time.time():
        return
    with _LOCK:
        _ANSWERS[(digest, issuer.issuer)] = (until, answer)
        while len(_ANSWERS) > _CACHED:
            _ANSWERS.popitem(last=False)


def _asked(token: str, issuer: tokens.Issuer) -> tuple[tokens.Verified | str, float]:
    """The issuer's answer for the token (the verified token, or why it is refused) and until
    when it may be kept. Raises tokens.TokenRefused when the endpoint cannot be asked (not
    kept: the next call asks again)."""
    now = time.time()
    until = now + settings.RELAY_INTROSPECTION_CACHE_SECONDS
    claims = _introspection(token, issuer)
    if claims.get("active") is not True:
        return f"the token is not active (its issuer {issuer.issuer!r} says so)", until
    try:
        verified = _verified(claims, issuer, now)
    except tokens.TokenRefused as error:
        return str(error), until
    expires = claims.get("exp")
    if _is_number(expires):
        until = min(until, float(expires))
    return verified, until


def _introspection(token: str, issuer: tokens.Issuer) -> dict[str, Any]:
    what = f"the introspection endpoint of issuer {issuer.issuer!r}"
    try:
        outbound.check_url_shape(issuer.introspection_url)
        with outbound.client() as client:
            request = client.build_request(
                "POST",
                issuer.introspection_url,
                data={"token": token, "token_type_hint": "access_token"},
                headers={"Accept": "application/json"},
            )
            auth = httpx.BasicAuth(issuer.client_id, issuer.client_secret)
            response = client.send(request, auth=auth, stream=True, follow_redirects=False)
            try:
                status = response.status_code
                body = outbound.read_limited(response, MAX_ANSWER_BYTES)
            finally:
                response.close()
    except outbound.UnsafeURLError as error:
        raise tokens.TokenRefused(f"{what} is refused: {error}") from None
    except outbound.ResponseTooLargeError:
        raise tokens.TokenRefused(f"{what} answered more than {MAX_ANSWER_BYTES} bytes") from None
    except httpx.HTTPError as error:
        raise tokens.TokenRefused(f"{what} cannot be reached: {type(error).__name__}") from None
    if status != 200:
        raise tokens.TokenRefused(f"{what} answered HTTP {status}")
    try:
        claims = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise tokens.TokenRefused(f"{what} did not answer JSON") from None
    if not isinstance(claims, dict):
        raise tokens.TokenRefused(f"{what} did not answer a JSON object")
    return claims


def _verified(claims: dict[str, Any], issuer: tokens.Issuer, now: float) -> tokens.Verified:
    """An active token's claims checked as a JWT's are (those the answer gives) and mapped to
    its principal. Raises tokens.TokenRefused."""
    iss = claims.get("iss")
    if iss is not None and iss != issuer.issuer:
        raise tokens.TokenRefused(
            f"the token's issuer {str(iss)[:200]!r} is not {issuer.issuer!r}, which introspected it"
        )
    audience = claims.get("aud")
    if audience is not None:
        named = [audience] if isinstance(audience, str) else audience
        if not isinstance(named, list) or not set(named) & set(issuer.audience):
            raise tokens.TokenRefused(
                f"the token's audience is not this relay (accepted: {', '.join(issuer.audience)})"
            )
    expires, not_before = claims.get("exp"), claims.get("nbf")
    if _is_number(expires) and expires + issuer.leeway <= now:
        raise tokens.TokenRefused("the token has expired")
    if _is_number(not_before) and not_before - issuer.leeway > now:
        raise tokens.TokenRefused("the token is not valid yet (nbf)")
    subject = claims.get(issuer.subject_claim)
    if not isinstance(subject, str) or not subject:
        raise tokens.TokenRefused(
            f"the introspected token has no {issuer.subject_claim!r} naming its subject"
        )
    return tokens.Verified(
        issuer=issuer,
        subject=subject,
        scopes=tokens.scopes_of(claims, issuer.scopes_claim),
        claims=dict(claims),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
