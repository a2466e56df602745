"""``GET /a2a/usage`` (a key sees its own calls, staff everyone's), the quotas API (staff or
an admin key, audited), and the hourly roll-ups the reports read for past hours."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from registry.models import Agent, AuditEntry
from registry.services import api_key_create
from registry.usage_models import AgentPrice, Quota
from tasks_app import services
from tasks_app.models import Task, UsageHour, UsageRecord
from tasks_app.usage import reports, rollups
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def client_of(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def ended_call(agent, caller, *, state="completed") -> UsageRecord:
    """A call of ``caller`` to ``agent`` ended through the task services: its usage record
    is the one the gateway would write."""
    task = services.task_open(
        caller=caller,
        target_kind="agent",
        target_id=agent.pk,
        agent_id=agent.pk,
        message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        client_version="1.0",
    )
    services.task_record(task=task, event=services.status_event(task, state, "done"))
    return UsageRecord.objects.get(task=task)


def test_a_key_sees_its_own_usage_and_staff_see_everyones():
    agent = make_agent(agent_id="priced")
    AgentPrice.objects.create(agent=agent, per_call=Decimal("0.125"))
    alice, alice_secret = api_key_create(name="alice")
    bob, _ = api_key_create(name="bob")
    _, admin_secret = api_key_create(name="admin", is_admin=True)
    for caller, state in ((alice, "completed"), (alice, "failed"), (bob, "completed")):
        ended_call(agent, caller, state=state)

    own = client_of(alice_secret).get("/a2a/usage").json()
    everyone = client_of(admin_secret).get("/a2a/usage", {"group": "key"}).json()
    filtered = client_of(admin_secret).get("/a2a/usage", {"key": bob.prefix}).json()

    (mine,) = own["groups"]
    assert mine["id"] == "priced"
    assert (mine["calls"], mine["completed"], mine["failed"]) == (2, 1, 1)
    assert mine["successRate"] == 0.5 and mine["cost"] == "0.25"
    assert mine["bytesIn"] > 0 and mine["bytesOut"] > 0
    assert {group["id"]: group["calls"] for group in everyone["groups"]} == {
        alice.prefix: 2,
        bob.prefix: 1,
    }
    assert [group["calls"] for group in filtered["groups"]] == [1]


def test_usage_refuses_a_bad_window_with_a_400():
    _, secret = api_key_create(name="k")
    response = client_of(secret).get("/a2a/usage", {"since": "yesterday"})
    assert response.status_code == 400
    assert "since must be an ISO 8601 time" in response.json()["error"]["message"]


def test_past_hours_are_read_from_the_roll_ups_and_add_up_to_the_records():
    agent = make_agent(agent_id="rolled")
    AgentPrice.objects.create(agent=agent, per_call=Decimal("0.01"))
    caller, _ = api_key_create(name="k")
    records = [ended_call(agent, caller) for _ in range(3)]
    earlier = timezone.now() - timedelta(hours=5)
    Task.objects.filter(pk__in=[r.pk for r in records[:2]]).update(completed_at=earlier)

    assert rollups.usage_roll_up(hours=8) == 2  # two hours with calls, one row each
    Task.objects.filter(pk=records[0].pk).update(usage_cost=Decimal("5"))  # not re-read

    found = reports.usage_totals(
        since=timezone.now() - timedelta(hours=8), until=timezone.now(), group="agent"
    )
    assert found["rolled"].calls == 3
    assert found["rolled"].cost == Decimal("0.03")  # the rolled hour's sum, not the edit
    assert UsageHour.objects.get(hour=rollups.hour_start(earlier)).calls == 2


def test_quotas_are_set_by_an_admin_key_and_audited():
    agent = make_agent(agent_id="limited")
    _, admin_secret = api_key_create(name="admin", is_admin=True)
    plain, plain_secret = api_key_create(name="plain")
    admin = client_of(admin_secret)

    refused = client_of(plain_secret).post("/a2a/quotas", {"agent": agent.pk}, format="json")
    created = admin.post(
        "/a2a/quotas", {"agent": agent.pk, "costPerDay": "2.5", "callsPerDay": 100}, format="json"
    )
    again = admin.post("/a2a/quotas", {"agent": agent.pk}, format="json")
    two = admin.post("/a2a/quotas", {"agent": agent.pk, "key": plain.prefix}, format="json")
    changed = admin.patch(
        f"/a2a/quotas/{created.json()['id']}", {"costPerMonth": "40"}, format="json"
    )

    assert refused.status_code == 403
    assert created.status_code == 201, created.content
    assert created.json() == {
        "id": created.json()["id"],
        "agent": "limited",
        "callsPerDay": 100,
        "costPerDay": "2.50",
        "costPerMonth": None,
    }
    assert again.status_code == 409 and two.status_code == 400
    assert changed.json()["costPerMonth"] == "40.00"
    assert Quota.objects.get().cost_per_month == Decimal("40")
    assert list(
        AuditEntry.objects.filter(object_type="quota").order_by("at").values_list("action")
    ) == [("create",), ("update",)]
    assert admin.delete(f"/a2a/quotas/{created.json()['id']}").status_code == 204
    assert not Quota.objects.exists()


def test_a_staff_user_sets_a_teams_budget_in_the_admin_and_it_is_audited(admin_client):
    from registry.teams import team_create

    make_agent(agent_id="member")
    team_create(team_id="crew", name="Crew", members=["member"], default_agent="member")

    response = admin_client.post(
        "/admin/registry/quota/add/",
        {"team": "crew", "cost_per_day": "1.00", "calls_per_day": ""},
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    quota = Quota.objects.get()
    assert (quota.team_id, quota.cost_per_day, quota.calls_per_day) == ("crew", Decimal("1"), None)
    assert AuditEntry.objects.filter(object_type="quota", action="create").exists()
    both = admin_client.post(
        "/admin/registry/quota/add/", {"team": "crew", "agent": "member", "cost_per_day": "2"}
    )
    assert both.status_code == 200 and Quota.objects.count() == 1  # the form says why


def test_the_success_selector_prefers_the_agent_that_fails_less(settings):
    from registry.selection import SelectRequest, select
    from tests.factories import skill

    settings.RELAY_AGENT_SELECTOR = "tasks_app.usage.selection.rank_by_meaning_and_success"
    caller, _ = api_key_create(name="k")
    for agent_id in ("flaky", "steady"):
        make_agent(agent_id=agent_id, skills=[skill("forecast", name="Weather forecast")])
    for _ in range(3):
        ended_call(Agent.objects.get(pk="flaky"), caller, state="failed")
    ended_call(Agent.objects.get(pk="steady"), caller)

    chosen = select(request=SelectRequest(text="weather forecast", limit=2)).selections

    assert [selection.agent_id for selection in chosen] == ["steady", "flaky"]
    assert chosen[0].score > chosen[1].score
