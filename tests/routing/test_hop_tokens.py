"""A delegated token per hop: agents in pass mode get the caller's own bearer JWT (when its
audience names them), agents in exchange mode a token of their own from the token-exchange
endpoint of a real authorization server on 127.0.0.1 (tests.authorization_server), whose
nested ``act`` chain is the routing trace. The members are real a2a-sdk agents recording
the Authorization header each call brought."""

from __future__ import annotations

import json
import logging
import uuid

import httpx
import pytest
from asgiref.sync import sync_to_async
from joserfc import jwt
from joserfc.jwk import KeySet

from registry import principals
from registry.models import Agent, AuditEntry
from routing.models import RoutingHop
from tasks_app import delegation, hop_tokens
from tasks_app.gateway import CallContext, forget_agent_targets
from tasks_app.models import Task
from tests.authorization_server import AUDIENCE, authorization_server
from tests.routing.test_team_e2e import (  # noqa: F401 - agent_urls, registered: fixtures
    AGENTS,
    HELPER,
    LEAD,
    WAIT_SECONDS,
    WORKER,
    agent_urls,
    make_team,
    message_calls,
    registered,
    route,
    send,
    trace,
    user_message,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


@pytest.fixture(scope="module")
def issuer():
    with authorization_server() as server:
        yield server


@pytest.fixture(autouse=True)
def trusted(issuer, settings):
    """The relay trusts the test issuer and exchanges its tokens at its /token."""
    # Loading the ASGI application sets Django up again, and with it the logging config,
    # which drops the handler of a caplog set before: load it before any test captures logs.
    import relay_project.asgi  # noqa: F401

    settings.RELAY_ID = "relay-under-test"
    settings.RELAY_JWT_ISSUERS = json.dumps(
        [
            {
                "issuer": issuer.issuer,
                "jwksUrl": issuer.jwks_url,
                "audience": AUDIENCE,
                "callScope": "a2a:call",
                "exchangeUrl": issuer.url + "/token",
            }
        ]
    )
    principals.issuers_changed()
    hop_tokens.forget_tokens()
    issuer.exchanges.clear()
    issuer.exchange_clients.clear()
    issuer.exchange_down = False
    issuer.exchange_adds = ""
    yield issuer
    principals.issuers_changed()
    hop_tokens.forget_tokens()
    forget_agent_targets()


def caller_token(issuer, **claims) -> str:
    """A token of a principal of its own (a principal's row is cached by the relay)."""
    return issuer.token(sub=f"alice-{uuid.uuid4().hex[:8]}", scope="a2a:call", **claims)


@pytest.fixture
def post_message(trusted):
    """Sends one JSON-RPC message call to ``path`` through the relay, as a principal of its
    own (or with ``token``), and returns the response."""

    async def post(
        path: str, *, token: str = "", method: str = "SendMessage", text: str = "hi"
    ) -> httpx.Response:
        async with client(token or caller_token(trusted)) as relay:
            return await relay.post(
                path,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": method,
                    "params": {"message": user_message(text)},
                },
            )

    return post


def client(token: str) -> httpx.AsyncClient:
    from relay_project.asgi import application

    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        timeout=WAIT_SECONDS,
    )


def delegate(agent_id: str, mode: str, **fields) -> None:
    Agent.objects.filter(pk=agent_id).update(delegation_mode=mode, **fields)
    forget_agent_targets(agent_id)


def claims_of(token: str, issuer) -> dict:
    """The claims of a token the test issuer signed (verified)."""
    keys = KeySet.import_key_set({"keys": [key.as_dict(private=False) for key in issuer.keys]})
    return jwt.decode(token, keys).claims


def received_tokens(agent_id: str) -> list[str]:
    """The bearer tokens of the message calls the agent received."""
    tokens = []
    for request in message_calls(agent_id):
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        assert scheme == "Bearer", request.headers
        tokens.append(token)
    return tokens


def act_chain(claims: dict) -> list[str]:
    """The actors of nested ``act`` claims, oldest first (the outermost is the current)."""
    chain, act = [], claims.get("act")
    while act:
        chain.append(act["sub"])
        act = act.get("act")
    return chain[::-1]


