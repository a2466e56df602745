"""Workflow quotas end to end: a workflow that loops over a priced agent stops at its $1
budget, at most one step's price above it, the refusal audited; a workflow over its calls per
day is refused at admission with the documented error; the run's cost is its steps' and is
in the workflow's usage. Real a2a-sdk agents on 127.0.0.1 (tests.usage.metered), the relay
in-process."""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from registry.models import AuditEntry
from registry.usage_models import AgentPrice, Quota
from routing.workflows.services import workflow_import
from tasks_app.models import Task, UsageRecord
from tasks_app.usage import quotas, reports
from tests.usage.conftest import make_key, rpc

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

STEP_PRICE = Decimal("0.30")
LOOPER = """\
name: Looper
slug: looper
steps:
  - id: again
    loop:
      - agent: meter-a
    max_iterations: 10
"""


def looper(**limits) -> None:
    AgentPrice.objects.filter(agent_id="meter-a").update(
        per_call=STEP_PRICE, per_million_input_tokens=0, per_million_output_tokens=0
    )
    workflow_import(text=LOOPER)
    Quota.objects.create(workflow="looper", **limits)


async def test_a_looping_workflow_stops_at_its_budget_within_one_step(metered, relay):
    key, secret = await sync_to_async(make_key)("looper")
    await sync_to_async(looper)(cost_per_day=Decimal("1.00"))

    response = await rpc(relay, "/a2a/workflows/looper/", secret, "SendMessage", "loop")

    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    said = " ".join(part.get("text", "") for part in task["status"]["message"]["parts"])
    assert "quota exceeded: workflow 'looper' allows a cost of 1.00 per day" in said

    def spent():
        steps = UsageRecord.objects.filter(workflow_id="looper", parent_task_id=task["id"])
        run = UsageRecord.objects.get(task_id=task["id"])
        return (
            [record.cost for record in steps.order_by("at") if record.agent_id],
            run.workflow_id,
            Task.objects.filter(parent_id=task["id"], state="failed").count(),
            list(
                AuditEntry.objects.filter(object_type="quota").values_list(
                    "action", "object_id", "changes__limit"
                )
            ),
            quotas.cost_since(("workflow", "looper"), quotas.day_start(run.at)),
            reports.scores(kind="workflow", subject_id="looper"),
        )

    costs, run_workflow, refused_steps, audited, summed, scores = await sync_to_async(spent)()
    assert costs == [STEP_PRICE] * 4  # 0.30, 0.60, 0.90 are under $1: the fourth may start
    assert sum(costs) == summed == Decimal("1.20") <= Decimal("1.00") + STEP_PRICE
    assert run_workflow == "looper"
    assert refused_steps == 1  # the fifth step, stored failed with the quota's message
    assert audited == [("deny", "workflow:looper", "cost_per_day")]
    assert scores.tasks == 1 and scores.failed == 1
    assert scores.cost == Decimal("1.20")  # the run's cost is its steps'

    usage = await relay.get(
        "/a2a/usage",
        params={"group": "workflow", "workflow": "looper"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert usage.status_code == 200, usage.text
    (group,) = usage.json()["groups"]
    assert group["id"] == "looper"
    assert group["calls"] == 6  # the run and its five steps, the refused one included
    assert group["cost"] == "1.20"

    metrics = (await relay.get("/a2a/workflows/looper/metrics")).json()
    assert metrics["workflowId"] == "looper"
    assert metrics["last24Hours"]["tasks"] == 1 and metrics["last24Hours"]["cost"] == "1.20"
    assert metrics["costPerTask"] == "1.20" and metrics["successRate"] == 0.0


async def test_a_workflow_over_its_daily_calls_is_refused_with_the_documented_error(metered, relay):
    key, secret = await sync_to_async(make_key)("caller")
    await sync_to_async(looper)(calls_per_day=1)
    await sync_to_async(workflow_import)(
        text=LOOPER.replace("max_iterations: 10", "max_iterations: 1"), replace=True
    )

    first = await rpc(relay, "/a2a/workflows/looper/", secret, "SendMessage", "one")
    over = await rpc(relay, "/a2a/workflows/looper/", secret, "SendMessage", "two")

    assert first.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    error = over.json()["error"]
    assert error["code"] == -31429
    assert "quota exceeded: workflow 'looper' allows 1 call per day (1 made)" in error["message"]
    assert error["data"][0]["metadata"]["quota"] == "workflow:looper"
    audited = await sync_to_async(
        lambda: list(AuditEntry.objects.filter(object_type="quota").values_list("object_id"))
    )()
    assert audited == [("workflow:looper",)]
