"""Teams in the admin's routing section ("Teams, routing and health"), next to probes and
health events, while the "Agent registry" section keeps agents; the pages keep their old names,
their old addresses redirect, and who may use them is decided by the registry's team
permissions, as before the move."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

from registry import teams
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

moving = importlib.import_module("routing.migrations.0003_team_in_routing_admin")


@pytest.fixture
def crew():
    make_agent(agent_id="researcher")
    return teams.team_create(
        team_id="crew", name="Crew", members=["researcher"], default_agent="researcher"
    )


def section_models(response, app_label: str) -> list[str]:
    app = next(app for app in response.context["app_list"] if app["app_label"] == app_label)
    return [model["object_name"] for model in app["models"]]


def test_teams_are_listed_with_routing_and_health_and_agents_stay_in_the_registry(admin_client):
    response = admin_client.get(reverse("admin:index"))

    assert "Team" in section_models(response, "routing")
    assert {"ProbeResult", "HealthEvent"} <= set(section_models(response, "routing"))
    assert "Team" not in section_models(response, "registry")
    assert "Agent" in section_models(response, "registry")
    assert reverse("admin:routing_team_changelist") == "/admin/routing/team/"


def test_the_old_page_names_give_the_new_addresses(crew):
    assert reverse("admin:registry_team_changelist") == "/admin/routing/team/"
    assert reverse("admin:registry_team_change", args=["crew"]) == (
        "/admin/routing/team/crew/change/"
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/registry/team/", "/admin/routing/team/"),
        ("/admin/registry/team/crew/change/", "/admin/routing/team/crew/change/"),
        (
            "/admin/registry/team/?q=cr&enabled__exact=1",
            "/admin/routing/team/?q=cr&enabled__exact=1",
        ),
    ],
)
def test_an_old_team_address_redirects_to_the_same_page_under_routing(admin_client, crew, old, new):
    response = admin_client.get(old)

    assert response.status_code == 308
    assert response["Location"] == new
    assert admin_client.get(new).status_code == 200


def test_a_form_posted_to_an_old_address_keeps_its_method(admin_client, crew):
    response = admin_client.post("/admin/registry/team/crew/delete/", {"post": "yes"})

    assert response.status_code == 308  # a browser posts the same body to the new address
    assert response["Location"] == "/admin/routing/team/crew/delete/"


def test_an_old_team_address_sends_a_visitor_to_the_login(client):
    response = client.get("/admin/registry/team/crew/change/")

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def staff_with(*codenames: str) -> User:
    user = User.objects.create_user("operator", password="x", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="registry", codename__in=codenames)
    )
    return user


def test_a_staff_member_with_the_registrys_team_permissions_still_manages_teams(client, crew):
    client.force_login(staff_with("view_team", "change_team"))

    index = client.get(reverse("admin:index"))
    change = client.get(reverse("admin:routing_team_change", args=["crew"]))

    assert "Team" in section_models(index, "routing")
    assert change.status_code == 200
    assert change.context["has_change_permission"] is True
    assert change.context["has_delete_permission"] is False
    assert client.get(reverse("admin:routing_team_add")).status_code == 403


def test_a_staff_member_without_team_permissions_does_not_see_teams(client, crew):
    client.force_login(staff_with("view_agent"))

    index = client.get(reverse("admin:index"))

    assert all(app["app_label"] != "routing" for app in index.context["app_list"])
    assert client.get(reverse("admin:routing_team_changelist")).status_code == 403


def test_the_history_written_while_teams_were_the_registrys_moves_with_them(admin_client, crew):
    registry_team = ContentType.objects.get_for_model(crew)  # the registry's own content type
    entry = LogEntry.objects.create(
        user=User.objects.get(username="admin"),
        content_type=registry_team,
        object_id="crew",
        object_repr="Crew",
        action_flag=CHANGE,
        change_message="renamed before the move",
    )
    history = reverse("admin:routing_team_history", args=["crew"])
    assert "renamed before the move" not in admin_client.get(history).content.decode()

    moving.forwards(apps, None)

    entry.refresh_from_db()
    assert (entry.content_type.app_label, entry.content_type.model) == ("routing", "team")
    assert "renamed before the move" in admin_client.get(history).content.decode()

    moving.backwards(apps, None)

    entry.refresh_from_db()
    assert entry.content_type == registry_team
