"""Attacks on the registry API: registering agents at private addresses (directly, through a
name, a redirect or DNS rebinding), cards that never end, and bursts over a key's rate limit.
Each gets its documented answer and nothing is stored.

With ``RELAY_ALLOW_PRIVATE_URLS`` off, 127.0.0.1 is made to count as public where a test needs
a "public" server next to a private one (127.0.0.2), as in tests/registry/test_fetching.py.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from starlette.responses import StreamingResponse

from registry.models import Agent, CardSnapshot, Skill
from relay_project import outbound
from tests.cardservers import card_json, card_site, redirect
from tests.registry.test_cards import card_v1

pytestmark = [pytest.mark.django_db]


def register(api, url, **body):
    return api.post("/a2a/registry", {"url": url, **body}, format="json")


def nothing_stored() -> bool:
    return (Agent.objects.count(), CardSnapshot.objects.count(), Skill.objects.count()) == (0, 0, 0)


@pytest.fixture
def private_off(settings):
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    return settings


@pytest.fixture
def resolver(monkeypatch):
    """``names[host] = [addresses...]``: each lookup of ``host`` takes the next address (the
    last one repeats); other hosts resolve as usual."""
    names: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host in names:
            answers = names[host]
            address = answers.pop(0) if len(answers) > 1 else answers[0]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return names


@pytest.fixture
def loopback_one_is_public(monkeypatch, private_off):
    real = outbound.is_public_address
    monkeypatch.setattr(
        outbound, "is_public_address", lambda address: address == "127.0.0.1" or real(address)
    )


# --- SSRF ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9",
        "http://10.1.2.3",
        "http://192.168.0.10:8080/agent",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8080",
        "http://[fd00:ec2::254]",
        "http://0.0.0.0:80",
        "http://localhost:9",
    ],
)
def test_registering_an_agent_at_a_private_address_is_refused(api, private_off, url):
    response = register(api, url)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "unsafe_url"
    assert "non-public address" in error["message"]
    assert nothing_stored()


def test_a_name_that_resolves_to_a_private_address_is_refused(api, private_off, resolver):
    resolver["intranet.example"] = ["10.20.30.40"]
    response = register(api, "http://intranet.example/agent")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsafe_url"
    assert "10.20.30.40" in response.json()["error"]["message"]
    assert nothing_stored()


def test_a_name_with_one_private_address_among_public_ones_is_refused(
    api, private_off, monkeypatch
):
    def mixed(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    response = register(api, "http://mixed.example/")
    assert response.json()["error"]["code"] == "unsafe_url"
    assert nothing_stored()


def test_a_public_host_that_redirects_to_a_private_one_is_refused(api, loopback_one_is_public):
    card = {"/.well-known/agent-card.json": card_json(card_v1())}
    with card_site(card, host="127.0.0.2") as (private_site, private_url):
        hop = {
            "/.well-known/agent-card.json": redirect(f"{private_url}/.well-known/agent-card.json")
        }
        with card_site(hop) as (public_site, public_url):
            response = register(api, public_url)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsafe_url"
    assert public_site.hits and private_site.hits == []
    assert nothing_stored()


def test_dns_rebinding_at_registration_reaches_only_the_checked_address(
    api, loopback_one_is_public, resolver
):
    """The name answers public first, private afterwards: every request of the registration
    goes to an address the guard checked, so the private server sees nothing, and the agent
    is registered from the public server's card."""
    public_card = card_v1(name="Public Agent")
    private_card = card_v1(name="Private Agent")
    with card_site({"/.well-known/agent-card.json": card_json(public_card)}) as (
        public_site,
        public_url,
    ):
        port = int(public_url.rsplit(":", 1)[1])
        with card_site(
            {"/.well-known/agent-card.json": card_json(private_card)}, host="127.0.0.2", port=port
        ) as (private_site, _):
            resolver["rebind.example"] = ["127.0.0.1", "127.0.0.2"]
            response = register(api, f"http://rebind.example:{port}")
    assert private_site.hits == []
    if response.status_code == 201:
        assert response.json()["name"] == "Public Agent"
    else:  # a second lookup (a new connection) met the private answer and was refused
        assert response.json()["error"]["code"] == "unsafe_url"
        assert nothing_stored()


# --- card size -----------------------------------------------------------------------------


