"""The pure card parser: 0.2, 0.3 and 1.0 cards into one shape, and clear refusals."""

import json
import subprocess
import sys

import pytest

from registry.cards import (
    CLIENT_ROUTING_URI,
    InvalidCardError,
    card_diff,
    card_generation,
    content_hash,
    major_minor,
    parse_card,
)


def card_v1(**overrides):
    card = {
        "name": "Weather",
        "description": "Forecasts",
        "version": "2.1.0",
        "supportedInterfaces": [
            {
                "url": "https://w.example/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            },
            {
                "url": "https://w.example/rest",
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "1.0",
            },
            {
                "url": "https://w.example/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "0.3",
            },
        ],
        "provider": {"organization": "Met", "url": "https://met.example"},
        "capabilities": {
            "streaming": True,
            "extensions": [
                {
                    "uri": CLIENT_ROUTING_URI,
                    "required": False,
                    "params": {"maxPeers": 5, "nested": {"a": [1, 2]}},
                }
            ],
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": "forecast",
                "name": "Forecast",
                "description": "Tomorrow's weather",
                "tags": ["weather", "forecast"],
                "examples": ["rain in Oslo?"],
                "inputModes": ["text/plain"],
            }
        ],
    }
    card.update(overrides)
    return card


def card_v03(**overrides):
    card = {
        "protocolVersion": "0.3.0",
        "name": "Echo",
        "description": "Echoes",
        "url": "https://e.example/rpc",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": "https://e.example/rest", "transport": "HTTP+JSON"}],
        "version": "1",
        "capabilities": {"pushNotifications": True},
        "supportsAuthenticatedExtendedCard": True,
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Says it back", "tags": ["echo"]}],
    }
    card.update(overrides)
    return card


def test_a_1_0_card_keeps_its_interfaces_in_order_and_its_capabilities():
    card = parse_card(card_v1())
    assert card.protocol_version == "1.0"
    assert [i.binding for i in card.interfaces] == ["JSONRPC", "HTTP+JSON", "JSONRPC"]
    assert card.protocol_versions == ("1.0", "0.3")
    assert card.bindings == ("JSONRPC", "HTTP+JSON")
    assert card.streaming and not card.push_notifications
    assert card.provider_organization == "Met"
    assert card.skills[0].tags == ("weather", "forecast")
    assert card.skills[0].input_modes == ("text/plain",)


def test_extension_params_keep_integers_and_nesting():
    extension = parse_card(card_v1()).extensions[0]
    assert extension.uri == CLIENT_ROUTING_URI
    assert extension.params == {"maxPeers": 5, "nested": {"a": [1, 2]}}
    assert isinstance(extension.params["maxPeers"], int)


BIG = 2**63 + 7  # beyond a double's 53 bits and beyond int64


def exact_json(value):
    """The value as JSON text, so 2 and 2.0 differ (they compare equal in Python)."""
    return json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("make", [card_v1, card_v03], ids=["1.0", "0.3"])
def test_item3_integer_extension_params_stay_integers_in_the_normalized_card(make):
    """Issue 13, item 3: ``"level": 2`` came back as ``2.0`` (and large integers lost digits)
    in the normalized card the relay serves, because protobuf's Struct holds doubles."""
    params = {"level": 2, "big": BIG, "ratio": 0.5, "nested": {"list": [1, {"deep": 3}]}}
    document = make(
        capabilities={
            "streaming": True,
            "extensions": [
                {"uri": "https://ext.example/a", "params": {"first": 1}},
                {"uri": "https://ext.example/b", "params": params},
            ],
        }
    )
    card = parse_card(document)
    served = card.normalized["capabilities"]["extensions"]
    assert exact_json(served[0]["params"]) == exact_json({"first": 1})
    assert exact_json(served[1]["params"]) == exact_json(params)
    assert exact_json(card.extensions[1].params) == exact_json(params)
    served[1]["params"]["nested"]["list"].append(9)
    assert document["capabilities"]["extensions"][1]["params"]["nested"]["list"] == [1, {"deep": 3}]


def test_item3_integers_in_a_signature_header_stay_integers():
    """Issue 13, item 3: the card's other Struct field, a signature's header."""
    header = {"kid": "key-1", "version": 2, "issued": BIG}
    document = card_v1(signatures=[{"protected": "e30", "signature": "c2ln", "header": header}])
    card = parse_card(document)
    assert exact_json(card.normalized["signatures"][0]["header"]) == exact_json(header)


def test_a_0_3_card_becomes_interfaces_with_version_0_3():
    card = parse_card(card_v03())
    assert card.protocol_version == "0.3"
    assert [(i.url, i.binding, i.protocol_version) for i in card.interfaces] == [
        ("https://e.example/rpc", "JSONRPC", "0.3"),
        ("https://e.example/rest", "HTTP+JSON", "0.3"),
    ]
    assert card.push_notifications and card.extended_card
    assert card.normalized["supportedInterfaces"][0]["url"] == "https://e.example/rpc"


