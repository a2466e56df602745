"""Following a peer relay, in one process: the peer is a real HTTP server on 127.0.0.1 that
answers the registry API's list (with cursors), removed list and cards. The two-relay run with
real daphne processes is tests/test_relay_peers.py."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from starlette.responses import JSONResponse

from registry import peers, secrets
from registry.models import Agent, PeerRelay
from tests.cardservers import card_json, card_site
from tests.factories import card, make_agent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]


class FakePeer:
    """A peer relay's registry: ``agents`` (API shape) listed two per page, ``removed`` ids,
    and a card for each agent at the relay's card path."""

    def __init__(self, site, url: str) -> None:
        self.site, self.url = site, url
        self.agents: list[dict] = []
        self.removed: list = []
        self.removed_page_size = 1000
        self.queries: list[dict] = []
        site.routes["/a2a/registry"] = self.page
        site.routes["/a2a/registry/removed"] = self.removed_page

    def add(self, agent_id: str, *, origin=None, **fields) -> dict:
        remote = {
            "id": agent_id,
            "name": fields.pop("name", agent_id.title()),
            "description": fields.pop("description", f"The {agent_id} agent"),
            "status": "active",
            "cardUrl": f"https://{agent_id}.example/.well-known/agent-card.json",
            "origin": origin,
            **fields,
        }
        self.agents.append(remote)
        self.site.routes[f"/a2a/agents/{agent_id}/.well-known/agent-card.json"] = card_json(
            card(name=remote["name"])
        )
        return remote

    def page(self, request):
        self.queries.append({"path": "list", **dict(request.query_params), **_auth(request)})
        ordered = sorted(self.agents, key=lambda a: a["id"])
        cursor = request.query_params.get("cursor")
        if cursor:
            ordered = [a for a in ordered if a["id"] > cursor]
        page = ordered[:2]
        more = len(ordered) > 2
        return JSONResponse({"agents": page, "nextCursor": page[-1]["id"] if more else None})

    def removed_page(self, request):
        """Removed ids at or after ``since``, oldest first, ``removed_page_size`` at most;
        ``removed`` holds ids (removed now) or (id, time) pairs."""
        self.queries.append({"path": "removed", **dict(request.query_params)})
        since = parse_datetime(request.query_params["since"])
        rows = []
        for entry in self.removed:
            agent_id, at = entry if isinstance(entry, tuple) else (entry, timezone.now())
            if at >= since:
                rows.append({"id": agent_id, "at": at.isoformat()})
        rows.sort(key=lambda row: row["at"])
        return JSONResponse({"removed": rows[: self.removed_page_size]})


def _auth(request) -> dict:
    return {"authorization": request.headers.get("authorization", "")}


@pytest.fixture
def peer():
    with card_site({}) as (site, url):
        yield FakePeer(site, url)


def follow(fake: FakePeer, **kwargs) -> PeerRelay:
    return peers.peer_follow(url=fake.url, api_key="peer-key", name="peer", **kwargs)


def test_the_first_sync_mirrors_every_page_and_skips_the_peers_own_mirrors(peer):
    for agent_id in ("alpha", "beta", "gamma"):
        peer.add(agent_id)
    peer.add("echo", origin={"relay": "http://elsewhere", "id": "echo"})
    relay = follow(peer)
    report = peers.peer_sync(peer=relay)
    assert report.added == ["alpha", "beta", "gamma"]
    assert report.skipped == [{"id": "echo", "reason": "a mirror at the peer"}]
    assert [q.get("cursor") for q in peer.queries if q["path"] == "list"] == [None, "beta"]
    assert all(q["authorization"] == "Bearer peer-key" for q in peer.queries)
    alpha = Agent.objects.get(pk="alpha")
    assert (alpha.origin_peer, alpha.origin_id) == (relay, "alpha")
    assert alpha.card_url == f"{peer.url}/a2a/agents/alpha/.well-known/agent-card.json"
    assert alpha.credential_kind == "bearer"  # calls go through the peer with its key
    assert alpha.description == "The alpha agent"
    relay.refresh_from_db()
    assert relay.synced_until is not None
    assert relay.last_report["added"] == ["alpha", "beta", "gamma"]


