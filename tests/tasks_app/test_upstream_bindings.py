"""Agents reached over the binding their card offers: regressions of the upstream client."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from registry.models import Agent
from routing.demo.agents import ECHO, build_agent_app
from tasks_app import gateway
from tasks_app.protocol.errors import InvalidAgentResponse
from tests.servers import running
from tests.tasks_app.a2a_http import register

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

HELLO = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}


def only_interface(agent: Agent, binding: str, version: str) -> Agent:
    """Keeps the one interface of the card that speaks ``binding`` in ``version``."""
    agent.interfaces = [
        interface
        for interface in agent.interfaces
        if (interface["protocolBinding"], interface["protocolVersion"]) == (binding, version)
    ]
    assert len(agent.interfaces) == 1, agent.interfaces
    agent.save(update_fields=["interfaces"])
    return agent


async def target_at(url: str, binding: str, version: str) -> gateway.Target:
    """The agent served at ``url``, registered and called over ``binding`` in ``version``."""
    agent = await sync_to_async(register)(url)
    await sync_to_async(only_interface)(agent, binding, version)
    gateway.forget_agent_targets()
    return await sync_to_async(gateway.agent_target)(agent.pk)


def answering(respond) -> Starlette:
    """A hand-written agent: every request to any path gets ``respond(request)``."""
    return Starlette(routes=[Route("/{path:path}", respond, methods=["GET", "POST"])])


def failure_text(answer: dict) -> str:
    status = answer["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED", status
    return status["message"]["parts"][0]["text"]


async def test_a_0_3_agent_that_speaks_only_http_json_is_called_at_its_own_paths():
    """Regression: the relay asked {base}/v1/v1/message:send (the 0.3 routes already start
    with /v1), the agent answered 404 and the caller got -32601 Method not found."""
    with running(lambda url: build_agent_app(ECHO, base_url=url, versions=("0.3",))) as url:
        target = await target_at(url, "HTTP+JSON", "0.3")
        assert (target.endpoint.binding, target.endpoint.version) == ("HTTP+JSON", "0.3")
        answer = await gateway.send_message(target, gateway.CallContext(caller=None), HELLO)
    assert answer["message"]["parts"] == [{"text": "hello"}]


async def test_an_agent_answering_a_plain_text_404_fails_the_task_instead_of_blaming_the_caller():
    """Regression: a plain-text 404 from the agent reached the caller as -32601 Method not
    found, as if the caller had called a method that does not exist."""

    async def missing(request: Request):
        return PlainTextResponse("Not Found", status_code=404)

    with running(answering(missing)) as url:
        target = await target_at(url, "HTTP+JSON", "1.0")
        answer = await gateway.send_message(target, gateway.CallContext(caller=None), HELLO)
    assert "answered HTTP 404" in failure_text(answer)


async def test_an_agent_refusing_the_relays_credentials_is_its_failure_not_the_callers_401():
    """Regression: an agent behind auth answering 401 reached the caller as HTTP 401 "an API
    key is required" with WWW-Authenticate, as if the caller's own key were wrong."""

    async def refuse(request: Request):
        body = await request.json()
        return JSONResponse(
            {
                "jsonrpc": "2.0",
                "id": body.get("id"),
                "error": {"code": -31401, "message": "an API key is required"},
            },
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="agent"'},
        )

    with running(answering(refuse)) as url:
        target = await target_at(url, "JSONRPC", "1.0")
        answer = await gateway.send_message(target, gateway.CallContext(caller=None), HELLO)
    assert "refused the relay's credentials" in failure_text(answer)


async def test_garbage_from_an_agent_names_the_failed_task_the_caller_can_look_up(api_key):
    """Regression: garbage from an agent on SendMessage gave the caller -32006 with no task
    id, while a failed task was stored that the caller could never find."""

    async def garbage(request: Request):
        body = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "result": {"oops": 1}})

    ctx = gateway.CallContext(caller=api_key[0])
    with running(answering(garbage)) as url:
        target = await target_at(url, "JSONRPC", "1.0")
        with pytest.raises(InvalidAgentResponse) as raised:
            await gateway.send_message(target, ctx, HELLO)
    task_id = raised.value.metadata["taskId"]
    assert any(
        detail.get("metadata", {}).get("taskId") == task_id for detail in raised.value.details()
    )
    stored = await gateway.get_task(None, ctx, task_id)
    assert stored["status"]["state"] == "TASK_STATE_FAILED"
