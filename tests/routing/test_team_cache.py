"""Loaded teams are kept per process (``routing.team_loading.team_target``), like agent targets.

What the health jobs and the circuit breaker write (queryset updates, often from another
process) counts at the next call: a team call reads its members' health and breakers afresh.
What the registry changes through its services or the admin (teams, memberships, cards) drops
the loaded team at once; anything else within RELAY_TARGET_CACHE_SECONDS.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from registry import services, teams
from registry.models import Agent, Team
from routing import team_loading
from tasks_app.api import admission, parsing
from tests.factories import card, card_client, make_agent, skill
from tests.tasks_app.a2a_http import JSONRPC_1

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    make_agent(agent_id="lead", name="Lead", skills=[skill("plan", tags=["planning"])])
    make_agent(agent_id="helper", name="Helper", skills=[skill("write", tags=["writing"])])
    return teams.team_create(
        team_id="crew", name="Crew", members=["lead", "helper"], default_agent="lead"
    )


def view_of(team_id: str = "crew") -> dict[str, bool]:
    """Each member the router would see, and whether it counts as healthy."""
    target = team_loading.team_target(team_id)
    assert target is not None
    return {member.id: member.healthy for member in target.view.members}


def test_a_call_to_a_loaded_team_costs_one_query_for_its_members_and_the_task_insert(team, api_key):
    body = json.dumps(JSONRPC_1.send().body).encode()
    parsed = parsing.parse_jsonrpc_call({"A2A-Version": "1.0"}, body)
    for _ in range(2):  # loads the team and the key, and records the key's last use
        admission.admit_parsed(f"Bearer {api_key[1]}", ("team", team.pk, parsed))
    with CaptureQueriesContext(connection) as queries:
        admitted = admission.admit_parsed(f"Bearer {api_key[1]}", ("team", team.pk, parsed))
    assert admitted.target.id == "crew" and admitted.opened is not None
    statements = [query["sql"] for query in queries.captured_queries]
    assert [sql.split()[0] for sql in statements] == ["SELECT", "INSERT"], statements
    assert "breaker_state" in statements[0]


def test_a_member_marked_unhealthy_by_another_process_counts_at_the_next_call(team):
    assert view_of() == {"lead": True, "helper": True}
    # A queryset update sends no signal, like the health job's write in the worker.
    Agent.objects.filter(pk="helper").update(health=Agent.Health.UNHEALTHY)
    assert view_of() == {"lead": True, "helper": False}
    Agent.objects.filter(pk="helper").update(health=Agent.Health.HEALTHY)
    assert view_of() == {"lead": True, "helper": True}


def test_a_breaker_opened_by_another_process_counts_at_the_next_call(team):
    assert view_of()["helper"] is True
    Agent.objects.filter(pk="helper").update(
        breaker_state="open", breaker_failures=5, breaker_opened_at=timezone.now()
    )
    assert view_of()["helper"] is False
    long_ago = timezone.now() - timedelta(days=1)
    Agent.objects.filter(pk="helper").update(breaker_opened_at=long_ago)
    assert view_of()["helper"] is True  # cooled down: the trial call may go


def test_a_member_disabled_by_another_process_leaves_the_team_at_the_next_call(team):
    assert set(view_of()) == {"lead", "helper"}
    Agent.objects.filter(pk="helper").update(status=Agent.Status.DISABLED)
    target = team_loading.team_target("crew")
    assert [member.id for member in target.view.members] == ["lead"]
    assert "helper" not in target.members


def test_membership_changes_through_the_services_count_at_once(team):
    make_agent(agent_id="critic", name="Critic")
    assert set(view_of()) == {"lead", "helper"}
    teams.team_update(team=team, fields={"members": ["lead", "helper", "critic"]})
    assert set(view_of()) == {"lead", "helper", "critic"}
    teams.team_member_set_enabled(team=team, agent_id="critic", enabled=False)
    assert set(view_of()) == {"lead", "helper"}
    teams.team_update(team=Team.objects.get(pk="crew"), fields={"max_routing_hops": 3})
    assert team_loading.team_target("crew").view.max_hops == 3


def test_a_refreshed_card_gives_the_router_its_new_skills_at_once(team):
    before = team_loading.team_target("crew").view.member("helper").capabilities
    assert before == ("writing",)
    helper = Agent.objects.get(pk="helper")
    document = card(name="Helper", skills=[skill("edit", tags=["editing"])])
    with card_client(document) as client:
        assert services.agent_card_refresh(agent=helper, client=client)
    assert team_loading.team_target("crew").view.member("helper").capabilities == ("editing",)


def test_a_deleted_or_disabled_team_is_not_callable_at_once(team):
    assert team_loading.team_target("crew") is not None
    teams.team_update(team=team, fields={"enabled": False})
    assert team_loading.team_target("crew") is None
    teams.team_update(team=Team.objects.get(pk="crew"), fields={"enabled": True})
    assert team_loading.team_target("crew") is not None
    teams.team_delete(team=Team.objects.get(pk="crew"))
    assert team_loading.team_target("crew") is None


def test_a_change_no_signal_announces_counts_within_the_cache_lifetime(team, settings):
    settings.RELAY_TARGET_CACHE_SECONDS = 0.3
    assert team_loading.team_target("crew").view.max_hops == 10
    Team.objects.filter(pk="crew").update(max_routing_hops=2)
    assert team_loading.team_target("crew").view.max_hops == 10
    time.sleep(0.4)
    assert team_loading.team_target("crew").view.max_hops == 2
