"""Finding and fetching cards from real servers on 127.0.0.1, and the SSRF guard."""

import asyncio
import socket
import time

import httpx
import pytest

from registry.fetching import CardFetchError, candidate_urls, fetch_card
from relay_project import outbound
from tests.cardservers import (
    card_json,
    card_site,
    hang,
    oversized_card,
    redirect,
    status,
    trickling_server,
)
from tests.registry.test_cards import card_v03, card_v1

pytestmark = pytest.mark.usefixtures("allow_private_urls")


def test_candidates_try_the_given_path_before_the_origin():
    assert candidate_urls("https://a.example/team/agent/") == [
        "https://a.example/team/agent/.well-known/agent-card.json",
        "https://a.example/team/agent/.well-known/agent.json",
        "https://a.example/.well-known/agent-card.json",
        "https://a.example/.well-known/agent.json",
    ]


def test_a_card_url_is_fetched_as_given():
    assert candidate_urls("https://a.example/cards/weather.json") == [
        "https://a.example/cards/weather.json"
    ]


def test_a_base_url_finds_the_1_0_card_at_the_well_known_path():
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (site, url):
        fetched = fetch_card(url)
    assert fetched.url == f"{url}/.well-known/agent-card.json"
    assert fetched.card.name == "Weather"


def test_an_agent_under_a_path_prefix_is_found_there_first():
    routes = {
        "/prefix/agent/.well-known/agent-card.json": card_json(card_v03(name="Prefixed")),
        "/.well-known/agent-card.json": card_json(card_v1(name="Origin")),
    }
    with card_site(routes) as (site, url):
        fetched = fetch_card(f"{url}/prefix/agent")
    assert fetched.card.name == "Prefixed"
    assert site.hits == ["/prefix/agent/.well-known/agent-card.json"]


def test_a_0_2_card_is_found_at_the_legacy_path():
    legacy = card_v03(protocolVersion="0.2.5")
    with card_site({"/.well-known/agent.json": card_json(legacy)}) as (site, url):
        fetched = fetch_card(url)
    assert fetched.card.protocol_version == "0.2"
    assert site.hits == ["/.well-known/agent-card.json", "/.well-known/agent.json"]


def test_credentials_are_sent_with_the_card_request():
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (site, url):
        fetch_card(url, headers={"X-Api-Key": "s3cret"})
    assert site.headers[0]["x-api-key"] == "s3cret"


def test_redirects_are_followed_within_the_limit():
    routes = {
        "/.well-known/agent-card.json": redirect("/cards/real.json"),
        "/cards/real.json": card_json(card_v1()),
    }
    with card_site(routes) as (site, url):
        fetched = fetch_card(url)
    assert fetched.url == f"{url}/cards/real.json"


@pytest.mark.parametrize(
    ("routes", "code"),
    [
        ({}, "card_not_found"),
        ({"/.well-known/agent-card.json": status(200, "<html>hi</html>")}, "not_json"),
        ({"/.well-known/agent-card.json": status(500)}, "upstream_error"),
        ({"/.well-known/agent-card.json": card_json({"name": "half"})}, "invalid_card"),
        ({"/.well-known/agent-card.json": oversized_card(card_v1(), 1024 * 1024)}, "too_large"),
        (
            {"/.well-known/agent-card.json": redirect("/.well-known/agent-card.json")},
            "too_many_redirects",
        ),
    ],
    ids=[
        "nothing-published",
        "html",
        "server-error",
        "missing-fields",
        "oversized",
        "redirect-loop",
    ],
)
def test_a_site_without_a_usable_card_gives_a_named_error(routes, code):
    with card_site(routes) as (site, url), pytest.raises(CardFetchError) as raised:
        fetch_card(url)
    assert raised.value.code == code
    assert 400 <= raised.value.status < 500


def test_an_unreachable_host_is_reported_as_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(CardFetchError) as raised:
        fetch_card(f"http://127.0.0.1:{port}")
    assert raised.value.code == "unreachable"


def test_a_hanging_host_times_out(settings):
    settings.RELAY_FETCH_TIMEOUT = 0.3
    with (
        card_site({"/.well-known/agent-card.json": hang(5)}) as (site, url),
        pytest.raises(CardFetchError) as raised,
    ):
        fetch_card(url)
    assert raised.value.code == "timeout"


_TRICKLED_CARD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + b" " * 100
)


@pytest.mark.parametrize(
    "response",
    [_TRICKLED_CARD, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100],
    ids=["body", "headers"],
)
def test_a_server_trickling_bytes_cannot_hold_a_fetch_past_its_deadline(settings, response):
    """Each byte comes well within the read timeout; only the total deadline ends the fetch."""
    settings.RELAY_FETCH_TIMEOUT = 5
    settings.RELAY_FETCH_DEADLINE = 1
    with trickling_server(response, every=0.05) as url:
        started = time.monotonic()
        with pytest.raises(CardFetchError) as raised:
            fetch_card(f"{url}/card.json")
        took = time.monotonic() - started
    assert raised.value.code == "timeout"
    assert 0.9 < took < 2.5


