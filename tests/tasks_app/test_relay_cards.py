"""The cards the relay serves: rewritten agent cards, team and relay cards, hybrid and 0.2 forms.

No database: the functions are pure. The SDK is the judge of what a client can read and use.
"""

import copy
import json

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from registry.cards import parse_card
from registry.extensions import CLIENT_ROUTING_URI
from tasks_app.cards import (
    CARD_CACHE_CONTROL,
    agent_card_for_relay,
    card_etag,
    card_for_reader,
    hybrid_card,
    legacy_0_2_card,
    relay_interfaces,
    relay_security,
    relay_self_card,
    team_card,
)
from tasks_app.protocol.errors import VersionNotSupported
from tasks_app.protocol.validation import parse_v1
from tasks_app.protocol.versions import ProtocolVersion

BASE = "https://relay.example/a2a/agents/echo/"
UPSTREAM_HOST = "upstream.internal"
PARAMS = {"maxPeers": 5, "weights": [1, 2], "ratio": 0.5, "nested": {"depth": 3}}


def make_upstream_card(**overrides):
    """An upstream agent's card as registry.cards normalizes it (1.0 ProtoJSON)."""
    card = {
        "name": "Echo",
        "description": "Echoes what it is told",
        "supportedInterfaces": [
            {
                "url": f"https://{UPSTREAM_HOST}/rpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
                "tenant": "acme",
            },
            {
                "url": f"https://{UPSTREAM_HOST}/rest",
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "0.3",
            },
        ],
        "provider": {"organization": "Echo Inc", "url": "https://echo.example"},
        "version": "2.1.0",
        "documentationUrl": "https://docs.echo.example/",
        "iconUrl": "https://echo.example/icon.png",
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
            "extendedAgentCard": True,
            "extensions": [
                {"uri": "https://ext.example/tuning/v1", "required": True, "params": PARAMS}
            ],
        },
        "securitySchemes": {
            "upstreamOauth": {
                "oauth2SecurityScheme": {
                    "flows": {
                        "clientCredentials": {
                            "tokenUrl": f"https://{UPSTREAM_HOST}/token",
                            "scopes": {"echo": "use echo"},
                        }
                    }
                }
            }
        },
        "securityRequirements": [{"schemes": {"upstreamOauth": {"list": ["echo"]}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": "echo",
                "name": "Echo",
                "description": "Says it back",
                "tags": ["demo"],
                "examples": ["hello"],
                "securityRequirements": [{"schemes": {"upstreamOauth": {"list": ["echo"]}}}],
            }
        ],
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2lnbmF0dXJl"}],
    }
    card.update(overrides)
    return card


