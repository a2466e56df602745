"""Opaque bearer tokens of an issuer with an introspection endpoint (RFC 7662) are callers on
every binding: an active token calls, an inactive or revoked one is refused with the
binding's own error, and the relay's client secret appears in no log, admin page or audit
entry. The issuer is a real authorization server on 127.0.0.1 (tests.authorization_server)."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from asgiref.sync import sync_to_async
from django.urls import reverse

from registry import principals, tokens
from registry.identity_models import TokenIssuer
from registry.models import AuditEntry
from tasks_app.models import Task
from tests.authorization_server import AUDIENCE, INTROSPECTION_CLIENT, authorization_server
from tests.tasks_app.a2a_http import (
    JSONRPC_1,
    REST_1,
    UNAUTHENTICATED,
    call,
    expect_error,
    relay_client,
)
from tests.tasks_app.test_grpc_admission import auth, refused, relay_grpc

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

CLIENT_ID, SECRET = INTROSPECTION_CLIENT


@pytest.fixture(scope="module")
def issuer():
    with authorization_server() as server:
        yield server


@pytest.fixture
def trusted(issuer, settings):
    """The relay trusts the test issuer's JWTs and introspects its opaque tokens."""
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [
            {
                "issuer": issuer.issuer,
                "jwksUrl": issuer.jwks_url,
                "audience": AUDIENCE,
                "callScope": "a2a:call",
                "introspectionUrl": issuer.introspection_url,
                "clientId": CLIENT_ID,
                "clientSecret": SECRET,
            }
        ]
    )
    principals.issuers_changed()
    yield issuer
    principals.issuers_changed()


def send_request(echo) -> SendMessageRequest:
    return SendMessageRequest(
        tenant=f"agents/{echo.pk}",
        message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")]),
    )


@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_an_active_opaque_token_calls_an_agent(binding, trusted, echo, caplog):
    token = trusted.opaque_token(sub=f"carol-{binding}")
    caplog.set_level("DEBUG")
    async with relay_client() as client:
        response = await call(client, echo, binding.send(), binding.headers(token))
    assert response.status_code == 200, response.text
    assert "error" not in response.json(), response.text
    task = await sync_to_async(Task.objects.select_related("caller").get)()
    assert task.caller.token_subject == f"carol-{binding}"
    assert task.caller.token_issuer == trusted.issuer
    assert token not in caplog.text and SECRET not in caplog.text


async def test_an_active_opaque_token_calls_an_agent_over_grpc(trusted, echo):
    token = trusted.opaque_token(sub="grpc-carol")
    async with relay_grpc() as stub:
        response = await stub.SendMessage(send_request(echo), metadata=auth(token), timeout=20)
    assert response.WhichOneof("payload") in ("task", "message")
    owner = await sync_to_async(lambda: Task.objects.get().caller.token_subject)()
    assert owner == "grpc-carol"


@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_an_inactive_opaque_token_is_refused(binding, trusted, echo):
    async with relay_client() as client:
        response = await call(client, echo, binding.send(), binding.headers("not-a-token-at-all"))
    expect_error(binding, response, UNAUTHENTICATED, http_status=401)
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    assert "not active" in response.json()["error"]["message"]
    assert not await sync_to_async(Task.objects.exists)()


async def test_an_inactive_opaque_token_is_unauthenticated_over_grpc(trusted, echo):
    async with relay_grpc() as stub:
        error = await refused(stub.SendMessage(send_request(echo), metadata=auth("made-up")))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "not active" in error.details()


async def test_a_revoked_token_is_refused_once_its_answer_lapses(trusted, echo, settings):
    settings.RELAY_INTROSPECTION_CACHE_SECONDS = 1
    token = trusted.opaque_token(sub="dave")
    async with relay_client() as client:
        first = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
        assert "result" in first.json(), first.text
        asked = trusted.introspections
        trusted.revoke(token)
        kept = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
        assert "result" in kept.json(), kept.text
        assert trusted.introspections == asked  # answered from the kept answer
        time.sleep(1.1)
        lapsed = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    expect_error(JSONRPC_1, lapsed, UNAUTHENTICATED, http_status=401)
    assert "not active" in lapsed.json()["error"]["message"]
    assert trusted.introspections == asked + 1