def test_a_later_sync_asks_for_changes_only_and_follows_them(peer):
    peer.add("alpha")
    beta = peer.add("beta")
    relay = follow(peer)
    peers.peer_sync(peer=relay)
    relay.refresh_from_db()
    watermark = relay.synced_until
    peer.queries.clear()
    beta["description"] = "Changed at the origin"
    beta["status"] = "deprecated"
    peer.removed.append("alpha")
    peer.agents.remove(next(a for a in peer.agents if a["id"] == "alpha"))
    report = peers.peer_sync(peer=relay)
    assert report.removed == ["alpha"]
    assert report.updated == ["beta"]
    assert [q["path"] for q in peer.queries] == ["removed", "list"]
    since = peer.queries[1]["updatedSince"]
    assert since == peer.queries[0]["since"]
    assert since < watermark.isoformat()  # the overlap
    assert not Agent.objects.filter(pk="alpha").exists()
    mirrored = Agent.objects.get(pk="beta")
    assert (mirrored.description, mirrored.status) == ("Changed at the origin", "deprecated")


def test_removals_are_read_page_after_page(peer, monkeypatch):
    from datetime import timedelta

    monkeypatch.setattr(peers, "REMOVED_PAGE", 2)
    peer.removed_page_size = 2
    for agent_id in ("a1", "a2", "a3", "a4", "a5"):
        peer.add(agent_id)
    relay = follow(peer)
    peers.peer_sync(peer=relay)
    soon = timezone.now() + timedelta(seconds=1)
    peer.removed = [(f"a{n}", soon + timedelta(milliseconds=n)) for n in range(1, 6)]
    peer.agents.clear()
    report = peers.peer_sync(peer=relay)
    assert sorted(report.removed) == ["a1", "a2", "a3", "a4", "a5"]
    # Each page starts at the last time of the one before ("at or after"), so pages overlap
    # by one: nothing deleted in the same microsecond as a page's last entry is missed.
    assert [q["path"] for q in peer.queries].count("removed") == 5


def test_a_first_sync_removes_mirrors_the_peer_no_longer_has(peer):
    peer.add("alpha")
    relay = follow(peer)
    peers.peer_sync(peer=relay)
    peer.agents.clear()
    PeerRelay.objects.filter(pk=relay.pk).update(synced_until=None)
    relay.refresh_from_db()
    assert peers.peer_sync(peer=relay).removed == ["alpha"]


def test_direct_mode_registers_the_agents_own_card(peer):
    with card_site({"/.well-known/agent-card.json": card_json(card(name="Own"))}) as (_s, url):
        peer.add("alpha", cardUrl=f"{url}/.well-known/agent-card.json")
        relay = follow(peer, mode="direct")
        peers.peer_sync(peer=relay)
    alpha = Agent.objects.get(pk="alpha")
    assert alpha.card_url == f"{url}/.well-known/agent-card.json"
    assert not alpha.has_credentials


def test_an_id_taken_here_gets_the_peers_name(peer):
    make_agent(agent_id="alpha")
    peer.add("alpha")
    peers.peer_sync(peer=follow(peer))
    assert Agent.objects.get(pk="alpha-peer").origin_id == "alpha"
    assert Agent.objects.get(pk="alpha").origin_peer is None


def test_an_unreachable_peer_keeps_its_watermark_and_records_why(peer):
    relay = follow(peer)
    peer.site.routes["/a2a/registry"] = lambda request: JSONResponse({}, status_code=502)
    with pytest.raises(peers.PeerError, match="answered HTTP 502"):
        peers.peer_sync(peer=relay)
    relay.refresh_from_db()
    assert relay.synced_until is None
    assert "502" in relay.last_error


def test_follow_relay_stores_the_key_encrypted_and_refuses_private_addresses(peer, settings):
    peer.add("alpha")
    call_command("follow_relay", peer.url, "--key", "s3cret-key", "--name", "west", "--sync")
    relay = PeerRelay.objects.get(name="west")
    assert "s3cret-key" not in relay.api_key
    assert secrets.decrypt(relay.api_key) == "s3cret-key"
    assert Agent.objects.get(pk="alpha").origin_peer == relay
    with pytest.raises(CommandError, match="already named 'west'"):
        call_command("follow_relay", "http://127.0.0.1:9", "--name", "west")
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    with pytest.raises(CommandError, match="non-public address"):
        call_command("follow_relay", "http://10.0.0.1:8000")


