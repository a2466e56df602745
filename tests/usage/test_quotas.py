"""Quotas and budgets end to end: a key over its calls per day is refused with the rate-limit
error of each binding, naming the limit and when it resets, and audited; a team whose two
members hand the conversation back and forth stops at its $1 budget, at most one hop's price
above it. Real a2a-sdk agents on 127.0.0.1 (tests.usage.metered)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from registry.models import AuditEntry
from registry.usage_models import AgentPrice, Quota
from routing.models import RoutingHop
from tasks_app.models import Task, UsageRecord
from tasks_app.usage import quotas
from tests.usage.conftest import make_key, rest_send, rpc
from tests.usage.metered import NEXT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

HOP_PRICE = Decimal("0.30")


async def test_a_key_over_its_daily_calls_is_refused_with_the_documented_error(metered, relay):
    key, secret = await sync_to_async(make_key)("capped")
    await sync_to_async(Quota.objects.create)(api_key=key, calls_per_day=2)

    first = await rpc(relay, "/a2a/agents/meter-a/", secret, "SendMessage", "one")
    second = await rest_send(relay, "meter-a", secret, "two")
    over_rpc = await rpc(relay, "/a2a/agents/meter-a/", secret, "SendMessage", "three")
    over_rest = await rest_send(relay, "meter-a", secret, "four")

    assert "result" in first.json() and second.status_code == 200, second.text
    error = over_rpc.json()["error"]
    assert error["code"] == -31429
    assert f"quota exceeded: key {key.prefix!r} allows 2 calls per day (2 made)" in error["message"]
    assert "it resets at " in error["message"]
    info = error["data"][0]
    assert info["reason"] == "RATE_LIMITED"
    assert info["metadata"]["limit"] == "calls_per_day"
    assert info["metadata"]["resetsAt"].endswith("T00:00:00.000Z")
    assert over_rest.status_code == 429
    assert 0 < int(over_rest.headers["Retry-After"]) <= 86400
    body = over_rest.json()["error"]
    assert body["status"] == "RESOURCE_EXHAUSTED" and "2 calls per day" in body["message"]

    def stored():
        return (
            Task.objects.filter(caller=key).count(),
            list(
                AuditEntry.objects.filter(object_type="quota").values_list(
                    "actor", "action", "object_id", "changes__limit"
                )
            ),
        )

    tasks, audited = await sync_to_async(stored)()
    assert tasks == 2  # the refused calls opened no task
    entry = ("key:" + key.prefix, "deny", f"key:{key.prefix}", "calls_per_day")
    assert audited == [entry, entry]


async def test_a_looping_team_stops_at_its_budget_within_one_hop(metered, relay):
    key, secret = await sync_to_async(make_key)("looper")

    def priced():
        AgentPrice.objects.filter(agent_id__in=["meter-a", "meter-b"]).update(
            per_call=HOP_PRICE, per_million_input_tokens=0, per_million_output_tokens=0
        )
        Quota.objects.create(team_id="pair", cost_per_day=Decimal("1.00"))

    await sync_to_async(priced)()
    NEXT.update({"meter-a": "meter-b", "meter-b": "meter-a"})  # they hand back and forth

    response = await rpc(relay, "/a2a/teams/pair/", secret, "SendMessage", "loop")

    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    said = task["status"]["message"]["parts"][0]["text"]
    assert "quota exceeded: team 'pair' allows a cost of 1.00 per day" in said

    def spent():
        hops = UsageRecord.objects.filter(team_id="pair").exclude(parent_task_id="")
        return (
            sum(record.cost for record in hops),
            hops.count(),
            RoutingHop.objects.filter(task_id=task["id"]).count(),
            AuditEntry.objects.filter(object_type="quota", object_id="team:pair").count(),
            quotas.cost_since(("team", "pair"), quotas.day_start(UsageRecord.objects.first().at)),
        )

    total, member_calls, hops, audited, summed = await sync_to_async(spent)()
    assert member_calls == 4  # 0.30, 0.60, 0.90 are under $1: the fourth hop may start
    assert total == summed == Decimal("1.20")
    assert total <= Decimal("1.00") + HOP_PRICE
    assert hops == 5  # the fifth hop is the refused one, recorded with the team's failure
    assert audited == 1
