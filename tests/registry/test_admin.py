"""The registry in the Django admin: agents, card snapshots and API keys."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import httpx
import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from registry import secrets
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Agent, ApiKey, CardSnapshot
from registry.services import api_key_create
from relay_project import outbound
from tests.factories import CARD_PATH, card, extension, make_agent, skill

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:registry_agent_changelist"
AUDIT_URI = "https://example.com/extensions/audit/v1"


class _FormFields(HTMLParser):
    """What a browser would submit from the form with ``form_id``: every named input, the
    selected option of each select, and each textarea (checkboxes only when checked)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.select: str | None = None
        self.textarea: str | None = None
        self.data: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.inside = attrs.get("id") == self.form_id
        if not self.inside:
            return
        name = attrs.get("name")
        if tag == "input" and name and attrs.get("type") not in ("submit", "button"):
            if attrs.get("type") in ("checkbox", "radio") and "checked" not in attrs:
                return
            self.data[name] = attrs.get("value") or (
                "on" if attrs.get("type") == "checkbox" else ""
            )
        elif tag == "select" and name:
            self.select = name
            self.data.setdefault(name, "")
        elif tag == "option" and self.select and "selected" in attrs:
            self.data[self.select] = attrs.get("value", "")
        elif tag == "textarea" and name:
            self.textarea = name
            self.data[name] = ""

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None

    def handle_data(self, data):
        if self.textarea:
            self.data[self.textarea] += data


def form_data(response, form_id: str) -> dict[str, str]:
    parser = _FormFields(form_id)
    parser.feed(response.content.decode())
    return parser.data


def messages_of(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.fixture
def cards_served(monkeypatch):
    """Makes the relay's outbound client serve cards from a dict: URL prefix -> card document
    (or an HTTP status to answer with). Returns the dict, to change between calls."""
    served: dict[str, dict | int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        for prefix, answer in served.items():
            if str(request.url).startswith(prefix) and request.url.path.endswith(CARD_PATH):
                if isinstance(answer, int):
                    return httpx.Response(answer, text="down")
                return httpx.Response(200, json=answer)
        return httpx.Response(404, text="not found")

    monkeypatch.setattr(
        outbound,
        "client",
        lambda *args, **kwargs: httpx.Client(transport=httpx.MockTransport(handler)),
    )
    return served


@pytest.fixture
def agents():
    weather = make_agent(
        agent_id="weather",
        name="Weather Agent",
        description="Forecasts with rain radar.",
        capabilities={
            "streaming": True,
            "extensions": [extension(CLIENT_ROUTING_URI, required=True, params={"maxHops": 3})],
        },
        skills=[
            skill("forecast", name="Forecast", tags=["weather", "rain"], examples=["Rain in Oslo?"])
        ],
        health="healthy",
    )
    ledger = make_agent(
        agent_id="ledger",
        name="Ledger Agent",
        description="Keeps the books.",
        supportedInterfaces=[
            {"url": "http://agent.test/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ],
        capabilities={"extensions": [extension(AUDIT_URI)]},
        skills=[skill("quote", tags=["finance"])],
        status="deprecated",
        health="unhealthy",
    )
    return weather, ledger


def changelist_ids(response) -> list[str]:
    return [agent.pk for agent in response.context["cl"].result_list]


# --- Agents: list, search, filters -------------------------------------------------------------


def test_agent_changelist_shows_health_versions_and_client_routing(admin_client, agents):
    response = admin_client.get(reverse(CHANGELIST))

    assert response.status_code == 200
    assert changelist_ids(response) == ["ledger", "weather"]
    page = response.content.decode()
    assert 'class="health health-healthy"' in page
    assert 'class="health health-unhealthy"' in page
    assert '<td class="field-versions">0.3</td>' in page
    assert (
        '<td class="field-client_routing"><img src="/static/admin/img/icon-yes.svg" alt="True">'
        in page
    )
    assert "/static/relay/relay.css" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("books", ["ledger"]),
        ("Weather", ["weather"]),
        ("ledger-agent", ["ledger"]),
        ("nothing-like-it", []),
    ],
)
def test_agent_search_looks_at_id_name_description_and_card_url(
    admin_client, agents, query, expected
):
    assert changelist_ids(admin_client.get(reverse(CHANGELIST), {"q": query})) == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status__exact": "deprecated"}, ["ledger"]),
        ({"health__exact": "healthy"}, ["weather"]),
        ({"card_protocol_version__exact": "1.0"}, ["ledger", "weather"]),
        ({"extension": CLIENT_ROUTING_URI}, ["weather"]),
        ({"extension": AUDIT_URI}, ["ledger"]),
        ({"streaming__exact": "1"}, ["weather"]),
        ({"streaming__exact": "0"}, ["ledger"]),
    ],
)
def test_agent_filters_narrow_the_list(admin_client, agents, params, expected):
    assert changelist_ids(admin_client.get(reverse(CHANGELIST), params)) == expected


