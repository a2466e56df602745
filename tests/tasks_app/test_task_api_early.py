"""The task API in the early A2A task shape (client task ids, ``type``-tagged parts), end to
end over ASGI against real a2a-sdk agents on 127.0.0.1 and a real database: send,
sendSubscribe, get, cancel and sendBatch, each answered in the shape it was asked in."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import TaskUpdater
from asgiref.sync import sync_to_async

from registry.services import agent_register, api_key_create
from routing.demo.agents import ECHO, WRITER, app_factory, build_agent_app, text_message
from tasks_app.models import ClientTaskId, Task
from tasks_app.relay_endpoint import default_target_set
from tests.agents import (
    CHUNKS,
    TaskExecutor,
    chunked_streaming_agent,
    input_required_agent,
    never_finishing_agent,
    task_spec,
)
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


class MirrorsParts(TaskExecutor):
    """Completes with one artifact "mirror" holding the parts it received, unchanged."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.add_artifact(list(context.message.parts), name="mirror", last_chunk=True)
        await updater.complete(text_message(updater, "mirrored"))


MIRROR = task_spec("mirror", "Mirror", "Sends back the parts it got.", MirrorsParts)


@pytest.fixture(scope="module")
def agent_urls():
    """The agents on 127.0.0.1 for the whole module (each test registers them afresh)."""
    apps = {
        "echo": app_factory(ECHO),
        "writer": app_factory(WRITER),
        "asks": input_required_agent,
        "never": never_finishing_agent,
        "chunks": chunked_streaming_agent,
        "mirror": lambda url: build_agent_app(MIRROR, base_url=url),
    }
    with running_many(apps) as urls:
        yield urls


@pytest.fixture
def agents(agent_urls):
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)


def client_for(secret: str) -> httpx.AsyncClient:
    from relay_project.asgi import application

    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {secret}"},
        timeout=20,
    )


@pytest.fixture
async def relay(api_key):
    async with client_for(api_key[1]) as client:
        yield client


def early_send(task_id: str, *parts: dict, **extra) -> dict:
    parts = parts or ({"type": "text", "text": "notes about the weather"},)
    return {"id": task_id, "message": {"role": "user", "parts": list(parts)}, **extra}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def frames(body: str) -> list[tuple[str, dict]]:
    """(event name, data) of each SSE frame."""
    out = []
    for block in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event", "message"), json.loads(lines["data"])))
    return out


async def task_count() -> int:
    return await Task.objects.acount()


# --- the regression test of the issue item -----------------------------------------------


async def test_the_task_api_accepts_the_bodies_our_design_notes_document(agents, relay):
    """Issue 13: "The task API does not accept the bodies our design notes document"."""
    body = {
        "agentId": "writer",
        "id": "note-1",
        "message": {"role": "user", "parts": [{"type": "text", "text": "a poem"}]},
        "metadata": {"source": "design-notes"},
    }
    response = await relay.post("/a2a/tasks/send", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] == "note-1"
    assert answer["status"] == "completed"
    assert answer["artifacts"][0]["type"] == "text"
    assert "a poem" in answer["artifacts"][0]["text"]
    assert isinstance(answer["metadata"], dict)

    stream = await relay.post("/a2a/tasks/sendSubscribe", json={**body, "id": "note-2"})
    assert stream.status_code == 200, stream.text
    names = [name for name, _ in frames(stream.text)]
    assert "task_status" in names and "task_artifact" in names

    batch = await relay.post(
        "/a2a/tasks/sendBatch",
        json={
            "tasks": [{**body, "id": "note-3"}, {**body, "id": "note-4"}],
            "executionMode": "sequential",
            "aggregationStrategy": "merge",
        },
    )
    assert batch.status_code == 200, batch.text
    assert [task["id"] for task in batch.json()["tasks"]] == ["note-3", "note-4"]
    assert batch.json()["merged"]["status"] == "completed"


# --- send ----------------------------------------------------------------------------------


async def test_an_early_send_is_answered_as_an_early_task(agents, relay):
    response = await relay.post(
        "/a2a/tasks/send",
        json={"agentId": "writer", **early_send("t-1", text("a short story"), sessionId="s-1")},
    )
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    assert answer["id"] == "t-1"
    assert answer["sessionId"] == "s-1"
    assert answer["status"] == "completed"
    assert answer["timestamp"].endswith("Z")
    assert answer["artifacts"][0]["index"] == 0
    assert answer["artifacts"][0]["name"]
    assert "history" not in answer
    assert answer["statusMessage"]["role"] == "agent"
    stored = await Task.objects.aget()
    assert stored.context_id == "s-1"
    assert await ClientTaskId.objects.filter(client_id="t-1", task_id=stored.id).aexists()