def endless_card(request):
    """A card that declares no length (chunked) and goes on far past any limit: 16 MiB of a
    string that never closes. (Bounded, and yielding between chunks, so the server stops
    once the relay hangs up instead of writing to a closed socket for the rest of the run.)"""

    async def body():
        yield b'{"name": "Endless", "description": "'
        for _ in range(256):
            yield b"x" * 65536
            await asyncio.sleep(0)

    return StreamingResponse(body(), media_type="application/json")


def test_a_card_that_never_ends_is_cut_at_the_limit(api, settings, allow_private_urls):
    settings.RELAY_CARD_MAX_BYTES = 256 * 1024
    with card_site({"/.well-known/agent-card.json": endless_card}) as (site, url):
        response = register(api, url)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert nothing_stored()


def test_a_card_that_declares_a_huge_length_is_refused_before_reading(
    api, settings, allow_private_urls
):
    settings.RELAY_CARD_MAX_BYTES = 1000
    document = json.dumps(card_v1(description="y" * 5000))
    from starlette.responses import Response

    with card_site(
        {
            "/.well-known/agent-card.json": lambda request: Response(
                document, media_type="application/json"
            )
        }
    ) as (site, url):
        response = register(api, url)
    assert response.json()["error"]["code"] == "too_large"
    assert nothing_stored()


# --- rate limits ---------------------------------------------------------------------------


@pytest.fixture
def fresh_counters():
    from django.core.cache import caches

    if "locmem" not in type(caches["default"]).__module__:
        pytest.skip("clears the cache: only with the embedded profile's local-memory cache")
    caches["default"].clear()
    yield
    caches["default"].clear()


def test_a_burst_over_the_key_limit_gets_429_with_retry_after(
    api, settings, fresh_counters, anonymous
):
    settings.RELAY_RATE_LIMIT_PER_KEY = 3
    statuses = [api.get("/a2a/registry").status_code for _ in range(3)]
    refused = api.post("/a2a/registry", {"url": "http://agent.example/"}, format="json")
    assert statuses == [200, 200, 200]
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"]["code"] == "throttled"
    assert "Expected available in" in refused.json()["error"]["message"]
    assert nothing_stored()
    # Anonymous reads are not counted against anyone's key.
    assert anonymous.get("/a2a/registry").status_code == 200


def test_the_team_api_counts_against_the_same_budget(api, settings, fresh_counters):
    settings.RELAY_RATE_LIMIT_PER_KEY = 2
    assert api.get("/a2a/registry").status_code == 200
    assert api.get("/a2a/teams").status_code == 200
    assert api.get("/a2a/teams").status_code == 429


# --- found by fuzzing ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["Ñ-secret", "line\r\nX-Injected: 1", " padded", "tab\t"])
def test_a_credential_no_http_client_could_send_is_refused_not_a_500(api, value):
    """Regression: a non-ASCII header value was stored, then crashed the card fetch (500)."""
    response = register(
        api, "http://agent.example/", credentials={"headerName": "X-Api-Key", "headerValue": value}
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_request"
    assert "headerValue" in response.json()["error"]["message"]
    assert nothing_stored()


@pytest.mark.parametrize("path", ["/a2a/registry", "/a2a/teams"])
def test_a_body_over_the_size_limit_is_a_413_in_the_api_error_body(api, api_key, path):
    """Regression: Django's own 400 page (HTML) answered bodies over the upload limit. (Team
    writes need an admin key; any other key is refused before its body is read.)"""
    api_key[0].is_admin = True
    api_key[0].save(update_fields=["is_admin"])
    body = json.dumps({"url": "http://agent.example/", "pad": "x" * (1024 * 1024 + 1)})
    response = api.post(path, body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "1048576 bytes" in response.json()["error"]["message"]
    assert nothing_stored()


@pytest.mark.parametrize(
    "method,path",
    [("post", "/a2a/registry"), ("post", "/a2a/teams"), ("patch", "/a2a/registry/{id}")],
)
def test_a_body_nested_a_hundred_thousand_levels_deep_is_a_400_not_a_500(
    api, api_key, method, path
):
    """Regression: DRF's JSON parser recursed into it and failed with RecursionError (500)."""
    from tests.factories import make_agent

    api_key[0].is_admin = True
    api_key[0].save(update_fields=["is_admin"])
    agent = make_agent(name="Deep")
    before = Agent.objects.filter(pk=agent.pk).values().get()
    body = "[" * 100_000 + "]" * 100_000
    response = getattr(api, method)(path.format(id=agent.pk), body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert "nested deeper than the limit of 64 levels" in error["message"]
    assert Agent.objects.count() == 1
    assert Agent.objects.filter(pk=agent.pk).values().get() == before
