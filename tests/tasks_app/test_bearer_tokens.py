"""Bearer JWTs of a trusted issuer are callers on every binding and the REST APIs; a token that
fails a check is refused with the binding's own error, saying which check. The issuer is a
real authorization server on 127.0.0.1 (tests.authorization_server): its discovery document
and JWKS are fetched by the relay through its outbound client."""

from __future__ import annotations

import base64
import json
import time

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.types import Message, Part, Role, SendMessageRequest
from asgiref.sync import sync_to_async

from registry import principals
from registry.models import ApiKey
from tasks_app.models import Task
from tests.authorization_server import AUDIENCE, authorization_server
from tests.tasks_app.a2a_http import (
    BINDINGS,
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


@pytest.fixture(scope="module")
def issuer():
    with authorization_server() as server:
        yield server


@pytest.fixture
def trusted(issuer, settings):
    """The relay trusts the test issuer (through its discovery document); calling needs the
    ``a2a:call`` scope."""
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [
            {
                "issuer": issuer.issuer,
                "discovery": issuer.discovery_url,
                "audience": AUDIENCE,
                "callScope": "a2a:call",
                "leeway": 5,
            }
        ]
    )
    principals.issuers_changed()
    yield issuer
    principals.issuers_changed()


def unsigned(issuer) -> str:
    """A token with ``alg: none`` and no signature, claims otherwise valid."""

    def part(value) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(issuer.claims())}."


REFUSALS = {
    "expired": (lambda s: s.token(exp=int(time.time()) - 600), "the token has expired"),
    "wrong audience": (lambda s: s.token(aud="someone-else"), "audience is not this relay"),
    "wrong issuer": (lambda s: s.token(iss="https://evil.example"), "not one this relay trusts"),
    "unknown kid": (lambda s: s.token(header={"kid": "no-such-key"}), "no key with id"),
    "alg none": (unsigned, "alg 'none'"),
}


@pytest.mark.parametrize("binding", BINDINGS, ids=str)
async def test_a_valid_token_calls_an_agent_on_every_http_binding(binding, trusted, echo, caplog):
    token = trusted.token(sub=f"alice-{binding}")
    caplog.set_level("DEBUG")
    async with relay_client() as client:
        response = await call(client, echo, binding.send(), binding.headers(token))
    assert token.split(".")[2] not in caplog.text
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" not in body, body
    task = await sync_to_async(Task.objects.select_related("caller").get)()
    # The task belongs to the token's principal, and keeps nothing of the token.
    assert task.caller.token_subject == f"alice-{binding}"
    assert task.caller.token_issuer == trusted.issuer
    stored = json.dumps([task.history, task.metadata, task.artifacts], default=str)
    assert token not in stored and token.split(".")[2] not in stored


async def test_a_valid_token_calls_an_agent_over_grpc(trusted, echo):
    token = trusted.token(sub="grpc-alice")
    request = SendMessageRequest(
        tenant=f"agents/{echo.pk}",
        message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")]),
    )
    async with relay_grpc() as stub:
        response = await stub.SendMessage(request, metadata=auth(token), timeout=20)
    assert response.WhichOneof("payload") in ("task", "message")
    owner = await sync_to_async(lambda: Task.objects.get().caller.token_subject)()
    assert owner == "grpc-alice"


@pytest.mark.parametrize("case", list(REFUSALS))
@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_a_token_failing_a_check_is_refused_saying_which(binding, case, trusted, echo):
    make, words = REFUSALS[case]
    async with relay_client() as client:
        response = await call(client, echo, binding.send(), binding.headers(make(trusted)))
    expect_error(binding, response, UNAUTHENTICATED, http_status=401)
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    body = response.json()
    message = body["error"]["message"]
    assert words in message, message
    assert not await sync_to_async(Task.objects.exists)()


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_a_token_failing_a_check_is_unauthenticated_over_grpc(case, trusted, echo):
    make, words = REFUSALS[case]
    request = SendMessageRequest(
        tenant=f"agents/{echo.pk}",
        message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")]),
    )
    async with relay_grpc() as stub:
        error = await refused(stub.SendMessage(request, metadata=auth(make(trusted))))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert words in error.details()


async def test_a_rotated_key_is_fetched_without_a_restart_and_only_once(trusted, echo, settings):
    settings.RELAY_JWT_REFRESH_SECONDS = 60
    async with relay_client() as client:
        first = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(trusted.token()))
        assert "result" in first.json(), first.text
        fetches = trusted.jwks_fetches
        trusted.rotate()
        rotated = trusted.token(sub="bob")
        second = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(rotated))
        assert "result" in second.json(), second.text
        assert trusted.jwks_fetches == fetches + 1
        # A key id nobody has, right after: refused without asking the issuer again.
        unknown = trusted.token(header={"kid": "made-up"})
        third = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(unknown))
        expect_error(JSONRPC_1, third, UNAUTHENTICATED, http_status=401)
        assert trusted.jwks_fetches == fetches + 1