async def test_an_early_send_with_history_length_gets_the_history(agents, relay):
    answer = (
        await relay.post(
            "/a2a/tasks/send",
            json={"agentId": "writer", **early_send("t-h", text("hello"), historyLength=5)},
        )
    ).json()
    assert answer["history"][0] == {"role": "user", "parts": [text("hello")]}


async def test_an_agent_answering_with_a_message_gives_its_parts_as_artifacts(agents, relay):
    answer = (
        await relay.post(
            "/a2a/tasks/send", json={"agentId": "echo", **early_send("t-echo", text("hi there"))}
        )
    ).json()
    assert answer["status"] == "completed"
    assert answer["artifacts"] == [{"type": "text", "text": "hi there", "index": 0}]
    assert answer["statusMessage"]["parts"] == [text("hi there")]


async def test_file_and_data_parts_reach_the_agent_and_come_back_early(agents, relay):
    raw = bytes(range(256))
    parts = [
        text("see attached"),
        {
            "type": "file",
            "file": {
                "bytes": base64.b64encode(raw).decode(),
                "mimeType": "application/octet-stream",
                "name": "b.bin",
            },
        },
        {"type": "file", "file": {"uri": "https://example.com/a.png", "mimeType": "image/png"}},
        {"type": "data", "data": {"n": 12345678901234567, "nested": {"ok": True}}},
    ]
    answer = (
        await relay.post(
            "/a2a/tasks/send", json={"agentId": "mirror", **early_send("t-files", *parts)}
        )
    ).json()
    assert answer["status"] == "completed", answer
    mirrored = [
        {k: v for k, v in part.items() if k not in ("index", "name")}
        for part in answer["artifacts"]
    ]
    assert mirrored[0] == text("see attached")
    assert base64.b64decode(mirrored[1]["file"]["bytes"]) == raw
    assert mirrored[1]["file"]["name"] == "b.bin"
    assert mirrored[2] == parts[2]
    assert mirrored[3]["data"]["nested"] == {"ok": True}


async def test_the_current_shape_still_answers_in_the_current_shape(agents, relay):
    response = await relay.post(
        "/a2a/tasks/send",
        json={
            "agentId": "writer",
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        },
    )
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert await ClientTaskId.objects.acount() == 0


@pytest.mark.parametrize("shape", ["early", "current"])
async def test_a_send_without_a_target_goes_to_the_default_target(agents, relay, shape):
    await sync_to_async(default_target_set)(kind="agent", target_id="echo")
    body = (
        early_send("t-default", text("to whoever"))
        if shape == "early"
        else {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "to whoever"}]}}
    )
    answer = (await relay.post("/a2a/tasks/send", json=body)).json()
    reply = (
        answer["artifacts"][0]["text"]
        if shape == "early"
        else (answer["message"]["parts"][0]["text"])
    )
    assert reply == "to whoever"
    assert (await Task.objects.aget()).target_id == "echo"


async def test_without_a_target_or_a_default_the_send_is_a_400_naming_agent_id(agents, relay):
    response = await relay.post("/a2a/tasks/send", json=early_send("t-nowhere"))
    assert response.status_code == 400
    assert "agentId" in response.json()["error"]["message"]
    assert await task_count() == 0


# --- client task ids -----------------------------------------------------------------------


async def test_a_second_send_with_the_same_id_continues_the_task(agents, relay):
    first = (
        await relay.post(
            "/a2a/tasks/send", json={"agentId": "asks", **early_send("greet", text("hello"))}
        )
    ).json()
    assert first["status"] == "input-required"
    assert first["statusMessage"]["parts"] == [text("What name should I greet?")]
    second = (
        await relay.post(
            "/a2a/tasks/send", json={"agentId": "asks", **early_send("greet", text("Ada"))}
        )
    ).json()
    assert second["id"] == "greet"
    assert second["status"] == "completed"
    assert second["artifacts"][0]["text"] == "Hello, Ada!"
    assert await task_count() == 1


async def test_a_finished_tasks_id_takes_no_more_messages(agents, relay):
    await relay.post("/a2a/tasks/send", json={"agentId": "writer", **early_send("done")})
    response = await relay.post("/a2a/tasks/send", json={"agentId": "writer", **early_send("done")})
    assert response.status_code == 400
    assert "'done' is completed" in response.json()["error"]["message"]
    assert await task_count() == 1


