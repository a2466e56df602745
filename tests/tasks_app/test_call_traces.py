"""Which spans an incoming call makes over HTTP JSON-RPC: the relay in-process over ASGI, the
echo agent (a2a-sdk) on 127.0.0.1 recording the headers it gets, the spans exported to a real
local OTLP receiver. A send that is admitted is traced by the spans of its work only (no
``a2a.call`` span); a send that is refused gets its ``a2a.call`` span, failed, after the fact;
any other call keeps its ``a2a.call`` span."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from asgiref.sync import sync_to_async

from relay_project import tracing
from tests.live import Recording
from tests.otlp_receiver import tracing_to_receiver
from tests.servers import running
from tests.tasks_app.a2a_http import register

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

CALLER_TRACE = "7cf92f3577b34da6a3ce929d0e0e4738"
CALLER_SPAN = "20f067aa0ba902b9"
TRACEPARENT = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
SERVER, CLIENT = 2, 3  # SPAN_KIND_*
ERROR = 2  # STATUS_CODE_ERROR


@pytest.fixture
def recording():
    from routing.demo.agents import ECHO, build_agent_app

    return Recording(lambda url: build_agent_app(ECHO, base_url=url))


@pytest.fixture
async def echo_agent(recording):
    with running(recording) as url:
        yield await sync_to_async(register)(url)


@pytest.fixture
async def relay(api_key):
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0", **TRACEPARENT},
        timeout=15.0,
    ) as client:
        yield client


@pytest.fixture
def receiver(monkeypatch):
    with tracing_to_receiver(monkeypatch) as receiver:
        yield receiver


async def rpc(relay, agent_id: str, method: str, params: dict) -> dict:
    response = await relay.post(
        f"/a2a/agents/{agent_id}/",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
    )
    return response.json()


def hello() -> dict:
    return {
        "message": {
            "messageId": f"m-{uuid.uuid4().hex[:10]}",
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
        }
    }


def exported_with_a_call_span(receiver) -> list:
    """The spans exported, once an ``a2a.call`` span is among them."""
    tracing.flush()
    return receiver.wait_for(lambda spans: any(s.name.startswith("a2a.call") for s in spans))


def assert_a_server_span_under_the_caller(span) -> None:
    assert (span.trace_id, span.parent_span_id, span.kind) == (CALLER_TRACE, CALLER_SPAN, SERVER)


async def test_an_admitted_send_is_traced_by_its_agent_call_alone(
    relay, echo_agent, recording, receiver
):
    answer = await rpc(relay, echo_agent.pk, "SendMessage", hello())
    assert "result" in answer, answer
    tracing.flush()
    spans = receiver.wait_for(lambda spans: any(s.name.startswith("invoke_agent") for s in spans))

    assert not [s for s in spans if s.name.startswith("a2a.call")]
    (agent,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert (agent.trace_id, agent.parent_span_id, agent.kind) == (
        CALLER_TRACE,
        CALLER_SPAN,
        CLIENT,
    )
    assert agent.attributes["a2a.method"] == "SendMessage"
    sent = [r.headers.get("traceparent") for r in recording.requests if r.method == "POST"]
    assert sent == [f"00-{CALLER_TRACE}-{agent.span_id}-01"]


@pytest.mark.parametrize("refusal", ["unknown agent", "over its quota", "bad key"])
async def test_a_refused_send_is_one_failed_call_span_made_after_the_fact(
    relay, echo_agent, api_key, receiver, refusal
):
    from registry.usage_models import Quota

    if refusal == "over its quota":
        await sync_to_async(Quota.objects.create)(api_key=api_key[0], calls_per_day=0)
    if refusal == "bad key":
        relay.headers["Authorization"] = "Bearer not-a-key"
    arrived = time.time_ns()
    answer = await rpc(
        relay, "nobody" if refusal == "unknown agent" else echo_agent.pk, "SendMessage", hello()
    )
    answered = time.time_ns()
    assert "error" in answer, answer
    spans = exported_with_a_call_span(receiver)

    (call,) = spans
    assert call.name == "a2a.call SendMessage"
    assert_a_server_span_under_the_caller(call)
    assert call.status == ERROR
    assert (
        call.attributes["error.type"]
        == {
            "unknown agent": "METHOD_NOT_FOUND",
            "over its quota": "RATE_LIMITED",
            "bad key": "UNAUTHENTICATED",
        }[refusal]
    )
    assert call.attributes["a2a.method"] == "SendMessage"
    assert arrived <= call.start < call.end <= answered


async def test_a_get_task_keeps_its_call_span(relay, echo_agent, receiver):
    params = {**hello(), "configuration": {"returnImmediately": True}}
    sent = await rpc(relay, echo_agent.pk, "SendMessage", params)
    task_id = sent["result"]["task"]["id"]
    answer = await rpc(relay, echo_agent.pk, "GetTask", {"id": task_id})
    assert answer["result"]["id"] == task_id
    spans = exported_with_a_call_span(receiver)

    (call,) = [s for s in spans if s.name.startswith("a2a.call")]
    assert call.name == "a2a.call GetTask"
    assert_a_server_span_under_the_caller(call)
    assert call.attributes["a2a.method"] == "GetTask"
    assert call.attributes["a2a.target"] == f"agent:{echo_agent.pk}"
    assert call.status != ERROR
    assert call.start < call.end


def test_a_send_that_fails_after_admission_gets_its_failed_call_span(receiver):
    from tasks_app.api import traces
    from tasks_app.protocol.errors import InvalidAgentResponse
    from tasks_app.protocol.versions import Operation

    with traces.CallTrace(TRACEPARENT.items(), "agent:x", Operation.SEND) as trace:
        trace.failed(InvalidAgentResponse("not A2A"))
    spans = exported_with_a_call_span(receiver)
    (call,) = spans
    assert call.name == "a2a.call SendMessage"
    assert_a_server_span_under_the_caller(call)
    assert call.status == ERROR
    assert call.attributes["error.type"] == InvalidAgentResponse("x").reason
    assert call.start <= call.end