def test_a_card_without_protocol_version_from_the_legacy_path_is_0_2():
    document = card_v03()
    del document["protocolVersion"]
    assert parse_card(document, legacy_path=True).protocol_version == "0.2"
    assert parse_card(document).protocol_version == "0.3"


@pytest.mark.parametrize(
    ("document", "missing"),
    [
        ({k: v for k, v in card_v1().items() if k != "name"}, ["name"]),
        (
            {k: v for k, v in card_v1().items() if k not in ("skills", "version")},
            ["version", "skills"],
        ),
        (
            card_v1(supportedInterfaces=[{"url": "https://x"}]),
            ["supportedInterfaces[0].protocolBinding", "supportedInterfaces[0].protocolVersion"],
        ),
        (card_v1(skills=[{"id": "s", "name": "S"}]), ["skills[0].description"]),
        ({k: v for k, v in card_v03().items() if k != "url"}, ["url"]),
    ],
    ids=["name", "version-and-skills", "interface-fields", "skill-description", "0.3-url"],
)
def test_a_card_missing_required_fields_is_refused_naming_them(document, missing):
    with pytest.raises(InvalidCardError) as raised:
        parse_card(document)
    assert list(raised.value.missing) == missing
    for name in missing:
        assert name in str(raised.value)


@pytest.mark.parametrize(
    "document",
    [
        [],
        "card",
        card_v1(name=5),
        card_v1(skills={"id": "x"}),
        card_v1(capabilities=[]),
        card_v1(skills=["x"]),
    ],
    ids=[
        "list",
        "string",
        "name-not-string",
        "skills-not-list",
        "capabilities-not-object",
        "skill-not-object",
    ],
)
def test_a_malformed_card_is_refused_with_an_invalid_card_error(document):
    with pytest.raises(InvalidCardError):
        parse_card(document)


def test_content_hash_ignores_key_order_but_not_values():
    assert content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


def test_card_diff_shows_changed_lines_only_when_cards_differ():
    assert card_diff(card_v1(), card_v1()) == []
    diff = card_diff(card_v1(), card_v1(version="2.2.0"))
    assert '-  "version": "2.1.0"' in diff
    assert '+  "version": "2.2.0"' in diff


@pytest.mark.parametrize(
    ("given", "expected"), [("0.3.0", "0.3"), ("1.0", "1.0"), ("1", "1.0"), ("0.2.5", "0.2")]
)
def test_versions_are_compared_as_major_minor(given, expected):
    assert major_minor(given) == expected


def test_card_generation_prefers_supported_interfaces():
    assert card_generation({"supportedInterfaces": [], "protocolVersion": "0.3.0"}) == "1.0"


def test_the_card_parser_imports_no_django():
    code = "import sys, registry.cards; print('django' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def agno_card():
    """A 0.3 card as agno serves it: a2a-sdk's pydantic AgentCard dumped without
    ``exclude_none``, so every optional field it lacks is a JSON null."""
    return card_v03(
        additionalInterfaces=None,
        documentationUrl=None,
        iconUrl=None,
        provider=None,
        security=None,
        securitySchemes=None,
        signatures=None,
        supportsAuthenticatedExtendedCard=None,
        capabilities={
            "extensions": None,
            "pushNotifications": None,
            "stateTransitionHistory": None,
            "streaming": True,
        },
        skills=[
            {
                "id": "echo",
                "name": "Echo",
                "description": "Says it back",
                "tags": ["echo"],
                "examples": None,
                "inputModes": None,
                "outputModes": None,
                "security": None,
            }
        ],
    )


def test_a_card_with_null_fields_is_read_as_if_they_were_absent():
    card = parse_card(agno_card())
    assert card.name == "Echo"
    assert card.streaming and not card.push_notifications and not card.extended_card
    assert [i.binding for i in card.interfaces] == ["JSONRPC"]
    assert card.skills[0].examples == () and card.provider_organization == ""
    assert "provider" not in card.normalized and "iconUrl" not in card.normalized


def test_a_1_0_card_with_null_fields_keeps_the_nulls_inside_extension_params():
    document = card_v1(provider=None, iconUrl=None, signatures=None)
    document["supportedInterfaces"][0]["tenant"] = None
    document["capabilities"]["extensions"][0]["params"]["empty"] = None
    document["skills"][0]["outputModes"] = None
    card = parse_card(document)
    assert card.interfaces[0].tenant == ""
    assert card.extensions[0].params["empty"] is None
    assert card.normalized["capabilities"]["extensions"][0]["params"]["empty"] is None


def test_a_required_field_that_is_null_is_still_missing():
    with pytest.raises(InvalidCardError) as raised:
        parse_card(card_v1(name=None))
    assert raised.value.missing == ("name",)
