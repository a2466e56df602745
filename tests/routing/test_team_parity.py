"""A team answers as its only member would, called directly through the relay: the same call
to both, the same answer. The relay in-process over ASGI (JSON-RPC 1.0); the members real
a2a-sdk agents on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from unittest import mock

import httpx
import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Artifact, Part, Task, TaskState
from asgiref.sync import sync_to_async

from registry.services import agent_register
from registry.teams import team_create
from routing.demo import agents as demo_agents
from routing.demo.agents import TaskExecutor, build_agent_app, text_message
from tasks_app.models import Task as RelayTask
from tests.agents import task_spec
from tests.live import eventually
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

WAIT_SECONDS = 20.0
LATER_SECONDS = 2.0
LATER_STORE = InMemoryTaskStore()


class FinishesLater(TaskExecutor):
    """Answers with its task ``working`` (the call ends there) and completes it LATER_SECONDS
    afterwards, with artifact "report", as a long job the agent finishes on its own."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work(text_message(updater, "Started; come back later."))
        task_id, call = updater.task_id, context.call_context
        asyncio.get_running_loop().create_task(_finish_later(task_id, call))


async def _finish_later(task_id: str, call) -> None:
    await asyncio.sleep(LATER_SECONDS)
    done = Task()
    done.CopyFrom(await LATER_STORE.get(task_id, call))
    done.status.state = TaskState.TASK_STATE_COMPLETED
    done.artifacts.append(Artifact(artifact_id="report", parts=[Part(text="the report")]))
    await LATER_STORE.save(done, call)


LATER = task_spec("later", "Later", "Finishes its work later.", FinishesLater)


def later_agent(base_url: str):
    with mock.patch.object(demo_agents, "InMemoryTaskStore", lambda: LATER_STORE):
        return build_agent_app(LATER, base_url=base_url)


@pytest.fixture(scope="module")
def agent_urls():
    with running_many({"later": later_agent}) as urls:
        yield urls


@pytest.fixture(autouse=True)
def registered(agent_urls, allow_private_urls):
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)
    team_create(team_id="solo-later", name="Solo later", members=["later"], default_agent="later")


@pytest.fixture
async def relay(api_key):
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=WAIT_SECONDS,
    ) as client:
        yield client


def user_message(text: str) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }


async def send(relay, path: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await relay.post(
        path, json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    )
    assert response.status_code == 200, response.text
    return response.json()["result"]


async def final_state(relay, task_id: str) -> dict[str, Any]:
    async def ended():
        response = await relay.get(f"/a2a/tasks/{task_id}")
        # The test database (SQLite in memory, shared cache) may refuse a read while the
        # relay's job writes ("table is locked"): asked again at the next poll.
        if response.status_code != 200:
            return None
        task = response.json()
        return task if task["status"]["state"] != "TASK_STATE_WORKING" else None

    return await eventually(ended, f"task {task_id} ending", timeout=WAIT_SECONDS)


@pytest.mark.parametrize("path", ["/a2a/agents/later/", "/a2a/teams/solo-later/"])
async def test_a_blocking_call_answers_at_once_with_the_members_working_task(relay, path):
    """Regression: a team waited 60 s for a member that left its task working, then failed."""
    started = time.monotonic()
    answer = await send(relay, path, {"message": user_message("a long job")})
    assert time.monotonic() - started < LATER_SECONDS
    assert list(answer) == ["task"]
    assert answer["task"]["status"]["state"] == "TASK_STATE_WORKING"
    # The relay goes on following the member's task, and answers when it ends.
    done = await final_state(relay, answer["task"]["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [artifact["artifactId"] for artifact in done["artifacts"]] == ["report"]
    assert done["artifacts"][0]["parts"] == [{"text": "the report"}]


async def test_a_team_following_its_member_routes_on_when_the_members_task_ends(relay):
    answer = await send(relay, "/a2a/teams/solo-later/", {"message": user_message("a job")})
    team_task = answer["task"]["id"]
    await final_state(relay, team_task)
    hops = (await relay.get(f"/a2a/tasks/{team_task}/trace")).json()["hops"]
    assert [(hop["from"], hop["to"], hop["outcome"], hop["next"]) for hop in hops] == [
        ("user", "later", "replied", "user")
    ]
    children = await sync_to_async(list)(
        RelayTask.objects.filter(parent_id=team_task).values_list("state", flat=True)
    )
    assert children == ["completed"]


# --- a follow-up stream that opens with the task as it still stands ----------------------


class ResendsOnFollowUp(TaskExecutor):
    """Asks for a name (input-required). On the answer, opens its stream by re-sending the
    task still input-required (as @a2a-js/sdk agents do), then works and completes."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        if context.current_task is None:
            await updater.requires_input(text_message(updater, "Whose name?"))
            return
        await updater.event_queue.enqueue_event(context.current_task)
        await asyncio.sleep(0.1)
        await updater.start_work()
        name = context.get_user_input().strip()
        await updater.complete(text_message(updater, f"Hello, {name}!"))


RESENDS = task_spec("resends", "Resends", "Re-sends its task on a follow-up.", ResendsOnFollowUp)


@pytest.fixture(scope="module")
def resending_url():
    with running_many({"resends": lambda url: build_agent_app(RESENDS, base_url=url)}) as urls:
        yield urls["resends"]


def sse_results(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])["result"]
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


async def stream(relay, path: str, message: dict[str, Any]) -> list[dict[str, Any]]:
    response = await relay.post(
        path,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": message},
        },
    )
    assert response.status_code == 200, response.text
    return sse_results(response.text)


def state_of(event: dict[str, Any]) -> str | None:
    body = event.get("task") or event.get("statusUpdate") or {}
    return (body.get("status") or {}).get("state")


@pytest.mark.parametrize("path", ["/a2a/agents/resends/", "/a2a/teams/solo-resends/"])
async def test_a_follow_up_stream_opening_with_the_waiting_task_is_followed_to_its_end(
    relay, resending_url, path
):
    """Regression: the re-sent input-required task ended the stream; a team stayed
    input-required for ever although its member completed."""
    await sync_to_async(agent_register)(url=resending_url, agent_id="resends")
    await sync_to_async(team_create)(
        team_id="solo-resends", name="Solo resends", members=["resends"], default_agent="resends"
    )
    first = await stream(relay, path, user_message("greet someone"))
    assert state_of(first[-1]) == "TASK_STATE_INPUT_REQUIRED"
    task_id = first[0]["task"]["id"]

    follow_up = await stream(relay, path, {**user_message("Ada"), "taskId": task_id})

    assert state_of(follow_up[-1]) == "TASK_STATE_COMPLETED"
    last = follow_up[-1]["statusUpdate"]["status"]["message"]["parts"]
    assert last == [{"text": "Hello, Ada!"}]
    stored = (await relay.get(f"/a2a/tasks/{task_id}")).json()
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
