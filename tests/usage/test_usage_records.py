"""Usage records end to end: the relay in-process over ASGI, its agents real a2a-sdk agents
on 127.0.0.1 reporting their tokens on their final status update. Totals per agent and per
key reconcile with the task table exactly (calls) and to the cent (cost)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx
import pytest
from asgiref.sync import sync_to_async

from registry.services import agent_register
from registry.teams import team_create
from registry.usage_models import AgentPrice
from tasks_app.lifecycle import TERMINAL
from tasks_app.models import Task, UsageRecord
from tests.servers import running_many
from tests.usage.metered import NEXT, TOKENS, metered_agent

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

PRICES = {
    "meter-a": dict(
        per_call=Decimal("0.01"),
        per_million_input_tokens=Decimal("2.50"),
        per_million_output_tokens=Decimal("10"),
    ),
    "meter-b": dict(per_call=Decimal("0.25"), per_million_output_tokens=Decimal("0.4")),
}


def expected_cost(agent_id: str) -> Decimal:
    price, (tokens_in, tokens_out) = PRICES[agent_id], TOKENS[agent_id]
    return (
        price.get("per_call", Decimal(0))
        + tokens_in * price.get("per_million_input_tokens", Decimal(0)) / 1_000_000
        + tokens_out * price.get("per_million_output_tokens", Decimal(0)) / 1_000_000
    )


@pytest.fixture(scope="module")
def agent_urls():
    with running_many({slug: metered_agent(slug) for slug in TOKENS}) as urls:
        yield urls


@pytest.fixture
def metered(agent_urls, allow_private_urls):
    NEXT.update({"meter-a": None, "meter-b": None})
    for slug, url in agent_urls.items():
        agent_register(url=url, agent_id=slug)
        AgentPrice.objects.create(agent_id=slug, **PRICES[slug])
    team_create(
        team_id="pair",
        name="Pair",
        members=["meter-a", "meter-b"],
        default_agent="meter-a",
        max_routing_hops=10,
    )


def make_key(name: str):
    from registry.services import api_key_create

    return api_key_create(name=name)


@pytest.fixture
async def client():
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"A2A-Version": "1.0"},
        timeout=20,
    ) as client:
        yield client


def message(text: str) -> dict:
    return {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}


async def rpc(client, path: str, secret: str, method: str, text: str) -> httpx.Response:
    return await client.post(
        path,
        headers={"Authorization": f"Bearer {secret}"},
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message(text)}},
    )


async def rest_send(client, agent_id: str, secret: str, text: str) -> httpx.Response:
    return await client.post(
        f"/a2a/agents/{agent_id}/message:send",
        headers={"Authorization": f"Bearer {secret}"},
        json={"message": message(text)},
    )


async def test_usage_per_agent_and_key_reconciles_with_the_tasks_after_a_mixed_load(
    metered, client
):
    (alice, alice_secret), (bob, bob_secret) = await asyncio.gather(
        sync_to_async(make_key)("alice"), sync_to_async(make_key)("bob")
    )
    NEXT.update({"meter-a": "meter-b", "meter-b": "user"})  # a team call: two hops
    calls = []
    for i in range(3):
        calls.append(rpc(client, "/a2a/agents/meter-a/", alice_secret, "SendMessage", f"a{i}"))
        calls.append(
            rpc(client, "/a2a/agents/meter-b/", bob_secret, "SendStreamingMessage", f"b{i}")
        )
        calls.append(rest_send(client, "meter-b", alice_secret, f"r{i}"))
    calls.append(rpc(client, "/a2a/teams/pair/", bob_secret, "SendMessage", "team1"))
    calls.append(rpc(client, "/a2a/teams/pair/", alice_secret, "SendStreamingMessage", "team2"))
    for response in await asyncio.gather(*calls):
        assert response.status_code == 200, response.text
        assert "error" not in response.text[:200], response.text

    def totals():
        ended = Task.objects.filter(state__in=[s.value for s in TERMINAL])
        assert Task.objects.count() == ended.count() == UsageRecord.objects.count()
        out = {}
        for agent_id in TOKENS:
            records = UsageRecord.objects.filter(agent_id=agent_id)
            tasks = ended.filter(agent_id=agent_id)
            out[agent_id] = (records.count(), tasks.count(), sum(r.cost for r in records))
            assert {r.input_tokens for r in records} == {TOKENS[agent_id][0]}
            assert {r.output_tokens for r in records} == {TOKENS[agent_id][1]}
        for key in (alice, bob):
            records = UsageRecord.objects.filter(caller=key)
            calls = records.filter(parent_task_id="").count()
            tasks = ended.filter(caller=key)
            expected = sum(expected_cost(t.agent_id) for t in tasks.exclude(target_kind="team"))
            spent = sum(r.cost or 0 for r in records)
            out[key.name] = (calls, tasks.filter(parent=None).count(), spent, expected)
        out["teams"] = list(
            UsageRecord.objects.filter(target_kind="team").values_list("team_id", "cost")
        )
        out["hops"] = UsageRecord.objects.filter(team_id="pair").exclude(parent_task_id="").count()
        return out

    found = await sync_to_async(totals)()
    # meter-a: 3 sends, and the first hop of two team calls; meter-b: 6 calls and 2 hops.
    assert found["meter-a"][:2] == (5, 5)
    assert found["meter-b"][:2] == (8, 8)
    assert found["meter-a"][2] == 5 * expected_cost("meter-a")
    assert found["meter-b"][2] == 8 * expected_cost("meter-b")
    assert found["alice"][:2] == (7, 7)  # 3 + 3 calls to agents, 1 team call
    assert found["bob"][:2] == (4, 4)
    for name in ("alice", "bob"):
        calls, tasks, spent, expected = found[name]
        assert round(spent, 2) == round(expected, 2) and spent > 0
    assert found["teams"] == [("pair", None), ("pair", None)]
    assert found["hops"] == 4
