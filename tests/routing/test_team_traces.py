"""OpenTelemetry traces of a team call end to end: the relay in-process over ASGI, its members
real a2a-sdk agents on 127.0.0.1, the spans exported over OTLP/HTTP to a real local receiver.

A three-hop conversation is one trace: under the caller's span (a send has no ``a2a.call`` span
of its own), one ``invoke_workflow`` span and an ``invoke_agent`` span per hop, in the order of
the stored hop trace, each member receiving the ``traceparent`` of its own span. With tracing
off, nothing is made or sent.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import httpx
import pytest
from asgiref.sync import sync_to_async

from relay_project import tracing
from tests.otlp_receiver import otlp_receiver
from tests.routing.test_team_e2e import (  # noqa: F401  (fixtures)
    AGENTS,
    LEAD,
    WORKER,
    agent_urls,
    make_team,
    message_calls,
    registered,
    send,
    trace,
    user_message,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
async def relay(api_key):
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=15.0,
    ) as client:
        yield client


@pytest.fixture
def tracing_on(monkeypatch):
    with otlp_receiver() as (receiver, url):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "relay-under-test")
        assert tracing.configure()
        try:
            yield receiver
        finally:
            tracing.shutdown()


def _three_hops():
    LEAD.load("worker", "user")
    WORKER.load("sender")


async def test_a_three_hop_team_call_is_one_trace_in_hop_order(relay, tracing_on):
    await sync_to_async(make_team)("lead", "worker")
    _three_hops()

    task = await _send_traced(relay)  # the caller's own trace: the relay continues it
    hops = await trace(relay, task["id"])
    tracing.flush()
    spans = tracing_on.wait_for(lambda spans: sum(s.name.startswith("invoke_") for s in spans) >= 4)

    ours = [s for s in spans if s.trace_id == CALLER_TRACE]
    assert {s.trace_id for s in spans if s.name.startswith("invoke_")} == {CALLER_TRACE}
    # A send is traced by the spans of its work, under the caller's span.
    assert not [s for s in spans if s.name.startswith("a2a.call")]
    (workflow,) = [s for s in ours if s.name.startswith("invoke_workflow")]
    assert workflow.parent_span_id == CALLER_SPAN
    assert workflow.attributes["a2a.task.id"] == task["id"]
    assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert workflow.attributes["gen_ai.workflow.name"] == "Team crew"
    assert workflow.attributes["gen_ai.conversation.id"] == task["contextId"]
    assert workflow.attributes["a2a.task.state"] == "TASK_STATE_COMPLETED"
    agents = sorted((s for s in ours if s.name.startswith("invoke_agent")), key=lambda s: s.start)
    assert [s.attributes["gen_ai.agent.id"] for s in agents] == [hop["to"] for hop in hops]
    assert [s.attributes["gen_ai.agent.id"] for s in agents] == ["lead", "worker", "lead"]
    for span in agents:
        assert span.parent_span_id == workflow.span_id
        assert span.kind == 3  # SPAN_KIND_CLIENT
        assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert span.attributes["gen_ai.agent.name"]
        assert span.attributes["a2a.method"] in ("SendStreamingMessage", "SendMessage")
        assert span.attributes["gen_ai.conversation.id"]
    # The lead's two calls continue its own upstream context: the same conversation.
    conversations = [s.attributes["gen_ai.conversation.id"] for s in agents]
    assert conversations[0] == conversations[2] != conversations[1]

    # Each member got the traceparent of the span of its own call.
    sent = [
        request.headers.get("traceparent", "")
        for agent_id in ("lead", "worker")
        for request in message_calls(agent_id)
    ]
    expected = {f"00-{CALLER_TRACE}-{span.span_id}-01" for span in agents}
    assert set(sent) == expected


async def _send_traced(relay):
    relay.headers["traceparent"] = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    try:
        return await send(relay, user_message("go"))
    finally:
        del relay.headers["traceparent"]


async def test_with_tracing_off_no_span_is_made_and_no_traceparent_sent(relay, monkeypatch):
    with otlp_receiver() as (receiver, url):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
        assert not tracing.enabled()  # configured at start-up only, without OTEL_* set
        await sync_to_async(make_team)("lead", "worker")
        _three_hops()

        task = await _send_traced(relay)

        assert len(await trace(relay, task["id"])) == 3
        tracing.flush()
        assert receiver.posts == 0 and receiver.spans == []
    for agent_id in ("lead", "worker"):
        assert message_calls(agent_id)
        # The caller's traceparent is not passed on either: the relay is not in the trace.
        assert all("traceparent" not in r.headers for r in message_calls(agent_id))


def test_a_relay_without_otel_variables_sets_up_no_tracer_provider():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["DJANGO_SETTINGS_MODULE"] = env.get("DJANGO_SETTINGS_MODULE", "relay_project.settings")
    code = (
        "import django, sys; django.setup();"
        "from opentelemetry import trace; from relay_project import tracing;"
        "print(type(trace.get_tracer_provider()).__name__, tracing.enabled(),"
        " 'opentelemetry.sdk.trace' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ProxyTracerProvider", "False", "False"]


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_tracing_is_wanted_only_when_the_otel_variables_ask(environ, wanted):
    assert tracing.wanted(environ) is wanted


async def test_a_streamed_team_call_has_a_stream_span_over_its_workflow(relay, tracing_on):
    await sync_to_async(make_team)("lead", "worker")
    _three_hops()

    relay.headers["traceparent"] = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    response = await relay.post(
        "/a2a/teams/crew/",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("stream it")},
        },
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    tracing.flush()
    # Waited for in a thread: the stream has its final event before the driving job, on this
    # event loop, closes the last member's stream and so ends its span.
    spans = await asyncio.to_thread(
        tracing_on.wait_for,
        lambda spans: (
            any(s.name == "a2a.stream" for s in spans)
            and sum(s.name.startswith("invoke_agent") for s in spans) >= 3
        ),
    )

    # The relay's spans (the a2a-sdk agents in this process trace themselves too).
    spans = [s for s in spans if s.name.startswith(("a2a.call", "a2a.stream", "invoke_"))]
    assert {s.trace_id for s in spans} == {CALLER_TRACE}
    assert not [s for s in spans if s.name.startswith("a2a.call")]
    (stream,) = [s for s in spans if s.name == "a2a.stream"]
    (workflow,) = [s for s in spans if s.name.startswith("invoke_workflow")]
    assert stream.parent_span_id == CALLER_SPAN
    assert stream.kind == 2  # SPAN_KIND_SERVER
    assert stream.attributes["a2a.method"] == "SendStreamingMessage"
    assert stream.attributes["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert workflow.parent_span_id == CALLER_SPAN
    agents = sorted((s for s in spans if s.name.startswith("invoke_agent")), key=lambda s: s.start)
    assert [s.attributes["gen_ai.agent.id"] for s in agents] == ["lead", "worker", "lead"]
    assert {s.parent_span_id for s in agents} == {workflow.span_id}


async def test_a_member_that_refuses_the_connection_is_a_failed_span_with_its_error_type(
    relay, tracing_on
):
    from registry.services import agent_register
    from tests.agents import Script, scripted_agent
    from tests.live import Recording
    from tests.servers import running_many

    with running_many({"down": Recording(scripted_agent(Script("down")))}) as urls:
        await sync_to_async(agent_register)(url=urls["down"], agent_id="down")
    await sync_to_async(make_team)("lead", "down")
    LEAD.load("down", "user")

    task = await send(relay, user_message("write it"))
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    tracing.flush()
    spans = tracing_on.wait_for(
        lambda spans: (
            any(s.attributes.get("gen_ai.agent.id") == "down" for s in spans)
            and any(s.name.startswith("invoke_workflow") for s in spans)
        )
    )

    # Each try of the call (the gateway retries a refused connection) is a span of its own.
    tries = [s for s in spans if s.attributes.get("gen_ai.agent.id") == "down"]
    assert len(tries) > 1
    assert {s.attributes["error.type"] for s in tries} == {"refused"}
    (workflow,) = [s for s in spans if s.name.startswith("invoke_workflow")]
    assert workflow.attributes["a2a.task.state"] == "TASK_STATE_FAILED"