def test_a_mirror_is_read_only_in_the_api_and_the_admin(peer, admin_client):
    peer.add("alpha")
    peers.peer_sync(peer=follow(peer))
    from rest_framework.test import APIClient

    from registry.services import api_key_create

    _key, secret = api_key_create(name="admin", is_admin=True)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    for method in ("patch", "delete"):
        answer = getattr(api, method)("/a2a/registry/alpha", {"name": "x"}, format="json")
        assert answer.status_code == 409
        assert answer.json()["error"]["code"] == "mirrored"
    assert api.get("/a2a/registry?mirrored=true").json()["agents"][0]["origin"] == {
        "relay": peer.url,
        "relayName": "peer",
        "id": "alpha",
        "mode": "via_origin",
    }
    change = admin_client.post("/admin/registry/agent/alpha/change/", {"name": "x"})
    assert change.status_code == 403
    assert Agent.objects.get(pk="alpha").name == "Alpha"


def test_the_admin_adds_a_peer_with_a_key_it_never_shows(admin_client):
    answer = admin_client.post(
        "/admin/registry/peerrelay/add/",
        {
            "name": "east",
            "url": "http://127.0.0.1:9/",
            "mode": "via_origin",
            "enabled": "on",
            "new_api_key": "br_top_secret",
        },
    )
    assert answer.status_code == 302, answer.content[:2000]
    relay = PeerRelay.objects.get(name="east")
    assert relay.url == "http://127.0.0.1:9"
    assert secrets.decrypt(relay.api_key) == "br_top_secret"
    page = admin_client.get(f"/admin/registry/peerrelay/{relay.pk}/change/")
    assert "br_top_secret" not in page.text


def test_the_beat_job_syncs_every_enabled_peer(peer):
    from registry.tasks import sync_peers
    from routing.schedules import schedules

    peer.add("alpha")
    follow(peer)
    assert sync_peers() == {
        "peer": "1 added, 0 updated, 0 unchanged, 0 removed, 0 skipped, 0 refused"
    }
    assert any(s.task == "registry.sync_peers" for s in schedules())


def test_the_agent_page_shows_the_origin_and_signature_badges(peer, client):
    peer.add("alpha")
    peers.peer_sync(peer=follow(peer))
    Agent.objects.filter(pk="alpha").update(signature_status="verified", signature_kid="k1")
    page = client.get("/agents/alpha/").text
    assert "from peer" in page
    assert 'class="chip chip-signed"' in page
    assert "read-only here" in page
    listing = client.get("/").text
    assert "chip-origin" in listing and "chip-signed" in listing
    make_agent(agent_id="local")
    mirrored_only = client.get("/?mirrored=true").text
    assert "/agents/alpha/" in mirrored_only and "/agents/local/" not in mirrored_only
    unsigned_only = client.get("/?signed=false").text
    assert "/agents/local/" in unsigned_only and "/agents/alpha/" not in unsigned_only


@pytest.mark.django_db(transaction=True)
def test_the_badges_in_a_real_browser(peer, live_server, monkeypatch):
    from tests.browser import CHROMIUM, chromium_page, screenshot

    if not CHROMIUM.exists():
        pytest.skip("Chromium from Debian's packages is not installed: apt-get install chromium")
    peer.add("alpha")
    peers.peer_sync(peer=follow(peer))
    Agent.objects.filter(pk="alpha").update(
        signature_status="verified",
        signature_kid="k1",
        require_signature=True,
        card_refused_reason="invalid: the signature with key 'k1' does not match the card's content",
    )
    with chromium_page(monkeypatch) as page:
        page.goto(f"{live_server.url}/agents/alpha/")
        assert page.locator(".agent-state .chip-signed").inner_text() == "signed"
        assert page.locator(".agent-state .chip-origin").inner_text() == "from peer"
        assert "newer card refused" in page.locator(".agent-state").inner_text()
        screenshot(page, "agent-mirrored-signed")
        page.goto(f"{live_server.url}/")
        assert page.locator(".chip-origin").count() == 1
        screenshot(page, "registry-mirrored-signed")


def test_a_card_invalid_at_the_origin_shows_invalid_here_not_unsigned(peer):
    peer.add("alpha", signature={"status": "invalid", "detail": "the signature does not verify"})
    peer.add("beta", signature={"status": "unsigned", "detail": ""})
    relay = follow(peer)
    peers.peer_sync(peer=relay)
    alpha, beta = Agent.objects.get(pk="alpha"), Agent.objects.get(pk="beta")
    assert alpha.signature_status == "invalid"
    assert alpha.signature_detail == (
        "invalid at the origin relay peer: the signature does not verify"
    )
    assert beta.signature_status == "unsigned"
    peers.peer_sync(peer=relay)  # the refresh checks the peer's unsigned card again
    assert Agent.objects.get(pk="alpha").signature_status == "invalid"