def stored_text() -> str:
    """Everything the relay stored about tasks, hops and the audit log."""
    rows = [
        *Task.objects.values(),
        *RoutingHop.objects.values(),
        *AuditEntry.objects.values(),
    ]
    return json.dumps(rows, default=str)


RELAY_LOGGERS = ("registry", "routing", "tasks_app", "relay_project", "django", "httpx")
"""The relay's own loggers and the libraries it calls with: the member agents (a2a-sdk
servers in this process) log the headers they received at DEBUG, which is theirs to do."""


async def assert_kept_nowhere(tokens: list[str], caplog) -> None:
    stored = await sync_to_async(stored_text)()
    logged = "\n".join(
        record.getMessage()
        for record in caplog.records
        if record.name.split(".")[0] in RELAY_LOGGERS
    )
    assert caplog.records, "nothing was logged: the check below would prove nothing"
    for token in tokens:
        signature = token.split(".")[2]
        assert signature not in logged
        assert signature not in stored


async def test_three_members_in_exchange_mode_each_get_a_token_for_them_acting_as_traced(
    trusted, caplog
):
    caplog.set_level(logging.DEBUG)
    await sync_to_async(make_team)("lead", "worker", "helper")
    for agent_id in ("lead", "worker"):
        await sync_to_async(delegate)(agent_id, "exchange", delegation_audience=f"aud-{agent_id}")
    # The helper's audience is its URL (no audience configured).
    await sync_to_async(delegate)("helper", "exchange")
    LEAD.load("worker")
    WORKER.load("helper")
    HELPER.load("user")
    token = caller_token(trusted)

    async with client(token) as relay:
        task = await send(relay, user_message("go"))
        hops = await trace(relay, task["id"])

    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert route(hops) == [
        ("user", "lead", "routed", "worker"),
        ("lead", "worker", "routed", "helper"),
        ("worker", "helper", "replied", "user"),
    ]
    relay_actor = f"relay:{delegation.relay_id()}"
    helper_url = await sync_to_async(lambda: hop_tokens_audience("helper"))()
    expected = {
        "lead": ("aud-lead", [relay_actor, "team:crew"]),
        "worker": ("aud-worker", [relay_actor, "team:crew", "agent:lead"]),
        "helper": (helper_url, [relay_actor, "team:crew", "agent:lead", "agent:worker"]),
    }
    seen = []
    for agent_id, (audience, chain) in expected.items():
        (received,) = received_tokens(agent_id)
        claims = claims_of(received, trusted)
        assert claims["aud"] == audience
        assert claims["sub"] == claims_of(token, trusted)["sub"]
        assert act_chain(claims) == chain
        assert claims["scope"] == "a2a:call"
        assert received != token
        seen.append(received)
    # The chain is the trace: each member's actors are the members the hops went through.
    assert [hop["from"] for hop in hops[1:]] == ["lead", "worker"]
    assert [e["audience"] for e in trusted.exchanges] == [e[0] for e in expected.values()]
    await assert_kept_nowhere([token, *seen], caplog)


def hop_tokens_audience(agent_id: str) -> str:
    from tasks_app.gateway import agent_target

    return agent_target(agent_id).endpoint.url


