"""The trace context on calls to an MCP server registered as an agent: the relay in-process
over ASGI, the MCP server a real one (the official SDK over streamable HTTP on 127.0.0.1)
that records the headers of every request it gets, the spans exported to a real local OTLP
receiver. With tracing on the call is an ``invoke_agent`` span under the caller's span, and
every request of the call carries that span's ``traceparent``; with tracing off none does."""

from __future__ import annotations

import uuid

import httpx
import pytest
from asgiref.sync import sync_to_async

from registry.services import agent_register
from relay_project import tracing
from tests.registry.test_mcp_servers_as_agents import unit_tools_app
from tests.routing.test_team_traces import tracing_on  # noqa: F401  (fixture)
from tests.servers import running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

CALLER_TRACE = "5bf92f3577b34da6a3ce929d0e0e4737"
CALLER_SPAN = "10f067aa0ba902b8"
SEEN: list[dict[str, str]] = []


def recording(app):
    """``app`` that keeps the headers of each HTTP request it gets in SEEN."""

    async def recorded(scope, receive, send):
        if scope["type"] == "http":
            SEEN.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    return recorded


@pytest.fixture(scope="module")
def mcp_url():
    with running(lambda: recording(unit_tools_app())) as url:
        yield f"{url}/mcp"


@pytest.fixture
async def relay(api_key, mcp_url):
    from relay_project.asgi import application

    await sync_to_async(agent_register)(url=mcp_url, agent_id="tools", mcp_server=True)
    SEEN.clear()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=15.0,
    ) as client:
        yield client


async def shout(relay) -> dict:
    message = {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"data": {"tool": "shout", "arguments": {"sentence": "hi"}}}],
    }
    response = await relay.post(
        "/a2a/agents/tools/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
    )
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task


async def test_an_mcp_call_is_an_agent_span_its_requests_carry(relay, tracing_on):  # noqa: F811
    task = await shout(relay)
    tracing.flush()
    spans = tracing_on.wait_for(lambda spans: any(s.name.startswith("invoke_agent") for s in spans))
    assert not [s for s in spans if s.name.startswith("a2a.call")]  # a send has none
    (agent,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert (agent.trace_id, agent.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert agent.kind == 3  # SPAN_KIND_CLIENT
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.id"] == "tools"
    assert agent.attributes["a2a.method"] == "SendMessage"
    assert agent.attributes["a2a.binding"] == "MCP"
    assert agent.attributes["a2a.task.id"] == task["id"]
    assert agent.attributes["gen_ai.conversation.id"] == task["contextId"]

    assert SEEN  # initialize, tools/call and the rest of the session
    assert {headers.get("traceparent") for headers in SEEN} == {
        f"00-{CALLER_TRACE}-{agent.span_id}-01"
    }


async def test_with_tracing_off_an_mcp_call_sends_no_traceparent(relay):
    assert not tracing.enabled()
    await shout(relay)
    assert SEEN
    assert not any("traceparent" in headers for headers in SEEN)


async def test_a_send_that_fails_before_its_agent_call_is_a_failed_call_span(relay, tracing_on):  # noqa: F811
    message = {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"data": {"tool": "no-such-tool", "arguments": {}}}],
    }
    response = await relay.post(
        "/a2a/agents/tools/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
    )
    assert "no tool 'no-such-tool'" in response.json()["error"]["message"]
    tracing.flush()
    spans = tracing_on.wait_for(lambda spans: any(s.name.startswith("a2a.call") for s in spans))

    # Admitted, then refused before any span of its work: the failure is the call's own span.
    (call,) = spans
    assert call.name == "a2a.call SendMessage"
    assert (call.trace_id, call.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert call.status == 2  # STATUS_CODE_ERROR
    assert call.attributes["error.type"] == "INVALID_PARAMS"
    assert not SEEN
