"""Access rules on hand-offs between team members: a forbidden hand-off is refused like a bad
recipient (the answer goes to the default agent with a routingError naming the rule, or to
the caller when handing to the default agent is forbidden too), the member handed to is
never called, and each refusal is in the audit log."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from registry import access
from registry.identity_models import AccessRule
from registry.models import AuditEntry
from tests.routing.test_team_e2e import (  # noqa: F401 - agent_urls, registered: fixtures
    HELPER,
    LEAD,
    URI,
    WORKER,
    agent_urls,
    make_team,
    registered,
    route,
    send,
    trace,
    user_message,
)
from tests.routing.test_team_e2e import relay as relay  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

FORBIDDEN = "access rule 'worker-not-to-helper' forbids 'worker' handing to 'helper'"


@pytest.fixture(autouse=True)
def fresh_rules():
    access.rules_changed()
    yield
    access.rules_changed()


def handoff_rule(name: str, condition: str) -> AccessRule:
    return AccessRule.objects.create(name=name, kind="handoff", condition=condition)


def denials() -> list[tuple[str, str, str]]:
    return [
        (entry.object_type, entry.object_id, entry.changes["rule"])
        for entry in AuditEntry.objects.filter(action="deny").order_by("id")
    ]


async def test_a_forbidden_hand_off_goes_to_the_default_agent_with_the_rule_named(relay):
    await sync_to_async(make_team)("lead", "worker", "helper")
    await sync_to_async(handoff_rule)(
        "worker-not-to-helper", 'handoff.from == "worker" && handoff.to == "helper"'
    )
    LEAD.load("worker", "user")
    WORKER.load("helper")

    task = await send(relay, user_message("go"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    hops = await trace(relay, task["id"])
    assert route(hops) == [
        ("user", "lead", "routed", "worker"),
        ("lead", "worker", "routed", "lead"),
        ("worker", "lead", "replied", "user"),
    ]
    assert hops[2]["routingError"] == FORBIDDEN
    assert LEAD.received[1][1]["routingError"] == FORBIDDEN
    assert HELPER.received == []
    assert await sync_to_async(denials)() == [
        ("handoff", "crew:worker>helper", "worker-not-to-helper")
    ]


async def test_an_allowed_hand_off_is_not_touched_by_the_rule(relay):
    await sync_to_async(make_team)("lead", "worker", "helper")
    await sync_to_async(handoff_rule)(
        "worker-not-to-helper", 'handoff.from == "worker" && handoff.to == "helper"'
    )
    LEAD.load("helper", "user")
    HELPER.load("lead")

    task = await send(relay, user_message("go"))

    assert [to for _, to, _, _ in route(await trace(relay, task["id"]))] == [
        "lead",
        "helper",
        "lead",
    ]
    assert await sync_to_async(denials)() == []


async def test_when_handing_back_to_the_default_agent_is_forbidden_too_the_caller_is_answered(
    relay,
):
    await sync_to_async(make_team)("lead", "worker", "helper")
    await sync_to_async(handoff_rule)("worker-alone", 'handoff.from == "worker"')
    LEAD.load("worker")
    WORKER.load("helper")

    task = await send(relay, user_message("go"))

    both = (
        "access rule 'worker-alone' forbids 'worker' handing to 'helper'; "
        "access rule 'worker-alone' forbids 'worker' handing to 'lead'"
    )
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["metadata"][URI] == {"routingError": both}
    assert HELPER.received == [] and len(LEAD.received) == 1
    assert [object_id for _, object_id, _ in await sync_to_async(denials)()] == [
        "crew:worker>helper",
        "crew:worker>lead",
    ]
