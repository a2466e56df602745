"""The team pages (``/teams/``, ``/teams/{id}/``), the skills page (``/skills/``) and the "how to
call it" panel of the agent and team pages: content, escaping, who may read them, query
counts, and 404 for unknown ids."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry.cards import CLIENT_ROUTING_URI
from registry.teams import MemberSpec, team_create
from tests.factories import extension, make_agent, make_task, skill

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>'


def router_agent(agent_id: str, **overrides):
    return make_agent(
        agent_id=agent_id,
        name=overrides.pop("name", agent_id.title()),
        capabilities={"extensions": [extension(CLIENT_ROUTING_URI)]},
        **overrides,
    )


@pytest.fixture
def crew():
    """A team whose default agent routes (lead), with a healthy member and one disabled in the
    team; and a team whose default agent cannot route."""
    router_agent("lead", health="healthy", skills=[skill("plan", name="Plan", tags=["plans"])])
    make_agent(
        agent_id="writer",
        name="Writer",
        health="unhealthy",
        skills=[skill("write", name="Write reports", tags=["reports"])],
    )
    make_agent(agent_id="critic", name="Critic")
    team_create(
        team_id="crew",
        name="The Crew",
        description="Plans and writes.",
        members=["lead", "writer", MemberSpec("critic", False)],
        default_agent="lead",
    )
    team_create(team_id="stuck", name="Stuck", members=["writer", "lead"], default_agent="writer")


def text_of(response) -> str:
    return response.content.decode()


def snippet(response, name: str) -> str:
    found = re.search(
        rf'<pre class="code" id="snippet-{name}">(.*?)</pre>', text_of(response), re.S
    )
    assert found, f"no {name} snippet on the page"
    return html.unescape(found.group(1))


# --- the team list ------------------------------------------------------------------------


def test_team_list_shows_each_team_with_its_members_health_and_routing(client, crew):
    response = client.get(reverse("team-list-page"))

    assert response.status_code == 200
    page = text_of(response)
    assert re.findall(r'<li class="agent team" id="team-([^"]+)"', page) == ["crew", "stuck"]
    crew_item = page[page.index('id="team-crew"') : page.index('id="team-stuck"')]
    assert "The Crew" in crew_item and "Plans and writes." in crew_item
    assert 'href="/agents/lead/"' in crew_item
    assert '<span class="health health-healthy"' in crew_item
    assert 'lead <span title="declares client routing">⇄</span>' in crew_item
    assert 'class="member member-off"' in crew_item  # critic, disabled in the team
    assert "only the default agent is called" not in crew_item
    stuck_item = page[page.index('id="team-stuck"') :]
    assert "only the default agent is called" in stuck_item


def test_team_list_says_when_there_are_no_teams(client):
    response = client.get(reverse("team-list-page"))

    assert response.status_code == 200
    assert "No teams yet" in text_of(response)


def test_team_list_with_a_bad_cursor_says_so_with_400(client, crew):
    response = client.get(reverse("team-list-page"), {"cursor": "not-a-cursor"})

    assert response.status_code == 400
    assert 'class="notice notice-error"' in text_of(response)


def test_team_list_costs_the_same_queries_with_more_teams_and_members(client, crew):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("team-list-page")).status_code == 200
        return len(captured)

    before = queries()
    for number in range(6):
        make_agent(agent_id=f"extra-{number}", name=f"Extra {number}")
        team_create(
            team_id=f"team-{number}",
            name=f"Team {number}",
            members=["lead", f"extra-{number}", "writer"],
            default_agent="lead",
        )

    assert queries() == before <= 4


def test_team_list_pages_with_a_cursor(client, crew):
    make_agent(agent_id="solo", name="Solo")
    for number in range(30):
        team_create(
            team_id=f"t-{number:02d}", name=f"T {number}", members=["solo"], default_agent="solo"
        )

    first = client.get(reverse("team-list-page"))
    next_link = re.search(r'<a class="button" rel="next" href="\?([^"]+)"', text_of(first))
    second = client.get(reverse("team-list-page") + "?" + html.unescape(next_link.group(1)))

    ids = re.findall(r'id="team-([^"]+)"', text_of(second))
    assert ids == ["t-28", "t-29"] or ids[-1] == "t-29"
    assert "First page" in text_of(second)


# --- one team -----------------------------------------------------------------------------


def test_team_page_shows_members_default_agent_card_and_how_to_call(client, crew):
    response = client.get(reverse("team-page", args=["crew"]))

    assert response.status_code == 200
    page = text_of(response)
    assert "<h1>The Crew</h1>" in page
    members = re.findall(r'<tr id="member-([^"]+)"', page)
    assert members == ["lead", "writer", "critic"]
    lead_row = page[page.index('id="member-lead"') : page.index('id="member-writer"')]
    assert "default agent" in lead_row and "⇄ client routing" in lead_row
    assert "health-healthy" in lead_row
    writer_row = page[page.index('id="member-writer"') : page.index('id="member-critic"')]
    assert "health-unhealthy" in writer_row and "no: answers go back" in writer_row
    assert 'class="member-off"' in page[page.index('id="member-critic"') - 40 :]
    assert "routing-warning" not in page
    # The relay's card of the team: the members' skills and the team's own URL.
    assert "&quot;url&quot;: &quot;http://testserver/a2a/teams/crew/&quot;" in page
    assert "Write reports" in page
    assert '<code class="url" id="call-url">http://testserver/a2a/teams/crew/</code>' in page
    assert 'href="http://testserver/a2a/teams/crew/.well-known/agent-card.json"' in page
    assert '<code class="url" id="call-agui-url">http://testserver/agui/teams/crew</code>' in page


def test_team_page_warns_when_the_default_agent_cannot_route(client, crew):
    response = client.get(reverse("team-page", args=["stuck"]))

    warning = re.search(
        r'<p class="notice notice-warning" id="routing-warning"[^>]*>(.*?)</p>',
        text_of(response),
        re.S,
    )
    assert warning, "no routing warning on the page"
    assert "“writer” does not declare the client-routing extension" in html.unescape(
        warning.group(1)
    )
    assert "lead will never be called" in warning.group(1)


def test_team_snippets_call_the_team_at_the_relay_with_a_bearer_key(client, crew):
    response = client.get(reverse("team-page", args=["crew"]))

    curl = snippet(response, "curl")
    assert curl.startswith("curl -s -X POST http://testserver/a2a/teams/crew/ \\")
    assert '-H "Authorization: Bearer $RELAY_API_KEY"' in curl
    assert '"method": "SendMessage"' in curl
    python = snippet(response, "python")
    assert 'URL = "http://testserver/a2a/teams/crew/"' in python
    assert "create_client(URL, ClientConfig(httpx_client=http, streaming=False))" in python
    compile(python, "snippet.py", "exec")
    javascript = snippet(response, "javascript")
    assert 'createFromUrl("http://testserver/a2a/teams/crew/")' in javascript
    assert "Authorization: `Bearer ${process.env.RELAY_API_KEY}`" in javascript


def test_snippets_use_the_public_url_when_one_is_set(client, crew, settings):
    settings.RELAY_PUBLIC_URL = "https://relay.example.org/"

    response = client.get(reverse("agent-page", args=["lead"]))

    assert 'URL = "https://relay.example.org/a2a/agents/lead/"' in snippet(response, "python")
    assert "curl -s -X POST https://relay.example.org/a2a/agents/lead/" in snippet(response, "curl")


def test_a_disabled_team_says_calls_answer_404_and_shows_no_snippets(client, crew):
    make_agent(agent_id="idle", name="Idle")
    team_create(team_id="off", name="Off", members=["idle"], default_agent="idle", enabled=False)

    response = client.get(reverse("team-page", args=["off"]))

    assert response.status_code == 200
    assert "This team is disabled" in text_of(response)
    assert 'id="snippet-curl"' not in text_of(response)
    assert "A disabled team publishes no card." in text_of(response)


def test_unknown_team_is_a_404_page(client, crew):
    response = client.get(reverse("team-page", args=["nobody"]))

    assert response.status_code == 404
    assert "No team “nobody”" in text_of(response)


def test_unknown_team_id_is_escaped_on_the_404_page(client):
    response = client.get("/teams/%3Cb%20onclick=x%3Ebold/")

    assert response.status_code == 404
    assert "<b onclick=x>" not in text_of(response)
    assert "No team “&lt;b onclick=x&gt;bold”" in text_of(response)


def test_team_page_escapes_names_and_descriptions(client, crew):
    router_agent(
        "evil",
        name=HOSTILE,
        description=HOSTILE,
        skills=[skill("x", name=HOSTILE, description=HOSTILE, tags=[HOSTILE])],
    )
    team_create(
        team_id="evil-team",
        name=HOSTILE,
        description=HOSTILE,
        members=["evil"],
        default_agent="evil",
    )

    for url in (reverse("team-page", args=["evil-team"]), reverse("team-list-page")):
        page = text_of(client.get(url))
        assert HOSTILE not in page
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_conversations_are_shown_to_staff_only(client, admin_client, crew):
    lead = make_agent(agent_id="talker", name="Talker")
    task = make_task(lead, state="completed", target_kind="team")
    # A team task names the team as its target.
    type(task).objects.filter(pk=task.pk).update(target_id="crew")

    anonymous = text_of(client.get(reverse("team-page", args=["crew"])))
    staff = text_of(admin_client.get(reverse("team-page", args=["crew"])))

    assert 'id="conversations"' not in anonymous and task.pk not in anonymous
    assert 'id="conversations"' in staff
    assert f'href="/tasks/{task.pk}/"' in staff


def test_a_logged_in_user_who_is_not_staff_sees_no_conversations(client, crew):
    user = get_user_model().objects.create_user("reader", password="pw-reader-1")
    client.force_login(user)

    page = text_of(client.get(reverse("team-page", args=["crew"])))

    assert 'id="conversations"' not in page


def test_team_page_costs_the_same_queries_with_more_members_and_conversations(admin_client, crew):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(reverse("team-page", args=["crew"])).status_code == 200
        return len(captured)

    first = make_task(make_agent(agent_id="first", name="First"), target_kind="team")
    type(first).objects.filter(pk=first.pk).update(target_id="crew")
    queries()  # fills the per-process caches (one query on a cold start), then compare
    before = queries()
    members = ["lead", "writer"]
    for number in range(5):
        agent = make_agent(agent_id=f"more-{number}", name=f"More {number}")
        members.append(agent.pk)
        task = make_task(agent, state="completed", target_kind="team")
        type(task).objects.filter(pk=task.pk).update(target_id="crew")
    from registry.models import Team
    from registry.teams import team_update

    team_update(team=Team.objects.get(pk="crew"), fields={"members": members})

    assert queries() == before


@pytest.mark.parametrize("name", ["team-list-page", "skills-page"])
def test_pages_send_anyone_to_the_login_when_the_registry_is_private(client, settings, name):
    settings.RELAY_REGISTRY_PUBLIC = False

    response = client.get(reverse(name))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_private_registry_team_page_lets_staff_in(admin_client, settings, crew):
    settings.RELAY_REGISTRY_PUBLIC = False

    assert admin_client.get(reverse("team-page", args=["crew"])).status_code == 200


def test_private_registry_team_page_sends_anonymous_to_login(client, settings, crew):
    settings.RELAY_REGISTRY_PUBLIC = False

    assert client.get(reverse("team-page", args=["crew"])).status_code == 302


# --- the agent page's call panel ----------------------------------------------------------


def test_agent_page_shows_the_relay_url_and_snippets(client, crew):
    response = client.get(reverse("agent-page", args=["writer"]))

    page = text_of(response)
    assert '<code class="url" id="call-url">http://testserver/a2a/agents/writer/</code>' in page
    assert "curl -s -X POST http://testserver/a2a/agents/writer/" in snippet(response, "curl")
    assert 'URL = "http://testserver/a2a/agents/writer/"' in snippet(response, "python")
    assert 'url: "http://testserver/agui/agents/writer"' in snippet(response, "agui")
    assert "Authorization: Bearer &lt;key&gt;" in page


def test_agent_page_of_a_disabled_agent_says_calls_answer_404(client, crew):
    make_agent(agent_id="gone", name="Gone", status="disabled")

    page = text_of(client.get(reverse("agent-page", args=["gone"])))

    assert "This agent is disabled: the relay answers calls to it with 404" in page


# --- skills -------------------------------------------------------------------------------


def skill_ids(response) -> list[str]:
    return re.findall(r'<li class="skill-card" id="skill-([^"]+)"', text_of(response))


def test_skills_page_lists_every_skill_without_a_query(client, crew):
    response = client.get(reverse("skills-page"))

    assert response.status_code == 200
    # Healthier agents first: lead is healthy, critic unknown, writer unhealthy.
    assert skill_ids(response) == ["lead-plan", "critic-forecast", "writer-write"]
    assert 'Offered by <a href="/agents/writer/">Writer</a>' in text_of(response)


def test_skills_page_finds_skills_by_meaning_and_tag(client, crew):
    by_meaning = client.get(reverse("skills-page"), {"q": "put together a written summary"})
    by_tag = client.get(reverse("skills-page"), {"tag": "plans"})

    assert skill_ids(by_meaning)[0] == "writer-write"
    assert 'id="search-mode"' not in text_of(by_meaning)
    assert skill_ids(by_tag) == ["lead-plan"]


def test_skills_page_finds_skills_by_words_without_the_model(client, crew, settings):
    from registry import embeddings

    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    try:
        by_words = client.get(reverse("skills-page"), {"q": "reports"})
        nothing = client.get(reverse("skills-page"), {"q": "juggling"})
        by_tag = client.get(reverse("skills-page"), {"tag": "plans"})
    finally:
        embeddings.reset()
    assert "Searched by words only" in text_of(by_words)
    assert skill_ids(by_words) == ["writer-write"]
    assert re.search(r"score \d\.\d\d", text_of(by_words))  # ranked by BM25
    assert skill_ids(by_tag) == ["lead-plan"]
    assert skill_ids(nothing) == []
    assert "No skill matches" in text_of(nothing)
    assert 'value="juggling"' in text_of(nothing)


def test_skills_page_leaves_out_disabled_agents(client, crew):
    make_agent(
        agent_id="off-agent",
        name="Off",
        status="disabled",
        skills=[skill("write", name="Write reports")],
    )

    found = skill_ids(client.get(reverse("skills-page"), {"q": "write"}))
    assert found[0] == "writer-write"
    assert not any(found_id.startswith("off-agent") for found_id in found)


def test_skills_page_escapes_skills_and_the_query(client, crew):
    make_agent(
        agent_id="evil",
        name=HOSTILE,
        skills=[skill("x", name=HOSTILE, description=HOSTILE, tags=[HOSTILE], examples=[HOSTILE])],
    )

    page = text_of(client.get(reverse("skills-page"), {"q": HOSTILE}))
    everything = text_of(client.get(reverse("skills-page")))

    assert HOSTILE not in page and HOSTILE not in everything
    assert "&lt;script&gt;" in everything


def test_skills_page_runs_one_query_whatever_the_number_of_skills(client, crew):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("skills-page")).status_code == 200
        return len(captured)

    before = queries()
    make_agent(
        agent_id="many",
        name="Many",
        skills=[skill(f"s-{number}", name=f"Skill {number}") for number in range(12)],
    )

    assert queries() == before
    assert before <= 2
