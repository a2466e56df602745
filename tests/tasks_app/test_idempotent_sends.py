"""Idempotent sends (docs/concepts/retries.md): a send with an Idempotency-Key (or, where
message ids count, the same messageId) opens one task and calls the agent once, whatever the
binding and however often it is repeated; a repeat with another body is refused. In-process
over ASGI, against a real a2a-sdk agent on 127.0.0.1 that counts the calls it receives."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from a2a.types import Part

from routing.demo.agents import TaskExecutor, build_agent_app, text_message
from tasks_app.models import Task
from tests.agents import task_spec
from tests.live import Recording
from tests.servers import running
from tests.tasks_app.a2a_http import INVALID_PARAMS, JSONRPC_1, REST_1, call, expect_error

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

WORK_SECONDS = 0.3


class SlowWriter(TaskExecutor):
    """Working, then after WORK_SECONDS completed with artifact "draft" (the text it got)."""

    async def work(self, context, updater) -> None:
        await updater.start_work()
        await asyncio.sleep(WORK_SECONDS)
        text = context.get_user_input()
        await updater.add_artifact([Part(text=f"draft: {text}")], name="draft", last_chunk=True)
        await updater.complete(text_message(updater, "Done."))


SLOW_WRITER = task_spec("slow-writer", "Slow Writer", "Writes, slowly.", SlowWriter)


@pytest.fixture
def agent():
    """The slow writer, recorded, registered as "writer": its Recording."""
    from registry.services import agent_register

    recording = Recording(lambda url: build_agent_app(SLOW_WRITER, base_url=url))
    with running(recording) as url:
        agent_register(url=url, agent_id="writer")
        yield recording


def message(text: str = "a poem", message_id: str = "m-1") -> dict:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


def task_of(binding, response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    return body["result"]["task"] if binding.jsonrpc else body["task"]


@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_a_repeated_key_gets_the_stored_task_without_a_second_agent_call(
    binding, agent, asgi_relay
):
    headers = binding.headers(**{"Idempotency-Key": "send-1"})
    first = task_of(binding, await call(asgi_relay, "writer", binding.send(message()), headers))
    again = task_of(binding, await call(asgi_relay, "writer", binding.send(message()), headers))
    assert first["status"]["state"] == again["status"]["state"] == "TASK_STATE_COMPLETED"
    assert again["id"] == first["id"]
    assert again["artifacts"] == first["artifacts"]
    assert len(agent.posts()) == 1
    assert await Task.objects.acount() == 1


async def test_a_repeat_over_another_binding_is_the_same_send(agent, asgi_relay):
    key = {"Idempotency-Key": '"8e03978e-40d5-43e8-bc93-6894a57f9324"'}  # the draft's quoting
    first = task_of(
        JSONRPC_1,
        await call(asgi_relay, "writer", JSONRPC_1.send(message()), JSONRPC_1.headers(**key)),
    )
    again = task_of(
        REST_1, await call(asgi_relay, "writer", REST_1.send(message()), REST_1.headers(**key))
    )
    assert again["id"] == first["id"]
    assert len(agent.posts()) == 1


async def test_without_a_key_every_send_calls_the_agent(agent, asgi_relay):
    for _ in range(2):
        task_of(
            JSONRPC_1,
            await call(asgi_relay, "writer", JSONRPC_1.send(message()), JSONRPC_1.headers()),
        )
    assert len(agent.posts()) == 2
    assert await Task.objects.acount() == 2


async def test_concurrent_sends_with_one_key_open_one_task(agent, asgi_relay):
    headers = REST_1.headers(**{"Idempotency-Key": "together"})
    responses = await asyncio.gather(
        *(call(asgi_relay, "writer", REST_1.send(message()), headers) for _ in range(20))
    )
    tasks = [task_of(REST_1, response) for response in responses]
    assert {task["id"] for task in tasks} == {tasks[0]["id"]}
    # Every repeat waited for the task to end, as the first send did.
    assert {task["status"]["state"] for task in tasks} == {"TASK_STATE_COMPLETED"}
    assert len(agent.posts()) == 1
    assert await Task.objects.acount() == 1


@pytest.mark.parametrize(
    ("binding", "status"), [(JSONRPC_1, 200), (REST_1, 422)], ids=["jsonrpc", "rest"]
)
async def test_a_key_repeated_with_another_body_is_refused(binding, status, agent, asgi_relay):
    headers = binding.headers(**{"Idempotency-Key": "send-1"})
    first = task_of(binding, await call(asgi_relay, "writer", binding.send(message()), headers))
    other = binding.send(message("a song"))
    response = await call(asgi_relay, "writer", other, headers)
    assert response.status_code == status
    if binding.jsonrpc:
        error = response.json()["error"]
        assert error["code"] == -32602
    else:
        error = response.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT"
    assert "another send" in error["message"]
    assert first["id"] in error["message"]
    assert len(agent.posts()) == 1


async def test_a_key_used_with_another_agent_is_refused(agent, asgi_relay):
    from registry.services import agent_register

    recording = Recording(lambda url: build_agent_app(SLOW_WRITER, base_url=url))
    with running(recording) as url:
        await asyncio.to_thread(agent_register, url=url, agent_id="other")
        headers = REST_1.headers(**{"Idempotency-Key": "send-1"})
        task_of(REST_1, await call(asgi_relay, "writer", REST_1.send(message()), headers))
        response = await call(asgi_relay, "other", REST_1.send(message()), headers)
    assert response.status_code == 422, response.text
    assert "another agent or team" in response.json()["error"]["message"]
    assert recording.posts() == []


async def test_the_same_key_of_two_callers_opens_two_tasks(agent, asgi_relay):
    from registry.services import api_key_create

    _, other_secret = await asyncio.to_thread(api_key_create, name="other caller")
    key = {"Idempotency-Key": "send-1"}
    mine = task_of(
        REST_1, await call(asgi_relay, "writer", REST_1.send(message()), REST_1.headers(**key))
    )
    theirs = task_of(
        REST_1,
        await call(
            asgi_relay,
            "writer",
            REST_1.send(message()),
            REST_1.headers(**key, Authorization=f"Bearer {other_secret}"),
        ),
    )
    assert mine["id"] != theirs["id"]
    assert len(agent.posts()) == 2


async def test_a_key_past_its_window_opens_a_new_task(agent, asgi_relay, settings):
    settings.RELAY_IDEMPOTENCY_KEY_SECONDS = 60
    headers = REST_1.headers(**{"Idempotency-Key": "send-1"})
    first = task_of(REST_1, await call(asgi_relay, "writer", REST_1.send(message()), headers))
    await Task.objects.filter(pk=first["id"]).aupdate(
        created_at=(await Task.objects.aget(pk=first["id"])).created_at - timedelta(seconds=61)
    )
    again = task_of(REST_1, await call(asgi_relay, "writer", REST_1.send(message()), headers))
    assert again["id"] != first["id"]
    assert len(agent.posts()) == 2
    assert (await Task.objects.aget(pk=first["id"])).send_key == ""


@pytest.mark.parametrize(
    ("key", "why"),
    [("", "must not be empty"), ("k" * 201, "longer than 200"), ("caf\u00e9", "printable")],
    ids=["empty", "long", "not-ascii"],
)
async def test_a_malformed_key_is_invalid_params_and_stores_nothing(key, why, agent, asgi_relay):
    headers = REST_1.headers(**{"Idempotency-Key": key.encode("utf-8")})
    response = await call(asgi_relay, "writer", REST_1.send(message()), headers)
    error = expect_error(REST_1, response, INVALID_PARAMS)
    assert error["reason"] == "INVALID_PARAMS"
    assert why in response.json()["error"]["message"]
    assert agent.posts() == []
    assert await Task.objects.acount() == 0


async def test_a_repeated_stream_replays_the_task_from_its_start(agent, asgi_relay):
    headers = REST_1.headers(**{"Idempotency-Key": "stream-1"})
    request = REST_1.send(message(), stream=True)
    first = _sse(await call(asgi_relay, "writer", request, headers))
    again = _sse(await call(asgi_relay, "writer", request, headers))
    assert "task" in first[0] and "task" in again[0]
    assert again[0]["task"]["id"] == first[0]["task"]["id"]
    assert again[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert [_kind(event) for event in again[1:]] == [_kind(event) for event in first[1:]]
    assert again[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(agent.posts()) == 1


async def test_a_blocking_repeat_of_a_streamed_send_gets_its_final_task(agent, asgi_relay):
    headers = REST_1.headers(**{"Idempotency-Key": "stream-then-send"})
    streamed = _sse(await call(asgi_relay, "writer", REST_1.send(message(), stream=True), headers))
    again = task_of(REST_1, await call(asgi_relay, "writer", REST_1.send(message()), headers))
    # Not the same body (the stream's) in another operation: a stream and a send of one
    # message are one send.
    assert again["id"] == streamed[0]["task"]["id"]
    assert again["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(agent.posts()) == 1


async def test_the_task_api_takes_the_key_too(agent, asgi_relay):
    body = {"agentId": "writer", "message": message()}
    headers = {"Idempotency-Key": "task-api-1"}
    first = await asgi_relay.post("/a2a/tasks/send", json=body, headers=headers)
    again = await asgi_relay.post("/a2a/tasks/send", json=body, headers=headers)
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["task"]["id"] == first.json()["task"]["id"]
    assert len(agent.posts()) == 1


async def test_a_batch_key_covers_each_send_by_its_place(agent, asgi_relay):
    body = {"requests": [{"agentId": "writer", "message": message(f"poem {i}")} for i in (1, 2)]}
    headers = {"Idempotency-Key": "batch-1"}
    first = await asgi_relay.post("/a2a/tasks/sendBatch", json=body, headers=headers)
    again = await asgi_relay.post("/a2a/tasks/sendBatch", json=body, headers=headers)
    ids = [result["task"]["id"] for result in first.json()["results"]]
    assert len(set(ids)) == 2
    assert [result["task"]["id"] for result in again.json()["results"]] == ids
    assert len(agent.posts()) == 2


async def test_message_ids_count_as_keys_only_when_set(agent, asgi_relay, settings):
    headers = REST_1.headers()
    for _ in range(2):
        task_of(REST_1, await call(asgi_relay, "writer", REST_1.send(message()), headers))
    assert len(agent.posts()) == 2
    settings.RELAY_MESSAGE_ID_WINDOW_SECONDS = 600
    request = REST_1.send(message(message_id="unique-1"))
    first = task_of(REST_1, await call(asgi_relay, "writer", request, headers))
    again = task_of(REST_1, await call(asgi_relay, "writer", request, headers))
    assert again["id"] == first["id"]
    assert len(agent.posts()) == 3
    response = await call(
        asgi_relay, "writer", REST_1.send(message("other", message_id="unique-1")), headers
    )
    assert response.status_code == 422
    assert "message.messageId" in response.json()["error"]["message"]


def _sse(response) -> list[dict]:
    assert response.status_code == 200, response.text
    return [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]


def _kind(event: dict) -> str:
    return next(iter(event))