async def test_a_scope_the_caller_lacks_is_left_out_when_the_member_narrows(trusted):
    await sync_to_async(make_team)("lead", "worker")
    await sync_to_async(delegate)(
        "lead", "exchange", delegation_audience="aud-lead", delegation_scopes="a2a:call billing"
    )
    LEAD.load("user")

    async with client(caller_token(trusted)) as relay:
        task = await send(relay, user_message("go"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    (received,) = received_tokens("lead")
    assert claims_of(received, trusted)["scope"] == "a2a:call"
    assert trusted.exchanges[0]["scope"] == "a2a:call"


async def test_a_scope_the_caller_lacks_refuses_the_hop_when_the_member_does_not_narrow(
    trusted,
):
    await sync_to_async(make_team)("lead", "worker")
    await sync_to_async(delegate)(
        "worker",
        "exchange",
        delegation_audience="aud-worker",
        delegation_scopes="a2a:call billing",
        delegation_narrow=False,
    )
    LEAD.load("worker")

    async with client(caller_token(trusted)) as relay:
        task = await send(relay, user_message("go"))

    # The member is never called; the team fails as for a member call that failed itself.
    assert message_calls("worker") == []
    assert trusted.exchanges == []
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    text = task["status"]["message"]["parts"][0]["text"]
    assert "needs the scopes 'billing', which the caller's token lacks" in text


async def test_pass_mode_sends_the_callers_token_when_its_audience_names_the_agent(trusted):
    await sync_to_async(make_team)("lead", "worker")
    await sync_to_async(delegate)("lead", "pass", delegation_audience="aud-lead")
    LEAD.load("user")
    token = caller_token(trusted, aud=[AUDIENCE, "aud-lead"])

    async with client(token) as relay:
        task = await send(relay, user_message("go"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert received_tokens("lead") == [token]
    assert trusted.exchanges == []


async def test_pass_mode_with_a_wrong_audience_is_refused_and_nothing_is_sent(
    trusted, post_message
):
    await sync_to_async(make_team)("lead", "worker")
    await sync_to_async(delegate)("lead", "pass", delegation_audience="aud-lead")

    response = await post_message("/a2a/teams/crew/", text="go")

    body = response.json()
    # The member refused the caller's own message: the caller gets the protocol's error.
    assert body["error"]["code"] == -31403, body
    assert (
        "takes the caller's token only when its aud names 'aud-lead'" in (body["error"]["message"])
    )
    assert message_calls("lead") == []


async def test_the_exchange_endpoint_down_refuses_the_call_and_nothing_is_sent(
    trusted, post_message
):
    await sync_to_async(delegate)("echo", "exchange", delegation_audience="aud-echo")
    trusted.exchange_down = True

    response = await post_message("/a2a/agents/echo/")

    body = response.json()
    assert body["error"]["code"] == -31503, body
    assert "token-exchange endpoint failed (HTTP 503)" in body["error"]["message"]
    assert len(trusted.exchanges) == 1
    assert AGENTS["echo"].posts() == []


async def test_an_agent_in_mode_none_gets_no_caller_token(trusted, post_message):
    response = await post_message("/a2a/agents/echo/")

    assert "result" in response.json(), response.text
    (request,) = AGENTS["echo"].posts()
    assert "authorization" not in request.headers
    assert trusted.exchanges == []


async def test_a_call_context_of_a_stored_caller_has_no_token_so_a_delegated_hop_is_refused(
    trusted, api_key
):
    stored = await sync_to_async(lambda: type(api_key[0]).objects.get(pk=api_key[0].pk))()
    ctx = CallContext(caller=stored, delegation=("team:crew",))
    assert ctx.caller_token == ""
    for mode in ("pass", "exchange"):
        with pytest.raises(hop_tokens.HopRefused, match="took it over"):
            await hop_tokens.authorization(
                hop_tokens.Delegation(agent_id="lead", mode=mode, audience="aud-lead"), ctx
            )
    assert await hop_tokens.authorization(hop_tokens.Delegation(agent_id="lead"), ctx) == {}
    assert "caller_token" not in repr(CallContext(caller=None, caller_token="secret-value"))


async def test_a_task_taken_over_by_another_process_refuses_its_delegated_hop(trusted):
    """The caller's token was in the memory of the process that stopped: the process taking
    the task over has none, so it never calls the agent in exchange mode, and the task ends
    failed saying why."""
    from tasks_app import gateway
    from tasks_app.gateway import supervisor
    from tests.tasks_app.test_gateway_ownership import dead_process, until

    await sync_to_async(delegate)("echo", "exchange", delegation_audience="aud-echo")
    target = await sync_to_async(gateway.agent_target)("echo")
    ctx = CallContext(caller=None, caller_token=caller_token(trusted))
    opened = await sync_to_async(gateway.open_task)(target, ctx, {"message": user_message("hi")})
    dead = await sync_to_async(dead_process)()
    await sync_to_async(Task.objects.filter(pk=opened.task.pk).update)(
        owner=dead, state="working", upstream_task_id="agent-task-1"
    )

    assert await supervisor.take_over_orphans() == 1
    task = await until(
        lambda: Task.objects.filter(pk=opened.task.pk, state="failed").first(),
        "the taken-over task failed",
    )
    assert "took it over" in task.error
    assert AGENTS["echo"].posts() == []
    assert trusted.exchanges == []


async def test_every_call_kind_to_an_agent_in_pass_mode_carries_the_callers_token(
    trusted, post_message
):
    """Send, GetTask and CancelTask (the follow-ups of a task) all go with the caller's
    token, never the stored credential."""
    from tasks_app import gateway

    await sync_to_async(delegate)("asks", "pass", delegation_audience="aud-asks")
    token = caller_token(trusted, aud=[AUDIENCE, "aud-asks"])
    response = await post_message("/a2a/agents/asks/", token=token)
    answer = response.json()["result"]["task"]
    assert answer["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer
    task = await sync_to_async(Task.objects.select_related("caller").get)(pk=answer["id"])
    target = await sync_to_async(gateway.agent_target)("asks")
    caller = task.caller
    caller.token_claims = claims_of(token, trusted)
    ctx = CallContext(caller=caller, caller_token=token)
    await target.refresh(task, ctx)
    await target.cancel_upstream(task, ctx)

    methods = [request.json()["method"] for request in AGENTS["asks"].posts()]
    assert methods[-2:] == ["GetTask", "CancelTask"]
    assert {request.headers["authorization"] for request in AGENTS["asks"].posts()} == {
        f"Bearer {token}"
    }


async def test_the_relay_authenticates_to_the_exchange_endpoint_as_its_client(
    trusted, settings, post_message
):
    settings.RELAY_TOKEN_EXCHANGE_CLIENT_ID = "brass-relay"
    settings.RELAY_TOKEN_EXCHANGE_CLIENT_SECRET = "relay-secret"
    await sync_to_async(delegate)("echo", "exchange", delegation_audience="aud-echo")

    response = await post_message("/a2a/agents/echo/")

    assert "result" in response.json(), response.text
    assert trusted.exchange_clients == ["brass-relay"]
    (request,) = AGENTS["echo"].posts()
    assert claims_of(request.headers["authorization"].split()[1], trusted)["aud"] == "aud-echo"


async def test_an_exchanged_token_broader_than_the_callers_is_never_sent(trusted, post_message):
    await sync_to_async(delegate)("echo", "exchange", delegation_audience="aud-echo")
    trusted.exchange_adds = "admin"

    response = await post_message("/a2a/agents/echo/")

    body = response.json()
    assert body["error"]["code"] == -31403, body
    assert "holds scopes the caller's does not (admin)" in body["error"]["message"]
    assert AGENTS["echo"].posts() == []


async def test_a_streaming_team_call_gives_each_streaming_member_its_exchanged_token(
    trusted, post_message
):
    await sync_to_async(make_team)("lead", "worker")
    for agent_id in ("lead", "worker"):
        await sync_to_async(delegate)(agent_id, "exchange", delegation_audience=f"aud-{agent_id}")
    LEAD.load("worker")
    WORKER.load("user")

    response = await post_message("/a2a/teams/crew/", method="SendStreamingMessage", text="go")

    assert "TASK_STATE_COMPLETED" in response.text, response.text
    relay_actor = f"relay:{delegation.relay_id()}"
    for agent_id, chain in (
        ("lead", [relay_actor, "team:crew"]),
        ("worker", [relay_actor, "team:crew", "agent:lead"]),
    ):
        (call,) = message_calls(agent_id)
        assert call.json()["method"] == "SendStreamingMessage"
        (received,) = received_tokens(agent_id)
        claims = claims_of(received, trusted)
        assert (claims["aud"], act_chain(claims)) == (f"aud-{agent_id}", chain)