def same_json(left, right):
    """Equal including number types: 5 and 5.0 differ."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def interfaces_of(proto_card):
    return [MessageToDict(interface) for interface in proto_card.supported_interfaces]


# relay_interfaces / relay_security ------------------------------------------------------------


def test_the_relay_serves_four_interfaces_at_the_base_in_order_of_preference():
    assert relay_interfaces(BASE) == [
        {"url": BASE, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": BASE, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": BASE, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": BASE, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]


@pytest.mark.parametrize("given", [BASE.rstrip("/"), BASE + "/"])
def test_the_base_url_always_ends_in_exactly_one_slash(given):
    assert {interface["url"] for interface in relay_interfaces(given)} == {BASE}


@pytest.mark.parametrize("given", ["", "/a2a/agents/echo/", "relay.example/a2a/"])
def test_a_base_url_that_is_not_absolute_is_refused(given):
    with pytest.raises(ValueError, match="absolute"):
        relay_interfaces(given)


def test_the_relay_security_is_one_bearer_scheme_required_without_scopes():
    schemes, requirements = relay_security()
    assert list(schemes) == ["relayApiKey"]
    assert schemes["relayApiKey"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert (
        "Authorization: Bearer" in schemes["relayApiKey"]["httpAuthSecurityScheme"]["description"]
    )
    assert requirements == [{"schemes": {"relayApiKey": {"list": []}}}]


def test_relay_security_hands_out_fresh_objects():
    schemes, requirements = relay_security()
    schemes["relayApiKey"]["httpAuthSecurityScheme"]["scheme"] = "Basic"
    requirements.clear()
    assert relay_security()[0]["relayApiKey"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert relay_security()[1]


# agent_card_for_relay -------------------------------------------------------------------------


def test_a_rewritten_card_points_every_interface_at_the_relay():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    assert card["supportedInterfaces"] == relay_interfaces(BASE)
    assert UPSTREAM_HOST not in json.dumps(card)
    assert "tenant" not in json.dumps(card["supportedInterfaces"])


def test_a_rewritten_card_carries_the_relay_security_and_none_of_the_upstreams():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    assert (card["securitySchemes"], card["securityRequirements"]) == relay_security()
    assert "upstreamOauth" not in json.dumps(card)
    assert all("securityRequirements" not in skill for skill in card["skills"])


def test_a_rewritten_card_drops_the_signatures_that_no_longer_verify():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    assert "signatures" not in card


def test_a_rewritten_card_keeps_what_the_upstream_says_about_itself():
    upstream = make_upstream_card()
    card = agent_card_for_relay(upstream, base_url=BASE)
    for field in (
        "name",
        "description",
        "version",
        "provider",
        "documentationUrl",
        "iconUrl",
        "defaultInputModes",
        "defaultOutputModes",
    ):
        assert card[field] == upstream[field], field
    assert card["skills"] == [
        {
            "id": "echo",
            "name": "Echo",
            "description": "Says it back",
            "tags": ["demo"],
            "examples": ["hello"],
        }
    ]


def test_a_rewritten_card_keeps_the_declared_capabilities_but_push_is_the_relays():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["extendedAgentCard"] is True
    assert card["capabilities"]["pushNotifications"] is True  # upstream said False
    assert card["capabilities"]["extensions"][0]["uri"] == "https://ext.example/tuning/v1"
    assert card["capabilities"]["extensions"][0]["required"] is True
    no_push = agent_card_for_relay(make_upstream_card(), base_url=BASE, push_notifications=False)
    assert no_push["capabilities"]["pushNotifications"] is False


def test_ints_in_extension_params_survive_the_rewrite_the_hybrid_and_the_02_card():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    hybrid = hybrid_card(card)
    legacy = legacy_0_2_card(hybrid)
    for served in (card, hybrid, legacy):
        assert same_json(served["capabilities"]["extensions"][0]["params"], PARAMS)


def test_rewriting_never_mutates_the_upstream_card():
    upstream = make_upstream_card()
    before = copy.deepcopy(upstream)
    card = agent_card_for_relay(upstream, base_url=BASE)
    card["capabilities"]["extensions"][0]["params"]["maxPeers"] = 99
    card["skills"][0]["tags"].append("changed")
    assert upstream == before


def test_a_registered_03_card_is_rewritten_without_a_trace_of_its_endpoints():
    registered = parse_card(
        {
            "name": "Legacy",
            "description": "A 0.3 agent",
            "url": f"http://{UPSTREAM_HOST}:9000/a2a",
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [
                {"url": f"http://{UPSTREAM_HOST}:9000/rest", "transport": "HTTP+JSON"}
            ],
            "protocolVersion": "0.3.0",
            "version": "1",
            "capabilities": {"streaming": False},
            "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
            "security": [{"key": []}],
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "old", "name": "Old", "description": "old skill", "tags": []}],
        }
    )
    card = agent_card_for_relay(registered.normalized, base_url=BASE)
    served = json.dumps(hybrid_card(card))
    assert UPSTREAM_HOST not in served
    assert "X-Key" not in served
    assert card["capabilities"]["streaming"] is False


# hybrid_card ----------------------------------------------------------------------------------


def test_the_hybrid_card_adds_the_03_fields_for_the_relays_03_interfaces():
    hybrid = hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE))
    assert hybrid["url"] == BASE
    assert hybrid["preferredTransport"] == "JSONRPC"
    assert hybrid["protocolVersion"] == "0.3.0"
    assert hybrid["additionalInterfaces"] == [{"url": BASE, "transport": "HTTP+JSON"}]
    assert hybrid["supportsAuthenticatedExtendedCard"] is True
    assert hybrid["security"] == [{"relayApiKey": []}]
    scheme = hybrid["securitySchemes"]["relayApiKey"]
    description = "A Brass Relay API key, sent as 'Authorization: Bearer <key>'."
    # The 0.3 shape alone: no shape serves every reader (see the tests below).
    assert scheme == {"type": "http", "scheme": "Bearer", "description": description}


def readers_of_the_card_without_a_version(card: dict) -> dict[str, bool]:
    """Whether each reader that fetches a card without ``A2A-Version`` reads it with the
    relay's security: a2a-sdk 0.3.26's AgentCard model; a2a-sdk 1.3's ``parse_agent_card``
    made strict (issue 13); a 1.0 ProtoJSON reader without the SDK's 0.3 step, which skips
    fields it does not know (the conformance suite's card-structure check reads so)."""
    import pydantic
    from a2a.types import a2a_pb2
    from google.protobuf.json_format import ParseDict, ParseError

    from tests.tasks_app.test_card_fidelity import strict_sdk_parse

    def reads(read) -> bool:
        try:
            return read()
        except (ParseError, pydantic.ValidationError):
            return False

    def v03() -> bool:
        scheme = types_v03.AgentCard.model_validate(card).security_schemes["relayApiKey"]
        return scheme.root.type == "http"

    def sdk_strict() -> bool:
        scheme = strict_sdk_parse(card).security_schemes["relayApiKey"]
        return scheme.WhichOneof("scheme") == "http_auth_security_scheme"

    def protojson() -> bool:
        read = ParseDict(card, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
        return read.security_schemes["relayApiKey"].WhichOneof("scheme") is not None

    return {"0.3": reads(v03), "1.3 strict": reads(sdk_strict), "1.0 protojson": reads(protojson)}


def test_no_security_scheme_shape_serves_every_reader_of_the_card_without_a_version():
    """Issue 34, item 9: the card fetched without ``A2A-Version`` is refused by the conformance
    suite's 1.0 card-structure check. Its one security scheme can be written three ways, and
    each leaves one reader out: 0.3 needs ``type``; with ``type``, a2a-sdk's 0.3 step wraps
    the whole scheme, so a strict parse refuses a 1.0 wrapper beside it; a 1.0 reader without
    that step needs the wrapper. The relay keeps the 0.3 shape (the SDKs both read it); 1.0
    readers that check structure ask with ``A2A-Version: 1.0`` and get the 1.0 card."""
    served = hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE))
    wrapped = {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
    typed = {"type": "http", "scheme": "Bearer"}
    shapes = {"served": served["securitySchemes"]["relayApiKey"], "1.0": wrapped}
    shapes["both"] = {**typed, **wrapped}
    verdicts = {
        name: readers_of_the_card_without_a_version(
            {**served, "securitySchemes": {"relayApiKey": scheme}}
        )
        for name, scheme in shapes.items()
    }
    assert verdicts == {
        "served": {"0.3": True, "1.3 strict": True, "1.0 protojson": False},
        "1.0": {"0.3": False, "1.3 strict": True, "1.0 protojson": True},
        "both": {"0.3": True, "1.3 strict": False, "1.0 protojson": True},
    }


def test_no_card_reads_both_in_a_strict_10_parse_and_in_the_03_model():
    """Issue 34, item 9, the limit: a 0.3 reader needs the card's top-level ``url`` (the 0.3
    AgentCard requires it) and the 1.0 AgentCard has no such field, so a parse that refuses
    unknown fields refuses every card a 0.3 reader can use. The card fetched without a version
    stays the hybrid; strict 1.0 readers ask with ``A2A-Version: 1.0`` and get the 1.0 card."""
    import pydantic
    from a2a.types import a2a_pb2
    from google.protobuf.json_format import ParseDict, ParseError

    hybrid = hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE))
    with pytest.raises(ParseError, match="url"):
        ParseDict({"url": hybrid["url"]}, a2a_pb2.AgentCard())
    without_url = {key: value for key, value in hybrid.items() if key != "url"}
    with pytest.raises(pydantic.ValidationError, match="url"):
        types_v03.AgentCard.model_validate(without_url)
    only_v1 = card_for_reader(
        agent_card_for_relay(make_upstream_card(), base_url=BASE), version=ProtocolVersion.V1_0
    )
    ParseDict(only_v1, a2a_pb2.AgentCard())  # strict: nothing unknown


