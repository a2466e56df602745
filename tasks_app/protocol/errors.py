"""A2A errors: one exception hierarchy, rendered into every binding and parsed back.

Every :class:`A2AError` carries its JSON-RPC ``code``, its ``google.rpc.ErrorInfo``
``reason``, its HTTP status and ``google.rpc.Code`` name (the v1.0.1 mapping of
PROTOCOL.md section 3, which a2a-sdk 1.3.0 follows), a human ``message`` and a
``metadata`` map (ErrorInfo metadata: strings to strings).

Three errors are ours, not A2A's, for the gateway's own use:

- :class:`Unauthenticated`: HTTP 401, JSON-RPC code ``-31401``.
- :class:`PermissionDenied`: HTTP 403, JSON-RPC code ``-31403`` (an access rule refused).
- :class:`RateLimited`: HTTP 429, JSON-RPC code ``-31429``, with ``retry_after`` seconds
  (rendered as a ``google.rpc.RetryInfo`` detail).
- :class:`Unavailable`: HTTP 503, JSON-RPC code ``-31503``: the relay cannot serve the call
  now (its Redis is unreachable); the caller may try again shortly.

Their JSON-RPC codes sit outside the block JSON-RPC reserves (-32768..-32000, where A2A
takes -32001 and up), so no future JSON-RPC or A2A code can collide with them; the last
three digits repeat the HTTP status so a reader recognises them. Their ErrorInfo domain
is ``brass-relay``, since the reasons are not A2A's. When sent over JSON-RPC the HTTP
status of the response should still be 401/429/503 (with ``WWW-Authenticate`` /
``Retry-After``); that is the view's business.

Renderers: :func:`jsonrpc_error_body` and :func:`rest_error_body`. Parsers of upstream
errors (either version, either binding): :func:`error_from_jsonrpc` and
:func:`error_from_rest`. This module imports nothing from the SDK; a test checks that our
table agrees with ``a2a.utils.errors``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

A2A_DOMAIN = "a2a-protocol.org"
RELAY_DOMAIN = "brass-relay"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"

JsonRpcId = str | int | None


@dataclass(frozen=True)
class FieldViolation:
    """One ``google.rpc.BadRequest.FieldViolation``: a camelCase field path and what is wrong."""

    field: str
    description: str


class A2AError(Exception):
    """Base of every protocol error. Raise a subclass; the base renders as an internal error.

    ``data`` is only set when the error came from a 0.3 peer whose JSON-RPC ``error.data``
    was free-form; it is sent back verbatim to 0.3 clients so pass-through is faithful.
    ``request_id`` is set by the JSON-RPC parser on errors it raises, so the caller can
    answer with the id it managed to read; ``request_version`` likewise when the method name
    revealed the version (a 0.3 client gets the 0.3 ``error.data``).
    """

    code: ClassVar[int] = -32603
    reason: ClassVar[str] = "INTERNAL_ERROR"
    http_status: ClassVar[int] = 500
    status: ClassVar[str] = "INTERNAL"
    domain: ClassVar[str] = A2A_DOMAIN
    default_message: ClassVar[str] = "Internal error"

    request_id: JsonRpcId = None
    request_version: str | None = None

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: Mapping[str, object] | None = None,
        data: Any = None,
    ) -> None:
        self.message = message or self.default_message
        self.metadata: dict[str, str] = {
            str(key): _as_metadata_value(value) for key, value in (metadata or {}).items()
        }
        self.data = data
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, metadata={self.metadata!r})"

    def details(self) -> list[dict[str, Any]]:
        """The typed details: an ErrorInfo first, then whatever the subclass adds."""
        return [
            {
                "@type": ERROR_INFO_TYPE,
                "reason": self.reason,
                "domain": self.domain,
                "metadata": dict(self.metadata),
            },
            *self._extra_details(),
        ]

    def v03_data(self) -> Any:
        """``error.data`` for 0.3 JSON-RPC: the upstream's own data, else our facts, else None."""
        if self.data is not None:
            return self.data
        data: dict[str, Any] = {**self.metadata, **self._extra_v03_data()}
        return data or None

    def _extra_details(self) -> list[dict[str, Any]]:
        return []

    def _extra_v03_data(self) -> dict[str, Any]:
        return {}


class JSONParseError(A2AError):
    # REST has no parse error of its own; like the SDK we answer 400 INVALID_REQUEST.
    code = -32700
    reason = "INVALID_REQUEST"
    http_status = 400
    status = "INVALID_ARGUMENT"
    default_message = "Invalid JSON payload"


class InvalidRequest(A2AError):
    code = -32600
    reason = "INVALID_REQUEST"
    http_status = 400
    status = "INVALID_ARGUMENT"
    default_message = "Request payload validation error"