async def test_an_id_sent_to_another_target_is_not_found(agents, relay):
    await relay.post("/a2a/tasks/send", json={"agentId": "asks", **early_send("mine")})
    response = await relay.post("/a2a/tasks/send", json={"agentId": "writer", **early_send("mine")})
    assert response.status_code == 404
    assert "'mine'" in response.json()["error"]["message"]


async def test_two_callers_with_the_same_id_get_two_tasks_and_never_each_others(agents, relay):
    _, other_secret = await sync_to_async(api_key_create)(name="another caller")
    await relay.post("/a2a/tasks/send", json={"agentId": "asks", **early_send("shared")})
    async with client_for(other_secret) as other:
        theirs = (
            await other.post(
                "/a2a/tasks/send",
                json={"agentId": "writer", **early_send("shared", text("their own"))},
            )
        ).json()
        assert theirs["status"] == "completed"  # a new task, not the first caller's
        fetched = (await other.get("/a2a/tasks/shared")).json()
        assert fetched["status"] == "completed"
        mine = await Task.objects.filter(target_id="asks").aget()
        assert (await other.get(f"/a2a/tasks/{mine.id}")).status_code == 404
        assert (await other.post(f"/a2a/tasks/{mine.id}/cancel")).status_code == 404
    assert (await relay.get("/a2a/tasks/shared")).json()["status"] == "input-required"
    assert await task_count() == 2


# --- get and cancel ------------------------------------------------------------------------


