"""The Agent Cards the relay serves: for each registered agent, each team, and the relay itself.

Plain Python: imports no Django. Every card is built as 1.0 ProtoJSON (a plain dict, camelCase,
the shape ``registry.cards.ParsedCard.normalized`` has); :func:`card_for_reader` serves it as it is
to 1.0 readers and with the 0.3 fields added (:func:`hybrid_card`) to everyone else at
``/.well-known/agent-card.json``, and :func:`legacy_0_2_card` makes the 0.2 document for
``/.well-known/agent.json``.

What the relay serves at every base URL (``{relay}/a2a/agents/{id}/``, ``{relay}/a2a/teams/{id}/``,
``{relay}/a2a/relay/``), and therefore what every card says (:func:`relay_interfaces`):

- JSON-RPC 1.0 and 0.3 on the base itself: both dialects share the URL and are told apart by the
  method name (``SendMessage`` vs ``message/send``).
- HTTP+JSON 1.0 with its paths directly under the base (``{base}message:send``) and HTTP+JSON 0.3
  under ``{base}v1/...``. The 0.3 interface URL is the base too, because the SDK's 0.3 REST
  client appends ``/v1/...`` itself.

Decisions:

- The base URL always ends in exactly one ``/``: the SDK's JSON-RPC clients POST to the interface
  URL verbatim (and Django's APPEND_SLASH cannot redirect a POST), while its REST clients strip a
  trailing ``/`` before appending their paths, so one URL serves all four interfaces.
- A proxied card carries the relay's security, never the upstream's: the upstream credentials
  are the relay's business. Skill-level security requirements and ``signatures`` (which no longer
  verify after the rewrite) are removed from every card the relay serves.
- Team skills are always prefixed with the member id (``"researcher/search"``), not only on a
  collision, so a skill id stays stable when members join or leave; each also gets the tag
  ``"member:<id>"`` saying who provides it.
- ``CARD_CACHE_CONTROL`` is five minutes: cards change only when an upstream card is refreshed
  or the registry is edited, and the weak ETag makes revalidation a cheap 304.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from a2a.utils.constants import TransportProtocol

from registry.cards import content_hash
from registry.extensions import CLIENT_ROUTING_URI
from tasks_app.protocol.card_conversion import (
    agent_card_hybrid,
    agent_card_to_v03,
    agent_card_to_v1,
)
from tasks_app.protocol.versions import ProtocolVersion

JsonDict = dict[str, Any]

RELAY_SECURITY_SCHEME = "relayApiKey"
CARD_CACHE_CONTROL = "public, max-age=300"

# The 0.3 schema's own default; 0.3 cards carry the full version, 1.0 fields only Major.Minor.
HYBRID_PROTOCOL_VERSION = "0.3.0"
# What the 0.2 document declares: 0.2 clients speak the ``category/action`` JSON-RPC methods and
# ``kind`` shapes that the relay's 0.3 JSON-RPC interface accepts.
LEGACY_PROTOCOL_VERSION = "0.2.6"

DEFAULT_RELAY_DESCRIPTION = (
    "Brass Relay: an A2A gateway to the agents and teams registered with it."
)
_RELAY_MODES = ("text/plain", "application/json")
_SKILL_SECURITY_FIELDS = ("securityRequirements", "security")
# 0.3 fields a normalized card should not have; dropped so no upstream URL survives a rewrite.
_LEGACY_CARD_FIELDS = (
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "protocolVersion",
    "security",
    "supportsAuthenticatedExtendedCard",
)


def relay_interfaces(base_url: str) -> list[JsonDict]:
    """The 1.0 ``supportedInterfaces`` the relay serves at ``base_url``, preferred first:
    JSON-RPC 1.0, HTTP+JSON 1.0, JSON-RPC 0.3, HTTP+JSON 0.3, all at the base (with exactly one
    trailing ``/``), then those of the registered providers (gRPC, when its server is
    configured: ``tasks_app.grpc.targets``). Raises ValueError when ``base_url`` is not an
    absolute http(s) URL."""
    base = _base(base_url)
    interfaces = [
        {"url": base, "protocolBinding": binding.value, "protocolVersion": version.value}
        for version in (ProtocolVersion.V1_0, ProtocolVersion.V0_3)
        for binding in (TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON)
    ]
    for provider in _INTERFACE_PROVIDERS:
        extra = provider(base)
        if extra is not None:
            interfaces.append(extra)
    return interfaces


_INTERFACE_PROVIDERS: list[Callable[[str], JsonDict | None]] = []


def register_interface(provider: Callable[[str], JsonDict | None]) -> None:
    """Adds an interface served elsewhere than at the base URL (the gRPC server's) to every
    card: ``provider(base_url)`` gives it, or None when it is not served."""
    if provider not in _INTERFACE_PROVIDERS:
        _INTERFACE_PROVIDERS.append(provider)


def relay_security(extra: JsonDict | None = None) -> tuple[JsonDict, list[JsonDict]]:
    """The relay's ``(securitySchemes, securityRequirements)`` in 1.0 shape: a bearer scheme,
    the relay's API keys sent as ``Authorization: Bearer <key>``, and the ``extra`` schemes
    (name to 1.0 scheme: the trusted token issuers'); any one of them is enough. Fresh
    objects on every call."""
    schemes = {
        RELAY_SECURITY_SCHEME: {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "A Brass Relay API key, sent as 'Authorization: Bearer <key>'.",
            }
        }
    }
    for name, scheme in (extra or {}).items():
        schemes.setdefault(name, copy.deepcopy(scheme))
    requirements = [{"schemes": {name: {"list": []}}} for name in schemes]
    return schemes, requirements


def client_routing_extension() -> JsonDict:
    """The client-routing extension as the relay's own card and team cards declare it."""
    return {
        "uri": CLIENT_ROUTING_URI,
        "description": "Receives peer agents and chooses the next recipient",
        "required": False,
    }


def agent_card_for_relay(
    normalized_card: JsonDict,
    *,
    base_url: str,
    push_notifications: bool = True,
    security: JsonDict | None = None,
) -> JsonDict:
    """The upstream agent's 1.0 card as the relay serves it at ``base_url``.

    Its interfaces become :func:`relay_interfaces`, its security the relay's (with the
    ``security`` schemes, see :func:`relay_security`); skill-level
    security and ``signatures`` are removed. Capabilities keep ``streaming``, ``extensions``
    (params untouched) and ``extendedAgentCard`` as declared upstream; ``pushNotifications``
    is ``push_notifications``, since the relay delivers push itself. Everything else (name,
    description, version, provider, skills, modes, documentationUrl, iconUrl) is kept. The
    input is never mutated.
    """
    card = copy.deepcopy(normalized_card)
    for name in (*_LEGACY_CARD_FIELDS, "signatures"):
        card.pop(name, None)
    card["supportedInterfaces"] = relay_interfaces(base_url)
    card["securitySchemes"], card["securityRequirements"] = relay_security(security)
    card["skills"] = [_without_security(skill) for skill in card.get("skills") or []]
    capabilities = card.get("capabilities")
    card["capabilities"] = capabilities if isinstance(capabilities, dict) else {}
    card["capabilities"]["pushNotifications"] = push_notifications
    return card


def relay_self_card(
    *,
    base_url: str,
    name: str = "Brass Relay",
    description: str = DEFAULT_RELAY_DESCRIPTION,
    version: str,
    skills: list[JsonDict],
    default_target: str | None,
    security: JsonDict | None = None,
) -> JsonDict:
    """The relay's own 1.0 card at ``base_url``: streaming, push and the client-routing
    extension; text/plain and application/json by default. ``skills`` (e.g. the default
    target's) are copied without their security; when empty, one generic ``"relay"`` skill
    says where messages go (``default_target``, unless the client-routing recipient says
    otherwise)."""
    served_skills = [_without_security(skill) for skill in skills]
    if not served_skills:
        where = f"to '{default_target}'" if default_target else "to the agent it names"
        served_skills = [
            {
                "id": "relay",
                "name": "Relay",
                "description": (
                    f"Forwards each message {where}; a client-routing recipient in the "
                    "message metadata picks another registered agent."
                ),
                "tags": ["relay", "routing"],
            }
        ]
    return _relay_card(
        name=name,
        description=description,
        version=version,
        base_url=base_url,
        skills=served_skills,
        input_modes=list(_RELAY_MODES),
        output_modes=list(_RELAY_MODES),
        security=security,
    )


def team_card(
    *,
    team_id: str,
    name: str,
    description: str,
    base_url: str,
    members: list[JsonDict],
    version: str = "1.0.0",
    security: JsonDict | None = None,
) -> JsonDict:
    """A synthesized 1.0 card for a team served at ``base_url``.

    ``members`` are ``{"id", "name", "skills": [1.0 skill dicts], "streaming"}`` (optionally
    ``defaultInputModes``/``defaultOutputModes``). Capabilities are always streaming and push
    (the relay streams and pushes the team's progress itself, whatever each member can do) plus
    the client-routing extension. Each member skill is served with the id
    ``"<member id>/<skill id>"`` (made unique with ``~2``, ``~3``... should one member repeat an
    id), its tags plus ``"member:<member id>"``, and no security. The default modes are the
    union, in order of appearance, of the members' default modes and skill modes, text/plain
    when there are none. A team whose members have no skills gets one generic ``"team"`` skill.
    """
    skills: list[JsonDict] = []
    seen_ids: set[str] = set()
    input_modes: list[str] = []
    output_modes: list[str] = []
    for member in members:
        member_id = str(member["id"])
        _add_modes(input_modes, member.get("defaultInputModes"))
        _add_modes(output_modes, member.get("defaultOutputModes"))
        for skill in member.get("skills") or []:
            served = _without_security(skill)
            served["id"] = _unique(f"{member_id}/{skill.get('id', '')}", seen_ids)
            member_tag = f"member:{member_id}"
            served["tags"] = [*(skill.get("tags") or [])]
            if member_tag not in served["tags"]:
                served["tags"].append(member_tag)
            _add_modes(input_modes, skill.get("inputModes"))
            _add_modes(output_modes, skill.get("outputModes"))
            skills.append(served)
    description = description or f"The team '{name}' ({team_id}) on Brass Relay."
    if not skills:
        skills = [{"id": "team", "name": name, "description": description, "tags": ["team"]}]
    return _relay_card(
        name=name,
        description=description,
        version=version,
        base_url=base_url,
        skills=skills,
        input_modes=input_modes or ["text/plain"],
        output_modes=output_modes or ["text/plain"],
        security=security,
    )


def workflow_card(
    *,
    workflow_id: str,
    name: str,
    description: str,
    base_url: str,
    first_step: str,
    first_skills: list[JsonDict],
    version: str = "1.0.0",
    security: JsonDict | None = None,
) -> JsonDict:
    """A synthesized 1.0 card for a workflow served at ``base_url``: one skill for the
    workflow itself (its description), then the skills of the agent its first step calls
    (``first_skills``), each with the id ``"<first step>/<skill id>"`` and the tag
    ``"step:<first step>"``, without security. Streaming and push, text in and out."""
    description = description or f"The workflow '{name}' ({workflow_id}) on Brass Relay."
    skills: list[JsonDict] = [
        {"id": workflow_id, "name": name, "description": description, "tags": ["workflow"]}
    ]
    seen_ids = {workflow_id}
    for skill in first_skills:
        served = _without_security(skill)
        served["id"] = _unique(f"{first_step}/{skill.get('id', '')}", seen_ids)
        served["tags"] = [*(skill.get("tags") or []), f"step:{first_step}"]
        skills.append(served)
    return _relay_card(
        name=name,
        description=description,
        version=version,
        base_url=base_url,
        skills=skills,
        input_modes=["text/plain"],
        output_modes=["text/plain", "application/json"],
        security=security,
    )


def hybrid_card(card_v1: JsonDict) -> JsonDict:
    """The 1.0 card plus the 0.3 fields, for ``/.well-known/agent-card.json`` read by 0.3
    clients: ``url`` and ``preferredTransport`` (the first 0.3 interface, JSON-RPC in every
    relay card), ``additionalInterfaces`` (the other 0.3 interfaces), ``protocolVersion``
    ``"0.3.0"``, ``supportsAuthenticatedExtendedCard`` (only when true), ``security``, and
    each security scheme in its 0.3 ``type``-d shape only (through
    ``tasks_app.protocol.card_conversion.agent_card_hybrid``, which says why). It parses strictly
    with a2a-sdk 1.x's ``parse_agent_card`` and validates as an a2a-sdk 0.3.x AgentCard. The
    1.0 part comes back normalized (unknown fields dropped, defaults omitted); extension
    params keep their ints. A card without a 0.3 interface gets no 0.3 fields. The input is
    not mutated."""
    hybrid = agent_card_hybrid(copy.deepcopy(card_v1))
    if "url" in hybrid:
        hybrid["protocolVersion"] = HYBRID_PROTOCOL_VERSION
    return hybrid


def card_for_reader(card_v1: JsonDict, *, version: ProtocolVersion) -> JsonDict:
    """The card as a reader asking for ``version`` gets it at the well-known path.

    1.0 readers (a2a-sdk 1.x's ``ClientFactory`` and @a2a-js/sdk send ``A2A-Version: 1.0``
    with the card request) get the 1.0 card alone, normalized: nothing in it is unknown to
    the 1.0 ``AgentCard`` proto, so even a strict protobuf parse without a2a-sdk's 0.3
    compatibility step reads it. Everyone else gets :func:`hybrid_card`, since a missing
    ``A2A-Version`` means 0.3 and 0.3 clients (a2a-sdk 0.3.x) need ``url`` and the 0.3
    security scheme shape. The input is not mutated."""
    if version == ProtocolVersion.V1_0:
        return agent_card_to_v1(copy.deepcopy(card_v1))
    return hybrid_card(card_v1)


def legacy_0_2_card(hybrid: JsonDict) -> JsonDict:
    """The 0.2 card for ``/.well-known/agent.json``, from the hybrid (or plain 1.0) card.

    Only 0.2 fields: ``url`` is the JSON-RPC 0.3 interface (0.2 clients send the same
    ``category/action`` methods), ``preferredTransport`` JSONRPC, ``protocolVersion``
    ``"0.2.6"``, no ``additionalInterfaces`` (0.2 defined no REST path layout the relay serves)
    and no ``supportsAuthenticatedExtendedCard`` (0.2 fetched that card by a plain GET the
    relay does not serve). Capabilities in 0.2 shape (``stateTransitionHistory`` false), typed
    security schemes, ``security`` on the card and skills. A card without a JSON-RPC 0.3
    interface keeps its 0.3 interfaces as they are. The input is not mutated. Raises
    ``tasks_app.protocol.errors.VersionNotSupported`` when the card has no 0.3 interface."""
    legacy = agent_card_to_v03(copy.deepcopy(hybrid))
    interfaces = [
        {"url": legacy["url"], "transport": legacy.get("preferredTransport", "JSONRPC")},
        *legacy.get("additionalInterfaces", []),
    ]
    jsonrpc = next((i for i in interfaces if i["transport"] == TransportProtocol.JSONRPC), None)
    if jsonrpc is not None:
        legacy["url"] = jsonrpc["url"]
        legacy["preferredTransport"] = TransportProtocol.JSONRPC.value
        legacy.pop("additionalInterfaces", None)
    legacy["protocolVersion"] = LEGACY_PROTOCOL_VERSION
    legacy.pop("supportsAuthenticatedExtendedCard", None)
    legacy.pop("signatures", None)
    capabilities = legacy.setdefault("capabilities", {})
    capabilities["stateTransitionHistory"] = False
    return legacy


def card_etag(card: JsonDict) -> str:
    """A weak ETag, ``W/"<sha256 hex>"``, of the card's canonical JSON without ``signatures``
    (as a2a-sdk's card route does): key order does not matter, any content change does."""
    unsigned = {key: value for key, value in card.items() if key != "signatures"}
    return f'W/"{content_hash(unsigned)}"'


def _relay_card(
    *,
    name: str,
    description: str,
    version: str,
    base_url: str,
    skills: list[JsonDict],
    input_modes: list[str],
    output_modes: list[str],
    security: JsonDict | None,
) -> JsonDict:
    schemes, requirements = relay_security(security)
    return {
        "name": name,
        "description": description,
        "supportedInterfaces": relay_interfaces(base_url),
        "version": version,
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "extensions": [client_routing_extension()],
        },
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": input_modes,
        "defaultOutputModes": output_modes,
        "skills": skills,
    }


def _base(base_url: str) -> str:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"the base URL must be an absolute http(s) URL, not {base_url!r}")
    return base_url.rstrip("/") + "/"


def _without_security(skill: JsonDict) -> JsonDict:
    served = copy.deepcopy(skill)
    for name in _SKILL_SECURITY_FIELDS:
        served.pop(name, None)
    return served


def _unique(candidate: str, seen: set[str]) -> str:
    unique, number = candidate, 1
    while unique in seen:
        number += 1
        unique = f"{candidate}~{number}"
    seen.add(unique)
    return unique


def _add_modes(modes: list[str], more: Any) -> None:
    for mode in more or []:
        if isinstance(mode, str) and mode and mode not in modes:
            modes.append(mode)
