"""``registry.auth.caller_from_headers``, the one way endpoints outside DRF and the A2A gateway
(MCP, AG-UI) learn their caller: from a mapping or an ASGI scope's header pairs, an API key or
a trusted issuer's token is the caller; no credential or a bad one is a CallerRefused saying
which, with the WWW-Authenticate its 401 should carry."""

from __future__ import annotations

import json

import pytest

from registry import principals
from registry.auth import REALM, REALM_INVALID_TOKEN, CallerRefused, caller_from_headers
from registry.services import api_key_revoke
from tests.authorization_server import AUDIENCE, authorization_server

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]


@pytest.fixture(scope="module")
def server():
    with authorization_server() as issuer:
        yield issuer


@pytest.fixture
def trusted(server, settings):
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [{"issuer": server.issuer, "jwksUrl": server.jwks_url, "audience": AUDIENCE}]
    )
    principals.issuers_changed()
    yield server
    principals.issuers_changed()


def test_an_api_key_in_a_mapping_of_any_case_is_the_caller(api_key):
    row, key = api_key
    assert caller_from_headers({"AUTHORIZATION": f"Bearer {key}"}).pk == row.pk


def test_a_token_in_asgi_scope_headers_is_its_principal(trusted):
    token = trusted.token(sub="frank", scope="a2a:call")
    scope_headers = [(b"host", b"relay"), (b"authorization", f"Bearer {token}".encode())]

    caller = caller_from_headers(scope_headers)

    assert caller.token_subject == "frank" and caller.token_issuer == trusted.issuer
    assert caller.token_scopes == frozenset({"a2a:call"})
    assert caller.bearer_token == token


def test_no_credential_is_refused_as_missing():
    for headers in ({}, [(b"authorization", b"Basic dTpw")]):
        with pytest.raises(CallerRefused) as refused:
            caller_from_headers(headers)
        assert refused.value.missing
        assert refused.value.www_authenticate == REALM


def test_a_revoked_key_and_a_bad_token_are_refused_saying_why(api_key, trusted):
    row, key = api_key
    api_key_revoke(api_key=row, actor="system")
    bad_token = trusted.token(aud="someone-else")
    for header, words in ((key, "revoked"), (bad_token, "audience is not this relay")):
        with pytest.raises(CallerRefused) as refused:
            caller_from_headers({"authorization": f"Bearer {header}"})
        assert not refused.value.missing
        assert refused.value.www_authenticate == REALM_INVALID_TOKEN
        assert words in str(refused.value.detail)