async def test_an_answer_is_kept_no_longer_than_the_token_lives(trusted, echo, settings):
    settings.RELAY_INTROSPECTION_CACHE_SECONDS = 300
    expires = int(time.time()) + 3
    token = trusted.opaque_token(sub="erin", exp=expires)
    async with relay_client() as client:
        headers = JSONRPC_1.headers(token)
        first = await call(client, echo, JSONRPC_1.send(), headers)
        asked = trusted.introspections
        again = await call(client, echo, JSONRPC_1.send(), headers)
        assert trusted.introspections == asked
        time.sleep(max(0.0, expires - time.time()) + 0.1)
        trusted.revoke(token)
        lapsed = await call(client, echo, JSONRPC_1.send(), headers)
    assert "result" in first.json() and "result" in again.json(), again.text
    # Asked again at the token's exp, long before the 300 s the setting allows.
    assert trusted.introspections == asked + 1
    expect_error(JSONRPC_1, lapsed, UNAUTHENTICATED, http_status=401)


async def test_an_opaque_token_of_another_audience_is_refused(trusted, echo):
    token = trusted.opaque_token(aud="someone-else")
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    expect_error(JSONRPC_1, response, UNAUTHENTICATED, http_status=401)
    assert "audience is not this relay" in response.json()["error"]["message"]


async def test_a_wrong_client_secret_refuses_without_saying_it(trusted, echo, settings, caplog):
    wrong = "wrong-secret-8d1e"
    settings.RELAY_JWT_ISSUERS = settings.RELAY_JWT_ISSUERS.replace(SECRET, wrong)
    principals.issuers_changed()
    caplog.set_level("DEBUG")
    async with relay_client() as client:
        token = trusted.opaque_token()
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    expect_error(JSONRPC_1, response, UNAUTHENTICATED, http_status=401)
    message = response.json()["error"]["message"]
    assert "answered HTTP 401" in message
    for text in (message, caplog.text):
        assert wrong not in text and token not in text


async def test_api_keys_still_call_beside_introspection(trusted, echo, api_key):
    introspections = trusted.introspections
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    assert "result" in response.json(), response.text
    assert trusted.introspections == introspections


def test_the_setting_takes_the_introspection_fields():
    [issuer] = tokens.issuers_from_setting(
        [
            {
                "issuer": "https://id.example",
                "audience": "relay",
                "introspectionUrl": "https://id.example/introspect",
                "clientId": "relay",
                "clientSecret": "s3cret-value",
            }
        ]
    )
    assert issuer.introspection_url == "https://id.example/introspect"
    assert not issuer.signs_tokens
    assert "s3cret-value" not in repr(issuer)
    with pytest.raises(ValueError, match="needs a 'clientId' and a 'clientSecret'"):
        tokens.issuers_from_setting(
            [{"issuer": "https://id.example", "audience": "x", "introspectionUrl": "https://i"}]
        )


def test_the_admin_stores_the_secret_encrypted_and_never_shows_it(admin_client, issuer):
    form = {
        "issuer": issuer.issuer,
        "audience": AUDIENCE,
        "algorithms": "RS256",
        "leeway": 30,
        "subject_claim": "sub",
        "scopes_claim": "scope",
        "introspection_url": issuer.introspection_url,
        "client_id": CLIENT_ID,
        "client_secret": SECRET,
        "enabled": "on",
    }
    added = admin_client.post(reverse("admin:registry_tokenissuer_add"), form)
    assert added.status_code == 302, added.content.decode()[:3000]
    row = TokenIssuer.objects.get()
    assert SECRET not in row.client_secret_encrypted
    assert row.as_issuer().client_secret == SECRET

    page = admin_client.get(reverse("admin:registry_tokenissuer_change", args=[row.pk]))
    listing = admin_client.get(reverse("admin:registry_tokenissuer_changelist"))
    entry = AuditEntry.objects.get(object_type="tokenissuer")
    for text in (page.content.decode(), listing.content.decode(), json.dumps(entry.changes)):
        assert SECRET not in text
    assert entry.changes["client_secret"] == "(changed)"

    # Saved again without a secret: the stored one is kept.
    kept = admin_client.post(
        reverse("admin:registry_tokenissuer_change", args=[row.pk]),
        {**form, "client_secret": "", "leeway": 10},
    )
    assert kept.status_code == 302, kept.content.decode()[:3000]
    assert TokenIssuer.objects.get().as_issuer().client_secret == SECRET
    principals.issuers_changed()


def test_an_issuer_of_opaque_tokens_only_is_a_bearer_scheme_without_the_jwt_format(settings):
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [
            {
                "issuer": "https://id.example",
                "audience": "relay",
                "introspectionUrl": "https://id.example/introspect",
                "clientId": "relay",
                "clientSecret": "s3cret-value",
            }
        ]
    )
    principals.issuers_changed()
    try:
        [scheme] = principals.card_security_schemes().values()
    finally:
        principals.issuers_changed()
    bearer = scheme["httpAuthSecurityScheme"]
    assert bearer["scheme"] == "Bearer" and "bearerFormat" not in bearer
    assert bearer["description"].startswith("A bearer token issued by https://id.example")
    assert "s3cret-value" not in json.dumps(scheme)
