"""GetExtendedAgentCard through the relay (issue 13): the agent's extended card as the relay
serves it, like its public card: the relay's interfaces and security, the agent's URL nowhere,
the extended skills kept, and in the caller's version (a 0.3 caller gets the 0.3 card, a 1.0
caller the 1.0 card), in every binding, against a real a2a-sdk agent on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from routing.demo.agents import ECHO, Skill, build_agent_app
from tests.servers import running
from tests.tasks_app.a2a_http import (
    BINDINGS,
    REST_03,
    Binding,
    call,
    register,
    relay_client,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

SIGNED = Skill(id="signed", name="Signed echo", description="For known callers.", tags=("x",))


@pytest.fixture(scope="module")
def agent_url():
    with running(lambda url: build_agent_app(ECHO, base_url=url, extended_skills=(SIGNED,))) as url:
        yield url


@pytest.fixture
def agent(agent_url, transactional_db):
    return register(agent_url, ECHO, extendedAgentCard=True)


@pytest.fixture
def key(api_key):
    return api_key[1]


async def extended_card(binding: Binding, agent_id: str, key: str) -> dict:
    async with relay_client() as client:
        response = await call(client, agent_id, binding.extended_card(), binding.headers(key))
    assert response.status_code == 200, response.text
    body = response.json()
    return body["result"] if binding.jsonrpc else body


async def public_card(agent_id: str, version: str | None) -> dict:
    headers = {"A2A-Version": version} if version else {}
    async with relay_client() as client:
        response = await client.get(
            f"/a2a/agents/{agent_id}/.well-known/agent-card.json", headers=headers
        )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("binding", BINDINGS, ids=str)
async def test_the_extended_card_is_the_relays_in_the_callers_version(
    binding, agent, agent_url, key
):
    card = await extended_card(binding, agent.pk, key)
    base = f"http://testserver/a2a/agents/{agent.pk}/"
    assert agent_url.rstrip("/") not in json.dumps(card)  # no URL of the agent's survives
    assert [skill["id"] for skill in card["skills"]] == [*(s.id for s in ECHO.skills), "signed"]
    if binding.version == "1.0":
        public = await public_card(agent.pk, "1.0")
        assert "url" not in card and "protocolVersion" not in card
        for name in ("supportedInterfaces", "securitySchemes", "securityRequirements"):
            assert card[name] == public[name], name
        assert {i["url"] for i in card["supportedInterfaces"]} == {base}
    else:
        public = await public_card(agent.pk, None)  # a 0.3 reader's card
        assert "supportedInterfaces" not in card
        assert card["protocolVersion"] == "0.3.0"
        for name in ("url", "preferredTransport", "additionalInterfaces", "security"):
            assert card[name] == public[name], name
        assert card["url"] == base
        assert card["securitySchemes"] == public["securitySchemes"]


async def test_a_0_3_caller_reads_the_extended_card_with_the_0_3_sdk_model(agent, key):
    """What a2a-sdk 0.3.26's client does with the answer: validate it as its AgentCard."""
    from a2a.compat.v0_3 import types as types_v03

    card = await extended_card(REST_03, agent.pk, key)
    parsed = await sync_to_async(types_v03.AgentCard.model_validate)(card)
    assert parsed.url == card["url"] and [s.id for s in parsed.skills][-1] == "signed"
