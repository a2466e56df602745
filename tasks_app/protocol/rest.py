"""The HTTP+JSON (REST) binding: routes, request parsing and result rendering, 1.0 and 0.3.

Paths are relative to an agent's base URL. 1.0 routes sit at the base (optionally under a
``/{tenant}`` prefix); 0.3 routes sit under ``/v1`` and speak 0.3 *proto* JSON. Route
variables are named after the 1.0 request fields they fill (``id``, ``taskId``).

- :func:`match_rest_route` finds the route for a verb and path.
- :func:`parse_rest_request` turns verb, path, query and body into ``(operation, canonical
  1.0 params)``. Query parameters are camelCase (snake_case accepted), enums by name,
  ``pageSize`` 1..100 defaulting to 50 for ListTasks.
- :func:`rest_result_body` / :func:`rest_stream_frame` render canonical results; errors use
  :func:`tasks_app.protocol.errors.rest_error_body`.
- :func:`rest_upstream_request` / :func:`parse_rest_response` do the same for calling an
  upstream REST agent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tasks_app import lifecycle
from tasks_app.protocol.convert import (
    request_from_v1,
    request_to_v1,
    result_from_v1,
    result_to_v1,
    stream_response_from_v1,
    stream_response_to_v1,
)
from tasks_app.protocol.errors import (
    FieldViolation,
    InvalidAgentResponse,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    VersionNotSupported,
    error_from_rest,
)
from tasks_app.protocol.validation import parse_request_v1
from tasks_app.protocol.versions import VERSION_HEADER, Dialect, Operation, ProtocolVersion

V1, V03 = ProtocolVersion.V1_0, ProtocolVersion.V0_3


@dataclass(frozen=True)
class RestRoute:
    """One REST route: verb, path template, the operation it invokes, in which version."""

    http_method: str
    template: str
    operation: Operation
    version: ProtocolVersion
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = re.split(r"\{(\w+)\}", self.template)
        regex = "".join(
            f"(?P<{part}>[^/]+)" if i % 2 else re.escape(part) for i, part in enumerate(parts)
        )
        object.__setattr__(self, "pattern", re.compile(regex))

    def path(self, **variables: str) -> str:
        """The template with its variables filled in."""
        return re.sub(r"\{(\w+)\}", lambda m: variables[m[1]], self.template)


def _routes(version: ProtocolVersion, prefix: str, card_path: str) -> tuple[RestRoute, ...]:
    # Custom-method suffixes (:cancel, :subscribe) come before /tasks/{id} so they win.
    table = (
        ("POST", "/message:send", Operation.SEND),
        ("POST", "/message:stream", Operation.STREAM),
        ("POST", "/tasks/{id}:cancel", Operation.CANCEL),
        ("POST", "/tasks/{id}:subscribe", Operation.SUBSCRIBE),
        ("GET", "/tasks/{id}:subscribe", Operation.SUBSCRIBE),
        ("GET", "/tasks/{taskId}/pushNotificationConfigs/{id}", Operation.PUSH_GET),
        ("DELETE", "/tasks/{taskId}/pushNotificationConfigs/{id}", Operation.PUSH_DELETE),
        ("POST", "/tasks/{taskId}/pushNotificationConfigs", Operation.PUSH_CREATE),
        ("GET", "/tasks/{taskId}/pushNotificationConfigs", Operation.PUSH_LIST),
        ("GET", "/tasks/{id}", Operation.GET_TASK),
        ("GET", "/tasks", Operation.LIST_TASKS),
        ("GET", card_path, Operation.EXTENDED_CARD),
    )
    return tuple(RestRoute(verb, prefix + path, op, version) for verb, path, op in table)


ROUTES: tuple[RestRoute, ...] = _routes(V1, "", "/extendedAgentCard") + _routes(V03, "/v1", "/card")


@dataclass(frozen=True)
class RouteMatch:
    route: RestRoute
    variables: dict[str, str]
    tenant: str | None


def match_rest_route(http_method: str, path: str, version: ProtocolVersion | str) -> RouteMatch:
    """The route serving ``http_method path`` in ``version``.

    A 1.0 path that matches nothing is retried without its first segment, read as the
    ``/{tenant}`` prefix. Raises :class:`MethodNotFound` (404) for an unknown path or a verb
    the path does not take (metadata ``allow`` lists the verbs), and
    :class:`VersionNotSupported` for a path of the other version, which is what a 1.0
    client that forgot ``A2A-Version`` sends.
    """
    verb = http_method.upper()
    path = "/" + path.strip("/")
    found = _match(verb, path, version)
    if found is None and version == V1:
        tenant, _, rest = path[1:].partition("/")
        if tenant and rest:
            inner = _match(verb, "/" + rest, version)
            if inner is not None:
                found = RouteMatch(inner.route, inner.variables, tenant)
    if found is not None:
        return found
    verbs = sorted({r.http_method for r in ROUTES if r.version == version and _fits(r, path)})
    if verbs:
        raise MethodNotFound(
            f"{verb} is not allowed on {path}; use {' or '.join(verbs)}",
            metadata={"allow": ",".join(verbs)},
        )
    if version == V03 and _match(verb, path, V1) is not None:
        raise VersionNotSupported(
            f"{path} is an A2A 1.0 route and the request asked for 0.3 "
            f"(no {VERSION_HEADER} header means 0.3); send {VERSION_HEADER}: 1.0"
        )
    raise MethodNotFound(f"no A2A route for {verb} {path}")


def _fits(route: RestRoute, path: str) -> bool:
    return route.pattern.fullmatch(path) is not None


def _match(verb: str, path: str, version: str) -> RouteMatch | None:
    for route in ROUTES:
        if route.version != version or route.http_method != verb:
            continue
        match = route.pattern.fullmatch(path)
        if match is not None:
            return RouteMatch(route, match.groupdict(), None)
    return None


def parse_rest_request(
    http_method: str,
    path: str,
    query: Mapping[str, object],
    body: bytes | str | None,
    version: ProtocolVersion | str,
) -> tuple[Operation, dict[str, Any]]:
    """``(operation, canonical 1.0 params)`` for a REST request.

    ``query`` maps names to a string or a list of strings (the last one wins); ``body`` is
    the raw request body (ignored for GET and DELETE). Path values win over body values and
    must agree with them. Raises :class:`JSONParseError` for a body that is not JSON,
    :class:`InvalidRequest` for one that is not an object, :class:`InvalidParams` with
    field violations, and the errors of :func:`match_rest_route`.
    """
    found = match_rest_route(http_method, path, version)
    operation = found.route.operation
    payload = _json_body(body) if found.route.http_method == "POST" else {}
    fields = _query_fields(operation, query, version)
    if version == V1:
        # The body is the request message minus the path fields; for CancelTask that
        # leaves `metadata`.
        params: dict[str, Any] = {**payload, **fields}
        _check_path_agrees(payload, found.variables)
        params.update(found.variables)
        if found.tenant is not None:
            params["tenant"] = found.tenant
        return operation, parse_request_v1(operation, params)
    legacy = _legacy_request(operation, payload, fields, found.variables)
    return operation, parse_request_v1(
        operation, request_to_v1(operation, legacy, Dialect.V03_REST)
    )


def _legacy_request(
    operation: Operation,
    payload: dict[str, Any],
    fields: dict[str, Any],
    variables: dict[str, str],
) -> dict[str, Any]:
    """The 0.3 proto request message: the path becomes resource names."""
    if operation in (Operation.SEND, Operation.STREAM):
        return payload
    if operation in (Operation.LIST_TASKS, Operation.EXTENDED_CARD):
        return fields
    if operation in (Operation.GET_TASK, Operation.CANCEL, Operation.SUBSCRIBE):
        return {**fields, "name": f"tasks/{variables['id']}"}
    if operation in (Operation.PUSH_CREATE, Operation.PUSH_LIST):
        return {**payload, **fields, "parent": f"tasks/{variables['taskId']}"}
    return {"name": f"tasks/{variables['taskId']}/pushNotificationConfigs/{variables['id']}"}


def rest_result_body(
    operation: Operation, version: ProtocolVersion | str, result: Any
) -> dict[str, Any] | list[Any]:
    """The 200 body for a canonical ``result`` of a non-streaming ``operation``.

    DeleteTaskPushNotificationConfig answers ``{}``; 0.3 results take the 0.3 proto JSON
    shapes (``{"task": ...}`` for a send, ``{"configs": [...]}``, ``TASK_STATE_CANCELLED``...).
    """
    if operation.streaming:
        raise ValueError(f"{operation.value} streams: use rest_stream_frame")
    if operation is Operation.PUSH_DELETE:
        return {}
    if version == V1:
        return result
    return result_from_v1(operation, result, Dialect.V03_REST)


def rest_stream_frame(version: ProtocolVersion | str, event: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON of one SSE ``data:`` line: a bare StreamResponse (0.3: proto JSON)."""
    if version == V1:
        return dict(event)
    return stream_response_from_v1(event, Dialect.V03_REST)


