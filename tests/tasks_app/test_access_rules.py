"""Access rules on calls: a rule that holds refuses the call on every binding with the
binding's permission-denied error naming the rule, and writes an audit entry; an earlier
allow rule wins; a rule that cannot be evaluated refuses (fails closed). Real agents on
127.0.0.1; tokens from the test authorization server."""

from __future__ import annotations

import grpc
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from asgiref.sync import sync_to_async

from registry import access
from registry.identity_models import AccessRule
from registry.models import AuditEntry
from tasks_app.models import Task
from tests.tasks_app.a2a_http import JSONRPC_1, REST_1, Expected, call, expect_error, relay_client
from tests.tasks_app.test_bearer_tokens import issuer, trusted  # noqa: F401 - fixtures
from tests.tasks_app.test_grpc_admission import auth, refused, relay_grpc

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

PERMISSION_DENIED = Expected(-31403, "PERMISSION_DENIED", 403, domain="brass-relay")


@pytest.fixture(autouse=True)
def fresh_rules():
    access.rules_changed()
    yield
    access.rules_changed()


def rule(name: str, condition: str, *, effect: str = "deny", position: int = 100, **fields):
    return AccessRule.objects.create(
        name=name, kind="call", effect=effect, condition=condition, position=position, **fields
    )


def denials() -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action="deny"))


@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_a_rule_forbidding_an_agent_refuses_the_call_naming_the_rule(binding, echo, api_key):
    await sync_to_async(rule)(
        "no-echo-for-keys",
        f'target.id == "{echo.pk}" && principal.kind == "key"',
        message="ask the echo team for access",
    )
    async with relay_client() as client:
        response = await call(client, echo, binding.send(), binding.headers(api_key[1]))
    expect_error(binding, response, PERMISSION_DENIED, http_status=403)
    message = response.json()["error"]["message"]
    assert message == (
        "access rule 'no-echo-for-keys' forbids this call: ask the echo team for access"
    )
    assert not await sync_to_async(Task.objects.exists)()
    [entry] = await sync_to_async(denials)()
    assert (entry.actor, entry.object_type, entry.object_id) == (
        f"key:{api_key[0].prefix}",
        "agent",
        echo.pk,
    )
    assert entry.changes["rule"] == "no-echo-for-keys"


async def test_a_rule_refuses_over_grpc_as_permission_denied(echo, api_key):
    await sync_to_async(rule)("nobody", "true")
    request = SendMessageRequest(
        tenant=f"agents/{echo.pk}",
        message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")]),
    )
    async with relay_grpc() as stub:
        error = await refused(stub.SendMessage(request, metadata=auth(api_key[1])))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == "access rule 'nobody' forbids this call"


async def test_a_rule_forbidding_a_principal_a_skill_refuses_only_that_principal(
    trusted,  # noqa: F811
    echo,
):
    await sync_to_async(rule)(
        "alice-no-echo-skill", 'principal.subject == "alice" && skill == "echo"'
    )
    alice, bob = trusted.token(sub="alice"), trusted.token(sub="bob")
    body = {"skill": "echo", "message": JSONRPC_1.message("hi")}
    async with relay_client() as client:
        refused_call = await client.post(
            "/a2a/tasks/send", json=body, headers={"Authorization": f"Bearer {alice}"}
        )
        allowed = await client.post(
            "/a2a/tasks/send", json=body, headers={"Authorization": f"Bearer {bob}"}
        )
    assert refused_call.status_code == 403, refused_call.text
    assert "access rule 'alice-no-echo-skill' forbids this call" in refused_call.text
    assert allowed.status_code == 200, allowed.text
    [entry] = await sync_to_async(denials)()
    assert entry.object_id == echo.pk and entry.changes["skill"] == "echo"
    assert entry.actor.startswith("key:jwt_")


async def test_the_first_rule_that_holds_decides(echo, api_key):
    await sync_to_async(rule)("everyone-else", "true", position=20)
    await sync_to_async(rule)(
        "this-key", f'principal.id == "{api_key[0].prefix}"', effect="allow", position=10
    )
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    assert "result" in response.json(), response.text


async def test_a_rule_that_cannot_be_evaluated_refuses_the_call(echo, api_key):
    await sync_to_async(rule)("typo", "principal.subjekt == 'alice'")
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    expect_error(JSONRPC_1, response, PERMISSION_DENIED, http_status=403)
    assert "access rule 'typo' could not be evaluated" in response.json()["error"]["message"]


async def test_a_disabled_rule_refuses_nothing(echo, api_key):
    await sync_to_async(rule)("off", "true", enabled=False)
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    assert "result" in response.json(), response.text


async def test_a_rule_may_look_at_any_claim_of_the_token(
    trusted,  # noqa: F811
    echo,
):
    await sync_to_async(rule)(
        "contractors-out",
        'has(principal.claims.employment) && principal.claims.employment == "contractor"',
    )
    contractor = trusted.token(sub="carl", employment="contractor")
    staff = trusted.token(sub="sara", employment="staff")
    async with relay_client() as client:
        refused_call = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(contractor))
        allowed = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(staff))
    expect_error(JSONRPC_1, refused_call, PERMISSION_DENIED, http_status=403)
    assert "'contractors-out'" in refused_call.json()["error"]["message"]
    assert "result" in allowed.json(), allowed.text
