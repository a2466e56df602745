"""The cards the relay serves, as the official SDKs' own parsers read them (issue 13, items 2
and 3): a2a-sdk 1.3 strictly, a2a-sdk 0.3.26's model, and integers in extension params."""

from __future__ import annotations

import copy
import json
from unittest import mock

import pytest
from a2a.client import card_resolver
from a2a.types import AgentCard
from google.protobuf import json_format

from registry import teams
from tests.factories import extension, make_agent

pytestmark = pytest.mark.django_db

BIG = 2**63 + 7
PARAMS = {"level": 2, "big": BIG, "ratio": 0.5, "nested": {"list": [1, {"deep": 3}]}}
PATHS = {
    "agent": "/a2a/agents/weather/.well-known/agent-card.json",
    "team": "/a2a/teams/crew/.well-known/agent-card.json",
    "relay": "/.well-known/agent-card.json",
}


@pytest.fixture
def served(settings):
    """An agent whose card declares an extension with integer params, and a team of it."""
    make_agent(
        agent_id="weather",
        capabilities={
            "streaming": True,
            "extensions": [extension("https://ext.example/tuning/v1", params=PARAMS)],
        },
    )
    teams.team_create(team_id="crew", name="Crew", members=["weather"], default_agent="weather")
    settings.RELAY_DEFAULT_AGENT = "weather"


def strict_sdk_parse(card: dict) -> AgentCard:
    """a2a-sdk 1.3's ``parse_agent_card`` (what its client runs on every card it fetches), with
    its final protobuf parse made strict: an unknown field, or a 0.3 field its compatibility
    step does not consume, is an error instead of being dropped."""

    def strict(document, message, **_ignored):
        return json_format.ParseDict(document, message)

    with mock.patch.object(card_resolver, "ParseDict", strict):
        return card_resolver.parse_agent_card(copy.deepcopy(card))


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_item2_every_relay_card_parses_strictly_in_a2a_sdk_1_3(client, served, kind):
    """Issue 13, item 2: the relay's cards mixed both security scheme shapes
    (``{httpAuthSecurityScheme, description, scheme, type}``), which a strict parse refuses."""
    card = client.get(PATHS[kind]).json()
    parsed = strict_sdk_parse(card)
    assert parsed.security_schemes["relayApiKey"].http_auth_security_scheme.scheme == "Bearer"
    assert [i.protocol_version for i in parsed.supported_interfaces] == ["1.0", "1.0", "0.3", "0.3"]
    scheme = card["securitySchemes"]["relayApiKey"]
    assert not ({"type", "scheme"} <= set(scheme) and "httpAuthSecurityScheme" in scheme)


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_item2_a_reader_asking_for_1_0_gets_only_1_0_fields(client, served, kind):
    """Issue 13, item 2: 1.0 fields only where 1.0 is asked for; even protobuf's plain strict
    parse, without the SDK's 0.3 compatibility step, reads that card."""
    response = client.get(PATHS[kind], headers={"A2A-Version": "1.0"})
    card = response.json()
    parsed = json_format.ParseDict(copy.deepcopy(card), AgentCard())
    assert parsed.security_schemes["relayApiKey"].http_auth_security_scheme.scheme == "Bearer"
    assert "url" not in card and "security" not in card
    assert response["Vary"] == "A2A-Version"
    assert response["ETag"] != client.get(PATHS[kind])["ETag"]


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_item2_every_relay_card_is_a_valid_card_for_a2a_sdk_0_3_26(
    client, served, kind, a2a_sdk_03
):
    """Issue 13, item 2: a2a-sdk 0.3.26's AgentCard model (what its resolver validates) reads
    the card a reader without ``A2A-Version`` gets, with its endpoint and security."""
    card = client.get(PATHS[kind]).json()
    answer = a2a_sdk_03.client({"parse_card": card})
    assert "error" not in answer, answer
    assert answer["card"]["url"] == card["supportedInterfaces"][2]["url"]
    assert answer["card"]["preferredTransport"] == "JSONRPC"
    assert answer["card"]["securitySchemes"]["relayApiKey"] == {
        "type": "http",
        "scheme": "Bearer",
        "description": "A Brass Relay API key, sent as 'Authorization: Bearer <key>'.",
    }


@pytest.mark.parametrize("version", [None, "1.0"])
def test_item3_integer_extension_params_stay_integers_in_the_relays_card(client, served, version):
    """Issue 13, item 3: ``"level": 2`` was served as ``2.0`` (and large integers rounded) in
    the relay's card of an agent, through the registry's protobuf parse of the card."""
    headers = {"A2A-Version": version} if version else {}
    body = client.get(PATHS["agent"], headers=headers).content.decode()
    params = json.loads(body)["capabilities"]["extensions"][0]["params"]
    assert json.dumps(params, sort_keys=True) == json.dumps(PARAMS, sort_keys=True)
    assert '"level": 2,' in body or '"level":2,' in body
    assert str(BIG) in body