# ---------------------------------------------------------------------------------------
# Calling upstream REST agents


@dataclass(frozen=True)
class RestCall:
    """What to send an upstream agent: verb, path under its base URL, query and JSON body."""

    http_method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any] | None


def rest_upstream_request(
    operation: Operation, version: ProtocolVersion | str, params: Mapping[str, Any]
) -> RestCall:
    """The REST call for canonical ``params`` of ``operation`` on a ``version`` agent.

    Subscribe uses POST, as the SDK client does (servers accept GET too). A 1.0 ``tenant``
    becomes the path prefix.
    """
    # The first route of an operation is its canonical one (POST for subscribe).
    route = next(r for r in ROUTES if r.operation is operation and r.version == version)
    if version == V1:
        variables = {name: str(params[name]) for name in route.pattern.groupindex}
        rest = {k: v for k, v in params.items() if k not in variables and k != "tenant"}
        path = route.path(**variables)
        if params.get("tenant"):
            path = f"/{params['tenant']}{path}"
        return _call(route, path, rest)
    legacy = request_from_v1(operation, params, Dialect.V03_REST)
    variables = _variables_from_resource_name(legacy.get("name") or legacy.get("parent"))
    if operation is Operation.PUSH_CREATE:
        # Like the SDK client, send the whole CreateTaskPushNotificationConfigRequest.
        return _call(route, route.path(**variables), legacy)
    rest = {k: v for k, v in legacy.items() if k not in ("name", "parent")}
    return _call(route, route.path(**variables), rest)


