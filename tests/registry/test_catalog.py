"""The AI Catalog: the relay publishes one at /.well-known/ai-catalog.json, links it from its
pages and cards, and imports other hosts' catalogs (real HTTP servers on 127.0.0.1)."""

from __future__ import annotations

import json
import re
import time

import jsonschema
import pytest
from django.core.management import call_command

from registry import catalog, services, teams
from registry.models import Agent
from tests.cardservers import card_json, card_site, oversized_card, status, trickling_server
from tests.factories import card, make_agent, skill

pytestmark = pytest.mark.django_db

# The entry rules of the AI Catalog / ARD, written out independently of registry.catalog:
# v0.9.0 (specVersion "0.9") names the artifact's kind ``type``; earlier drafts ``mediaType``.
ENTRY_SCHEMA = {
    "type": "object",
    "required": ["identifier", "displayName", "type", "mediaType"],
    "properties": {
        "identifier": {
            "type": "string",
            "pattern": r"^urn:air:[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[^:\s]+){2,}$",
        },
        "displayName": {"type": "string", "minLength": 1},
        "type": {"const": "application/a2a-agent-card+json"},
        "mediaType": {"const": "application/a2a-agent-card+json"},
        "url": {"type": "string", "format": "uri"},
        "description": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "capabilities": {"type": "array", "items": {"type": "string"}},
        "representativeQueries": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": 5,
        },
        "updatedAt": {"type": "string", "format": "date-time"},
    },
    "oneOf": [{"required": ["url"]}, {"required": ["data"]}],
}
CATALOG_SCHEMA = {
    "type": "object",
    "required": ["specVersion", "entries"],
    "properties": {
        "specVersion": {"const": "0.9"},
        "host": {"type": "object", "required": ["displayName"]},
        "entries": {"type": "array", "items": ENTRY_SCHEMA},
    },
}


def published(client, **headers) -> dict:
    answer = client.get("/.well-known/ai-catalog.json", **headers)
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/ai-catalog+json"
    return json.loads(answer.content)


def test_the_catalog_lists_agents_and_teams_with_valid_entries(client, settings):
    settings.RELAY_CATALOG_PUBLISHER = "relay.example.com"
    weather = make_agent(
        agent_id="weather",
        skills=[
            skill("forecast", tags=["weather"], examples=["rain in Oslo?", "wind in Bergen?"]),
            skill("alerts", tags=["weather", "alerts"], examples=["storms near me?"]),
        ],
    )
    make_agent(agent_id="old", name="Old", status="disabled")
    teams.team_create(team_id="crew", name="Crew", members=["weather"], default_agent="weather")
    document = published(client)
    jsonschema.validate(document, CATALOG_SCHEMA, format_checker=jsonschema.FormatChecker())
    for entry in document["entries"]:
        assert catalog.entry_problems(entry) == []
    by_id = {entry["identifier"]: entry for entry in document["entries"]}
    assert set(by_id) == {
        "urn:air:relay.example.com:agent:weather",
        "urn:air:relay.example.com:team:crew",
    }
    agent_entry = by_id["urn:air:relay.example.com:agent:weather"]
    assert agent_entry["url"] == "http://testserver/a2a/agents/weather/.well-known/agent-card.json"
    assert agent_entry["displayName"] == weather.name
    assert agent_entry["tags"] == ["weather", "alerts"]
    assert agent_entry["capabilities"] == ["forecast", "alerts"]
    assert agent_entry["representativeQueries"] == [
        "rain in Oslo?",
        "wind in Bergen?",
        "storms near me?",
    ]
    assert "data" not in agent_entry
    team_entry = by_id["urn:air:relay.example.com:team:crew"]
    assert team_entry["url"] == "http://testserver/a2a/teams/crew/.well-known/agent-card.json"
    # Every url in the catalog is a card the relay really serves.
    for entry in document["entries"]:
        card_answer = client.get(entry["url"].removeprefix("http://testserver"))
        assert card_answer.status_code == 200, entry["url"]
    assert document["host"]["identifier"] == "relay.example.com"


