"""The query budget of a team hop, counted in the database thread where every statement of the
call runs: a one-member team answering through its member."""

from __future__ import annotations

import httpx
import pytest

from registry.services import agent_register
from registry.teams import team_create
from relay_project.database import database_sync_to_async
from tests.queries import EVENT_WRITE, USAGE_WRITE, ThreadQueries, kinds
from tests.routing.calls import settled

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


async def test_a_team_hop_costs_the_two_tasks_and_their_writes(echo_url, api_key):
    from relay_project.asgi import application

    await database_sync_to_async(agent_register)(url=echo_url, agent_id="echo")
    await database_sync_to_async(team_create)(
        team_id="solo", name="Solo", members=["echo"], default_agent="echo"
    )
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
    ) as relay:
        assert "result" in (await relay.post("/a2a/teams/solo/", json=body)).json()  # warm
        await settled()
        body["params"]["message"]["messageId"] = "m-2"
        async with ThreadQueries() as queries:
            answer = (await relay.post("/a2a/teams/solo/", json=body)).json()
            await settled()
    assert "result" in answer, answer
    writes = [kind for kind in kinds(queries.statements) if kind != "SELECT"]
    # The team's task and the member's, each inserted once; the hop's record; the member's
    # end and the team's end, each one compare-and-set with its events.
    assert writes.count("INSERT tasks_app_task") == 2, writes
    assert writes.count("INSERT routing_routinghop") == 1, writes
    assert writes.count(EVENT_WRITE) == 2 and "UPDATE tasks_app_task" not in writes, writes
    # Each end with its call's usage record (the member's, the team's).
    assert writes.count(USAGE_WRITE) == 2, writes
    # Besides: admission's reads (the key, its scope, the members' health: 4), the team
    # call's row, the member's conversation, and the wait for the tasks to settle.
    assert len(kinds(queries.statements)) <= 16, queries.statements
