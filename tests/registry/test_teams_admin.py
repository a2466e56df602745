"""Teams in the Django admin: the team page with its members inline, checked as the API checks."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry import teams
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Team, TeamMembership
from routing.models import RoutingHop
from tasks_app.models import Task
from tests.factories import extension, make_agent, skill
from tests.registry.test_admin import form_data

pytestmark = pytest.mark.django_db

ADD = reverse("admin:registry_team_add")
CHANGELIST = reverse("admin:registry_team_changelist")


def change_url(team_id: str = "crew") -> str:
    return reverse("admin:registry_team_change", args=[team_id])


@pytest.fixture
def agents():
    researcher = make_agent(
        agent_id="researcher",
        name="Research Agent",
        capabilities={"extensions": [extension(CLIENT_ROUTING_URI)]},
        skills=[skill("search")],
        health="healthy",
    )
    writer = make_agent(agent_id="writer", name="Writer", health="unhealthy")
    critic = make_agent(agent_id="critic", name="Critic")
    return researcher, writer, critic


def add_data(*, members=(("researcher", "0", True), ("writer", "1", True)), **fields):
    """What the add page submits: the team's fields and one inline row per member
    (agent id, order, enabled)."""
    data = {
        "id": "crew",
        "name": "Crew",
        "description": "Researches and writes.",
        "default_agent": "researcher",
        "max_routing_hops": "5",
        "enabled": "on",
        "memberships-TOTAL_FORMS": str(len(members)),
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "workflow_memberships-TOTAL_FORMS": "0",
        "workflow_memberships-INITIAL_FORMS": "0",
        "workflow_memberships-MIN_NUM_FORMS": "0",
        "workflow_memberships-MAX_NUM_FORMS": "1000",
        **fields,
    }
    for index, (agent_id, order, enabled) in enumerate(members):
        data[f"memberships-{index}-agent"] = agent_id
        data[f"memberships-{index}-order"] = order
        if enabled:
            data[f"memberships-{index}-enabled"] = "on"
    return data


def stored_members(team_id: str = "crew") -> list[tuple[str, int, bool]]:
    return list(
        TeamMembership.objects.filter(team_id=team_id)
        .order_by("order")
        .values_list("agent_id", "order", "enabled")
    )


def page_text(response) -> str:
    return html.unescape(response.content.decode())


def make_crew() -> Team:
    return teams.team_create(
        team_id="crew", name="Crew", members=["researcher", "writer"], default_agent="researcher"
    )


# --- Adding -----------------------------------------------------------------------------------


def test_adding_a_team_with_inline_members_stores_the_team_and_its_members(admin_client, agents):
    response = admin_client.post(
        ADD,
        add_data(
            members=[
                ("researcher", "0", True),
                ("writer", "1", False),
                ("critic", "2", True),
            ]
        ),
    )

    assert response.status_code == 302, page_text(response)
    team = Team.objects.get(pk="crew")
    assert (team.name, team.default_agent_id, team.max_routing_hops, team.enabled) == (
        "Crew",
        "researcher",
        5,
        True,
    )
    assert stored_members() == [
        ("researcher", 0, True),
        ("writer", 1, False),
        ("critic", 2, True),
    ]
    assert LogEntry.objects.filter(object_id="crew", action_flag=1).exists()
    assert response.url == reverse("admin:registry_team_changelist")


def test_members_are_stored_in_the_order_given_with_empty_orders_last(admin_client, agents):
    response = admin_client.post(
        ADD,
        add_data(
            members=[
                ("researcher", "5", True),
                ("writer", "", True),
                ("critic", "1", True),
            ]
        ),
    )

    assert response.status_code == 302
    assert stored_members() == [("critic", 0, True), ("researcher", 1, True), ("writer", 2, True)]


@pytest.mark.parametrize(
    ("members", "fields", "reason"),
    [
        pytest.param(
            (("researcher", "0", True), ("writer", "1", True)),
            {"default_agent": "critic"},
            "The team cannot be saved: the default agent 'critic' is not a member of the team",
            id="default-not-a-member",
        ),
        pytest.param(
            (("researcher", "0", False), ("writer", "1", True)),
            {},
            "The team cannot be saved: the default agent 'researcher' is a disabled member",
            id="default-a-disabled-member",
        ),
        pytest.param(
            (),
            {},
            "The team cannot be saved: a team needs at least one member",
            id="no-members",
        ),
        pytest.param(
            (("researcher", "0", True), ("writer", "1", True)),
            {"max_routing_hops": "11"},
            "max routing hops must be a whole number from 1 to 10, not 11",
            id="hops-11",
        ),
        pytest.param(
            (("researcher", "0", True), ("writer", "1", True)),
            {"max_routing_hops": "0"},
            "max routing hops must be a whole number from 1 to 10, not 0",
            id="hops-0",
        ),
    ],
)
def test_a_team_the_rules_refuse_is_not_saved_and_the_page_says_why(
    admin_client, agents, members, fields, reason
):
    response = admin_client.post(ADD, add_data(members=members, **fields))

    assert response.status_code == 200
    assert reason in page_text(response)
    assert not Team.objects.exists()
    assert not TeamMembership.objects.exists()


def test_a_default_agent_left_empty_is_refused_by_the_form(admin_client, agents):
    response = admin_client.post(ADD, add_data(default_agent=""))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["default_agent"] == ["This field is required."]
    assert not Team.objects.exists()


def test_when_the_teams_own_fields_are_invalid_only_their_errors_show(admin_client, agents):
    response = admin_client.post(ADD, add_data(id="not a slug", default_agent="critic"))

    assert response.status_code == 200
    assert "id" in response.context["adminform"].form.errors
    assert "The team cannot be saved" not in page_text(response)
    assert not Team.objects.exists()


def test_a_member_listed_twice_is_refused(admin_client, agents):
    response = admin_client.post(
        ADD,
        add_data(
            members=[
                ("researcher", "0", True),
                ("researcher", "1", True),
            ]
        ),
    )

    assert response.status_code == 200
    assert "Please correct the duplicate data for agent" in page_text(response)
    assert not Team.objects.exists()


# --- Changing ---------------------------------------------------------------------------------


def test_the_default_agent_choices_are_only_the_teams_members(admin_client, agents):
    make_crew()

    response = admin_client.get(change_url())

    field = response.context["adminform"].form.fields["default_agent"]
    assert [str(value) for value, _ in field.choices if value] == ["researcher", "writer"]
    select = re.search(
        r'<select name="default_agent".*?</select>', response.content.decode(), re.S
    ).group(0)
    assert re.findall(r'<option value="([^"]+)"', select) == ["researcher", "writer"]


def test_a_non_member_cannot_be_posted_as_the_default_agent(admin_client, agents):
    make_crew()
    data = form_data(admin_client.get(change_url()), "team_form")
    data["default_agent"] = "critic"

    response = admin_client.post(change_url(), data)

    assert response.status_code == 200
    assert "default_agent" in response.context["adminform"].form.errors
    assert Team.objects.get(pk="crew").default_agent_id == "researcher"


def test_removing_the_default_agent_from_the_members_is_refused(admin_client, agents):
    make_crew()
    data = form_data(admin_client.get(change_url()), "team_form")
    data["memberships-0-DELETE"] = "on"

    response = admin_client.post(change_url(), data)

    assert response.status_code == 200
    assert (
        "The team cannot be saved: the default agent 'researcher' is not a member of the team"
        in page_text(response)
    )
    assert stored_members() == [("researcher", 0, True), ("writer", 1, True)]


def test_changing_the_members_and_the_default_saves_them_together(admin_client, agents):
    make_crew()
    data = form_data(admin_client.get(change_url()), "team_form")
    assert data["memberships-0-agent"] == "researcher"
    data.update(
        {
            "name": "Crew 2",
            "default_agent": "writer",
            "memberships-0-DELETE": "on",
            "memberships-1-order": "3",
            "memberships-2-agent": "critic",
            "memberships-2-order": "1",
            "memberships-2-enabled": "on",
            "memberships-TOTAL_FORMS": "3",
        }
    )

    response = admin_client.post(change_url(), data)

    assert response.status_code == 302, page_text(response)
    team = Team.objects.get(pk="crew")
    assert (team.name, team.default_agent_id) == ("Crew 2", "writer")
    assert stored_members() == [("critic", 0, True), ("writer", 1, True)]
    entry = LogEntry.objects.filter(object_id="crew", action_flag=2).get()
    assert "members" in entry.get_change_message()


def test_the_id_cannot_be_changed(admin_client, agents):
    make_crew()

    form = admin_client.get(change_url()).context["adminform"].form

    assert "id" not in form.fields


# --- At a glance ------------------------------------------------------------------------------


def test_the_team_list_shows_each_members_health_and_client_routing(admin_client, agents):
    make_crew()

    response = admin_client.get(CHANGELIST)

    page = response.content.decode()
    assert response.status_code == 200
    members_cell = re.search(r'<td class="field-members_at_a_glance">(.*?)</td>', page, re.S).group(
        1
    )
    assert 'class="health health-healthy"' in members_cell
    assert 'class="health health-unhealthy"' in members_cell
    assert "researcher ⇄" in members_cell
    assert "writer ⇄" not in members_cell
    assert '<td class="field-client_routing">1 of 2</td>' in page
    assert "/static/relay/relay.css" in page


def test_the_team_list_runs_the_same_queries_for_more_teams(admin_client, agents):
    make_crew()
    with CaptureQueriesContext(connection) as one_team:
        assert admin_client.get(CHANGELIST).status_code == 200
    for number in range(5):
        teams.team_create(
            team_id=f"t{number}", name="T", members=["writer", "critic"], default_agent="critic"
        )

    with CaptureQueriesContext(connection) as six_teams:
        assert len(admin_client.get(CHANGELIST).context["cl"].result_list) == 6

    assert len(six_teams.captured_queries) == len(one_team.captured_queries)


def test_the_members_inline_shows_health_and_client_routing(admin_client, agents):
    make_crew()

    page = admin_client.get(change_url()).content.decode()

    rows = re.findall(r'<tr class="form-row[^"]*"[^>]*id="memberships-\d+">(.*?)</tr>', page, re.S)
    assert len(rows) == 3  # the two members and one empty row to add another
    assert "health health-healthy" in rows[0] and 'alt="True"' in rows[0]
    assert "health health-unhealthy" in rows[1] and 'alt="False"' in rows[1]
    assert 'class="health' not in rows[2]
    assert 'alt="True"' not in rows[2] and 'alt="False"' not in rows[2]


def test_recent_conversations_show_each_task_with_its_routing_trace(admin_client, agents):
    make_crew()
    task = Task.objects.create(
        context_id="ctx-1", target_kind="team", target_id="crew", state="completed"
    )
    RoutingHop.objects.create(
        task=task,
        order=1,
        from_id="user",
        to_id="researcher",
        reason="starts the research",
        outcome="routed",
        next_id="writer",
        latency_ms=123.4,
    )
    RoutingHop.objects.create(
        task=task,
        order=2,
        from_id="researcher",
        to_id="writer",
        routing_error="'ghost' is not a team member",
        outcome="replied",
        latency_ms=56,
    )
    quiet = Task.objects.create(
        context_id="ctx-2", target_kind="team", target_id="crew", state="failed"
    )
    other = Task.objects.create(
        context_id="ctx-3", target_kind="team", target_id="another", state="working"
    )

    page = page_text(admin_client.get(change_url()))

    assert f'<a href="/tasks/{task.id}/">' in page
    assert f'<a href="/tasks/{quiet.id}/">' in page
    assert f"/tasks/{other.id}/" not in page
    trace = re.search(r'<table class="routing-trace">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr class=\"hop hop-(\w+)\">(.*?)</tr>", trace, re.S)
    assert [outcome for outcome, _ in rows] == ["routed", "replied"]
    first, second = (re.sub(r"<[^>]+>|\s+", " ", row).split() for _, row in rows)
    assert first[:4] == ["1", "user", "→", "researcher"]
    assert "starts the research" in " ".join(first) and "123 ms" in " ".join(first)
    assert "'ghost' is not a team member" in " ".join(second) and "56 ms" in " ".join(second)
    assert "No hops recorded." in page


def test_a_team_without_tasks_says_so(admin_client, agents):
    make_crew()

    assert "No conversations yet." in page_text(admin_client.get(change_url()))


# --- Deleting ---------------------------------------------------------------------------------


def test_deleting_a_team_in_the_admin_removes_it_and_its_memberships(admin_client, agents):
    make_crew()

    response = admin_client.post(
        reverse("admin:registry_team_delete", args=["crew"]), {"post": "yes"}
    )

    assert response.status_code == 302
    assert not Team.objects.exists()
    assert not TeamMembership.objects.exists()


def test_an_agent_that_is_a_default_agent_cannot_be_deleted_in_the_admin(admin_client, agents):
    make_crew()

    response = admin_client.post(
        reverse("admin:registry_agent_delete", args=["researcher"]), {"post": "yes"}
    )

    assert response.status_code == 200
    assert "protected" in page_text(response)
    assert Team.objects.filter(default_agent_id="researcher").exists()


@pytest.mark.parametrize(
    ("model_name", "field_name"), [("teammembership", "agent"), ("team", "default_agent")]
)
def test_members_and_the_default_agent_are_picked_by_searching_agents(
    admin_client, agents, model_name, field_name
):
    assert admin_client.get(ADD).status_code == 200

    response = admin_client.get(
        reverse("admin:autocomplete"),
        {
            "app_label": "registry",
            "model_name": model_name,
            "field_name": field_name,
            "term": "writ",
        },
    )

    assert response.status_code == 200
    assert [result["id"] for result in response.json()["results"]] == ["writer"]


# --- Workflow members -------------------------------------------------------------------------

PAIR = """
name: Pair
slug: {slug}
description: Two steps.
steps:
  - agent: writer
  - agent: critic
    input: "{{{{.writer}}}}"