def test_the_publisher_is_the_relays_host_without_the_port(client, settings):
    settings.RELAY_PUBLIC_URL = "https://relay.example.org:8443"
    make_agent(agent_id="weather")
    [entry] = published(client)["entries"]
    assert entry["identifier"] == "urn:air:relay.example.org:agent:weather"
    assert entry["url"].startswith("https://relay.example.org:8443/a2a/agents/weather/")


def test_the_entry_rules_refuse_what_the_spec_refuses():
    good = {"identifier": "urn:air:a.example:agent:x", "type": "t", "url": "https://a.example/c"}
    assert catalog.entry_problems(good) == []
    assert "exactly one of url and data" in catalog.entry_problems({**good, "data": {}})[0]
    no_content = {k: v for k, v in good.items() if k != "url"}
    assert "exactly one of url and data" in catalog.entry_problems(no_content)[0]
    assert "not urn:air" in catalog.entry_problems({**good, "identifier": "urn:air:a.example"})[0]
    assert "identifier is required" in catalog.entry_problems({**good, "identifier": ""})[0]
    assert "tags must be a list" in catalog.entry_problems({**good, "tags": "x"})[0]


def test_pages_and_cards_link_to_the_catalog(client):
    make_agent(agent_id="weather")
    page = client.get("/agents/weather/")
    assert page.status_code == 200
    assert 'rel="ai-catalog"' in page["Link"]
    assert re.search(r'<link rel="ai-catalog"[^>]*href="/.well-known/ai-catalog.json"', page.text)
    agent_card = client.get("/a2a/agents/weather/.well-known/agent-card.json")
    assert agent_card["Link"] == (
        '<http://testserver/.well-known/ai-catalog.json>; rel="ai-catalog", '
        '<http://testserver/.well-known/ard.json>; rel="ard"'
    )
    assert 'rel="ai-catalog"' in client.get("/.well-known/agent-card.json")["Link"]
    assert re.search(r'<link rel="ard"[^>]*href="/.well-known/ard.json"', page.text)
    assert published(client) == json.loads(client.get("/.well-known/ard.json").content)


def test_the_catalog_follows_the_registrys_read_rule(client, settings, api):
    settings.RELAY_REGISTRY_PUBLIC = False
    assert client.get("/.well-known/ai-catalog.json").status_code == 401
    assert api.get("/.well-known/ai-catalog.json").status_code == 200


# --- Import -----------------------------------------------------------------------------------


def a2a_entry(url: str, name: str, **extra) -> dict:
    return {
        "identifier": f"urn:air:agents.example:agent:{name}",
        "displayName": name,
        "type": "application/a2a-agent-card+json",
        "url": url,
        **extra,
    }


@pytest.fixture
def host(allow_private_urls):
    """A host publishing two agent cards and a catalog listing them with entries the relay
    must refuse."""
    with card_site({}) as (site, url):
        site.routes["/agents/alpha.json"] = card_json(card(name="Alpha"))
        site.routes["/agents/beta.json"] = card_json(card(name="Beta"))
        site.routes["/.well-known/ai-catalog.json"] = card_json(
            {
                "specVersion": "1.0",
                "host": {"displayName": "Agents Example"},
                "entries": [
                    a2a_entry(f"{url}/agents/alpha.json", "alpha"),
                    a2a_entry(f"{url}/agents/beta.json", "beta"),
                    {
                        "identifier": "urn:air:agents.example:mcp:tools",
                        "type": "application/mcp-server-card+json",
                        "url": f"{url}/mcp.json",
                    },
                    {
                        "identifier": "urn:air:agents.example:agent:inline",
                        "type": "application/a2a-agent-card+json",
                        "data": card(name="Inline"),
                    },
                    {"identifier": "urn:air:agents.example:agent:typeless", "url": f"{url}/x"},
                    a2a_entry(f"{url}/agents/missing.json", "missing"),
                    a2a_entry(
                        f"{url}/agents/alpha.json",
                        "mirrored",
                        extensions={"brassRelay": {"origin": "https://other.example"}},
                    ),
                ],
            }
        )
        yield site, url