async def test_a_token_without_the_call_scope_may_not_call(trusted, echo):
    token = trusted.token(scope="profile")
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    assert response.json()["error"]["message"] == f"no agent {echo.pk!r} at this relay"


async def test_a_revoked_principal_is_refused(trusted, echo):
    token = trusted.token(sub="mallory")
    async with relay_client() as client:
        first = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
        assert "result" in first.json(), first.text
        from registry.services import api_key_revoke

        principal = await sync_to_async(ApiKey.objects.get)(token_subject="mallory")
        await sync_to_async(api_key_revoke)(api_key=principal, actor="system")
        second = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    expect_error(JSONRPC_1, second, UNAUTHENTICATED, http_status=401)
    assert "revoked" in second.json()["error"]["message"]


async def test_a_relay_without_issuers_says_it_takes_api_keys_only(echo, issuer, settings):
    settings.RELAY_JWT_ISSUERS = ""
    principals.issuers_changed()
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(issuer.token()))
    expect_error(JSONRPC_1, response, UNAUTHENTICATED, http_status=401)
    assert "trusts no token issuer" in response.json()["error"]["message"]


async def test_the_rest_apis_take_a_token(trusted, echo, settings):
    settings.RELAY_REGISTRY_PUBLIC = False
    async with relay_client() as client:
        good = await client.get(
            "/a2a/registry", headers={"Authorization": f"Bearer {trusted.token()}"}
        )
        bad = await client.get(
            "/a2a/registry", headers={"Authorization": f"Bearer {trusted.token(aud='x')}"}
        )
    assert good.status_code == 200, good.text
    assert echo.pk in good.text
    assert bad.status_code == 401
    assert "audience" in json.dumps(bad.json()), bad.text
    assert 'error="invalid_token"' in bad.headers["WWW-Authenticate"]


async def test_cards_declare_the_issuers_openid_connect_scheme(trusted, echo):
    async with relay_client() as client:
        card = (await client.get(f"/a2a/agents/{echo}/.well-known/agent-card.json")).json()
    # The hybrid card gives the scheme in its 0.3 shape, which a2a-sdk 1.x reads as 1.0.
    assert card["securitySchemes"]["oidc"]["type"] == "openIdConnect", card["securitySchemes"]
    assert card["securitySchemes"]["oidc"]["openIdConnectUrl"] == trusted.discovery_url
    assert "relayApiKey" in card["securitySchemes"]
    alternatives = [set(item["schemes"]) for item in card["securityRequirements"]]
    assert {"oidc"} in alternatives and {"relayApiKey"} in alternatives, alternatives


async def test_an_issuer_set_in_the_admin_is_trusted_at_once(issuer, echo, settings):
    from registry.identity_models import TokenIssuer

    settings.RELAY_JWT_ISSUERS = ""
    principals.issuers_changed()
    token = issuer.token(sub="carol", roles=["a2a:call"], scope=None)
    async with relay_client() as client:
        before = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
        expect_error(JSONRPC_1, before, UNAUTHENTICATED, http_status=401)
        await sync_to_async(TokenIssuer.objects.create)(
            issuer=issuer.issuer,
            jwks_url=issuer.jwks_url,
            audience=f"other {AUDIENCE}",
            scopes_claim="roles",
            call_scope="a2a:call",
        )
        after = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    assert "result" in after.json(), after.text
    principals.issuers_changed()


def test_an_incomplete_issuer_setting_is_a_system_check_error(settings):
    from registry.checks import check_jwt_issuers

    settings.RELAY_JWT_ISSUERS = json.dumps([{"issuer": "https://id.example", "audience": "x"}])
    [error] = check_jwt_issuers(None)
    assert error.id == "relay.E011"
    assert "needs one of 'jwksUrl' or 'discovery'" in error.msg
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [{"issuer": "https://id.example", "jwksUrl": "https://id.example/k", "audience": "x"}]
        + [
            {
                "issuer": "https://b",
                "jwksUrl": "https://b/k",
                "audience": "x",
                "algorithms": "HS256",
            }
        ]
    )
    [error] = check_jwt_issuers(None)
    assert "'HS256' is not accepted" in error.msg


def test_a_symmetric_key_in_the_issuers_set_is_never_used():
    from registry.tokens import _verification_keys

    document = {
        "keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "enc", "use": "enc"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "sig"},
        ]
    }
    assert [key["kid"] for key in _verification_keys(document)["keys"]] == ["sig"]