def test_the_hybrid_card_reads_back_in_the_sdk_as_the_same_10_card():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    hybrid = hybrid_card(card)
    parsed = parse_agent_card(copy.deepcopy(hybrid))
    assert interfaces_of(parsed) == relay_interfaces(BASE)
    assert MessageToDict(parsed) == MessageToDict(parse_agent_card(copy.deepcopy(card)))


def test_the_hybrid_card_is_a_valid_03_card_for_the_sdks_03_model():
    hybrid = hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE))
    legacy = types_v03.AgentCard.model_validate(hybrid)
    assert legacy.url == BASE
    assert legacy.security_schemes["relayApiKey"].root.type == "http"
    assert [interface.transport for interface in legacy.additional_interfaces] == ["HTTP+JSON"]


def test_the_hybrid_card_states_no_extended_card_when_the_upstream_has_none():
    upstream = make_upstream_card()
    del upstream["capabilities"]["extendedAgentCard"]
    hybrid = hybrid_card(agent_card_for_relay(upstream, base_url=BASE))
    assert "supportsAuthenticatedExtendedCard" not in hybrid


def test_building_the_hybrid_card_leaves_the_10_card_alone():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    before = copy.deepcopy(card)
    hybrid = hybrid_card(card)
    hybrid["capabilities"]["extensions"][0]["params"]["maxPeers"] = 99
    assert card == before