"""


def test_a_workflow_is_picked_as_a_member_in_its_inline(admin_client, agents):
    from routing.models import TeamWorkflowMember
    from routing.workflows.services import workflow_import

    workflow_import(text=PAIR.format(slug="pair"))
    data = add_data(
        **{
            "workflow_memberships-TOTAL_FORMS": "1",
            "workflow_memberships-0-workflow": "pair",
            "workflow_memberships-0-order": "3",
            "workflow_memberships-0-enabled": "on",
        }
    )

    response = admin_client.post(ADD, data)

    assert response.status_code == 302, page_text(response)
    assert list(
        TeamWorkflowMember.objects.values_list("team_id", "workflow_id", "order", "enabled")
    ) == [("crew", "pair", 3, True)]
    page = page_text(admin_client.get(change_url()))
    assert "workflow members" in page.lower()
    assert re.search(r'<option value="pair" selected>', page), page


def test_a_workflow_with_the_id_of_an_agent_member_is_refused_by_the_inline(admin_client, agents):
    from routing.models import TeamWorkflowMember
    from routing.workflows.services import workflow_import

    workflow_import(text=PAIR.format(slug="writer"))
    data = add_data(
        **{
            "workflow_memberships-TOTAL_FORMS": "1",
            "workflow_memberships-0-workflow": "writer",
            "workflow_memberships-0-enabled": "on",
        }
    )

    response = admin_client.post(ADD, data)

    assert response.status_code == 200
    assert "has the id of an agent member of this team" in page_text(response)
    assert not Team.objects.filter(pk="crew").exists()
    assert not TeamWorkflowMember.objects.exists()