class MethodNotFound(A2AError):
    code = -32601
    reason = "METHOD_NOT_FOUND"
    http_status = 404
    status = "NOT_FOUND"
    default_message = "Method not found"


class InvalidParams(A2AError):
    """Invalid parameters, with the offending fields as a ``google.rpc.BadRequest``."""

    code = -32602
    reason = "INVALID_PARAMS"
    http_status = 400
    status = "INVALID_ARGUMENT"
    default_message = "Invalid parameters"

    def __init__(
        self,
        message: str | None = None,
        *,
        field_violations: tuple[FieldViolation, ...] | list[FieldViolation] = (),
        metadata: Mapping[str, object] | None = None,
        data: Any = None,
    ) -> None:
        self.field_violations = tuple(field_violations)
        if message is None and self.field_violations:
            message = "; ".join(f"{v.field}: {v.description}" for v in self.field_violations)
        super().__init__(message, metadata=metadata, data=data)

    def _extra_details(self) -> list[dict[str, Any]]:
        if not self.field_violations:
            return []
        return [{"@type": BAD_REQUEST_TYPE, "fieldViolations": _violation_dicts(self)}]

    def _extra_v03_data(self) -> dict[str, Any]:
        return {"fieldViolations": _violation_dicts(self)} if self.field_violations else {}


class IdempotencyKeyReused(InvalidParams):
    """A send repeats an idempotency key (or, where message ids count as keys, a messageId)
    of the caller's with another body. Invalid params in JSON-RPC (-32602) and gRPC
    (INVALID_ARGUMENT); HTTP 422 in HTTP+JSON, as the IETF Idempotency-Key draft answers a
    key reused with another payload (409 there means "still in progress", which the relay
    answers by waiting instead)."""

    http_status = 422


class InternalError(A2AError):
    pass


class TaskNotFound(A2AError):
    code = -32001
    reason = "TASK_NOT_FOUND"
    http_status = 404
    status = "NOT_FOUND"
    default_message = "Task not found"


class TaskNotCancelable(A2AError):
    code = -32002
    reason = "TASK_NOT_CANCELABLE"
    http_status = 400
    status = "FAILED_PRECONDITION"
    default_message = "Task cannot be canceled"


class PushNotificationNotSupported(A2AError):
    code = -32003
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    http_status = 400
    status = "FAILED_PRECONDITION"
    default_message = "Push Notification is not supported"


class UnsupportedOperation(A2AError):
    code = -32004
    reason = "UNSUPPORTED_OPERATION"
    http_status = 400
    status = "FAILED_PRECONDITION"
    default_message = "This operation is not supported"


class ContentTypeNotSupported(A2AError):
    code = -32005
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    http_status = 400
    status = "INVALID_ARGUMENT"
    default_message = "Incompatible content types"


class InvalidAgentResponse(A2AError):
    code = -32006
    reason = "INVALID_AGENT_RESPONSE"
    http_status = 500
    status = "INTERNAL"
    default_message = "Invalid agent response"


class ExtendedAgentCardNotConfigured(A2AError):
    code = -32007
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    http_status = 400
    status = "FAILED_PRECONDITION"
    default_message = "Extended agent card is not configured"


class ExtensionSupportRequired(A2AError):
    code = -32008
    reason = "EXTENSION_SUPPORT_REQUIRED"
    http_status = 400
    status = "FAILED_PRECONDITION"
    default_message = "Extension support required"


class VersionNotSupported(A2AError):
    code = -32009
    reason = "VERSION_NOT_SUPPORTED"
    http_status = 400
    status = "FAILED_PRECONDITION"
    default_message = "Version not supported"


class Unauthenticated(A2AError):
    code = -31401
    reason = "UNAUTHENTICATED"
    http_status = 401
    status = "UNAUTHENTICATED"
    domain = RELAY_DOMAIN
    default_message = "Authentication required"


class PermissionDenied(A2AError):
    """An access rule forbids the call; the message names the rule."""

    code = -31403
    reason = "PERMISSION_DENIED"
    http_status = 403
    status = "PERMISSION_DENIED"
    domain = RELAY_DOMAIN
    default_message = "Permission denied"


class RateLimited(A2AError):
    """Too many requests; ``retry_after`` is in whole seconds when known."""

    code = -31429
    reason = "RATE_LIMITED"
    http_status = 429
    status = "RESOURCE_EXHAUSTED"
    domain = RELAY_DOMAIN
    default_message = "Too many requests"

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: int | None = None,
        metadata: Mapping[str, object] | None = None,
        data: Any = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, metadata=metadata, data=data)

    def _extra_details(self) -> list[dict[str, Any]]:
        if self.retry_after is None:
            return []
        return [{"@type": RETRY_INFO_TYPE, "retryDelay": f"{self.retry_after}s"}]

    def _extra_v03_data(self) -> dict[str, Any]:
        return {} if self.retry_after is None else {"retryAfter": self.retry_after}


