"""Idempotent sends across relay processes (docs/concepts/retries.md), in the production
profile: two daphnes and ``manage.py run_grpc`` on one PostgreSQL database and one Redis, and
a real a2a-sdk agent on 127.0.0.1 that counts the calls it receives. Skipped, saying why,
where PostgreSQL or Redis is absent."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import ExitStack

import grpc
import httpx
import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    a2a_pb2_grpc,
)

from routing.demo.agents import build_agent_app
from tests.live import (
    Recording,
    ServiceMissingError,
    free_port,
    live_relay,
    production_services,
)
from tests.tasks_app.test_idempotent_sends import SLOW_WRITER

pytestmark = pytest.mark.production

CLIENTS = 100
CUT_SECONDS = 0.2
"""The client gives up on its first send this soon: before the agent (WORK_SECONDS) answers."""


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    """The relay (a daphne, a second one, the gRPC server) with the slow writer as "writer":
    (the relay, the second daphne's URL, the gRPC address, the agent's Recording)."""
    with ExitStack() as stack:
        try:
            services = stack.enter_context(production_services())
        except ServiceMissingError as error:
            pytest.skip(str(error))
        relay = stack.enter_context(
            live_relay(
                tmp_path_factory.mktemp("relay-idempotent"),
                RELAY_GRPC_PORT=str(free_port()),
                **services,
            )
        )
        recording = Recording(lambda url: build_agent_app(SLOW_WRITER, base_url=url))
        relay.serve_agent("writer", recording)
        second = stack.enter_context(relay.second())
        address = stack.enter_context(relay.grpc_server())
        yield relay, second, address, recording


def send_body(key_text: str) -> bytes:
    message = {"messageId": f"m-{key_text}", "role": "ROLE_USER", "parts": [{"text": key_text}]}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    ).encode()


def headers(relay, key: str, secret: str | None = None) -> dict[str, str]:
    return {
        **relay.auth(secret),
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
        "Idempotency-Key": key,
    }


async def test_a_hundred_clients_with_one_key_through_two_processes_get_one_task(relay):
    relay, second, _, recording = relay
    before = len(recording.posts())
    key = f"together-{uuid.uuid4().hex[:8]}"
    limits = httpx.Limits(max_connections=CLIENTS)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    relay.agent_url("writer", base=(relay.url, second)[index % 2]),
                    content=send_body(key),
                    headers=headers(relay, key),
                )
                for index in range(CLIENTS)
            )
        )
    assert {response.status_code for response in responses} == {200}, responses[0].text
    tasks = [response.json()["result"]["task"] for response in responses]
    assert len({task["id"] for task in tasks}) == 1
    assert {task["status"]["state"] for task in tasks} == {"TASK_STATE_COMPLETED"}
    assert len(recording.posts()) - before == 1


async def completed_task_of(relay, secret: str) -> dict:
    """The caller's one task once it completed (the caller does not know its id)."""
    for _ in range(100):
        response = httpx.post(
            relay.agent_url("writer"),
            content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
            headers={
                **relay.auth(secret),
                "A2A-Version": "1.0",
                "Content-Type": "application/json",
            },
            timeout=10,
        )
        tasks = response.json()["result"]["tasks"]
        if tasks and tasks[0]["status"]["state"] == "TASK_STATE_COMPLETED":
            assert len(tasks) == 1
            return tasks[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no completed task: {tasks}")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_client_cut_off_sends_again_and_gets_the_stored_task(relay, binding):
    relay, second, _, recording = relay
    secret = relay.create_key(f"cut-{binding}")
    before = len(recording.posts())
    key = f"cut-{uuid.uuid4().hex[:8]}"
    if binding == "JSONRPC":
        url, body = relay.agent_url("writer"), send_body(key)
        again_url = relay.agent_url("writer", base=second)
    else:
        url = relay.agent_url("writer") + "message:send"
        body = json.dumps(json.loads(send_body(key))["params"]).encode()
        again_url = relay.agent_url("writer", base=second) + "message:send"
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=CUT_SECONDS)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(url, content=body, headers=headers(relay, key, secret))
    stored = await completed_task_of(relay, secret)  # the agent answered meanwhile
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(again_url, content=body, headers=headers(relay, key, secret))
    assert response.status_code == 200, response.text
    task = response.json()["result"]["task"] if binding == "JSONRPC" else response.json()["task"]
    assert task["id"] == stored["id"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == f"draft: {key}"
    assert len(recording.posts()) - before == 1


async def test_a_grpc_client_cut_off_sends_again_and_gets_the_stored_task(relay):
    relay, _, address, recording = relay
    secret = relay.create_key("cut-grpc")
    before = len(recording.posts())
    key = f"cut-{uuid.uuid4().hex[:8]}"
    request = SendMessageRequest(
        tenant="agents/writer",
        message=Message(message_id=f"m-{key}", role=Role.ROLE_USER, parts=[Part(text=key)]),
    )
    metadata = (("authorization", f"Bearer {secret}"), ("idempotency-key", key))
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await stub.SendMessage(request, metadata=metadata, timeout=CUT_SECONDS)
        assert cut.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        stored = await completed_task_of(relay, secret)
        answer = await stub.SendMessage(request, metadata=metadata, timeout=10)
    assert answer.task.id == stored["id"]
    assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(recording.posts()) - before == 1
