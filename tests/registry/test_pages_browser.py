"""The registry pages in a real headless Chromium (Debian's /usr/bin/chromium), served by
pytest-django's live server: search, click through to an agent, follow the pager."""

from __future__ import annotations

import pytest

from registry import services
from tests.browser import chromium_page, needs_chromium, screenshot
from tests.factories import card, card_client, extension, make_agent, skill

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
]


@pytest.fixture
def page(monkeypatch):
    with chromium_page(monkeypatch) as opened:
        yield opened


@pytest.fixture
def registry():
    """A weather agent whose card changed once (so it has a diff), an agent that declares the
    client-routing extension, and 31 more so the list has a second page."""
    weather = make_agent(
        agent_id="weather",
        name="Weather Agent",
        description="Forecasts, rain radar and storm alerts for any city.",
        capabilities={"streaming": True},
        skills=[
            skill(
                "forecast",
                name="Forecast",
                tags=["weather", "rain"],
                examples=["Will it rain in Lyon tomorrow?"],
            ),
            skill("storm-alerts", name="Storm alerts", tags=["weather", "alerts"]),
        ],
        health="healthy",
    )
    changed = card(
        name="Weather Agent",
        description="Forecasts, rain radar, storm alerts and pollen counts for any city.",
        version="1.1.0",
        capabilities={"streaming": True, "pushNotifications": True},
        skills=[
            skill(
                "forecast",
                name="Forecast",
                tags=["weather", "rain"],
                examples=["Will it rain in Lyon tomorrow?"],
            ),
            skill("storm-alerts", name="Storm alerts", tags=["weather", "alerts"]),
            skill("pollen", name="Pollen count", tags=["weather", "allergy"]),
        ],
    )
    with card_client(changed) as client:
        services.agent_card_refresh(agent=weather, client=client)
    make_agent(
        agent_id="concierge",
        name="Concierge",
        description="Routes requests to the right teammate.",
        capabilities={
            "extensions": [
                extension(
                    "https://ranch.woi.dev/extensions/client-routing/v1",
                    required=True,
                    params={"team": "front-desk"},
                ),
            ]
        },
        skills=[skill("triage", name="Triage", tags=["routing"])],
        health="degraded",
    )
    for number in range(31):
        make_agent(
            agent_id=f"worker-{number:02d}",
            name=f"Worker {number:02d}",
            description="Sorts and files documents.",
            skills=[skill("sort", name="Sort documents", tags=["files"])],
            health=["healthy", "unhealthy", "unknown"][number % 3] if number % 4 else None,
        )


def listed(page) -> list[str]:
    return page.locator("li.agent").evaluate_all("items => items.map(item => item.id.slice(6))")


def test_search_from_the_registry_page_narrows_the_list(page, live_server, registry):
    page.goto(live_server.url + "/")
    assert page.title() == "Registry · Brass Relay"
    assert len(listed(page)) == 30
    screenshot(page, "relay-registry")

    page.fill("#q", "pollen")
    page.click("button:has-text('Search')")

    page.wait_for_url("**/?q=pollen*")
    assert listed(page) == ["weather"]
    assert page.locator("#agent-weather .health").get_attribute("class") == "health health-healthy"
    assert page.input_value("#q") == "pollen"


def test_filters_and_a_bad_filter_value(page, live_server, registry):
    page.goto(live_server.url + "/")
    page.fill("#f-extension", "https://ranch.woi.dev/extensions/client-routing/v1")
    page.click("button:has-text('Apply filters')")
    page.wait_for_load_state()

    assert listed(page) == ["concierge"]
    assert page.locator("#agent-concierge .ext-routing").inner_text() == "⇄ client routing"

    response = page.goto(live_server.url + "/?health=purple")
    assert response.status == 400
    assert "Health must be one of" in page.locator(".notice-error").inner_text()


def test_clicking_an_agent_shows_its_skills_and_card_history(page, live_server, registry):
    page.goto(live_server.url + "/?q=weather")
    page.click("#agent-weather h2 a")

    page.wait_for_url("**/agents/weather/")
    assert page.locator("h1").inner_text() == "Weather Agent"
    skills = [
        " ".join(text.split())
        for text in page.locator("#skills article.skill h3").all_inner_texts()
    ]
    assert skills == ["Forecast forecast", "Storm alerts storm-alerts", "Pollen count pollen"]
    assert page.locator(".history-entry").count() == 2
    added = [
        line.rstrip("\n")
        for line in page.locator(".history-entry").first.locator(".diff-added").all_inner_texts()
    ]
    assert '+  "version": "1.1.0"' in added
    assert page.locator(".history-entry").first.locator(".diff-added").first.is_visible()
    removed = [line.rstrip("\n") for line in page.locator(".diff-removed").all_inner_texts()]
    assert '-  "version": "1.0.0"' in removed
    colour = page.locator(".diff-added").first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour == "rgb(230, 246, 234)"
    screenshot(page, "relay-agent")


def test_next_page_link_carries_the_filters(page, live_server, registry):
    page.goto(live_server.url + "/?tag=files")
    assert listed(page) == [f"worker-{number:02d}" for number in range(30)]

    page.click("a[rel=next]")
    page.wait_for_url("**/?*cursor=*")

    assert "tag=files" in page.url
    assert listed(page) == ["worker-30"]
    assert page.locator("a[rel=next]").count() == 0
    screenshot(page, "relay-registry-page2")
    page.click("text=First page")
    page.wait_for_url(lambda url: "cursor=" not in url)
    assert listed(page)[0] == "worker-00"


def test_unknown_agent_shows_the_not_found_page(page, live_server, registry):
    response = page.goto(live_server.url + "/agents/nobody/")

    assert response.status == 404
    assert page.locator("h1").inner_text() == "No agent “nobody”"
    page.click("text=Back to the registry")
    page.wait_for_load_state()
    assert len(listed(page)) == 30
