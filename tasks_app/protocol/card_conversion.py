"""Agent cards converted between 0.3, 1.0 and the hybrid 1.0+0.3 card.

Cards, which are rare and full of nested security schemes, go through the SDK's
``conversions`` (unlike the message-plane objects in :mod:`tasks_app.protocol.objects`),
and their ``Struct`` fields (extension ``params``, signature ``header``) are copied back
from the source so JSON values keep their ints and key order.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import pydantic
from a2a.compat.v0_3 import conversions as sdk_conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2 as pb2_v10
from a2a.utils import errors as sdk_errors
from google.protobuf.json_format import MessageToDict, ParseDict

from registry.cards import restore_json_fields
from tasks_app.protocol.errors import InvalidParams, VersionNotSupported
from tasks_app.protocol.protojson import JsonDict, v1_descriptor, walk
from tasks_app.protocol.validation import pydantic_violations

_HYBRID_DROPPED_FALSE = "supportsAuthenticatedExtendedCard"


def agent_card_to_v1(card: Mapping[str, Any]) -> JsonDict:
    """A 1.0 card from a 1.0, hybrid or 0.3 card (not validated: use ``parse_v1``).

    A card with ``supportedInterfaces`` is read as 1.0 and its 0.3 fields dropped; any other
    is read as 0.3 through the SDK's 0.3 model and ``to_core_agent_card``. Interface
    versions are cut to Major.Minor (0.3 cards say ``"0.3.0"``). Raises
    :class:`InvalidParams` when a 0.3 card does not validate.
    """
    if "supportedInterfaces" in card or "supported_interfaces" in card:
        return _card_v1(card)
    try:
        compat = types_v03.AgentCard.model_validate(card)
    except pydantic.ValidationError as error:
        raise InvalidParams(field_violations=pydantic_violations(error)) from None
    out = MessageToDict(sdk_conversions.to_core_agent_card(compat))
    restore_json_fields(card, out)
    for interface in out.get("supportedInterfaces", []):
        version = interface.get("protocolVersion", "")
        match = re.fullmatch(r"(\d+\.\d+)\.\d+", version)
        if match:
            interface["protocolVersion"] = match[1]
    return out


def agent_card_to_v03(card: Mapping[str, Any]) -> JsonDict:
    """The 0.3 card for a 1.0 card, built from its first 0.3 interface (SDK
    ``to_compat_agent_card``), ``protocolVersion`` in full (``"0.3.0"``). Raises :class:`VersionNotSupported` without one."""
    normalized = _card_v1(card)
    proto = ParseDict(normalized, pb2_v10.AgentCard(), ignore_unknown_fields=True)
    try:
        compat = sdk_conversions.to_compat_agent_card(proto)
    except sdk_errors.VersionNotSupportedError:
        raise VersionNotSupported("the agent card has no 0.3 interface") from None
    out = compat.model_dump(mode="json", by_alias=True, exclude_none=True)
    restore_json_fields(normalized, out)
    if re.fullmatch(r"\d+\.\d+", out.get("protocolVersion", "")):
        # 1.0 interfaces say Major.Minor; a 0.3 card says the full version, as 0.3 agents do.
        out["protocolVersion"] += ".0"
    return out


def agent_card_hybrid(card: Mapping[str, Any]) -> JsonDict:
    """The 1.0 card plus the 0.3 fields (``url``, ``preferredTransport``, ``protocolVersion``,
    ``additionalInterfaces``, ``security``, ``supportsAuthenticatedExtendedCard``), so 0.3
    and 1.0 clients can both read it. Without a 0.3 interface, just the 1.0 card.

    Each security scheme 0.3 can express is given in its 0.3 shape only (``{"type": "http",
    "scheme": "Bearer", ...}``), never both shapes in one object as a2a-sdk's
    ``agent_card_to_dict`` merges them: a2a-sdk 0.3.x refuses a card whose scheme lacks
    ``type``, and a2a-sdk 1.x's ``parse_agent_card`` turns the 0.3 shape into the 1.0 one
    (``type`` decides the wrapper, ``in`` becomes ``location``), whereas the merged shape only
    reads because unknown fields are ignored. Every other 0.3 field is one that
    ``parse_agent_card`` consumes, so the card parses strictly in a2a-sdk 1.x."""
    normalized = _card_v1(card)
    try:
        legacy = agent_card_to_v03(normalized)
    except VersionNotSupported:
        return normalized
    if not legacy.get(_HYBRID_DROPPED_FALSE):
        legacy.pop(_HYBRID_DROPPED_FALSE, None)
    hybrid = copy.deepcopy(normalized)
    schemes = hybrid.get("securitySchemes") or {}
    for name, scheme in (legacy.pop("securitySchemes", None) or {}).items():
        schemes[name] = scheme
    return _merge_missing(hybrid, legacy)


def _card_v1(card: Mapping[str, Any]) -> JsonDict:
    """A 1.0 or hybrid card as normalized 1.0 ProtoJSON: security schemes in the 0.3 shape
    (a hybrid's) are read through the SDK's ``to_core_security_scheme``, then the card is
    walked along the 1.0 descriptor, dropping the 0.3 fields."""
    schemes = card.get("securitySchemes")
    if isinstance(schemes, Mapping) and any(
        isinstance(scheme, Mapping) and "type" in scheme for scheme in schemes.values()
    ):
        card = {
            **card,
            "securitySchemes": {
                name: _security_scheme_v1(scheme) for name, scheme in schemes.items()
            },
        }
    normalized, _ = walk(card, v1_descriptor("AgentCard"), keep_unknown=False)
    return normalized


def _security_scheme_v1(scheme: object) -> object:
    if not isinstance(scheme, Mapping) or "type" not in scheme:
        return scheme
    try:
        compat = types_v03.SecurityScheme.model_validate(scheme)
    except pydantic.ValidationError as error:
        raise InvalidParams(field_violations=pydantic_violations(error)) from None
    return MessageToDict(sdk_conversions.to_core_security_scheme(compat))


def _merge_missing(target: JsonDict, extra: Mapping[str, Any]) -> JsonDict:
    """Add what ``target`` lacks from ``extra``, recursing into objects and lists of objects."""
    for key, value in extra.items():
        if key not in target:
            target[key] = value
        elif isinstance(value, dict) and isinstance(target[key], dict):
            _merge_missing(target[key], value)
        elif isinstance(value, list) and isinstance(target[key], list):
            for mine, theirs in zip(target[key], value, strict=False):
                if isinstance(mine, dict) and isinstance(theirs, dict):
                    _merge_missing(mine, theirs)
    return target
