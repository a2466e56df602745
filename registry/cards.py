"""Agent Card parsing: card JSON of protocol 0.2, 0.3 or 1.0 in, one frozen ``ParsedCard`` out.

Plain Python: imports no Django, so the registry, the gateway and the health probes share it and
its tests run without a database. The version-specific mapping (0.3 ``url``/``preferredTransport``
/``additionalInterfaces``, legacy security) is done by ``a2a-sdk``'s ``parse_agent_card``; this
module adds what a registry needs on top: the required-field check that names what is missing,
Major.Minor versions, a content hash, and flat values that map onto our models.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.json_format import MessageToDict, ParseError

from registry.extensions import CLIENT_ROUTING_URI

# Fields the specification marks REQUIRED, per card generation.
_REQUIRED_V1 = (
    "name",
    "description",
    "supportedInterfaces",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
)
_REQUIRED_V03 = (
    "name",
    "description",
    "url",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
)
_REQUIRED_SKILL = ("id", "name", "description")
_REQUIRED_INTERFACE = ("url", "protocolBinding", "protocolVersion")
_FREE_FORM_FIELDS = ("params", "header")
_STRING_FIELDS = ("name", "description", "version", "url", "documentationUrl", "iconUrl")
_LIST_FIELDS = (
    "skills",
    "defaultInputModes",
    "defaultOutputModes",
    "supportedInterfaces",
    "additionalInterfaces",
)


class InvalidCardError(ValueError):
    """The document is not an Agent Card we can use. ``missing`` names absent required fields."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class Interface:
    url: str
    binding: str
    protocol_version: str
    tenant: str = ""


@dataclass(frozen=True)
class Skill:
    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Extension:
    uri: str
    description: str = ""
    required: bool = False
    params: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class ParsedCard:
    """What an Agent Card says, in one shape whatever its protocol version.

    ``protocol_version`` is the card's own generation ("1.0", "0.3" or "0.2"); ``interfaces``
    lists what the agent serves, preferred first; ``normalized`` is the card as 1.0 ProtoJSON.
    """

    name: str
    description: str
    version: str
    protocol_version: str
    interfaces: tuple[Interface, ...]
    skills: tuple[Skill, ...]
    extensions: tuple[Extension, ...]
    streaming: bool
    push_notifications: bool
    extended_card: bool
    default_input_modes: tuple[str, ...]
    default_output_modes: tuple[str, ...]
    provider_organization: str
    provider_url: str
    documentation_url: str
    icon_url: str
    normalized: dict[str, Any] = field(hash=False)
    content_hash: str = ""

    @property
    def protocol_versions(self) -> tuple[str, ...]:
        """Major.Minor versions of the interfaces, in order of preference, without repeats."""
        return tuple(dict.fromkeys(i.protocol_version for i in self.interfaces))

    @property
    def bindings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i.binding for i in self.interfaces))

    @property
    def supports_client_routing(self) -> bool:
        return any(e.uri == CLIENT_ROUTING_URI for e in self.extensions)

    def preferred_interface(
        self, versions=("1.0", "0.3", "0.2"), bindings=("JSONRPC", "HTTP+JSON")
    ) -> Interface | None:
        """The first declared interface whose version and binding the relay can speak."""
        for interface in self.interfaces:
            if interface.protocol_version in versions and interface.binding in bindings:
                return interface
        return None


def major_minor(version: str) -> str:
    """ "0.3.0" -> "0.3"; "1" -> "1.0"; anything unparsable is returned stripped."""
    parts = str(version).strip().split(".")
    if not parts[0].isdigit():
        return str(version).strip()
    minor = parts[1] if len(parts) > 1 and parts[1].isdigit() else "0"
    return f"{int(parts[0])}.{int(minor)}"