def _call(route: RestRoute, path: str, rest: dict[str, Any]) -> RestCall:
    if route.http_method == "POST":
        has_body = route.operation in (Operation.SEND, Operation.STREAM, Operation.PUSH_CREATE)
        body = (
            rest if has_body else ({"metadata": rest["metadata"]} if "metadata" in rest else None)
        )
        return RestCall("POST", path, {}, body)
    query = {key: _query_text(value) for key, value in rest.items()}
    return RestCall(route.http_method, path, query, None)


def _variables_from_resource_name(name: str | None) -> dict[str, str]:
    """``tasks/T`` fills ``{id}`` or ``{taskId}``; ``tasks/T/pushNotificationConfigs/C`` both."""
    segments = (name or "").split("/")
    if len(segments) == 4:
        return {"taskId": segments[1], "id": segments[3]}
    if len(segments) == 2:
        return {"id": segments[1], "taskId": segments[1]}
    return {}


def parse_rest_response(
    http_status: int,
    body: bytes | str | Mapping[str, Any] | None,
    operation: Operation,
    version: ProtocolVersion | str,
) -> Any:
    """The canonical result of an upstream REST response, or raise the error it carries.

    Non-2xx statuses raise the A2AError rebuilt by :func:`error_from_rest` (a bare 404 on a
    task route is TaskNotFound). A 2xx body that is not JSON raises
    :class:`InvalidAgentResponse`. For streams, pass each SSE ``data`` with status 200; an
    ``{"error": ...}`` frame raises its error.
    """
    payload: Any = body
    if isinstance(body, bytes | str):
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            if 200 <= http_status < 300:
                raise InvalidAgentResponse("the agent's response is not JSON") from None
            payload = None
    if not 200 <= http_status < 300:
        raise error_from_rest(http_status, payload, task_scoped=_is_task_scoped(operation))
    if isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping):
        status = payload["error"].get("code")
        raise error_from_rest(status if isinstance(status, int) else 500, payload)
    if operation is Operation.PUSH_DELETE:
        return None
    if payload is None:
        raise InvalidAgentResponse("the agent's response is empty")
    if version == V1:
        return payload
    if operation.streaming:
        return stream_response_to_v1(payload, Dialect.V03_REST)
    return result_to_v1(operation, payload, Dialect.V03_REST)