def codes(report) -> dict[str, str]:
    return {row["identifier"].rsplit(":", 1)[-1]: row["code"] for row in report.refused}


def test_importing_a_catalog_registers_its_a2a_agents_and_says_why_it_refused_others(host):
    _site, url = host
    report = catalog.catalog_import(url=url, actor="system")
    # ARD's path first; this host has only the AI Catalog's.
    assert report.catalog_url == f"{url}/.well-known/ai-catalog.json"
    assert _site.hits[:2] == ["/.well-known/ard.json", "/.well-known/ai-catalog.json"]
    assert [row["agentId"] for row in report.added] == ["alpha", "beta"]
    assert codes(report) == {
        "tools": "not_a2a",
        "inline": "inline_card",
        "typeless": "invalid_entry",
        "missing": "card_not_found",
        "mirrored": "mirror",
    }
    alpha = Agent.objects.get(pk="alpha")
    assert alpha.card_url == f"{url}/agents/alpha.json"
    assert alpha.name == "Alpha"


def test_importing_again_changes_nothing_but_what_changed(host):
    site, url = host
    catalog.catalog_import(url=url, actor="system")
    again = catalog.catalog_import(url=url, actor="system")
    assert again.added == []
    assert [row["agentId"] for row in again.unchanged] == ["alpha", "beta"]
    site.routes["/agents/beta.json"] = card_json(card(name="Beta", version="2.0.0"))
    third = catalog.catalog_import(url=url, actor="system")
    assert [row["agentId"] for row in third.updated] == ["beta"]
    assert Agent.objects.count() == 2
    assert Agent.objects.get(pk="beta").version == "2.0.0"


def test_a_catalog_over_the_entry_limit_has_the_rest_refused(host, settings):
    settings.RELAY_CATALOG_MAX_ENTRIES = 1
    _site, url = host
    report = catalog.catalog_import(url=url, actor="system")
    assert [row["agentId"] for row in report.added] == ["alpha"]
    assert {row["code"] for row in report.refused} == {"too_many"}
    assert len(report.refused) == 6


def test_a_catalog_over_the_size_limit_is_refused_whole(allow_private_urls, settings):
    settings.RELAY_CATALOG_MAX_BYTES = 1000
    big = {"specVersion": "1.0", "entries": []}
    with (
        card_site({"/.well-known/ai-catalog.json": oversized_card(big, 5000)}) as (_s, url),
        pytest.raises(catalog.CatalogError) as refused,
    ):
        catalog.catalog_import(url=url, actor="system")
    assert refused.value.code == "too_large"
    assert not Agent.objects.exists()


def test_a_document_that_is_not_a_catalog_is_refused(allow_private_urls):
    with (
        card_site({"/c.json": card_json({"entries": "no"})}) as (_site, url),
        pytest.raises(catalog.CatalogError) as refused,
    ):
        catalog.catalog_import(url=f"{url}/c.json", actor="system")
    assert refused.value.code == "invalid_catalog"
    assert "specVersion" in refused.value.message


def test_a_private_catalog_address_is_refused_by_the_ssrf_guard(settings):
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    with (
        card_site({"/.well-known/ai-catalog.json": status(200)}) as (site, url),
        pytest.raises(catalog.CatalogError) as refused,
    ):
        catalog.catalog_import(url=url, actor="system")
    assert refused.value.code == "unsafe_url"
    assert site.hits == []