async def test_get_by_client_id_answers_early_and_by_request_in_either_shape(agents, relay):
    await relay.post("/a2a/tasks/send", json={"agentId": "writer", **early_send("g-1")})
    by_client_id = (await relay.get("/a2a/tasks/g-1", params={"historyLength": 1})).json()
    assert by_client_id["id"] == "g-1" and by_client_id["status"] == "completed"
    assert len(by_client_id["history"]) == 1
    relay_id = (await Task.objects.aget()).id
    assert (await relay.get(f"/a2a/tasks/{relay_id}")).json()["id"] == "g-1"
    current = (await relay.get("/a2a/tasks/g-1", params={"shape": "current"})).json()
    assert current["id"] == relay_id
    assert current["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_current_shape_task_is_early_only_when_asked(agents, relay):
    task = (
        await relay.post(
            "/a2a/tasks/send",
            json={
                "agentId": "writer",
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            },
        )
    ).json()["task"]
    assert (await relay.get(f"/a2a/tasks/{task['id']}")).json()["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    early = (await relay.get(f"/a2a/tasks/{task['id']}", params={"shape": "early"})).json()
    assert early["id"] == task["id"] and early["status"] == "completed"


async def test_a_bad_shape_parameter_is_a_400_naming_it(agents, relay):
    response = await relay.get("/a2a/tasks/anything", params={"shape": "old"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("shape:")


async def test_cancel_by_client_id_answers_the_canceled_task_early(agents, relay):
    sending = asyncio.create_task(
        relay.post("/a2a/tasks/send", json={"agentId": "never", **early_send("forever")})
    )
    for _ in range(200):  # the task is stored before its agent is called (it never answers)
        if await Task.objects.aexists():
            break
        await asyncio.sleep(0.05)
    canceled = await relay.post("/a2a/tasks/forever/cancel")
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["id"] == "forever"
    assert canceled.json()["status"] == "canceled"
    assert (await asyncio.wait_for(sending, 20)).json()["id"] == "forever"
    assert (await relay.get("/a2a/tasks/forever")).json()["status"] == "canceled"
    again = await relay.post("/a2a/tasks/forever/cancel")
    assert again.json()["error"]["details"][0]["reason"] == "TASK_NOT_CANCELABLE"


# --- sendSubscribe -------------------------------------------------------------------------


async def test_send_subscribe_streams_early_status_and_artifact_frames(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendSubscribe", json={"agentId": "chunks", **early_send("story")}
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = frames(response.text)
    assert {name for name, _ in events} == {"task_status", "task_artifact"}
    assert all(data["id"] == "story" for _, data in events)
    assert events[0] == ("task_status", {**events[0][1], "status": "submitted", "final": False})
    chunks = [data["artifact"] for name, data in events if name == "task_artifact"]
    assert "".join(part["text"] for chunk in chunks for part in chunk["parts"]) == ("".join(CHUNKS))
    assert {chunk["index"] for chunk in chunks} == {0}
    assert [chunk["append"] for chunk in chunks] == [False, True, True, True]
    assert chunks[-1]["lastChunk"] is True
    last_name, last = events[-1]
    assert (last_name, last["status"], last["final"]) == ("task_status", "completed", True)
    assert sum(data.get("final", False) for _, data in events) == 1


async def test_send_subscribe_to_a_message_reply_streams_it_as_the_artifact(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendSubscribe", json={"agentId": "echo", **early_send("e", text("ping"))}
    )
    events = frames(response.text)
    assert events[-2] == (
        "task_artifact",
        {
            "id": "e",
            "metadata": {},
            "artifact": {"index": 0, "parts": [text("ping")], "append": False, "lastChunk": True},
        },
    )
    assert events[-1][1]["status"] == "completed" and events[-1][1]["final"] is True


async def test_send_subscribe_with_a_bad_early_body_is_a_400_and_stores_nothing(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendSubscribe",
        json={"agentId": "writer", "id": "s", "message": {"role": "user", "parts": []}},
    )
    assert response.status_code == 400
    assert "message.parts" in response.json()["error"]["message"]
    assert await task_count() == 0


# --- sendBatch -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_send_batch_runs_early_tasks_in_the_mode_asked(agents, relay, mode):
    body = {
        "executionMode": mode,
        "tasks": [
            {"agentId": "chunks", **early_send("b-1")},
            {"agentId": "chunks", **early_send("b-2")},
        ],
    }
    answer = (await relay.post("/a2a/tasks/sendBatch", json=body)).json()
    assert [(t["id"], t["status"]) for t in answer["tasks"]] == [
        ("b-1", "completed"),
        ("b-2", "completed"),
    ]
    first = await Task.objects.aget(client_task_id__client_id="b-1")
    second = await Task.objects.aget(client_task_id__client_id="b-2")
    if mode == "sequential":
        assert second.created_at >= first.completed_at
    else:
        assert second.created_at < first.completed_at


async def test_send_batch_merge_tags_each_artifact_with_its_client_id(agents, relay):
    body = {
        "aggregationStrategy": "merge",
        "tasks": [
            {"agentId": "writer", **early_send("m-1")},
            {"agentId": "asks", **early_send("m-2")},
        ],
    }
    merged = (await relay.post("/a2a/tasks/sendBatch", json=body)).json()["merged"]
    assert merged["status"] == "input-required"
    assert merged["taskIds"] == ["m-1", "m-2"]
    assert {part["taskId"] for part in merged["artifacts"]} == {"m-1"}


async def test_an_early_batch_entry_that_fails_is_answered_with_its_id(agents, relay):
    await relay.post("/a2a/tasks/send", json={"agentId": "writer", **early_send("old")})
    body = {
        "aggregationStrategy": "merge",
        "tasks": [
            {"agentId": "writer", **early_send("old")},
            {"agentId": "writer", **early_send("new")},
        ],
    }
    answer = (await relay.post("/a2a/tasks/sendBatch", json=body)).json()
    assert answer["tasks"][0]["id"] == "old"
    assert answer["tasks"][0]["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
    assert answer["tasks"][1]["status"] == "completed"
    assert answer["merged"]["status"] == "failed"


# --- bad input -----------------------------------------------------------------------------


def with_message(**message) -> dict:
    return {
        "agentId": "writer",
        "id": "x",
        "message": {"role": "user", "parts": [text("x")], **message},
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agentId": "writer", "message": {"role": "user", "parts": [text("x")]}}, "id"),
        ({**with_message(), "id": "has space"}, "id"),
        ({**with_message(), "id": "x" * 129}, "id"),
        ({**with_message(), "id": 7}, "id"),
        ({**with_message(), "id": "a/b"}, "id"),
        (with_message(role="agent"), "message.role"),
        (with_message(parts=[]), "message.parts"),
        (with_message(parts="text"), "message.parts"),
        (with_message(parts=[{"type": "video", "video": "x"}]), "message.parts[0].type"),
        (with_message(parts=[{"type": "text", "text": 3}]), "message.parts[0].text"),
        (with_message(parts=[{"type": "text"}]), "message.parts[0].text"),
        (with_message(parts=[{"type": "data", "data": [1]}]), "message.parts[0].data"),
        (with_message(parts=[{"type": "file", "file": {"name": "x"}}]), "message.parts[0].file"),
        (
            with_message(parts=[{"type": "file", "file": {"bytes": "AA==", "uri": "http://x"}}]),
            "message.parts[0].file",
        ),
        (
            with_message(parts=[{"type": "file", "file": {"bytes": "%%%"}}]),
            "message.parts[0].file.bytes",
        ),
        (
            with_message(parts=[{"type": "text", "text": "x", "kind": "text"}]),
            "message.parts[0].kind",
        ),
        (with_message(metadata=[1]), "message.metadata"),
        (with_message(messageId="m"), "message.messageId"),
        ({**with_message(), "sessionId": 5}, "sessionId"),
        ({**with_message(), "metadata": "x"}, "metadata"),
        ({**with_message(), "historyLength": -1}, "historyLength"),
        ({**with_message(), "historyLength": True}, "historyLength"),
        ({**with_message(), "acceptedOutputModes": "text"}, "acceptedOutputModes"),
        ({**with_message(), "pushNotification": {"token": "t"}}, "pushNotification.url"),
        ({**with_message(), "colour": "red"}, "colour"),
        ({**with_message(), "agentId": 5}, "agentId"),
        ({**with_message(), "teamId": "t"}, "teamId"),
        ({"agentId": "writer", "id": "x"}, "message"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
async def test_bad_early_sends_are_400s_naming_the_field_and_store_nothing(
    agents, relay, body, field
):
    response = await relay.post("/a2a/tasks/send", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["details"][0]["reason"] == "INVALID_PARAMS"
    violations = [
        v["field"] for detail in error["details"] for v in detail.get("fieldViolations", [])
    ]
    assert field in violations, error
    assert await task_count() == 0
    assert await ClientTaskId.objects.acount() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tasks": [with_message(), with_message()]}, "tasks[1].id"),
        (
            {
                "tasks": [
                    with_message(),
                    {
                        "agentId": "writer",
                        "message": {
                            "messageId": "m",
                            "role": "ROLE_USER",
                            "parts": [{"text": "x"}],
                        },
                    },
                ]
            },
            "tasks[1].id",
        ),
        ({"tasks": [with_message(role="robot")]}, "tasks[0].message.role"),
        ({"tasks": []}, "tasks"),
        ({"tasks": [with_message()], "executionMode": "later"}, "executionMode"),
        ({"tasks": [with_message()], "aggregationStrategy": "sum"}, "aggregationStrategy"),
        ({"tasks": [with_message()], "mode": "parallel"}, "mode"),
    ],
    ids=[
        "repeated-id",
        "entry-without-id",
        "bad-role",
        "empty",
        "bad-mode",
        "bad-strategy",
        "unknown-field",
    ],
)
async def test_bad_early_batches_are_400s_naming_the_field_and_run_nothing(
    agents, relay, body, field
):
    response = await relay.post("/a2a/tasks/sendBatch", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    violations = [
        v["field"] for detail in error["details"] for v in detail.get("fieldViolations", [])
    ]
    assert field in violations, error
    assert await task_count() == 0


async def test_a_batch_with_both_tasks_and_requests_is_a_400(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendBatch", json={"tasks": [with_message()], "requests": []}
    )
    assert response.status_code == 400
    assert "tasks" in response.json()["error"]["message"]


# --- API docs ------------------------------------------------------------------------------


def test_the_api_docs_show_both_shapes_for_every_task_api_operation(client):
    schema = client.get("/api/schema", {"format": "json"}).json()
    operations = {
        ("/a2a/tasks/send", "post"),
        ("/a2a/tasks/sendSubscribe", "post"),
        ("/a2a/tasks/{task_id}", "get"),
        ("/a2a/tasks/{task_id}/cancel", "post"),
        ("/a2a/tasks/sendBatch", "post"),
    }
    for path, verb in operations:
        operation = schema["paths"][path][verb]
        answers = operation["responses"]["200"]["content"]
        examples = next(iter(answers.values()))["examples"]
        assert set(examples) == {"EarlyShape", "CurrentShape"}, path
        if verb == "post" and "task_id" not in path:
            requests = operation["requestBody"]["content"]["application/json"]["examples"]
            assert set(requests) == {"EarlyShape", "CurrentShape"}, path
            early = requests["EarlyShape"]["value"]
            first = early["tasks"][0] if "tasks" in early else early
            assert first["message"]["parts"][0]["type"] == "text", path
    get_parameters = {
        p["name"] for p in schema["paths"]["/a2a/tasks/{task_id}"]["get"]["parameters"]
    }
    assert {"shape", "historyLength"} <= get_parameters
