"""The team admin warns about a team whose default agent cannot route: the other members are
never called. Regression for issue 15, item 8 (nothing warned)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.cards import CLIENT_ROUTING_URI
from registry.teams import team_create
from routing.team_checks import unreachable_members
from tests.factories import extension, make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams():
    make_agent(
        agent_id="lead", name="Lead", capabilities={"extensions": [extension(CLIENT_ROUTING_URI)]}
    )
    make_agent(agent_id="plain", name="Plain")
    make_agent(agent_id="other", name="Other")
    team_create(team_id="good", name="Good", members=["lead", "plain"], default_agent="lead")
    team_create(
        team_id="stuck", name="Stuck", members=["plain", "lead", "other"], default_agent="plain"
    )
    team_create(team_id="alone", name="Alone", members=["plain"], default_agent="plain")


def test_the_change_page_warns_when_the_default_agent_cannot_route(admin_client, teams):
    page = admin_client.get(reverse("admin:routing_team_change", args=["stuck"]))

    text = page.content.decode()
    assert 'id="team-routing-warning"' in text
    assert "“plain” does not declare the client-routing extension" in text
    assert "lead, other will never be called" in text


@pytest.mark.parametrize("team_id", ["good", "alone"])
def test_no_warning_when_every_member_can_be_reached(admin_client, teams, team_id):
    page = admin_client.get(reverse("admin:routing_team_change", args=[team_id]))

    assert 'id="team-routing-warning"' not in page.content.decode()


def test_the_team_list_flags_the_team(admin_client, teams):
    page = admin_client.get(reverse("admin:routing_team_changelist")).content.decode()

    assert page.count("⚠ only plain is called") == 1


def test_members_disabled_in_the_team_are_not_counted_as_unreachable(teams):
    from registry.models import Team
    from registry.selectors import teams_with_members
    from registry.teams import MemberSpec, team_update

    team_update(
        team=Team.objects.get(pk="stuck"),
        fields={
            "members": [
                MemberSpec("plain", True),
                MemberSpec("lead", False),
                MemberSpec("other", True),
            ]
        },
    )

    stuck = teams_with_members(Team.objects.filter(pk="stuck")).get()
    assert unreachable_members(stuck) == ["other"]