def test_each_issuer_is_declared_in_the_scheme_its_settings_allow(settings, db):
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [
            {"issuer": "https://a", "discovery": "https://a/.well-known/x", "audience": "r"},
            {
                "issuer": "https://b",
                "jwksUrl": "https://b/keys",
                "audience": "r",
                "tokenUrl": "https://b/token",
                "callScope": "a2a:call",
            },
            {"issuer": "https://c", "jwksUrl": "https://c/keys", "audience": "r"},
        ]
    )
    principals.issuers_changed()
    schemes = principals.card_security_schemes()
    principals.issuers_changed()
    assert list(schemes) == ["oidc", "oidc2", "oidc3"]
    assert schemes["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"] == (
        "https://a/.well-known/x"
    )
    flow = schemes["oidc2"]["oauth2SecurityScheme"]["flows"]["clientCredentials"]
    assert flow == {"tokenUrl": "https://b/token", "scopes": {"a2a:call": "Call agents and teams"}}
    assert schemes["oidc3"]["httpAuthSecurityScheme"]["bearerFormat"] == "JWT"


class ClientCredentials(CredentialService):
    """The OAuth2 client-credentials grant, as an a2a-sdk credential service: for an
    openIdConnect scheme of the card, the token endpoint comes from the scheme's discovery
    document, and the token from that endpoint."""

    def __init__(self, card, client_id: str) -> None:
        self.card = card
        self.client_id = client_id

    async def get_credentials(self, security_scheme_name, context):
        scheme = self.card.security_schemes[security_scheme_name]
        if not scheme.HasField("open_id_connect_security_scheme"):
            return None
        async with httpx.AsyncClient() as http:
            discovery = await http.get(scheme.open_id_connect_security_scheme.open_id_connect_url)
            answer = await http.post(
                discovery.json()["token_endpoint"],
                data={
                    "grant_type": "client_credentials",
                    "client_id": self.client_id,
                    "scope": "a2a:call",
                },
            )
        return answer.json()["access_token"]


async def test_an_a2a_sdk_client_with_oauth2_calls_an_agent_through_the_relay(trusted, echo):
    from relay_project.asgi import application

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        resolver = A2ACardResolver(http, f"http://testserver/a2a/agents/{echo.pk}/")
        card = await resolver.get_agent_card()
        assert card.security_schemes["oidc"].HasField("open_id_connect_security_scheme")
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_protocol_bindings=["JSONRPC"]
        )
        interceptor = AuthInterceptor(ClientCredentials(card, "billing-agent"))
        client = ClientFactory(config).create(card, interceptors=[interceptor])
        request = SendMessageRequest(
            message=Message(message_id="m-sdk", role=Role.ROLE_USER, parts=[Part(text="hi")])
        )
        events = [event async for event in client.send_message(request)]
    assert events, "the relay answered nothing"
    owner = await sync_to_async(lambda: Task.objects.get().caller.token_subject)()
    assert owner == "billing-agent"


async def test_a_token_opens_a_stream_and_gives_its_slot_back(trusted, echo):
    from relay_project import ratelimit

    token = trusted.token(sub="streamer")
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(stream=True), JSONRPC_1.headers(token))
    assert response.text.startswith("data: ") and '"result"' in response.text, response.text
    principal = await sync_to_async(ApiKey.objects.get)(token_subject="streamer")
    assert await sync_to_async(ratelimit.streams_open)(principal) == 0


async def test_an_issuer_that_is_down_is_refused_and_not_asked_on_every_call(
    trusted, echo, settings
):
    settings.RELAY_JWT_REFRESH_SECONDS = 60
    trusted.down = True
    fetches = trusted.jwks_fetches
    try:
        async with relay_client() as client:
            for _ in range(3):
                response = await call(
                    client, echo, JSONRPC_1.send(), JSONRPC_1.headers(trusted.token())
                )
                expect_error(JSONRPC_1, response, UNAUTHENTICATED, http_status=401)
                message = response.json()["error"]["message"]
                assert f"the keys of issuer '{trusted.issuer}' cannot be had" in message
                assert "answered HTTP 503" in message
    finally:
        trusted.down = False
    assert trusted.jwks_fetches == fetches + 1


async def test_a_discovery_document_naming_another_issuer_is_refused(issuer, echo, settings):
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [{"issuer": "https://other.example", "discovery": issuer.discovery_url, "audience": "x"}]
    )
    principals.issuers_changed()
    token = issuer.token(iss="https://other.example", aud="x")
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(token))
    expect_error(JSONRPC_1, response, UNAUTHENTICATED, http_status=401)
    assert "the discovery document names issuer" in response.json()["error"]["message"]
    principals.issuers_changed()


async def test_a_token_registers_agents_only_with_the_register_scope(trusted, settings):
    body = {"url": "http://127.0.0.1:9/nothing"}
    async with relay_client() as client:
        refused_call = await client.post(
            "/a2a/registry", json=body, headers={"Authorization": f"Bearer {trusted.token()}"}
        )
    assert refused_call.status_code == 403, refused_call.text
    assert "may not register" in refused_call.text