class Unavailable(A2AError):
    """The relay cannot serve the call now (its Redis or its database is unreachable);
    nothing was done, and the same call may be sent again after ``retry_after`` seconds."""

    code = -31503
    reason = "UNAVAILABLE"
    http_status = 503
    status = "UNAVAILABLE"
    domain = RELAY_DOMAIN
    default_message = "The relay is unavailable"
    retry_after = 2


ALL_ERRORS: tuple[type[A2AError], ...] = (
    JSONParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
    Unauthenticated,
    RateLimited,
    Unavailable,
)


# ---------------------------------------------------------------------------------------
# Rendering


def jsonrpc_error_body(error: A2AError, request_id: JsonRpcId, version: str) -> dict[str, Any]:
    """The JSON-RPC error response for ``version`` ("1.0" or "0.3").

    1.0: ``error.data`` is the typed-details array (ErrorInfo first, then BadRequest /
    RetryInfo). 0.3: ``data`` is free-form and omitted when there is nothing to say. The
    code is kept as is for 0.3 too (the SDK maps codes 0.3 lacks to -32603; an unknown
    code is still a valid JSON-RPC error and tells the client more).
    """
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if version == "1.0":
        body["data"] = error.details()
    else:
        data = error.v03_data()
        if data is not None:
            body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def rest_error_body(error: A2AError, version: str = "1.0") -> tuple[int, dict[str, Any]]:
    """``(http_status, body)`` with body a ProtoJSON ``google.rpc.Status`` under ``error``.

    The same shape serves 1.0 and the 0.3 ``/v1`` routes, as a2a-sdk 1.3.0 does; on the 0.3
    routes the HTTP status is the one 0.3 servers (the a2a-sdk 0.3 REST handler) answer,
    where it differs (a task that cannot be canceled: 409, not 400).
    """
    status = (
        V03_HTTP_STATUS.get(type(error), error.http_status)
        if version == "0.3"
        else (error.http_status)
    )
    return status, {
        "error": {
            "code": status,
            "status": error.status,
            "message": error.message,
            "details": error.details(),
        }
    }


V03_HTTP_STATUS: Mapping[type[A2AError], int] = {TaskNotCancelable: 409}
"""HTTP statuses of the 0.3 REST surface that differ from 1.0's."""


# ---------------------------------------------------------------------------------------
# Parsing upstream errors

