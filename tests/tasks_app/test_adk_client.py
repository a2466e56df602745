"""Google ADK's ``RemoteA2aAgent`` (from PyPI) in front of the relay: it reads an agent's card
from the relay's card URL, checks every interface URL on it (``https``, or ``http`` on a
loopback host, on the card's own origin) and calls the agent, with no model involved.

The relay's cards list the gRPC interface as a URL (``http://host:port``). ADK's origin rule
means it accepts the card when gRPC is reached at the relay's own origin (a proxy in front
routing ``application/grpc`` to ``run_grpc``: ``RELAY_GRPC_PUBLIC_ADDRESS``), as in production;
a gRPC server on a port of its own (``make up``) is another origin to ADK."""

from __future__ import annotations

import uuid

import httpx
import pytest

from routing.demo.agents import ECHO, build_agent_app
from tests.live import FREE_PORT, free_port

RELAY_ENV = {"RELAY_GRPC_PORT": FREE_PORT}


@pytest.fixture(scope="module", autouse=True)
def echo_agent(relay):
    relay.serve_agent("echo", lambda url: build_agent_app(ECHO, base_url=url))


@pytest.fixture(scope="module")
def proxied(relay):
    """A daphne of the relay whose cards give gRPC at its own origin, as a proxy in front of
    both servers would."""
    port = free_port()
    with relay.second(port=port, RELAY_GRPC_PUBLIC_ADDRESS=f"127.0.0.1:{port}") as base:
        yield base


def remote_agent(relay, base: str):
    from google.adk.agents.remote_a2a_agent import RemoteA2aAgent

    return RemoteA2aAgent(
        name="echo",
        agent_card=f"{relay.agent_url('echo', base)}.well-known/agent-card.json",
        httpx_client=httpx.AsyncClient(headers=relay.auth(), timeout=20),
    )


async def ask(agent, text: str) -> list[str]:
    """The texts of the events ADK's runner gives for one user message to ``agent``."""
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    sessions = InMemorySessionService()
    runner = Runner(app_name="interop", agent=agent, session_service=sessions)
    session = await sessions.create_session(app_name="interop", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    texts = []
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        if event.content:
            texts += [part.text for part in event.content.parts or [] if part.text]
    return texts


def test_the_relays_card_lists_grpc_as_a_url_on_the_relays_origin(relay, proxied):
    card = relay.card("echo", proxied)
    urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert urls["GRPC"] == proxied


async def test_adk_accepts_the_relays_card_with_grpc_and_calls_the_agent(relay, proxied):
    agent = remote_agent(relay, proxied)
    word = uuid.uuid4().hex[:8]
    texts = await ask(agent, f"echo {word}")
    assert any(word in text for text in texts), texts
