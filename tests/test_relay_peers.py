"""Two relays for real, each its own daphne process and database: relay B imports relay A's AI
Catalog, then follows A. What is registered, changed and deleted on A appears, changes and
disappears on B within one sync; mirrors carry their origin and A's card signature verifies on
B; when A follows B too, every agent stays listed once on each relay."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from contextlib import ExitStack

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict
from jwcrypto import jwk

from tests.agents import v1_only_agent
from tests.live import free_port, manage, python_process, relay_env, sdk_client
from tests.registry.test_cards import card_v1
from tests.servers import running
from tests.test_profiles import agent_site, wait_until


class Relay:
    def __init__(self, name: str, tmp_path, stack: ExitStack, template, **extra: str) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        var = tmp_path / name
        var.mkdir()
        self.env = relay_env(
            var,
            RELAY_PUBLIC_URL=self.url,
            RELAY_CATALOG_PUBLISHER=f"relay-{name}.test",
            # Each relay its own name in delegation chains (by default it comes from
            # SECRET_KEY, which two test relays share): a call B -> A is no loop.
            RELAY_ID=f"relay-{name}",
            # Only the syncs this test runs: no health sweeps or beat in the way.
            **extra,
        )
        # The run's migrated database (tests.live.shared_template), not a migration of its own.
        shutil.copyfile(template.database, var / "relay.sqlite3")
        self.key = manage(self.env, "create_api_key", f"{name}-admin", "--admin").split()[-1]
        self.process = stack.enter_context(
            python_process(
                self.env,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "relay_project.asgi:application",
            )
        )
        wait_until(self.listening, f"relay {name} listening", self.process)

    def listening(self) -> bool:
        try:
            return httpx.get(f"{self.url}/a2a/registry", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def call(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)

    def agents(self) -> dict[str, dict]:
        listed = self.call("GET", "/a2a/registry?limit=100").json()["agents"]
        return {agent["id"]: agent for agent in listed}

    def manage(self, *args: str) -> str:
        return manage(self.env, *args)


@pytest.fixture
def relays(tmp_path, relay_template):
    key_path = tmp_path / "relay-a-key.pem"
    key_path.write_bytes(
        jwk.JWK.generate(kty="EC", crv="P-256").export_to_pem(private_key=True, password=None)
    )
    with ExitStack() as stack:
        a = Relay("a", tmp_path, stack, relay_template, RELAY_CARD_SIGNING_KEY=str(key_path))
        b = Relay("b", tmp_path, stack, relay_template)
        yield a, b


def test_relay_b_imports_then_follows_relay_a_and_a_loop_keeps_one_of_each(relays):
    a, b = relays
    weather_card, echo_card, local_card = (
        card_v1(name="Weather"),
        card_v1(name="Echo", skills=[]),
        card_v1(name="Local", skills=[]),
    )
    with (
        agent_site(weather_card) as (_w, weather_url),
        agent_site(echo_card) as (_e, echo_url),
        agent_site(local_card) as (_l, local_url),
    ):
        created = a.call("POST", "/a2a/registry", json={"url": weather_url, "id": "weather"})
        assert created.status_code == 201, created.text

        # B imports A's catalog: the agent is registered from the card A serves for it.
        imported = b.manage("import_catalog", a.url, "--key", a.key)
        assert "1 added, 0 updated, 0 unchanged, 0 refused" in imported
        assert b.agents()["weather"]["cardUrl"] == (
            f"{a.url}/a2a/agents/weather/.well-known/agent-card.json"
        )
        assert b.agents()["weather"]["origin"] is None

        # B follows A: the imported agent becomes A's mirror; A's signature verifies on B.
        followed = b.manage("follow_relay", a.url, "--key", a.key, "--name", "relay-a", "--sync")
        assert "relay-a: 0 added, 0 updated, 1 unchanged" in followed
        weather = b.agents()["weather"]
        assert weather["origin"] == {
            "relay": a.url,
            "relayName": "relay-a",
            "id": "weather",
            "mode": "via_origin",
        }
        assert weather["signature"]["status"] == "verified", weather["signature"]
        assert weather["signature"]["keySetUrl"] == f"{a.url}/.well-known/jwks.json"
        assert weather["hasCredentials"] is True
        # Read-only on B.
        refused = b.call("PATCH", "/a2a/registry/weather", json={"description": "mine"})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "mirrored"
        assert b.call("GET", "/a2a/registry?signed=true").json()["agents"][0]["id"] == "weather"

        # Registered, changed and deleted on A: on B within one sync each.
        assert a.call("POST", "/a2a/registry", json={"url": echo_url, "id": "echo"}).is_success
        assert "1 added" in b.manage("sync_peers")
        assert b.agents()["echo"]["origin"]["id"] == "echo"

        changed = a.call("PATCH", "/a2a/registry/echo", json={"description": "Echoes louder"})
        assert changed.status_code == 200
        echo_card["version"] = "7.0.0"
        assert a.call("POST", "/a2a/registry/echo/refresh").json()["cardChanged"] is True
        synced = b.manage("sync_peers")
        assert "1 updated" in synced, synced
        assert b.agents()["echo"]["description"] == "Echoes louder"
        assert b.agents()["echo"]["version"] == "7.0.0"

        assert a.call("DELETE", "/a2a/registry/weather").status_code == 204
        synced = b.manage("sync_peers")
        assert "1 removed" in synced, synced
        assert set(b.agents()) == {"echo"}

        # The loop: A follows B as well, and B has an agent of its own.
        assert b.call("POST", "/a2a/registry", json={"url": local_url, "id": "local"}).is_success
        a.manage("follow_relay", b.url, "--key", b.key, "--name", "relay-b", "--sync")
        for _round in range(2):
            b.manage("sync_peers")
            a.manage("sync_peers")
        on_a, on_b = a.agents(), b.agents()
        assert sorted(on_a) == ["echo", "local"]
        assert sorted(on_b) == ["echo", "local"]
        assert on_a["echo"]["origin"] is None and on_a["local"]["origin"]["relayName"] == "relay-b"
        assert on_b["local"]["origin"] is None and on_b["echo"]["origin"]["relayName"] == "relay-a"
        # Each relay's catalog lists only its own agents: importing it back adds nothing.
        assert "0 added" in a.manage("import_catalog", b.url, "--key", b.key)
        assert "0 added" in b.manage("import_catalog", a.url, "--key", a.key)
        assert sorted(a.agents()) == ["echo", "local"]
        assert sorted(b.agents()) == ["echo", "local"]
        assert [
            e["identifier"]
            for e in httpx.get(f"{b.url}/.well-known/ai-catalog.json").json()["entries"]
        ] == ["urn:air:relay-b.test:agent:local"]


async def send_text(card: dict, text: str, *, key: str) -> list[dict]:
    """Sends one message with a2a-sdk's client (JSON-RPC 1.0, blocking) as a caller of the
    relay whose card it is; returns the events as A2A 1.0 JSON."""
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    headers = {"Authorization": f"Bearer {key}"}
    async with sdk_client(card, "JSONRPC", "1.0", headers=headers, streaming=False) as client:
        events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    return [MessageToDict(event) for event in events]


def test_a_mirror_is_called_through_its_origin_relay(relays):
    """B's mirror of an agent registered on A answers B's caller: B calls A's endpoint for the
    agent with A's key, and A calls the agent."""
    a, b = relays
    with running(v1_only_agent) as agent_url:
        created = a.call("POST", "/a2a/registry", json={"url": agent_url, "id": "talker"})
        assert created.status_code == 201, created.text
        b.manage("follow_relay", a.url, "--key", a.key, "--name", "relay-a", "--sync")
        card = httpx.get(
            f"{b.url}/a2a/agents/talker/.well-known/agent-card.json",
            headers={"A2A-Version": "1.0"},
        ).json()
        assert card["supportedInterfaces"][0]["url"] == f"{b.url}/a2a/agents/talker/"
        events = asyncio.run(send_text(card, "hello through two relays", key=b.key))
    # The echo agent answers with a message of the text it got, through both relays.
    assert [list(event) for event in events] == [["message"]], json.dumps(events)[:2000]
    assert events[0]["message"]["parts"] == [{"text": "hello through two relays"}]
    assert events[0]["message"]["role"] == "ROLE_AGENT"
    mirrored = b.agents()["talker"]
    assert mirrored["cardUrl"] == f"{a.url}/a2a/agents/talker/.well-known/agent-card.json"
    assert mirrored["origin"]["relay"] == a.url
