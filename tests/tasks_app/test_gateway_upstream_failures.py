"""Agents that fail: the relay answers the caller properly (never an HTTP 500) and the task
ends ``failed`` with a status message saying what went wrong upstream."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.agents import misadvertised_agent
from tests.live import CALL_SECONDS, PROTOCOL_IDS, PROTOCOLS, read_stream

UPSTREAM_TIMEOUT = 1.0
RELAY_ENV = {"RELAY_UPSTREAM_TIMEOUT": str(UPSTREAM_TIMEOUT)}


def failing_agent(answer) -> Any:
    """A 1.0 JSON-RPC agent (card and endpoint at its base URL) whose every call gets
    ``await answer(request)``."""

    def make(base_url: str) -> Starlette:
        card = {
            "name": "Failing Agent",
            "description": "Fails on purpose.",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": base_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "fail", "name": "Fail", "description": "Fails.", "tags": ["test"]}],
        }
        return Starlette(
            routes=[
                Route(
                    "/.well-known/agent-card.json",
                    lambda request: JSONResponse(card),
                    methods=["GET"],
                ),
                Route("/", answer, methods=["POST"]),
            ]
        )

    return make


async def hang(request: Request) -> Response:
    await asyncio.Event().wait()
    return Response()


async def server_error(request: Request) -> Response:
    return Response("upstream exploded", status_code=500, media_type="text/plain")


async def not_json(request: Request) -> Response:
    return Response("<html><body>hello</body></html>", media_type="text/html")


async def not_jsonrpc(request: Request) -> Response:
    return JSONResponse({"hello": "world"})


async def refuses(request: Request) -> Response:
    call = json.loads(await request.body())
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": call.get("id"),
            "error": {"code": -32602, "message": "the agent refuses this message"},
        }
    )


# agent id -> (agent, what the failed task's status message must say)
FAILURES = {
    "refused": (misadvertised_agent, "refused the connection"),
    "hangs": (failing_agent(hang), "did not answer in time"),
    "http-500": (failing_agent(server_error), "answered HTTP 500"),
}
GARBAGE = {
    "not-json": failing_agent(not_json),
    "not-jsonrpc": failing_agent(not_jsonrpc),
}
ALL = [*FAILURES, *GARBAGE]


@pytest.fixture(scope="module", autouse=True)
def agents(relay):
    relay.serve_agent("refuses", failing_agent(refuses))
    for agent_id, (agent, _) in FAILURES.items():
        relay.serve_agent(agent_id, agent)
    for agent_id, agent in GARBAGE.items():
        relay.serve_agent(agent_id, agent)


def message(text: str) -> dict[str, Any]:
    return {
        "messageId": f"m-{text}-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }


def status_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def stream_frames(relay, agent_id: str, text: str) -> list[dict[str, Any]]:
    """A SendStreamingMessage through the relay: every frame, the stream closed."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message(text)},
    }
    status, _, frames = read_stream(
        relay.agent_url(agent_id), body, {**relay.auth(), "A2A-Version": "1.0"}
    )
    assert status == 200
    return frames


def stream(relay, agent_id: str, text: str) -> list[dict[str, Any]]:
    """Every frame's result; there must be no error frame."""
    frames = stream_frames(relay, agent_id, text)
    assert all("result" in frame for frame in frames), frames
    return [frame["result"] for frame in frames]


def listed(relay, agent_id: str) -> list[dict[str, Any]]:
    response = relay.call(agent_id, "ListTasks", {})
    assert response.status_code == 200
    return response.json()["result"]["tasks"]


