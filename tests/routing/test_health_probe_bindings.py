"""The transport probe asks an agent exactly where and how the gateway calls it (issue 13,
item 4): same interface, version, binding and paths, so an agent the gateway cannot call is
never healthy."""

from __future__ import annotations

import dataclasses

import pytest
from asgiref.sync import async_to_sync
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from registry.models import Agent
from registry.services import agent_register
from routing import health_services, probes
from routing.demo.agents import ECHO, build_agent_app
from tasks_app import gateway
from tests.live import Recording
from tests.servers import running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

HELLO = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}


def only_rest_03(agent: Agent) -> Agent:
    """Keeps the agent's HTTP+JSON 0.3 interface alone, as an agent that speaks only that."""
    agent.interfaces = [
        i
        for i in agent.interfaces
        if (i["protocolBinding"], i["protocolVersion"]) == ("HTTP+JSON", "0.3")
    ]
    assert len(agent.interfaces) == 1
    agent.save(update_fields=["interfaces"])
    gateway.forget_agent_targets()
    return agent


def sweep(agent_id: str) -> dict[str, probes.LevelResult]:
    [found] = health_services.sweep_now(agent_ids=[agent_id])
    return {result.level: result for result in found.results}


def test_item4_the_probe_uses_the_endpoint_the_gateway_uses():
    """Issue 13, item 4: the probe's interface (URL, version, binding, credentials) is the
    gateway's for the same agent."""
    with running(lambda url: build_agent_app(ECHO, base_url=url, versions=("0.3",))) as url:
        agent = only_rest_03(agent_register(url=url, agent_id="rest-03"))
        agent = Agent.objects.get(pk=agent.pk)
        probe_endpoint = probes._endpoint(health_services.probe_target_of(agent))
        gateway_endpoint = gateway.agent_target(agent.pk).endpoint
    # The gateway's endpoint also carries the agent's name, for its trace spans; probes make
    # none, so the name is the one field the two may differ in.
    assert probe_endpoint == dataclasses.replace(gateway_endpoint, name="")
    assert (probe_endpoint.binding, probe_endpoint.version) == ("HTTP+JSON", "0.3")


def test_item4_a_03_agent_speaking_only_http_json_is_healthy_where_the_gateway_calls_it():
    """Issue 13, item 4: the probe called a 0.3 HTTP+JSON-only agent healthy while the gateway
    asked {base}/v1/v1/message:send and got 404. Now both use the agent's own /v1/ paths, and
    the probe's GetTask reaches the same place the gateway's SendMessage does."""
    recording = Recording(lambda url: build_agent_app(ECHO, base_url=url, versions=("0.3",)))
    with running(recording) as url:
        agent = only_rest_03(agent_register(url=url, agent_id="rest-03"))
        results = sweep(agent.pk)
        answer = async_to_sync(gateway.send_message)(
            gateway.agent_target(agent.pk), gateway.CallContext(caller=None), HELLO
        )
    assert results["transport"].ok, results["transport"]
    assert answer["message"]["parts"] == [{"text": "hello"}]
    paths = [
        request.path
        for request in recording.requests
        if request.method != "GET" or request.path.startswith("/v1/tasks/")
    ]
    assert paths[0].startswith("/v1/tasks/" + probes.PROBE_TASK_PREFIX), paths
    assert paths[1] == "/v1/message:send", paths


def test_item4_an_agent_answering_only_at_a_path_the_gateway_does_not_call_is_never_healthy():
    """Issue 13, item 4: an agent whose 0.3 REST routes sit where the gateway does not call
    (here the doubled /v1/v1/ of the old bug) fails the transport level."""

    async def not_found_task(request: Request):
        return JSONResponse({"code": 404, "message": "Task not found"}, status_code=404)

    async def nowhere(request: Request):
        return PlainTextResponse("Not Found", status_code=404)

    def make(url: str) -> Starlette:
        card = build_agent_app(ECHO, base_url=url, versions=("0.3",))
        return Starlette(
            routes=[
                Route("/v1/v1/tasks/{task_id}", not_found_task, methods=["GET"]),
                Route("/.well-known/agent-card.json", card, methods=["GET"]),
                Route("/{path:path}", nowhere, methods=["GET", "POST"]),
            ]
        )

    with running(make) as url:
        agent = only_rest_03(agent_register(url=url, agent_id="misrouted"))
        results = sweep(agent.pk)
    assert not results["transport"].ok
    assert results["transport"].category in ("http_status", "protocol"), results["transport"]


def test_item4_the_real_03_sdk_agent_over_http_json_only_is_healthy_and_callable(a2a_sdk_03):
    """Issue 13, item 4 with the agent everybody runs: a2a-sdk 0.3.26 serving only HTTP+JSON
    passes the transport probe, and the gateway calls it."""
    with a2a_sdk_03.agent(transports="HTTP+JSON") as url:
        agent = agent_register(url=url, agent_id="sdk03-rest")
        assert [(i["protocolBinding"], i["protocolVersion"]) for i in agent.interfaces] == [
            ("HTTP+JSON", "0.3")
        ]
        results = sweep(agent.pk)
        answer = async_to_sync(gateway.send_message)(
            gateway.agent_target(agent.pk), gateway.CallContext(caller=None), HELLO
        )
    assert results["transport"].ok, results["transport"]
    assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