def test_a_card_without_a_03_interface_gets_no_03_fields():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    card["supportedInterfaces"] = card["supportedInterfaces"][:2]
    hybrid = hybrid_card(card)
    assert "url" not in hybrid
    assert "protocolVersion" not in hybrid


# The SDK client against the cards (no server: httpx.MockTransport answers) ---------------------


def _answer(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content or b"{}")
    if body.get("method") == "SendMessage":
        result = {"message": {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})
    if body.get("method") == "message/send":
        result = {
            "kind": "message",
            "messageId": "r1",
            "role": "agent",
            "parts": [{"kind": "text", "text": "ok"}],
        }
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})
    if request.url.path.endswith("/v1/message:send"):  # 0.3 proto JSON
        message = {"messageId": "r1", "role": "ROLE_AGENT", "content": [{"text": "ok"}]}
        return httpx.Response(200, json={"message": message})
    message = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}
    return httpx.Response(200, json={"message": message})


def _card_as_seen_by(reader: str) -> object:
    """The hybrid card as a 1.x SDK client reads it, or as a 0.3 client does (0.3 fields only)."""
    hybrid = hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE))
    if reader == "0.3":
        del hybrid["supportedInterfaces"]
    return parse_agent_card(hybrid)


@pytest.mark.parametrize(
    ("reader", "binding", "transport_class", "url", "method"),
    [
        ("1.0", "JSONRPC", JsonRpcTransport, BASE, "SendMessage"),
        ("1.0", "HTTP+JSON", RestTransport, BASE + "message:send", None),
        ("0.3", "JSONRPC", CompatJsonRpcTransport, BASE, "message/send"),
        ("0.3", "HTTP+JSON", CompatRestTransport, BASE + "v1/message:send", None),
    ],
)
async def test_an_sdk_client_reaches_the_relay_through_every_interface_of_the_card(
    reader, binding, transport_class, url, method
):
    sent = []

    def record(request):
        sent.append(request)
        return _answer(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as http:
        config = ClientConfig(
            httpx_client=http, streaming=False, supported_protocol_bindings=[binding]
        )
        client = ClientFactory(config).create(_card_as_seen_by(reader))
        assert type(client._transport) is transport_class
        request = SendMessageRequest(
            message=Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hi")])
        )
        events = [event async for event in client.send_message(request)]

    assert [event.message.parts[0].text for event in events] == ["ok"]
    assert [(r.method, str(r.url)) for r in sent] == [("POST", url)]
    assert json.loads(sent[0].content).get("method") == method


# relay_self_card ------------------------------------------------------------------------------


def test_the_relay_card_declares_streaming_push_and_client_routing():
    card = relay_self_card(
        base_url="https://relay.example/a2a/relay", version="0.1.0", skills=[], default_target=None
    )
    assert card["supportedInterfaces"] == relay_interfaces("https://relay.example/a2a/relay/")
    assert (card["securitySchemes"], card["securityRequirements"]) == relay_security()
    assert card["capabilities"] == {
        "streaming": True,
        "pushNotifications": True,
        "extensions": [
            {
                "uri": CLIENT_ROUTING_URI,
                "description": "Receives peer agents and chooses the next recipient",
                "required": False,
            }
        ],
    }
    assert card["defaultInputModes"] == ["text/plain", "application/json"]
    assert card["defaultOutputModes"] == ["text/plain", "application/json"]
    assert (card["name"], card["version"]) == ("Brass Relay", "0.1.0")
    assert card["description"]


def test_the_relay_card_without_skills_has_one_generic_skill_naming_the_default_target():
    card = relay_self_card(base_url=BASE, version="1", skills=[], default_target="echo")
    assert [skill["id"] for skill in card["skills"]] == ["relay"]
    assert "'echo'" in card["skills"][0]["description"]
    untargeted = relay_self_card(base_url=BASE, version="1", skills=[], default_target=None)
    assert "'echo'" not in untargeted["skills"][0]["description"]


def test_the_relay_card_serves_the_given_skills_without_their_security():
    skills = make_upstream_card()["skills"]
    card = relay_self_card(base_url=BASE, version="1", skills=skills, default_target="echo")
    assert [skill["id"] for skill in card["skills"]] == ["echo"]
    assert "securityRequirements" not in card["skills"][0]
    assert "securityRequirements" in skills[0]


def test_the_relay_card_is_valid_for_the_sdk_in_10_and_03():
    card = relay_self_card(base_url=BASE, version="1", skills=[], default_target=None)
    parsed = parse_agent_card(copy.deepcopy(hybrid_card(card)))
    assert interfaces_of(parsed) == relay_interfaces(BASE)
    assert parsed.capabilities.extensions[0].uri == CLIENT_ROUTING_URI
    assert types_v03.AgentCard.model_validate(hybrid_card(card)).url == BASE


# team_card ------------------------------------------------------------------------------------


def make_members():
    return [
        {
            "id": "researcher",
            "name": "Research Agent",
            "streaming": True,
            "skills": [
                {
                    "id": "search",
                    "name": "Search",
                    "description": "Searches the web",
                    "tags": ["search", "web"],
                    "inputModes": ["text/plain"],
                    "outputModes": ["text/markdown"],
                },
                {
                    "id": "summarize",
                    "name": "Summarize",
                    "description": "Summarizes",
                    "tags": [],
                    "securityRequirements": [{"schemes": {"x": {"list": []}}}],
                },
            ],
        },
        {
            "id": "writer",
            "name": "Writer",
            "streaming": False,
            "skills": [
                {
                    "id": "search",
                    "name": "Search notes",
                    "description": "Searches its notes",
                    "tags": ["notes"],
                    "inputModes": ["application/json", "text/plain"],
                },
            ],
        },
    ]


def make_team_card(**overrides):
    arguments = {
        "team_id": "blog",
        "name": "Blog team",
        "description": "Writes researched posts",
        "base_url": "https://relay.example/a2a/teams/blog/",
        "members": make_members(),
    }
    arguments.update(overrides)
    return team_card(**arguments)


def test_team_skills_are_prefixed_with_the_member_so_equal_ids_stay_apart():
    card = make_team_card()
    assert [skill["id"] for skill in card["skills"]] == [
        "researcher/search",
        "researcher/summarize",
        "writer/search",
    ]


def test_team_skills_keep_their_tags_and_name_the_member_that_provides_them():
    card = make_team_card()
    assert [skill["tags"] for skill in card["skills"]] == [
        ["search", "web", "member:researcher"],
        ["member:researcher"],
        ["notes", "member:writer"],
    ]
    assert card["skills"][2]["name"] == "Search notes"
    assert all("securityRequirements" not in skill for skill in card["skills"])


def test_a_member_repeating_a_skill_id_still_gets_unique_team_skill_ids():
    members = make_members()
    members[1]["skills"].append(dict(members[1]["skills"][0]))
    ids = [skill["id"] for skill in make_team_card(members=members)["skills"]]
    assert len(ids) == len(set(ids)) == 4
    assert ids[-1] == "writer/search~2"


def test_the_team_modes_are_the_union_of_the_members_modes():
    members = make_members()
    members[1]["defaultOutputModes"] = ["text/plain"]
    card = make_team_card(members=members)
    assert card["defaultInputModes"] == ["text/plain", "application/json"]
    assert card["defaultOutputModes"] == ["text/markdown", "text/plain"]


def test_a_team_whose_members_declare_no_modes_speaks_text():
    members = [
        {
            "id": "a",
            "name": "A",
            "streaming": True,
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": []}],
        }
    ]
    card = make_team_card(members=members)
    assert (card["defaultInputModes"], card["defaultOutputModes"]) == (["text/plain"],) * 2


def test_a_team_without_skills_gets_one_generic_skill():
    card = make_team_card(members=[{"id": "a", "name": "A", "skills": [], "streaming": False}])
    assert [skill["id"] for skill in card["skills"]] == ["team"]


def test_the_team_card_streams_pushes_and_declares_client_routing_whatever_its_members_do():
    card = make_team_card()
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is True
    assert card["capabilities"]["extensions"][0]["uri"] == CLIENT_ROUTING_URI
    assert card["capabilities"]["extensions"][0]["required"] is False
    assert card["supportedInterfaces"] == relay_interfaces("https://relay.example/a2a/teams/blog/")
    assert (card["name"], card["description"]) == ("Blog team", "Writes researched posts")


def test_the_team_card_is_valid_for_the_sdk_and_leaves_the_members_alone():
    members = make_members()
    before = copy.deepcopy(members)
    card = make_team_card(members=members)
    parsed = parse_agent_card(copy.deepcopy(hybrid_card(card)))
    assert [skill.id for skill in parsed.skills] == [skill["id"] for skill in card["skills"]]
    types_v03.AgentCard.model_validate(hybrid_card(card))
    assert members == before


@pytest.mark.parametrize("kind", ["agent", "relay", "team"])
def test_every_card_the_relay_serves_is_a_complete_10_card(kind):
    card = {
        "agent": lambda: agent_card_for_relay(make_upstream_card(), base_url=BASE),
        "relay": lambda: relay_self_card(
            base_url=BASE, version="1", skills=[], default_target=None
        ),
        "team": make_team_card,
    }[kind]()
    parse_v1("AgentCard", card)  # types and field names, as the SDK's descriptors say
    parsed = parse_card(card)  # every required field present
    assert parsed.protocol_versions == ("1.0", "0.3")
    assert parsed.bindings == ("JSONRPC", "HTTP+JSON")


# card_etag ------------------------------------------------------------------------------------


def test_the_etag_is_weak_and_a_sha256():
    etag = card_etag({"name": "x"})
    assert etag.startswith('W/"') and etag.endswith('"')
    assert len(etag) == len('W/""') + 64


def test_the_etag_ignores_key_order():
    card = hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE))
    reordered = json.loads(json.dumps(card, sort_keys=True))
    reordered = dict(reversed(list(reordered.items())))
    assert list(reordered) != list(card)
    assert card_etag(reordered) == card_etag(card)