@pytest.mark.parametrize("agent_id", list(FAILURES))
def test_a_blocking_send_to_a_failing_agent_returns_the_failed_task(relay, agent_id):
    started = time.monotonic()
    response = relay.call(agent_id, "SendMessage", {"message": message("hello")})
    assert response.status_code == 200, response.text
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert f"agent '{agent_id}'" in status_text(task)
    assert FAILURES[agent_id][1] in status_text(task)
    assert time.monotonic() - started < UPSTREAM_TIMEOUT + 10
    stored = relay.call(agent_id, "GetTask", {"id": task["id"]}).json()["result"]
    assert stored["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(stored) == status_text(task)


@pytest.mark.parametrize("agent_id", list(FAILURES))
def test_a_stream_to_a_failing_agent_ends_with_the_failure(relay, agent_id):
    # Regression ("hangs"): the relay waited for a streaming agent's answer without a limit,
    # so the task stayed submitted and the caller got keep-alives forever.
    events = stream(relay, agent_id, "hello")
    assert "task" in events[0]
    last = events[-1]
    status = last["statusUpdate"]["status"] if "statusUpdate" in last else last["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert FAILURES[agent_id][1] in "".join(p["text"] for p in status["message"]["parts"])


@pytest.mark.parametrize("agent_id", list(GARBAGE))
def test_an_answer_that_is_not_a2a_is_an_invalid_agent_response(relay, agent_id):
    before = {task["id"] for task in listed(relay, agent_id)}
    response = relay.call(agent_id, "SendMessage", {"message": message("hello")})
    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == -32006
    assert error["data"][0]["reason"] == "INVALID_AGENT_RESPONSE"
    assert agent_id in error["message"]
    failed = [task for task in listed(relay, agent_id) if task["id"] not in before]
    assert [task["status"]["state"] for task in failed] == ["TASK_STATE_FAILED"]


@pytest.mark.parametrize("agent_id", list(GARBAGE))
def test_a_stream_to_an_agent_answering_garbage_ends_failed(relay, agent_id):
    events = stream(relay, agent_id, "hello")
    last = events[-1]
    status = last["statusUpdate"]["status"] if "statusUpdate" in last else last["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert "not A2A" in "".join(p["text"] for p in status["message"]["parts"])


@pytest.mark.parametrize("agent_id", ALL)
def test_the_relay_never_answers_http_500_for_an_agents_failure(relay, agent_id):
    for binding_path, headers, body in (
        (
            "",
            {"A2A-Version": "1.0"},
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "SendMessage",
                "params": {"message": message("x")},
            },
        ),
        ("message:send", {"A2A-Version": "1.0"}, {"message": message("x")}),
        (
            "",
            {},
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "message/send",
                "params": {
                    "message": {
                        **message("x"),
                        "role": "user",
                        "kind": "message",
                        "parts": [{"kind": "text", "text": "x"}],
                    }
                },
            },
        ),
    ):
        response = httpx.post(
            relay.agent_url(agent_id) + binding_path,
            json=body,
            headers={**relay.auth(), **headers},
            timeout=CALL_SECONDS,
        )
        assert response.status_code < 500 or (
            binding_path
            and response.json()["error"]["details"][0]["reason"] == "INVALID_AGENT_RESPONSE"
        ), response.text


def test_an_agent_refusing_a_message_passes_its_error_to_a_blocking_caller(relay):
    before = listed(relay, "refuses")
    response = relay.call("refuses", "SendMessage", {"message": message("hello")})
    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] == -32602
    assert "the agent refuses this message" in error["message"]
    # The refused message left no task behind.
    assert listed(relay, "refuses") == before


def test_an_agent_refusing_a_streamed_message_ends_the_stream_failed_with_its_reason(relay):
    # The stream has begun when the agent refuses, so the refusal ends the task instead.
    events = stream(relay, "refuses", "hello")
    assert "task" in events[0]
    last = events[-1]
    status = last["statusUpdate"]["status"] if "statusUpdate" in last else last["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert "the agent refuses this message" in status["message"]["parts"][0]["text"]
    assert [task["status"]["state"] for task in listed(relay, "refuses")] == ["TASK_STATE_FAILED"]


def error_of_send(relay, agent_id: str, binding: str, version: str) -> dict[str, Any]:
    """The error a SendMessage to ``agent_id`` gets in one binding and version, as sent."""
    text = message("hello")
    if version == "0.3":
        text = {**text, "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "x"}]}
    if binding == "JSONRPC":
        method = "SendMessage" if version == "1.0" else "message/send"
        response = relay.call(agent_id, method, {"message": text}, version=version)
        return response.json()["error"]
    if version == "0.3":
        text = {**message("hello"), "content": [{"text": "x"}]}
        text.pop("parts")
    path = "message:send" if version == "1.0" else "v1/message:send"
    headers = {"A2A-Version": "1.0"} if version == "1.0" else {}
    response = httpx.post(
        relay.agent_url(agent_id) + path,
        json={"message" if version == "1.0" else "request": text},
        headers={**relay.auth(), **headers},
        timeout=CALL_SECONDS,
    )
    return response.json()["error"]


def task_id_in(error: dict[str, Any]) -> str | None:
    """The task id an error names: in its ErrorInfo's metadata (1.0), in its data (0.3
    JSON-RPC)."""
    found = error.get("data") if isinstance(error.get("data"), dict) else None
    if found and found.get("taskId"):
        return found["taskId"]
    for detail in error.get("data") or error.get("details") or []:
        if isinstance(detail, dict) and detail.get("metadata", {}).get("taskId"):
            return detail["metadata"]["taskId"]
    return None


@pytest.mark.parametrize(("binding", "version"), PROTOCOLS, ids=PROTOCOL_IDS)
def test_an_invalid_agent_response_names_the_failed_task_it_left(relay, binding, version):
    # An agent of its own: the other tests' failures open the shared agents' breakers.
    agent_id = f"garbage-{'rest' if binding == 'HTTP+JSON' else 'rpc'}-{version.replace('.', '')}"
    relay.serve_agent(agent_id, failing_agent(not_jsonrpc))
    error = error_of_send(relay, agent_id, binding, version)
    task_id = task_id_in(error)
    assert task_id, error
    stored = relay.call(agent_id, "GetTask", {"id": task_id}).json()["result"]
    assert stored["status"]["state"] == "TASK_STATE_FAILED"
    assert "not A2A" in status_text(stored)