def test_the_import_endpoint_reports_and_needs_a_key_that_may_register(host, api, anonymous):
    _site, url = host
    assert anonymous.post("/a2a/registry/import", {"url": url}, format="json").status_code == 401
    answer = api.post("/a2a/registry/import", {"url": url}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert [row["agentId"] for row in body["added"]] == ["alpha", "beta"]
    assert {row["code"] for row in body["refused"]} >= {"not_a2a", "inline_card"}
    unknown = api.post("/a2a/registry/import", {"url": url, "urll": 1}, format="json")
    assert unknown.status_code == 400
    dead = api.post("/a2a/registry/import", {"url": f"{url}/none.json"}, format="json")
    assert dead.status_code == 422
    assert dead.json()["error"]["code"] == "upstream_error"


def test_the_import_command_prints_the_report(host, capsys):
    _site, url = host
    call_command("import_catalog", url)
    out = capsys.readouterr().out
    assert "added     alpha" in out
    assert "2 added, 0 updated, 0 unchanged, 5 refused" in out
    call_command("import_catalog", url, "--json")
    report = json.loads(capsys.readouterr().out)
    assert [row["agentId"] for row in report["unchanged"]] == ["alpha", "beta"]


def test_a_relay_does_not_import_its_own_entries(client, settings, allow_private_urls):
    settings.RELAY_CATALOG_PUBLISHER = "agents.example"
    with card_site({}) as (site, url):
        site.routes["/c.json"] = card_json(
            {"specVersion": "1.0", "entries": [a2a_entry(f"{url}/a.json", "self")]}
        )
        report = catalog.catalog_import(url=f"{url}/c.json", actor="system")
    assert codes(report) == {"self": "own_entry"}


def test_removed_agents_are_listed_since_a_time(api):
    agent = make_agent(agent_id="gone")
    services.agent_delete(agent=agent)
    answer = api.get("/a2a/registry/removed?since=2000-01-01T00:00:00Z")
    assert [row["id"] for row in answer.json()["removed"]] == ["gone"]
    assert api.get("/a2a/registry/removed?since=2999-01-01T00:00:00Z").json()["removed"] == []
    assert api.get("/a2a/registry/removed?since=yesterday").status_code == 400
    assert api.get("/a2a/registry/removed").status_code == 400


def test_importing_again_updates_an_agent_listed_by_its_base_url(allow_private_urls):
    with card_site({}) as (site, url):
        site.routes["/.well-known/agent-card.json"] = card_json(card(name="Gamma"))
        site.routes["/.well-known/ai-catalog.json"] = card_json(
            {"specVersion": "1.0", "entries": [a2a_entry(f"{url}/", "gamma")]}
        )
        first = catalog.catalog_import(url=url, actor="system")
        site.routes["/.well-known/agent-card.json"] = card_json(card(name="Gamma", version="2.0.0"))
        again = catalog.catalog_import(url=url, actor="system")
    assert [row["agentId"] for row in first.added] == ["gamma"]
    assert (again.refused, [row["agentId"] for row in again.updated]) == ([], ["gamma"])
    assert Agent.objects.get(pk="gamma").version == "2.0.0"


def test_an_entry_of_an_earlier_draft_with_only_a_media_type_is_imported(allow_private_urls):
    with card_site({}) as (site, url):
        site.routes["/agents/delta.json"] = card_json(card(name="Delta"))
        entry = a2a_entry(f"{url}/agents/delta.json", "delta")
        entry["mediaType"] = entry.pop("type")
        site.routes["/.well-known/ai-catalog.json"] = card_json(
            {"specVersion": "0.8", "entries": [entry]}
        )
        report = catalog.catalog_import(url=url, actor="system")
    assert (report.refused, [row["agentId"] for row in report.added]) == ([], ["delta"])


def test_a_catalog_trickled_a_byte_at_a_time_cannot_hold_the_import_endpoint(
    api, settings, allow_private_urls
):
    """Regression: a catalog sent at a byte a second held POST /a2a/registry/import for
    minutes, each read well within the read timeout."""
    settings.RELAY_FETCH_TIMEOUT = 5
    settings.RELAY_FETCH_DEADLINE = 1
    trickled = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b" " * 100
    with trickling_server(trickled, every=0.05) as url:
        started = time.monotonic()
        answer = api.post("/a2a/registry/import", {"url": url}, format="json")
        took = time.monotonic() - started
    assert answer.status_code == 422, answer.content
    assert answer.json()["error"]["code"] == "unreachable"
    assert took < 2.5