def test_extension_filter_offers_every_declared_uri(admin_client, agents):
    page = admin_client.get(reverse(CHANGELIST)).content.decode()

    assert "By declared extension" in page
    assert ">client routing</a>" in page
    assert f">{AUDIT_URI}</a>" in page


# --- Agents: the change page -------------------------------------------------------------------


def test_agent_change_page_shows_card_skills_and_extensions_read_only(admin_client, agents):
    response = admin_client.get(reverse("admin:registry_agent_change", args=["weather"]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Forecast" in page and "Rain in Oslo?" in page
    assert '<span class="chip">rain</span>' in page
    assert "⇄ client routing" in page
    assert "{\n  &quot;maxHops&quot;: 3\n}" in page
    assert '<pre class="json">{\n  &quot;name&quot;: &quot;Weather Agent&quot;' in page
    inputs = form_data(response, "agent_form")
    assert not [
        name
        for name in inputs
        if name.startswith(("skills-0-", "extensions-0-")) and not name.endswith(("-id", "-agent"))
    ], "inlines have no editable fields"
    assert "name" in inputs and "card_url" not in inputs and "version" not in inputs


def test_agent_change_page_shows_the_card_history_with_diffs(admin_client, agents, cards_served):
    weather = agents[0]
    cards_served[weather.card_url.removesuffix(CARD_PATH)] = card(
        name="Weather Agent", description="Now with snow.", version="9.9.9"
    )
    admin_client.post(
        reverse(CHANGELIST), {"action": "refetch_cards", "_selected_action": ["weather"]}
    )

    page = admin_client.get(
        reverse("admin:registry_agent_change", args=["weather"])
    ).content.decode()

    assert page.count('class="history-entry"') == 2
    assert '<span class="diff-added">+  &quot;version&quot;: &quot;9.9.9&quot;\n</span>' in page
    assert '<span class="diff-removed">-  &quot;version&quot;: &quot;1.0.0&quot;\n</span>' in page


def test_agent_change_page_escapes_card_content(admin_client):
    make_agent(
        agent_id="sneaky",
        name="Sneaky",
        description="<script>alert(1)</script>",
        documentationUrl="javascript:alert(2)",
        skills=[skill("x", tags=["<b>bold</b>"])],
    )

    page = admin_client.get(
        reverse("admin:registry_agent_change", args=["sneaky"])
    ).content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert 'href="javascript:' not in page


def test_agent_changes_go_through_the_service_and_credentials_stay_hidden(admin_client, agents):
    url = reverse("admin:registry_agent_change", args=["ledger"])
    data = form_data(admin_client.get(url), "agent_form")
    data |= {
        "name": "Ledger Pro",
        "credential_header_name": "X-Api-Key",
        "credential_header_value": "sk-very-secret-value",
    }

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.context["errors"] if response.context else ""
    ledger = Agent.objects.get(pk="ledger")
    assert ledger.name == "Ledger Pro"
    assert "ledger pro" in ledger.search_text, "agent_update rewrote the search text"
    assert ledger.auth_header_name == "X-Api-Key"
    assert "sk-very-secret-value" not in ledger.auth_header_value
    assert secrets.decrypt(ledger.auth_header_value) == "sk-very-secret-value"
    page = admin_client.get(url).content.decode()
    assert "sk-very-secret-value" not in page
    assert ledger.auth_header_value not in page
    assert "<code>X-Api-Key</code> is set (sk-v…)" in page


def test_agent_credential_can_be_removed(admin_client, agents):
    url = reverse("admin:registry_agent_change", args=["ledger"])
    data = form_data(admin_client.get(url), "agent_form")
    admin_client.post(
        url,
        data | {"credential_header_name": "Authorization", "credential_header_value": "Bearer abc"},
    )

    data = form_data(admin_client.get(url), "agent_form")
    admin_client.post(url, data | {"clear_credentials": "on"})

    ledger = Agent.objects.get(pk="ledger")
    assert (ledger.auth_header_name, ledger.auth_header_value) == ("", "")


# --- Agents: registering by URL ----------------------------------------------------------------


def test_add_agent_page_asks_for_a_url_not_model_fields(admin_client):
    response = admin_client.get(reverse("admin:registry_agent_add"))

    assert response.status_code == 200
    fields = form_data(response, "agent_form")
    assert set(fields) >= {
        "url",
        "agent_id",
        "invocation_url",
        "credential_header_name",
        "credential_header_value",
    }
    assert "name" not in fields and "card_url" not in fields
    assert "Register an agent" in response.content.decode()


def test_adding_an_agent_registers_it_by_url(admin_client, cards_served):
    cards_served["https://maps.example"] = card(
        name="Maps Agent", skills=[skill("route", tags=["maps"])]
    )

    response = admin_client.post(
        reverse("admin:registry_agent_add"),
        {
            "url": "https://maps.example/",
            "agent_id": "maps",
            "invocation_url": "",
            "credential_header_name": "Authorization",
            "credential_header_value": "Bearer maps-token-123",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:registry_agent_change", args=["maps"])
    agent = Agent.objects.get(pk="maps")
    assert agent.name == "Maps Agent"
    assert agent.card_url == "https://maps.example/.well-known/agent-card.json"
    assert list(agent.skills.values_list("skill_id", flat=True)) == ["route"]
    assert CardSnapshot.objects.filter(agent=agent).count() == 1
    assert secrets.decrypt(agent.auth_header_value) == "Bearer maps-token-123"
    assert any("Registered “maps” (Maps Agent, A2A 1.0)" in m for m in messages_of(response))


def test_adding_an_agent_whose_card_is_invalid_shows_why_and_stores_nothing(
    admin_client, cards_served
):
    broken = card()
    del broken["skills"], broken["version"]
    cards_served["https://broken.example"] = broken

    response = admin_client.post(
        reverse("admin:registry_agent_add"),
        {
            "url": "https://broken.example",
            "agent_id": "",
            "invocation_url": "",
            "credential_header_name": "",
            "credential_header_value": "",
        },
    )

    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "The agent could not be registered" in page
    assert "missing required fields: version, skills" in page
    assert Agent.objects.count() == 0


def test_adding_an_agent_by_a_url_without_a_scheme_says_to_write_the_scheme(
    admin_client, cards_served
):
    """Regression: the page said "only http and https URLs can be fetched, not ''"."""
    response = admin_client.post(reverse("admin:registry_agent_add"), {"url": "maps.example/agent"})

    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "'maps.example/agent' has no scheme" in page
    assert "'https://maps.example/agent'" in page
    assert "not ''" not in page
    assert Agent.objects.count() == 0


def test_adding_an_agent_wants_both_credential_header_and_value(admin_client, cards_served):
    response = admin_client.post(
        reverse("admin:registry_agent_add"),
        {
            "url": "https://maps.example",
            "credential_header_name": "Authorization",
        },
    )

    assert response.status_code == 200
    assert "Give both the credential header and its value" in response.content.decode()
    assert Agent.objects.count() == 0


# --- Agents: re-fetching cards -----------------------------------------------------------------


def test_refetch_action_reports_changed_unchanged_and_failed(admin_client, cards_served):
    changed = make_agent(agent_id="changed", name="Changed", url="https://changed.example")
    make_agent(agent_id="same", name="Same", url="https://same.example")
    make_agent(agent_id="gone", name="Gone", url="https://gone.example")
    cards_served["https://changed.example"] = card(name="Changed", version="2.0.0")
    cards_served["https://same.example"] = card(name="Same")
    cards_served["https://gone.example"] = 503

    response = admin_client.post(
        reverse(CHANGELIST),
        {
            "action": "refetch_cards",
            "_selected_action": ["changed", "same", "gone"],
        },
    )

    assert response.status_code == 302
    assert messages_of(response) == [
        "Card changed, new snapshot stored: changed.",
        "Card unchanged: same.",
        "Could not fetch: gone (https://gone.example/.well-known/agent-card.json answered "
        "HTTP 503).",
    ]
    assert CardSnapshot.objects.filter(agent=changed).count() == 2
    assert Agent.objects.get(pk="changed").version == "2.0.0"
    assert CardSnapshot.objects.filter(agent_id="same").count() == 1
    assert CardSnapshot.objects.filter(agent_id="gone").count() == 1


def test_deleting_an_agent_in_the_admin_removes_its_history(admin_client, agents):
    response = admin_client.post(
        reverse("admin:registry_agent_delete", args=["ledger"]), {"post": "yes"}
    )

    assert response.status_code == 302
    assert not Agent.objects.filter(pk="ledger").exists()
    assert not CardSnapshot.objects.filter(agent_id="ledger").exists()


# --- Card snapshots ----------------------------------------------------------------------------


def test_snapshots_are_listed_by_agent_and_shown_read_only(admin_client, agents):
    response = admin_client.get(reverse("admin:registry_cardsnapshot_changelist"))

    assert [s.agent_id for s in response.context["cl"].result_list] == ["ledger", "weather"]
    snapshot = CardSnapshot.objects.get(agent_id="weather")
    detail = admin_client.get(reverse("admin:registry_cardsnapshot_change", args=[snapshot.pk]))
    page = detail.content.decode()
    assert detail.status_code == 200
    assert '<pre class="json">{\n  &quot;name&quot;: &quot;Weather Agent&quot;' in page
    assert 'name="_save"' not in page, "view only"
    assert admin_client.get(reverse("admin:registry_cardsnapshot_add")).status_code == 403


# --- API keys ----------------------------------------------------------------------------------


def test_adding_an_api_key_shows_it_once_and_stores_only_its_hash(admin_client):
    response = admin_client.post(
        reverse("admin:registry_apikey_add"),
        {"name": "ci runner", "is_admin": "on"},
        follow=True,
    )

    page = response.content.decode()
    api_key = ApiKey.objects.get(name="ci runner")
    shown = page.split("<code>")[1].split("</code>")[0]
    assert shown.startswith(api_key.prefix)
    assert secrets.hash_api_key(shown) == api_key.key_hash
    assert api_key.is_admin
    assert api_key.created_by.username == "admin"
    assert "Copy it now" in page
    stored = [str(value) for value in ApiKey.objects.values_list().get(pk=api_key.pk)]
    assert shown not in stored
    again = admin_client.get(reverse("admin:registry_apikey_changelist")).content.decode()
    assert shown not in again
    assert api_key.prefix in again


def test_api_key_pages_never_show_the_hash(admin_client):
    api_key, _ = api_key_create(name="reader")

    for url in [
        reverse("admin:registry_apikey_changelist"),
        reverse("admin:registry_apikey_change", args=[api_key.pk]),
    ]:
        page = admin_client.get(url).content.decode()
        assert api_key.prefix in page
        assert api_key.key_hash not in page


def test_revoke_action_revokes_the_selected_keys(admin_client):
    kept, _ = api_key_create(name="kept")
    ended, _ = api_key_create(name="ended")

    response = admin_client.post(
        reverse("admin:registry_apikey_changelist"),
        {
            "action": "revoke",
            "_selected_action": [ended.pk],
        },
    )

    assert response.status_code == 302
    ended.refresh_from_db()
    kept.refresh_from_db()
    assert ended.revoked_at is not None and not ended.is_usable
    assert kept.revoked_at is None
    assert messages_of(response) == ["Revoked: ended (" + ended.prefix + "…)."]
