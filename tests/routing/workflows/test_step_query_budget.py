"""The query budget of a workflow step, next to a team hop's (tests/routing/
test_team_query_budget.py): statements in the database thread and trips to it, counted per
step as the difference between a two-step and a one-step workflow, and per hop as a
one-member team's call minus the member's direct call. A step may cost no more than a hop."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import SyncToAsync

from registry.services import agent_register
from registry.teams import team_create
from relay_project.database import database_sync_to_async
from routing.workflows.services import workflow_import
from tests.queries import ThreadQueries, kinds, of_the_call
from tests.routing.calls import settled

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


class Trips:
    """Calls into a sync thread (``sync_to_async``, the database thread's included)."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        original = SyncToAsync.__call__

        async def counted(this, *args, **kwargs):
            self.count += 1
            return await original(this, *args, **kwargs)

        monkeypatch.setattr(SyncToAsync, "__call__", counted)


async def cost(relay, path: str, number: int, monkeypatch) -> tuple[list[str], int]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": f"m-{number}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        },
    }
    assert "result" in (await relay.post(path, json=body)).json()  # warm
    await settled()
    body["params"]["message"]["messageId"] = f"m-{number}-measured"
    with monkeypatch.context() as patched:
        trips = Trips(patched)
        async with ThreadQueries() as queries:
            answer = (await relay.post(path, json=body)).json()
            counted = trips.count
        await settled()
    assert "result" in answer, answer
    return kinds(of_the_call(queries.statements)), counted


async def test_a_workflow_step_costs_no_more_than_a_team_hop(echo_url, api_key, monkeypatch):
    from relay_project.asgi import application

    await database_sync_to_async(agent_register)(url=echo_url, agent_id="echo")
    await database_sync_to_async(team_create)(
        team_id="solo", name="Solo", members=["echo"], default_agent="echo"
    )
    for k in (1, 2):
        steps = [
            {"id": f"s{i}", "agent": "echo", "input": "{{.originalMessage}}" if i == 0 else "x"}
            for i in range(k)
        ]
        await database_sync_to_async(workflow_import)(
            document={"name": f"Flow {k}", "slug": f"flow-{k}", "steps": steps}
        )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
    ) as relay:
        direct, direct_trips = await cost(relay, "/a2a/agents/echo/", 1, monkeypatch)
        team, team_trips = await cost(relay, "/a2a/teams/solo/", 2, monkeypatch)
        one, one_trips = await cost(relay, "/a2a/workflows/flow-1/", 3, monkeypatch)
        two, two_trips = await cost(relay, "/a2a/workflows/flow-2/", 4, monkeypatch)
    hop = (len(team) - len(direct), team_trips - direct_trips)
    step = (len(two) - len(one), two_trips - one_trips)
    # A step: its task and its row inserted, its task's end, and the run's record of that
    # end, written together (which numbers the step too); nothing read again. A hop (measured 4 statements,
    # 2 trips): the member's task, its end, the hop's record and the member's conversation.
    assert step[0] <= hop[0], (step, hop, one, two)
    assert two.count("SELECT") == one.count("SELECT"), (one, two)
    # Trips: the step opened (its target resolved, in the same trip) and its task's end
    # written by its driver, with the run's events that forward it.
    assert step[1] <= hop[1], (step, hop)
