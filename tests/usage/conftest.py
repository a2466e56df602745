"""Fixtures of the usage tests: the metered agents on 127.0.0.1, registered with prices and
in team "pair", and the relay in-process over ASGI."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from registry.services import agent_register
from registry.teams import team_create
from registry.usage_models import AgentPrice
from tests.servers import running_many
from tests.usage.metered import NEXT, TOKENS, metered_agent

PRICES = {
    "meter-a": dict(
        per_call=Decimal("0.01"),
        per_million_input_tokens=Decimal("2.50"),
        per_million_output_tokens=Decimal("10"),
    ),
    "meter-b": dict(per_call=Decimal("0.25"), per_million_output_tokens=Decimal("0.4")),
}


def expected_cost(agent_id: str) -> Decimal:
    price, (tokens_in, tokens_out) = PRICES[agent_id], TOKENS[agent_id]
    return (
        price.get("per_call", Decimal(0))
        + tokens_in * price.get("per_million_input_tokens", Decimal(0)) / 1_000_000
        + tokens_out * price.get("per_million_output_tokens", Decimal(0)) / 1_000_000
    )


@pytest.fixture(scope="module")
def agent_urls():
    with running_many({slug: metered_agent(slug) for slug in TOKENS}) as urls:
        yield urls


@pytest.fixture
def metered(agent_urls, allow_private_urls):
    NEXT.update({"meter-a": None, "meter-b": None})
    for slug, url in agent_urls.items():
        agent_register(url=url, agent_id=slug)
        AgentPrice.objects.create(agent_id=slug, **PRICES[slug])
    team_create(
        team_id="pair",
        name="Pair",
        members=["meter-a", "meter-b"],
        default_agent="meter-a",
        max_routing_hops=10,
    )


def make_key(name: str):
    from registry.services import api_key_create

    return api_key_create(name=name)


@pytest.fixture
async def relay(transactional_db):
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"A2A-Version": "1.0"},
        timeout=20,
    ) as client:
        yield client


def message(text: str) -> dict:
    return {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}


async def rpc(client, path: str, secret: str, method: str, text: str) -> httpx.Response:
    return await client.post(
        path,
        headers={"Authorization": f"Bearer {secret}"},
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message(text)}},
    )


async def rest_send(client, agent_id: str, secret: str, text: str) -> httpx.Response:
    return await client.post(
        f"/a2a/agents/{agent_id}/message:send",
        headers={"Authorization": f"Bearer {secret}"},
        json={"message": message(text)},
    )