_BY_CODE: Mapping[int, type[A2AError]] = {cls.code: cls for cls in ALL_ERRORS}
_BY_REASON: Mapping[str, type[A2AError]] = {
    **{cls.reason: cls for cls in ALL_ERRORS if cls is not JSONParseError},
    # 0.3 name of -32007, and the google.rpc.Code / SDK class spellings of internal errors.
    "AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED": ExtendedAgentCardNotConfigured,
    "INTERNAL": InternalError,
    "JSON_PARSE": JSONParseError,
    "INVALID_JSON": JSONParseError,
}
# Used when an upstream REST error names no reason. 404 depends on what was asked for.
_BY_HTTP_STATUS: Mapping[int, type[A2AError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Unauthenticated,
    405: MethodNotFound,
    409: TaskNotCancelable,
    415: ContentTypeNotSupported,
    422: InvalidParams,
    429: RateLimited,
    501: UnsupportedOperation,
    502: InvalidAgentResponse,
}


def error_from_jsonrpc(error: object) -> A2AError:
    """Rebuild the A2AError an upstream sent as a JSON-RPC ``error`` object (1.0 or 0.3).

    The ErrorInfo reason wins over the code when both are known; an unknown code becomes an
    :class:`InternalError` that keeps the code in ``metadata["upstreamCode"]``. 1.0 typed
    details become metadata / field violations / retry_after; a 0.3 free-form ``data`` is
    kept in ``error.data``. A malformed error object yields :class:`InvalidAgentResponse`.
    """
    if not isinstance(error, Mapping):
        return InvalidAgentResponse(f"upstream sent a malformed JSON-RPC error: {error!r:.200}")
    code = error.get("code")
    message = _str_or_none(error.get("message"))
    data = error.get("data")
    details = _typed_details(data)
    metadata = dict(details.metadata)
    valid_code = isinstance(code, int) and not isinstance(code, bool)
    by_code = _BY_CODE.get(code) if valid_code else None
    by_reason = _class_for_reason(details.reason)
    # The reason is the more specific of the two, except where one reason has two codes
    # (JSON parse errors and invalid requests are both INVALID_REQUEST).
    if by_reason is not None and (by_code is None or by_code.reason != by_reason.reason):
        cls = by_reason
    elif by_code is not None:
        cls = by_code
    else:
        cls = InternalError
        metadata["upstreamCode"] = str(code)
    return _build(cls, message, details, metadata, data=None if details.typed else data)


def error_from_rest(http_status: int, body: object, *, task_scoped: bool = False) -> A2AError:
    """Rebuild the A2AError an upstream REST agent answered with (1.0 or 0.3).

    Understands the ``google.rpc.Status`` body of 1.0 (and of SDK 1.x on ``/v1``), the
    ``{"message": ...}`` body of SDK 0.3.x, and RFC 9457 problem details (``type`` URIs
    like ``.../errors/task-not-found``). Without a known reason the HTTP status decides; a
    bare 404 means :class:`TaskNotFound` when ``task_scoped`` (the request named a task),
    else :class:`MethodNotFound`.
    """
    message: str | None = None
    details = _typed_details(None)
    reason: str | None = None
    if isinstance(body, Mapping):
        status_body = body.get("error")
        if isinstance(status_body, Mapping):
            message = _str_or_none(status_body.get("message"))
            details = _typed_details(status_body.get("details"))
            reason = details.reason
        else:
            message = _str_or_none(body.get("detail")) or _str_or_none(body.get("message"))
            message = message or _str_or_none(body.get("title"))
            reason = _reason_from_type(body.get("type"))
    cls = _class_for_reason(reason) or _class_for_http_status(http_status, task_scoped=task_scoped)
    return _build(cls, message, details, dict(details.metadata), data=None)


@dataclass(frozen=True)
class _Details:
    typed: bool = False
    reason: str | None = None
    metadata: Mapping[str, object] = field(default_factory=dict)
    violations: tuple[FieldViolation, ...] = ()
    retry_after: int | None = None


def _typed_details(data: object) -> _Details:
    """Read a ``google.rpc`` typed-details list; anything else is not typed details."""
    if not isinstance(data, list) or not any(
        isinstance(item, Mapping) and "@type" in item for item in data
    ):
        return _Details()
    reason: str | None = None
    metadata: Mapping[str, object] = {}
    violations: list[FieldViolation] = []
    retry_after: int | None = None
    for item in data:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("@type")
        if kind == ERROR_INFO_TYPE and reason is None:
            reason = _str_or_none(item.get("reason"))
            raw = item.get("metadata")
            metadata = raw if isinstance(raw, Mapping) else {}
        elif kind == BAD_REQUEST_TYPE:
            for violation in item.get("fieldViolations") or ():
                if isinstance(violation, Mapping):
                    violations.append(
                        FieldViolation(
                            str(violation.get("field", "")), str(violation.get("description", ""))
                        )
                    )
        elif kind == RETRY_INFO_TYPE:
            retry_after = _seconds(item.get("retryDelay"))
    return _Details(True, reason, metadata, tuple(violations), retry_after)


def _build(
    cls: type[A2AError],
    message: str | None,
    details: _Details,
    metadata: Mapping[str, object],
    *,
    data: Any,
) -> A2AError:
    if issubclass(cls, InvalidParams):
        return cls(message, field_violations=details.violations, metadata=metadata, data=data)
    if issubclass(cls, RateLimited):
        return cls(message, retry_after=details.retry_after, metadata=metadata, data=data)
    return cls(message, metadata=metadata, data=data)


def _class_for_reason(reason: str | None) -> type[A2AError] | None:
    return _BY_REASON.get(reason) if reason else None


def _class_for_http_status(http_status: int, *, task_scoped: bool) -> type[A2AError]:
    if http_status == 404:
        return TaskNotFound if task_scoped else MethodNotFound
    cls = _BY_HTTP_STATUS.get(http_status)
    if cls is not None:
        return cls
    return InvalidRequest if 400 <= http_status < 500 else InternalError


_CAMEL_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _reason_from_type(type_value: object) -> str | None:
    """``https://a2a-protocol.org/errors/task-not-found`` or ``TaskNotFoundError`` -> reason."""
    if not isinstance(type_value, str) or not type_value or type_value == "about:blank":
        return None
    name = type_value.rstrip("/").rsplit("/", 1)[-1]
    if "-" in name or "_" in name:
        return name.replace("-", "_").upper()
    name = name.removesuffix("Error").replace("JSON", "Json")
    return _CAMEL_WORD.sub("_", name).upper() or None


def _seconds(delay: object) -> int | None:
    """A ProtoJSON Duration (``"30s"``, ``"1.5s"``) rounded up to whole seconds."""
    if not isinstance(delay, str) or not delay.endswith("s"):
        return None
    try:
        value = float(delay[:-1])
    except ValueError:
        return None
    return max(0, -int(-value // 1))


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _as_metadata_value(value: object) -> str:
    # ErrorInfo.metadata is map<string, string>; strict proto readers reject anything else.
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _violation_dicts(error: InvalidParams) -> list[dict[str, str]]:
    return [{"field": v.field, "description": v.description} for v in error.field_violations]