def content_hash(document: dict[str, Any]) -> str:
    """SHA-256 of the document's canonical JSON: equal cards hash equal, whatever key order."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def card_generation(document: dict[str, Any], *, legacy_path: bool = False) -> str:
    """Which card generation a document is: "1.0" when it has ``supportedInterfaces``, else the
    Major.Minor of its ``protocolVersion``; a card without one is 0.2 when it came from the old
    ``agent.json`` path and 0.3 otherwise (the 0.3 default)."""
    if "supportedInterfaces" in document:
        return "1.0"
    declared = document.get("protocolVersion")
    if isinstance(declared, str) and declared.strip():
        return major_minor(declared)
    return "0.2" if legacy_path else "0.3"


def parse_card(document: Any, *, legacy_path: bool = False) -> ParsedCard:
    """Parses an Agent Card of any supported generation.

    Raises InvalidCardError naming every missing required field, or the first field whose type
    is wrong. ``legacy_path`` says the card came from ``/.well-known/agent.json``.
    """
    if not isinstance(document, dict):
        raise InvalidCardError("the agent card must be a JSON object")
    document = without_nulls(document)
    generation = card_generation(document, legacy_path=legacy_path)
    _check_required(document, generation)
    # Imported here: a2a.client brings the whole a2a-sdk client (transports, gRPC), a second
    # of CPU at every Django start, and most processes never parse a card.
    from a2a.client.card_resolver import parse_agent_card

    try:
        card = parse_agent_card(copy.deepcopy(document))
    except (ParseError, ValueError, TypeError, AttributeError) as error:
        raise InvalidCardError(f"the agent card is malformed: {error}") from error
    normalized = restore_json_fields(document, MessageToDict(card))

    interfaces = []
    for declared in card.supported_interfaces:
        version = major_minor(declared.protocol_version) if declared.protocol_version else ""
        if generation in ("0.2", "0.3") and "supportedInterfaces" not in document:
            version = generation
        interfaces.append(
            Interface(declared.url, declared.protocol_binding, version, declared.tenant)
        )

    capabilities = card.capabilities
    # Params come from the document itself: protobuf's Struct would turn every integer to float.
    raw_params = {
        extension.get("uri"): extension.get("params")
        for extension in (document.get("capabilities") or {}).get("extensions") or []
        if isinstance(extension, dict) and isinstance(extension.get("params"), dict)
    }
    return ParsedCard(
        name=card.name,
        description=card.description,
        version=card.version,
        protocol_version=generation,
        interfaces=tuple(interfaces),
        skills=tuple(
            Skill(
                id=skill.id,
                name=skill.name,
                description=skill.description,
                tags=tuple(skill.tags),
                examples=tuple(skill.examples),
                input_modes=tuple(skill.input_modes),
                output_modes=tuple(skill.output_modes),
            )
            for skill in card.skills
        ),
        extensions=tuple(
            Extension(
                uri=extension.uri,
                description=extension.description,
                required=extension.required,
                params=raw_params.get(extension.uri, {}),
            )
            for extension in capabilities.extensions
        ),
        streaming=capabilities.streaming,
        push_notifications=capabilities.push_notifications,
        extended_card=capabilities.extended_agent_card,
        default_input_modes=tuple(card.default_input_modes),
        default_output_modes=tuple(card.default_output_modes),
        provider_organization=card.provider.organization,
        provider_url=card.provider.url,
        documentation_url=card.documentation_url,
        icon_url=card.icon_url,
        normalized=normalized,
        # Signatures are left out: a card signed again (ECDSA signatures differ each time)
        # is the same card.
        content_hash=content_hash({k: v for k, v in document.items() if k != "signatures"}),
    )


def without_nulls(value: Any, *, key: str = "") -> Any:
    """``value`` with every JSON null left out, as if the field were absent: cards written from
    models without ``exclude_none`` (agno's, from a2a-sdk's pydantic types) carry a null for
    each optional field they lack, and protobuf's reader refuses them. The free-form JSON of
    extension ``params`` and a signature's ``header`` is kept as it is: a null there is data."""
    if key in _FREE_FORM_FIELDS:
        return value
    if isinstance(value, dict):
        return {
            name: without_nulls(item, key=name) for name, item in value.items() if item is not None
        }
    if isinstance(value, list):
        return [without_nulls(item) for item in value if item is not None]
    return value