def test_the_async_client_keeps_the_deadline_while_a_body_trickles(settings):
    settings.RELAY_FETCH_TIMEOUT = 5
    settings.RELAY_FETCH_DEADLINE = 1

    async def read_all(url: str) -> None:
        async with outbound.async_client() as client, client.stream("GET", url) as response:
            await outbound.aread_limited(response, 10_000)

    with trickling_server(_TRICKLED_CARD, every=0.05) as url:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            asyncio.run(read_all(url))
        took = time.monotonic() - started
    assert 0.9 < took < 2.5


def test_the_deadline_runs_from_the_first_request_across_redirects(settings):
    settings.RELAY_FETCH_TIMEOUT = 5
    settings.RELAY_FETCH_DEADLINE = 1
    with trickling_server(_TRICKLED_CARD, every=0.05) as slow_url:
        routes = {"/card.json": redirect(f"{slow_url}/card.json")}
        with card_site(routes) as (site, url), outbound.client() as client:
            started = time.monotonic()
            with pytest.raises(httpx.TimeoutException):
                client.get(f"{url}/card.json")
            took = time.monotonic() - started
    assert took < 2.5


# --- SSRF -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "224.0.0.1",
        "fd00:ec2::254",
    ],
)
def test_non_public_addresses_are_not_public(address):
    assert not outbound.is_public_address(address)


@pytest.mark.parametrize(
    "address",
    [
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:a9fe:a9fe::",  # 6to4 of the metadata address
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "::ffff:7f00:1",  # IPv4-mapped 127.0.0.1
    ],
)
def test_ipv6_addresses_embedding_a_non_public_ipv4_address_are_not_public(address):
    assert not outbound.is_public_address(address)


@pytest.mark.parametrize(
    "address",
    ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "2002:5db8:d70e::"],
)
def test_public_addresses_are_public(address):
    assert outbound.is_public_address(address)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://x.example/",
        "http://user:pw@a.example/",
        "http:///nohost",
        "http://a.example:99999/",
    ],
)
def test_urls_of_the_wrong_shape_are_refused_before_any_connection(url):
    with pytest.raises(CardFetchError) as raised:
        fetch_card(url)
    assert raised.value.code == "unsafe_url"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_agents_are_refused_when_private_urls_are_off(settings, host):
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (site, url):
        port = url.rsplit(":", 1)[1]
        with pytest.raises(CardFetchError) as raised:
            fetch_card(f"http://{host}:{port}")
    assert raised.value.code == "unsafe_url"
    assert "non-public address" in raised.value.message
    assert site.hits == []


def test_the_metadata_address_is_refused_without_connecting(settings):
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    with pytest.raises(CardFetchError) as raised:
        fetch_card("http://169.254.169.254/latest/meta-data/")
    assert raised.value.code == "unsafe_url"


@pytest.fixture
def loopback_one_is_public(monkeypatch, settings):
    """Treats 127.0.0.1 as a public address and 127.0.0.2 as private, so the guard's behaviour
    on redirects and rebinding can be shown with two local servers."""
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    real = outbound.is_public_address
    monkeypatch.setattr(
        outbound, "is_public_address", lambda address: address == "127.0.0.1" or real(address)
    )


def test_a_redirect_to_a_private_address_is_refused(loopback_one_is_public):
    inner_card = {"/.well-known/agent-card.json": card_json(card_v1())}
    with card_site(inner_card, host="127.0.0.2") as (private_site, private_url):
        outer = {
            "/.well-known/agent-card.json": redirect(f"{private_url}/.well-known/agent-card.json")
        }
        with card_site(outer) as (public_site, public_url), pytest.raises(CardFetchError) as raised:
            fetch_card(public_url)
    assert raised.value.code == "unsafe_url"
    assert public_site.hits == ["/.well-known/agent-card.json"]
    assert private_site.hits == []


def test_dns_rebinding_cannot_reach_the_private_address(loopback_one_is_public, monkeypatch):
    """The name resolves to a public address first and a private one afterwards. The guard
    connects to the address it checked, so the private server is never reached."""
    answers = iter(["127.0.0.1"] + ["127.0.0.2"] * 10)
    real_getaddrinfo = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.test":
            address = next(answers)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    card = {"/.well-known/agent-card.json": card_json(card_v1(name="Public"))}
    with card_site(card) as (public_site, public_url):
        port = int(public_url.rsplit(":", 1)[1])
        # The private server listens on the same port, so a guard that checked one resolution
        # and connected by name (a second resolution) would land here.
        with card_site(card, host="127.0.0.2", port=port) as (private_site, _):
            fetched = fetch_card(f"http://rebind.test:{port}")
    assert fetched.card.name == "Public"
    assert public_site.hits == ["/.well-known/agent-card.json"]
    assert private_site.hits == []
