"""The team, skills and agent "how to call it" pages and the admin's team warning and task page
in a real headless Chromium at 1280 px, served by pytest-django's live server. Each test keeps a
full-page screenshot under var/screenshots/ and checks that the page is no wider than the
window."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.cards import CLIENT_ROUTING_URI
from registry.teams import MemberSpec, team_create
from tasks_app import services as task_services
from tests.browser import chromium_page, needs_chromium, overflow, screenshot
from tests.factories import extension, make_agent, make_task, skill

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]


@pytest.fixture
def page(monkeypatch):
    with chromium_page(monkeypatch) as opened:
        yield opened


PASSWORD = "browser-test-password-1"


@pytest.fixture
def teams():
    make_agent(
        agent_id="triage",
        name="Triage",
        description="Reads each request and picks who answers.",
        capabilities={"extensions": [extension(CLIENT_ROUTING_URI)], "streaming": True},
        skills=[
            skill("triage", name="Triage", tags=["routing"], examples=["Who should answer this?"])
        ],
        health="healthy",
    )
    make_agent(
        agent_id="researcher",
        name="Researcher",
        description="Finds facts.",
        capabilities={"extensions": [extension(CLIENT_ROUTING_URI)]},
        skills=[
            skill(
                "research",
                name="Research",
                tags=["facts", "weather"],
                description="Looks things up, the weather too.",
            )
        ],
        health="degraded",
    )
    make_agent(
        agent_id="writer",
        name="Writer",
        description="Writes reports.",
        skills=[skill("write", name="Write a report", tags=["reports"])],
        health="unhealthy",
    )
    team_create(
        team_id="desk",
        name="Front desk",
        description="Answers anything, in turn.",
        members=["triage", "researcher", MemberSpec("writer", False)],
        default_agent="triage",
    )
    team_create(
        team_id="stuck", name="Stuck team", members=["writer", "researcher"], default_agent="writer"
    )


def log_in(page, live_server) -> None:
    get_user_model().objects.create_superuser("admin", "admin@example.org", PASSWORD)
    page.goto(live_server.url + "/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")


def test_team_list_and_team_page(page, live_server, teams):
    page.goto(live_server.url + "/teams/")
    assert page.title() == "Teams · Brass Relay"
    assert page.locator("li.team").count() == 2
    assert page.locator("#team-stuck .chip-warning").inner_text() == (
        "only the default agent is called"
    )
    assert overflow(page) == 0
    screenshot(page, "relay-teams")

    page.click("#team-desk h2 a")
    page.wait_for_url("**/teams/desk/")
    assert page.locator("h1").inner_text() == "Front desk"
    assert page.locator("#members tbody tr").count() == 3
    assert "default agent" in page.locator("#member-triage").inner_text()
    assert page.locator("#call-url").inner_text() == live_server.url + "/a2a/teams/desk/"
    assert page.locator("#snippet-python").is_visible()
    assert overflow(page) == 0
    screenshot(page, "relay-team")


def test_a_stuck_team_shows_its_warning(page, live_server, teams):
    page.goto(live_server.url + "/teams/stuck/")

    warning = page.locator("#routing-warning")
    assert warning.is_visible()
    assert "researcher will never be called" in warning.inner_text()


def test_copy_button_copies_the_snippet(page, live_server, teams):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(live_server.url + "/agents/triage/")

    page.click("button[data-copy=snippet-curl]")

    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("#snippet-curl").inner_text()
    assert copied.startswith(f"curl -s -X POST {live_server.url}/a2a/agents/triage/")
    assert overflow(page) == 0
    screenshot(page, "relay-agent-call")


def test_skills_page_search(page, live_server, teams):
    page.goto(live_server.url + "/skills/")
    assert page.locator("li.skill-card").count() == 3

    page.fill("#q", "weather")
    page.click("button:has-text('Search')")
    page.wait_for_url("**/skills/?q=weather*")

    assert page.locator("li.skill-card").count() == 1
    assert page.locator("#skill-researcher-research h2").inner_text() == "Research"
    assert overflow(page) == 0
    screenshot(page, "relay-skills")


def test_admin_team_warning_and_lists_fit(page, live_server, teams):
    log_in(page, live_server)
    assert "Brass Relay" in page.locator("#site-name").inner_text()
    screenshot(page, "admin-index")

    page.goto(live_server.url + "/admin/routing/team/")
    assert page.locator("text=⚠ only writer is called").count() == 1
    assert overflow(page) == 0
    screenshot(page, "admin-teams")

    page.goto(live_server.url + "/admin/routing/team/stuck/change/")
    assert page.locator("#team-routing-warning").is_visible()
    assert "researcher will never be called" in page.locator("#team-routing-warning").inner_text()
    screenshot(page, "admin-team-warning")

    for name, path in [
        ("admin-agents", "/admin/registry/agent/"),
        ("admin-tasks", "/admin/tasks_app/task/"),
        ("admin-probes", "/admin/routing/proberesult/"),
        ("admin-keys", "/admin/registry/apikey/"),
    ]:
        page.goto(live_server.url + path)
        assert overflow(page) == 0, f"{path} is wider than 1280 px"
        screenshot(page, name)


def test_admin_task_page_is_short_and_readable(page, live_server, teams):
    from registry.models import Agent

    task = make_task(Agent.objects.get(pk="writer"), state="working")
    for number in range(20):
        task_services.task_record(
            task=task,
            event={
                "artifactUpdate": {
                    "taskId": task.pk,
                    "contextId": task.context_id,
                    "append": number > 0,
                    "artifact": {
                        "artifactId": "story",
                        "name": "story",
                        "parts": [{"text": f"Chapter {number}. " * 20}],
                    },
                }
            },
        )
    task_services.task_record(
        task=task, event=task_services.status_event(task, "completed", "Here is the story.")
    )
    log_in(page, live_server)

    page.goto(live_server.url + f"/admin/tasks_app/task/{task.pk}/change/")

    assert page.locator(".task-state").first.inner_text() == "completed"
    task.refresh_from_db()
    assert page.locator("table.task-timeline tbody tr").count() == task.last_sequence == 22
    assert (
        not page.locator("text=Stored JSON")
        .locator("xpath=ancestor::details")
        .get_attribute("open")
    )
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 4000, f"the task page is {height} px tall"
    assert overflow(page) == 0
    screenshot(page, "admin-task")
    page.click("text=Open the conversation page and its diagram")
    page.wait_for_url(f"**/tasks/{task.pk}/")
