"""The registry's web pages: the agent list with search, filters and paging, and the agent page."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from registry import services
from registry.cards import CLIENT_ROUTING_URI
from tests.factories import card, card_client, extension, make_agent, skill

pytestmark = pytest.mark.django_db

OTHER_EXTENSION = "https://example.com/extensions/audit/v1"


def listed_ids(response) -> list[str]:
    """Agent ids on a list page, in page order."""
    return re.findall(r'<li class="agent" id="agent-([^"]+)"', response.content.decode())


@pytest.fixture
def two_agents():
    """Two agents that differ in every filterable way."""
    weather = make_agent(
        agent_id="weather",
        name="Weather Agent",
        description="Forecasts for any city.",
        capabilities={
            "streaming": True,
            "pushNotifications": True,
            "extensions": [extension(CLIENT_ROUTING_URI)],
        },
        defaultInputModes=["text/plain"],
        defaultOutputModes=["application/json"],
        skills=[skill("forecast", name="Forecast", tags=["weather", "rain"])],
        health="healthy",
    )
    ledger = make_agent(
        agent_id="ledger",
        name="Ledger Agent",
        description="Keeps the books.",
        capabilities={"extensions": [extension(OTHER_EXTENSION)]},
        defaultInputModes=["image/png"],
        defaultOutputModes=["text/csv"],
        skills=[skill("quote", name="Stock quote", tags=["finance"])],
        status="deprecated",
        health="degraded",
    )
    return weather, ledger


def test_registry_page_lists_agents_with_their_card_facts(client, two_agents):
    response = client.get(reverse("registry-page"))

    assert response.status_code == 200
    assert listed_ids(response) == ["ledger", "weather"]
    page = response.content.decode()
    for text in [
        "Weather Agent",
        "Forecasts for any city.",
        "Forecast",
        "rain",
        "Stock quote",
        "finance",
        "JSONRPC",
        OTHER_EXTENSION,
        'class="chip chip-version">1.0<',
        "Deprecated",
        "Health checked",
    ]:
        assert text in page, text
    assert 'href="/agents/weather/"' in page


def test_only_the_client_routing_extension_gets_the_special_badge(client, two_agents):
    page = client.get(reverse("registry-page")).content.decode()

    weather, ledger = page.split('id="agent-weather"')[1], page.split('id="agent-weather"')[0]
    assert f'class="ext ext-routing" title="{CLIENT_ROUTING_URI}"' in weather
    assert "ext-routing" not in ledger
    assert f'class="ext" title="{OTHER_EXTENSION}"' in ledger


def test_health_badges_carry_a_class_per_health(client):
    for health in ["healthy", "degraded", "unhealthy"]:
        make_agent(agent_id=f"agent-{health}", name=f"{health} agent", health=health)
    make_agent(agent_id="agent-new", name="new agent")

    page = client.get(reverse("registry-page")).content.decode()

    for health in ["healthy", "degraded", "unhealthy", "unknown"]:
        assert f'class="health health-{health}"' in page, health
    assert "Health not checked yet" in page


def test_search_words_narrow_the_list(client, two_agents):
    response = client.get(reverse("registry-page"), {"q": "books"})

    assert listed_ids(response) == ["ledger"]
    assert 'value="books"' in response.content.decode()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"tag": "rain"}, ["weather"]),
        ({"tag": "FINANCE"}, ["ledger"]),
        ({"skill": "quote"}, ["ledger"]),
        ({"extension": CLIENT_ROUTING_URI}, ["weather"]),
        ({"extension": OTHER_EXTENSION}, ["ledger"]),
        ({"streaming": "true"}, ["weather"]),
        ({"streaming": "false"}, ["ledger"]),
        ({"pushNotifications": "true"}, ["weather"]),
        ({"inputMode": "image/png"}, ["ledger"]),
        ({"outputMode": "application/json"}, ["weather"]),
        ({"status": "deprecated"}, ["ledger"]),
        ({"status": "active"}, ["weather"]),
        ({"health": "healthy"}, ["weather"]),
        ({"health": "degraded"}, ["ledger"]),
        ({"health": "unhealthy"}, []),
        ({"q": "agent", "tag": "weather", "streaming": "true"}, ["weather"]),
    ],
)
def test_each_filter_narrows_the_list(client, two_agents, params, expected):
    response = client.get(reverse("registry-page"), params)

    assert response.status_code == 200
    assert listed_ids(response) == expected


def test_the_filter_form_shows_the_chosen_values(client, two_agents):
    page = client.get(
        reverse("registry-page"), {"status": "deprecated", "streaming": "false", "tag": "finance"}
    ).content.decode()

    assert '<option value="deprecated" selected>' in page
    assert '<option value="false" selected>No</option>' in page.split('name="streaming"')[1]
    assert 'name="tag" value="finance"' in page


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"status": "sleeping"}, "Status must be one of active, deprecated, disabled"),
        ({"health": "green"}, "Health must be one of unknown, healthy, degraded, unhealthy"),
        ({"streaming": "maybe"}, "Streaming must be true or false"),
        ({"updatedSince": "yesterday"}, "UpdatedSince must be an ISO 8601 time"),
    ],
)
def test_an_invalid_filter_shows_a_friendly_message_not_an_error_page(
    client, two_agents, params, message
):
    response = client.get(reverse("registry-page"), params)

    assert response.status_code == 400
    page = response.content.decode()
    assert "That search could not be run." in page
    assert message in page
    assert listed_ids(response) == []
    assert 'role="search"' in page, "the form stays on the page to fix the search"


def test_an_empty_registry_says_how_to_register_an_agent(client):
    page = client.get(reverse("registry-page")).content.decode()

    assert "No agents yet" in page
    assert "register_agent" in page


def test_a_search_without_matches_offers_to_clear_it(client, two_agents):
    page = client.get(reverse("registry-page"), {"q": "zebra"}).content.decode()

    assert "No agents match" in page
    assert "Clear the search" in page


def test_next_page_link_keeps_the_filters_and_reaches_the_rest(client):
    for number in range(32):
        make_agent(
            agent_id=f"bulk-{number:02d}",
            name=f"Bulk {number}",
            skills=[
                skill("sort", tags=["bulk"]),
            ],
        )
    make_agent(agent_id="bulk-zz-other", name="Other", skills=[skill("sort", tags=["single"])])

    first = client.get(reverse("registry-page"), {"tag": "bulk", "q": ""})

    assert listed_ids(first) == [f"bulk-{number:02d}" for number in range(30)]
    next_link = re.search(r'<a class="button" rel="next" href="\?([^"]+)"', first.content.decode())
    assert next_link is not None
    query = next_link.group(1).replace("&amp;", "&")
    assert "tag=bulk" in query
    assert "q=" not in query, "empty filters are left out of the link"
    second = client.get(f"{reverse('registry-page')}?{query}")
    assert listed_ids(second) == ["bulk-30", "bulk-31"]
    second_page = second.content.decode()
    assert 'rel="next"' not in second_page
    assert 'href="?tag=bulk">First page</a>' in second_page


def test_the_list_page_runs_the_same_queries_for_5_and_40_agents(client):
    for number in range(5):
        make_agent(
            agent_id=f"few-{number:02d}",
            name=f"Few {number}",
            capabilities={"extensions": [extension(CLIENT_ROUTING_URI)]},
        )
    with CaptureQueriesContext(connection) as few:
        assert client.get(reverse("registry-page")).status_code == 200
    for number in range(35):
        make_agent(
            agent_id=f"many-{number:02d}",
            name=f"Many {number}",
            skills=[skill("one"), skill("two"), skill("three")],
        )
    with CaptureQueriesContext(connection) as many:
        response = client.get(reverse("registry-page"), {"q": "conditions"})

    assert len(listed_ids(response)) == 30
    assert len(few.captured_queries) == len(many.captured_queries) == 4


def test_agent_page_shows_every_card_field(client):
    agent = make_agent(
        agent_id="weather",
        name="Weather Agent",
        version="2.4.1",
        provider={"organization": "Meteo Co", "url": "https://meteo.example"},
        documentationUrl="https://meteo.example/docs",
        iconUrl="https://meteo.example/icon.png",
        supportedInterfaces=[
            {
                "url": "http://agent.test/a2a/v1",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            },
            {
                "url": "http://agent.test/a2a/rest",
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "0.3",
            },
        ],
        capabilities={
            "streaming": True,
            "extensions": [
                extension(CLIENT_ROUTING_URI, required=True, params={"maxHops": 4}),
                extension(OTHER_EXTENSION, description="Writes an audit trail."),
            ],
        },
        skills=[
            skill(
                "forecast",
                name="Forecast",
                tags=["weather", "rain"],
                examples=["Rain in Lyon tomorrow?"],
                inputModes=["text/plain"],
                outputModes=["application/json"],
            ),
            skill("alerts", name="Storm alerts", tags=["storm"]),
        ],
    )

    response = client.get(reverse("agent-page", args=["weather"]))

    assert response.status_code == 200
    page = response.content.decode()
    for text in [
        "Weather Agent",
        "version 2.4.1",
        "Meteo Co",
        'href="https://meteo.example/docs"',
        "https://meteo.example/icon.png",
        f'href="{agent.card_url}"',
        # interfaces table
        "<td><code>http://agent.test/a2a/rest</code></td><td>HTTP+JSON</td><td>0.3</td>",
        # skills with tags, examples and modes
        "Forecast",
        "Storm alerts",
        '<span class="tag">rain</span>',
        "“Rain in Lyon tomorrow?”",
        "<code>application/json</code>",
        "(agent default)",
        # extensions, the routing one marked, params as pretty JSON
        "⇄ client routing",
        "chip chip-required",
        "Writes an audit trail.",
        "{\n  &quot;maxHops&quot;: 4\n}",
        # capabilities and the current card
        '<li class="yes">Streaming',
        '<pre class="json">{\n  &quot;name&quot;: &quot;Weather Agent&quot;',
    ]:
        assert text in page, text


def test_agent_page_shows_the_card_history_as_a_coloured_diff(client):
    agent = make_agent(agent_id="weather", version="1.0.0")
    with card_client(card(version="1.1.0", description="Now with pollen counts.")) as http:
        assert services.agent_card_refresh(agent=agent, client=http) is True

    page = client.get(reverse("agent-page", args=["weather"])).content.decode()

    assert page.count('class="history-entry"') == 2
    assert '<span class="diff-removed">-  &quot;version&quot;: &quot;1.0.0&quot;\n</span>' in page
    assert '<span class="diff-added">+  &quot;version&quot;: &quot;1.1.0&quot;\n</span>' in page
    assert 'class="diff-added">+  &quot;description&quot;: &quot;Now with pollen counts.' in page
    assert 'class="diff-hunk">@@' in page
    assert "first card" in page


def test_agent_page_escapes_card_text_and_links_only_web_urls(client):
    make_agent(
        agent_id="sneaky",
        name="<script>alert(1)</script>",
        documentationUrl="javascript:alert(2)",
        skills=[skill("x", name="<img src=x onerror=alert(3)>")],
    )

    page = client.get(reverse("agent-page", args=["sneaky"])).content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page
    assert 'href="javascript:' not in page
    assert '<code class="url">javascript:alert(2)</code>' in page


def test_unknown_agent_gets_a_404_page(client):
    response = client.get(reverse("agent-page", args=["nobody"]))

    assert response.status_code == 404
    assert "No agent “nobody”" in response.content.decode()
    assert "Back to the registry" in response.content.decode()


def test_pages_use_the_stylesheet_and_link_api_docs_and_admin(client):
    page = client.get(reverse("registry-page")).content.decode()

    assert 'href="/static/relay/relay.css"' in page
    assert 'href="/api/docs"' in page
    assert 'href="/admin/"' in page
    assert client.get("/static/relay/relay.css").status_code == 200


@pytest.mark.parametrize("path", ["/", "/agents/weather/"])
def test_a_private_registry_sends_anonymous_people_to_the_login(client, settings, two_agents, path):
    settings.RELAY_REGISTRY_PUBLIC = False

    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={path}"


def test_a_private_registry_still_shows_pages_to_staff(admin_client, settings, two_agents):
    settings.RELAY_REGISTRY_PUBLIC = False

    assert listed_ids(admin_client.get("/")) == ["ledger", "weather"]
    assert admin_client.get("/agents/weather/").status_code == 200


def test_the_card_history_of_an_agent_without_snapshots_is_empty():
    from registry.views import card_history

    assert card_history([]) == []
