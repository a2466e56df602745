"""A team's stream as a live agent's: the team task first, then every member event as it
happens. A relay of real processes (daphne, its own SQLite file); the member is a real a2a-sdk
agent on 127.0.0.1 that works for about five seconds, streaming an artifact in chunks."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import TaskUpdater
from a2a.types import Part
from httpx_sse import aconnect_sse

from registry.extensions import CLIENT_ROUTING_URI as URI
from routing.demo.agents import TaskExecutor, build_agent_app, text_message
from tests.agents import task_spec
from tests.live import live_relay, manage

CHUNK_COUNT = 5
CHUNK_SECONDS = 1.0
STREAM_SECONDS = 30.0
EMITTED: list[float] = []
"""When the member sent each chunk (time.monotonic, shared by the test and the agent)."""
FINISHED: list[float] = []


class SlowChunks(TaskExecutor):
    """Works for (CHUNK_COUNT + 1) * CHUNK_SECONDS, sending artifact "story" a chunk at a time
    (append after the first, lastChunk on the last), then completes."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work(text_message(updater, "Writing."))
        for index in range(CHUNK_COUNT):
            await asyncio.sleep(CHUNK_SECONDS)
            EMITTED.append(time.monotonic())
            await updater.add_artifact(
                [Part(text=f"part {index}. ")],
                artifact_id="story",
                name="story",
                append=index > 0,
                last_chunk=index == CHUNK_COUNT - 1,
            )
        await asyncio.sleep(CHUNK_SECONDS)  # a last look over the story
        FINISHED.append(time.monotonic())
        await updater.complete(text_message(updater, "Story written."))


SLOW = task_spec("slow", "Slow Writer", "Writes a story slowly.", SlowChunks)


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with live_relay(tmp_path_factory.mktemp("team-stream")) as live:
        live.serve_agent("slow", lambda url: build_agent_app(SLOW, base_url=url))
        manage(
            live.env,
            "shell",
            "-c",
            "from registry.teams import team_create; team_create(team_id='writers', "
            "name='Writers', members=['slow'], default_agent='slow')",
        )
        yield live


def user_message(text: str) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }


async def test_member_events_reach_the_team_stream_as_they_happen(relay):
    EMITTED.clear()
    FINISHED.clear()
    headers = {**relay.auth(), "A2A-Version": "1.0", "Content-Type": "application/json"}
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("a story, please")},
        }
    )
    arrivals: list[tuple[float, dict[str, Any]]] = []
    async with (
        httpx.AsyncClient(base_url=relay.url, timeout=STREAM_SECONDS) as client,
        asyncio.timeout(STREAM_SECONDS),
    ):
        sent = time.monotonic()
        async with aconnect_sse(
            client, "POST", "/a2a/teams/writers/", headers=headers, content=body
        ) as source:
            async for event in source.aiter_sse():
                if event.data:
                    arrivals.append((time.monotonic(), json.loads(event.data)["result"]))

    first_at, first = arrivals[0]
    assert first_at - sent < 1.0
    team_task = first["task"]["id"]
    chunks = [(at, event["artifactUpdate"]) for at, event in arrivals if "artifactUpdate" in event]
    assert len(chunks) == CHUNK_COUNT
    assert len(EMITTED) == CHUNK_COUNT and len(FINISHED) == 1
    for index, ((arrived, update), emitted) in enumerate(zip(chunks, EMITTED, strict=True)):
        assert update["taskId"] == team_task
        assert update["artifact"]["artifactId"] == "story"
        assert update["artifact"]["parts"] == [{"text": f"part {index}. "}]
        assert update.get("append", False) == (index > 0)
        assert update.get("lastChunk", False) == (index == CHUNK_COUNT - 1)
        assert update["metadata"][URI] == {"member": "slow", "hop": 1}
        # Forwarded as it came: before the next chunk was even written, and long before the
        # member finished.
        assert emitted <= arrived < FINISHED[0]
        if index + 1 < CHUNK_COUNT:
            assert arrived < EMITTED[index + 1]
    statuses = [event["statusUpdate"] for _, event in arrivals if "statusUpdate" in event]
    # Every status update is the member's, forwarded: none of the relay's own.
    assert {status["taskId"] for status in statuses} == {team_task}
    assert {json.dumps(status["metadata"][URI]) for status in statuses} == {
        json.dumps({"member": "slow", "hop": 1})
    }
    working = [s for s in statuses if s["status"]["state"] == "TASK_STATE_WORKING"]
    assert len(working) == len(statuses) - 1
    assert [
        status["status"]["message"]["parts"] for status in working if "message" in status["status"]
    ] == [[{"text": "Writing."}]]
    last = statuses[-1]
    assert last["status"]["state"] == "TASK_STATE_COMPLETED"
    assert last["status"]["message"]["parts"] == [{"text": "Story written."}]
    # The team task keeps the story whole, once.
    async with httpx.AsyncClient(base_url=relay.url, timeout=STREAM_SECONDS) as client:
        stored = (await client.get(f"/a2a/tasks/{team_task}", headers=relay.auth())).json()
    assert [artifact["artifactId"] for artifact in stored["artifacts"]] == ["story"]
    assert "".join(part["text"] for part in stored["artifacts"][0]["parts"]) == "".join(
        f"part {index}. " for index in range(CHUNK_COUNT)
    )
