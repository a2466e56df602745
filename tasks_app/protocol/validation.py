"""Validation of A2A request params: 1.0 against the proto descriptors, 0.3 with pydantic.

- :func:`parse_v1` / :func:`parse_request_v1` validate a 1.0 dict against the a2a-sdk proto
  descriptors and return it normalised (camelCase keys, unknown fields dropped, defaults
  omitted); errors are :class:`InvalidParams` naming each field.
- :func:`parse_request_v03` validates 0.3 JSON-RPC params with the SDK's 0.3 pydantic
  models; :func:`pydantic_violations` turns their errors into field violations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic
from a2a.compat.v0_3 import types as types_v03

from tasks_app.protocol.errors import FieldViolation, InvalidParams, UnsupportedOperation
from tasks_app.protocol.protojson import JsonDict, v1_descriptor, walk
from tasks_app.protocol.versions import Operation

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


def parse_v1(message_type: str, data: object) -> JsonDict:
    """Validate a 1.0 ProtoJSON dict of ``message_type`` (e.g. ``"Task"``), normalised.

    Keys become camelCase, unknown fields and ``null`` are dropped, default-valued fields
    are omitted, enums become names; JSON-valued fields are kept verbatim. Raises
    :class:`InvalidParams` listing every problem with its field path.
    """
    normalized, violations = walk(data, v1_descriptor(message_type), keep_unknown=False)
    if violations:
        raise InvalidParams(field_violations=violations)
    return normalized


_REQUEST_TYPES_V1: Mapping[Operation, str] = {
    Operation.SEND: "SendMessageRequest",
    Operation.STREAM: "SendMessageRequest",
    Operation.GET_TASK: "GetTaskRequest",
    Operation.LIST_TASKS: "ListTasksRequest",
    Operation.CANCEL: "CancelTaskRequest",
    Operation.SUBSCRIBE: "SubscribeToTaskRequest",
    Operation.PUSH_CREATE: "TaskPushNotificationConfig",
    Operation.PUSH_GET: "GetTaskPushNotificationConfigRequest",
    Operation.PUSH_LIST: "ListTaskPushNotificationConfigsRequest",
    Operation.PUSH_DELETE: "DeleteTaskPushNotificationConfigRequest",
    Operation.EXTENDED_CARD: "GetExtendedAgentCardRequest",
}


def parse_request_v1(operation: Operation, params: object) -> JsonDict:
    """Validate 1.0 params of ``operation`` and return them canonical.

    On top of :func:`parse_v1`: ``pageSize`` must be 1..100 (ListTasks defaults it to 50),
    ``historyLength`` must not be negative, and a push config to create needs a ``taskId``.
    """
    normalized, violations = walk(
        {} if params is None else params,
        v1_descriptor(_REQUEST_TYPES_V1[operation]),
        keep_unknown=False,
    )
    violations.extend(_semantic_violations(operation, normalized))
    if violations:
        raise InvalidParams(field_violations=violations)
    if operation is Operation.LIST_TASKS:
        normalized.setdefault("pageSize", DEFAULT_PAGE_SIZE)
    return normalized


def _semantic_violations(operation: Operation, params: JsonDict) -> list[FieldViolation]:
    found: list[FieldViolation] = []
    page_size = params.get("pageSize")
    if page_size is not None and not 1 <= page_size <= MAX_PAGE_SIZE:
        found.append(FieldViolation("pageSize", f"must be between 1 and {MAX_PAGE_SIZE}"))
    history = params.get("historyLength", params.get("configuration", {}).get("historyLength"))
    if history is not None and history < 0:
        field = "historyLength" if "historyLength" in params else "configuration.historyLength"
        found.append(FieldViolation(field, "must not be negative"))
    if operation is Operation.PUSH_CREATE and not params.get("taskId"):
        found.append(FieldViolation("taskId", "is required"))
    return found


_REQUEST_MODELS_V03: Mapping[Operation, type[pydantic.BaseModel]] = {
    Operation.SEND: types_v03.MessageSendParams,
    Operation.STREAM: types_v03.MessageSendParams,
    Operation.GET_TASK: types_v03.TaskQueryParams,
    Operation.CANCEL: types_v03.TaskIdParams,
    Operation.SUBSCRIBE: types_v03.TaskIdParams,
    Operation.PUSH_CREATE: types_v03.TaskPushNotificationConfig,
    Operation.PUSH_GET: types_v03.GetTaskPushNotificationConfigParams,
    Operation.PUSH_LIST: types_v03.ListTaskPushNotificationConfigParams,
    Operation.PUSH_DELETE: types_v03.DeleteTaskPushNotificationConfigParams,
}


def parse_request_v03(operation: Operation, params: object) -> JsonDict:
    """Validate 0.3 JSON-RPC params with the SDK's 0.3 models; return them camelCase.

    The result only holds fields the client sent (``null`` ones dropped); feed it to
    :func:`request_to_v1`. Raises :class:`InvalidParams` with the 0.3 field paths.
    """
    if operation is Operation.EXTENDED_CARD:
        return {}
    model = _REQUEST_MODELS_V03.get(operation)
    if model is None:
        raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")
    try:
        parsed = model.model_validate({} if params is None else params)
    except pydantic.ValidationError as error:
        raise InvalidParams(field_violations=pydantic_violations(error)) from None
    return parsed.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude_none=True)


def pydantic_violations(error: pydantic.ValidationError) -> list[FieldViolation]:
    """Field violations from pydantic errors, collapsing union alternatives.

    For a union (a part is a text, file or data part) pydantic reports every alternative.
    We keep the alternative that fits best: the one whose ``kind`` matched, then the one
    with the fewest errors.
    """
    groups: dict[tuple[Any, ...], dict[str, list[tuple[tuple[Any, ...], str, str]]]] = {}
    plain: list[tuple[tuple[Any, ...], str]] = []
    for item in error.errors():
        loc = tuple(item["loc"])
        split = next((i for i, part in enumerate(loc) if part in _V03_MODEL_NAMES), None)
        if split is None:
            plain.append((loc, item["msg"]))
        else:
            member = groups.setdefault(loc[:split], {}).setdefault(loc[split], [])
            member.append((loc[:split] + loc[split + 1 :], item["msg"], item["type"]))
    for members in groups.values():
        best = min(members.values(), key=_union_member_fit)
        plain.extend((loc, msg) for loc, msg, _ in best)
    violations: dict[FieldViolation, None] = {}
    for loc, msg in plain:
        # A nested union leaves one more member name in the path; drop it too.
        parts = [p for p in loc if p not in _V03_MODEL_NAMES]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
        violations[FieldViolation(path or "(params)", msg)] = None
    return list(violations)


_V03_MODEL_NAMES = frozenset(
    name
    for name, value in vars(types_v03).items()
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel)
)


def _union_member_fit(errors: list[tuple[tuple[Any, ...], str, str]]) -> tuple[bool, int]:
    # Best first: the member whose `kind` literal matched, then the one with fewest errors.
    return any(kind == "literal_error" for _, _, kind in errors), len(errors)
