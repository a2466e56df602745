"""A verified bearer JWT is kept per process until it expires, so a caller sending the same
token again costs no signature check; an expired entry, or one whose issuer is no longer
trusted, is checked again. The issuer is the tests' authorization server on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from registry import tokens
from tests.authorization_server import AUDIENCE, authorization_server

pytestmark = pytest.mark.usefixtures("allow_private_urls")


@pytest.fixture(scope="module")
def server():
    with authorization_server() as issuer:
        yield issuer


@pytest.fixture
def trusted(server):
    tokens.forget_keys()
    issuer = tokens.Issuer(
        issuer=server.issuer, audience=(AUDIENCE,), jwks_url=server.jwks_url, leeway=0
    )
    yield (issuer,)
    tokens.forget_keys()


def counting_checks(monkeypatch) -> list[str]:
    checks: list[str] = []
    check = tokens.verify

    def counted(token, issuers, **kwargs):
        checks.append(token)
        return check(token, issuers, **kwargs)

    monkeypatch.setattr(tokens, "verify", counted)
    return checks


def test_the_same_token_is_checked_once_while_it_is_valid(server, trusted, monkeypatch):
    checks = counting_checks(monkeypatch)
    token = server.token(sub="alice")

    first = tokens.verify_cached(token, trusted)
    again = tokens.verify_cached(token, trusted)

    assert first.subject == again.subject == "alice"
    assert len(checks) == 1
    tokens.verify_cached(server.token(sub="bob"), trusted)
    assert len(checks) == 2


def test_a_kept_token_is_checked_again_once_it_has_expired(server, trusted, monkeypatch):
    checks = counting_checks(monkeypatch)
    token = server.token(exp=int(time.time()) + 1)
    tokens.verify_cached(token, trusted)

    time.sleep(1.1)
    with pytest.raises(tokens.TokenRefused, match="expired"):
        tokens.verify_cached(token, trusted)
    assert len(checks) == 2


def test_a_kept_token_of_an_issuer_no_longer_trusted_is_refused(server, trusted):
    token = server.token()
    tokens.verify_cached(token, trusted)
    other = (
        tokens.Issuer(
            issuer="https://other.example",
            audience=(AUDIENCE,),
            jwks_url="https://other.example/jwks",
        ),
    )

    with pytest.raises(tokens.TokenRefused, match="not one this relay trusts"):
        tokens.verify_cached(token, other)


def test_a_refusal_is_not_kept(server, trusted):
    token = server.token(aud="someone-else")
    for _ in range(2):
        with pytest.raises(tokens.TokenRefused, match="audience"):
            tokens.verify_cached(token, trusted)