def _is_task_scoped(operation: Operation) -> bool:
    return operation not in (
        Operation.SEND,
        Operation.STREAM,
        Operation.LIST_TASKS,
        Operation.EXTENDED_CARD,
    )


# ---------------------------------------------------------------------------------------
# Bodies and query strings


def _with_snake_case(*names: str) -> Mapping[str, str]:
    """Each camelCase query name, and its snake_case spelling, -> the camelCase name."""
    snake = {re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).lower(): name for name in names}
    return {**snake, **{name: name for name in names}}


_QUERY_FIELDS: Mapping[Operation, Mapping[str, str]] = {
    Operation.GET_TASK: _with_snake_case("historyLength"),
    Operation.LIST_TASKS: _with_snake_case(
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "statusTimestampAfter",
        "includeArtifacts",
    ),
    Operation.PUSH_LIST: _with_snake_case("pageSize", "pageToken"),
}


def _json_body(body: bytes | str | None) -> dict[str, Any]:
    if body is None or not body.strip():
        return {}
    try:
        payload = json.loads(body)
    except ValueError as problem:
        raise JSONParseError(f"Invalid JSON payload: {problem}") from None
    if not isinstance(payload, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return payload


def _query_fields(
    operation: Operation, query: Mapping[str, object], version: str
) -> dict[str, Any]:
    """The query parameters ``operation`` takes, typed where ProtoJSON needs it to be."""
    fields: dict[str, Any] = {}
    violations: list[FieldViolation] = []
    names = _QUERY_FIELDS.get(operation, {})
    for key, value in query.items():
        name = names.get(key)
        raw = _last(value) if name is not None else None
        if not raw:
            continue
        if name == "includeArtifacts":
            if raw.lower() not in ("true", "false", "1", "0"):
                violations.append(FieldViolation(name, "must be true or false"))
                continue
            fields[name] = raw.lower() in ("true", "1")
        elif name == "status":
            try:
                state = lifecycle.from_wire(raw)
            except ValueError:
                violations.append(FieldViolation(name, f"unknown task state {raw!r:.40}"))
                continue
            if state is not None:
                to_wire = lifecycle.to_wire_v1 if version == V1 else lifecycle.to_wire_v03_rest
                fields[name] = to_wire(state)
        elif name == "statusTimestampAfter":
            fields[name] = _utc_timestamp(raw, violations)
        else:
            fields[name] = raw  # integers are checked against the proto with the rest
    if violations:
        raise InvalidParams(field_violations=violations)
    return {key: value for key, value in fields.items() if value is not None}


def _utc_timestamp(raw: str, violations: list[FieldViolation]) -> str | None:
    """ISO 8601 with an offset (a ``+`` may arrive as a space) -> RFC 3339 UTC ``Z``."""
    try:
        moment = datetime.fromisoformat(raw.strip().replace(" ", "+"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        violations.append(FieldViolation("statusTimestampAfter", "must be ISO 8601 with a zone"))
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _last(value: object) -> str | None:
    if isinstance(value, list | tuple):
        value = value[-1] if value else None
    return None if value is None else str(value)


def _query_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_path_agrees(payload: Mapping[str, Any], variables: Mapping[str, str]) -> None:
    violations = [
        FieldViolation(name, f"must match the path ({value!r})")
        for name, value in variables.items()
        if payload.get(name) not in (None, "", value)
    ]
    if violations:
        raise InvalidParams(field_violations=violations)
