"""Usage records end to end: the relay in-process over ASGI, its agents real a2a-sdk agents
on 127.0.0.1 reporting their tokens on their final status update. Totals per agent and per
key reconcile with the task table exactly (calls) and to the cent (cost)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tasks_app.lifecycle import TERMINAL
from tasks_app.models import Task, UsageRecord
from tasks_app.usage.records import money_text
from tests.usage.conftest import expected_cost, make_key, rest_send, rpc
from tests.usage.metered import NEXT, TOKENS

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


async def test_usage_per_agent_and_key_reconciles_with_the_tasks_after_a_mixed_load(metered, relay):
    (alice, alice_secret), (bob, bob_secret) = await asyncio.gather(
        sync_to_async(make_key)("alice"), sync_to_async(make_key)("bob")
    )
    NEXT.update({"meter-a": "meter-b", "meter-b": "user"})  # a team call: two hops
    calls = []
    for i in range(3):
        calls.append(rpc(relay, "/a2a/agents/meter-a/", alice_secret, "SendMessage", f"a{i}"))
        calls.append(
            rpc(relay, "/a2a/agents/meter-b/", bob_secret, "SendStreamingMessage", f"b{i}")
        )
        calls.append(rest_send(relay, "meter-b", alice_secret, f"r{i}"))
    calls.append(rpc(relay, "/a2a/teams/pair/", bob_secret, "SendMessage", "team1"))
    calls.append(rpc(relay, "/a2a/teams/pair/", alice_secret, "SendStreamingMessage", "team2"))
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

    # The design notes' metrics, from the same records.
    body = (await relay.get("/a2a/agents/meter-b/metrics")).json()
    assert body["agentId"] == "meter-b"
    assert body["last24Hours"] == {
        "tasks": 8,
        "completed": 8,
        "failed": 0,
        "inputTokens": 8 * TOKENS["meter-b"][0],
        "outputTokens": 8 * TOKENS["meter-b"][1],
        "cost": money_text(8 * expected_cost("meter-b")),
    }
    assert body["costPerTask"] == money_text(expected_cost("meter-b"))
    assert body["avgLatency"] > 0 and body["p95Latency"] >= body["avgLatency"] / 2
    team = (await relay.get("/a2a/teams/pair/metrics")).json()
    assert team["teamId"] == "pair" and team["successRate"] == 1.0
    assert team["last24Hours"]["tasks"] == 2
    both = expected_cost("meter-a") + expected_cost("meter-b")
    assert team["last24Hours"]["cost"] == money_text(2 * both)
    assert team["costPerTask"] == money_text(both)