def restore_json_fields(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """Puts the card's free-form JSON values back into ``target``, the card as protobuf's
    ``MessageToDict`` wrote it, and returns ``target``.

    A card has two ``google.protobuf.Struct`` fields, extension ``params`` and signature
    ``header``; a Struct holds every number as a double, so ``"level": 2`` comes out as
    ``2.0`` and integers above 2**53 lose digits. Both fields sit at the same place in 0.3,
    hybrid and 1.0 cards, in the same order the SDK keeps, so each is copied back from
    ``source`` (the card as received) by position, as a deep copy. Entries ``source`` lacks or
    does not hold as an object are left alone."""
    pairs = (
        (
            _items(source, "capabilities", "extensions"),
            _items(target, "capabilities", "extensions"),
            "params",
        ),
        (_items(source, "signatures"), _items(target, "signatures"), "header"),
    )
    for source_items, target_items, key in pairs:
        for original, converted in zip(source_items, target_items, strict=False):
            if (
                isinstance(original, dict)
                and isinstance(converted, dict)
                and isinstance(original.get(key), dict)
            ):
                converted[key] = copy.deepcopy(original[key])
    return target


def _items(document: Any, *path: str) -> list[Any]:
    for name in path:
        document = document.get(name) if isinstance(document, dict) else None
    return document if isinstance(document, list) else []


def _check_required(document: dict[str, Any], generation: str) -> None:
    required = _REQUIRED_V1 if generation == "1.0" else _REQUIRED_V03
    missing = [name for name in required if _absent(document.get(name))]
    for name in _STRING_FIELDS:
        if name in document and not isinstance(document[name], str):
            raise InvalidCardError(f"the agent card field {name!r} must be a string")
    for name in _LIST_FIELDS:
        if name in document and not isinstance(document[name], list):
            raise InvalidCardError(f"the agent card field {name!r} must be a list")
    if "capabilities" in document and not isinstance(document["capabilities"], dict):
        raise InvalidCardError("the agent card field 'capabilities' must be an object")
    for index, interface in enumerate(document.get("supportedInterfaces") or []):
        if not isinstance(interface, dict):
            raise InvalidCardError(f"supportedInterfaces[{index}] must be an object")
        missing += [
            f"supportedInterfaces[{index}].{name}"
            for name in _REQUIRED_INTERFACE
            if _absent(interface.get(name))
        ]
    for index, skill in enumerate(document.get("skills") or []):
        if not isinstance(skill, dict):
            raise InvalidCardError(f"skills[{index}] must be an object")
        missing += [
            f"skills[{index}].{name}" for name in _REQUIRED_SKILL if _absent(skill.get(name))
        ]
        if "tags" in skill and not isinstance(skill["tags"], list):
            raise InvalidCardError(f"skills[{index}].tags must be a list")
    if missing:
        raise InvalidCardError(
            f"the agent card ({generation}) is missing required fields: {', '.join(missing)}",
            missing=tuple(missing),
        )


def _absent(value: Any) -> bool:
    # Required lists may be empty in practice (the 1.0 spec's own example has "skills": []),
    # so only a missing key, null or an empty string counts as absent.
    return value is None or (isinstance(value, str) and not value.strip())


def card_diff(
    old: dict[str, Any], new: dict[str, Any], *, old_label: str = "before", new_label: str = "after"
) -> list[str]:
    """Unified diff of two cards as pretty, key-sorted JSON; empty when they are equal."""
    import difflib

    def lines(document: dict[str, Any]) -> list[str]:
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return list(difflib.unified_diff(lines(old), lines(new), old_label, new_label, lineterm=""))