def test_the_etag_ignores_signatures():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    signed = {**card, "signatures": [{"protected": "a", "signature": "b"}]}
    assert card_etag(signed) == card_etag(card)


def test_the_etag_changes_with_the_content():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    changed = copy.deepcopy(card)
    changed["skills"][0]["description"] = "Says it back, louder"
    assert card_etag(changed) != card_etag(card)
    changed_number = copy.deepcopy(card)
    changed_number["capabilities"]["extensions"][0]["params"]["maxPeers"] = 6
    assert card_etag(changed_number) != card_etag(card)


def test_cards_may_be_cached_for_a_bounded_time():
    assert CARD_CACHE_CONTROL == "public, max-age=300"


# legacy_0_2_card ------------------------------------------------------------------------------


def test_the_02_card_has_only_02_fields_and_the_json_rpc_endpoint():
    legacy = legacy_0_2_card(hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE)))
    assert (legacy["url"], legacy["preferredTransport"], legacy["protocolVersion"]) == (
        BASE,
        "JSONRPC",
        "0.2.6",
    )
    for field in (
        "supportedInterfaces",
        "securityRequirements",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
        "signatures",
    ):
        assert field not in legacy, field
    assert list(legacy["securitySchemes"]) == ["relayApiKey"]
    scheme = legacy["securitySchemes"]["relayApiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "Bearer")
    assert "httpAuthSecurityScheme" not in scheme
    assert legacy["security"] == [{"relayApiKey": []}]
    assert legacy["capabilities"]["stateTransitionHistory"] is False
    assert "extendedAgentCard" not in legacy["capabilities"]
    for field in (
        "name",
        "description",
        "version",
        "provider",
        "defaultInputModes",
        "defaultOutputModes",
        "documentationUrl",
        "iconUrl",
    ):
        assert field in legacy, field


def test_the_02_card_gives_skills_security_not_security_requirements():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    card["skills"][0]["securityRequirements"] = [{"schemes": {"relayApiKey": {"list": ["x"]}}}]
    legacy = legacy_0_2_card(hybrid_card(card))
    assert legacy["skills"][0]["security"] == [{"relayApiKey": ["x"]}]
    assert "securityRequirements" not in legacy["skills"][0]


def test_the_02_card_reads_as_a_json_rpc_card_at_the_base():
    legacy = legacy_0_2_card(hybrid_card(agent_card_for_relay(make_upstream_card(), base_url=BASE)))
    assert types_v03.AgentCard.model_validate(legacy).url == BASE
    parsed = parse_agent_card(copy.deepcopy(legacy))
    assert [(i.url, i.protocol_binding) for i in parsed.supported_interfaces] == [(BASE, "JSONRPC")]


def test_there_is_no_02_card_for_a_card_without_a_03_interface():
    card = agent_card_for_relay(make_upstream_card(), base_url=BASE)
    card["supportedInterfaces"] = card["supportedInterfaces"][:2]
    with pytest.raises(VersionNotSupported):
        legacy_0_2_card(card)
