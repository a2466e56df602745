"""Protocol versions, operations, JSON-RPC method names and extension headers.

- :func:`negotiate_version` reads ``A2A-Version`` (a missing or empty header means 0.3, as
  the spec says; only Major.Minor counts, so ``1.0.1`` is ``1.0``).
- :class:`Dialect` names the three ways A2A objects are spelled on a wire.
- :class:`Operation` names the eleven A2A operations once; :data:`METHODS` maps every
  JSON-RPC method name of 1.0 (PascalCase) and 0.3 (``category/action``) onto one.
- :func:`requested_extensions` reads ``A2A-Extensions`` and the 0.3 ``X-A2A-Extensions``.

Headers may be given as any mapping (a dict, Django's case-insensitive ``request.headers``;
a value may be a list when the header was repeated) or as ASGI-style ``(name, value)``
pairs, str or bytes. Names are compared case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from tasks_app.protocol.errors import MethodNotFound, UnsupportedOperation, VersionNotSupported

VERSION_HEADER = "A2A-Version"
EXTENSIONS_HEADER = "A2A-Extensions"
LEGACY_EXTENSIONS_HEADER = "X-A2A-Extensions"


class ProtocolVersion(StrEnum):
    V1_0 = "1.0"
    V0_3 = "0.3"


SUPPORTED_VERSIONS: frozenset[ProtocolVersion] = frozenset(ProtocolVersion)


class Dialect(StrEnum):
    """How A2A objects are spelled on a wire."""

    V1 = "1.0"  # ProtoJSON of lf.a2a.v1: JSON-RPC 1.0 and REST 1.0
    V03_JSONRPC = "0.3"  # the 0.3 JSON schema, with `kind` discriminators
    V03_REST = "0.3-rest"  # the 0.3 proto JSON of package a2a.v1: /v1 REST


class Operation(StrEnum):
    """An A2A operation; the value is its 1.0 (gRPC and JSON-RPC) name."""

    SEND = "SendMessage"
    STREAM = "SendStreamingMessage"
    GET_TASK = "GetTask"
    LIST_TASKS = "ListTasks"
    CANCEL = "CancelTask"
    SUBSCRIBE = "SubscribeToTask"
    PUSH_CREATE = "CreateTaskPushNotificationConfig"
    PUSH_GET = "GetTaskPushNotificationConfig"
    PUSH_LIST = "ListTaskPushNotificationConfigs"
    PUSH_DELETE = "DeleteTaskPushNotificationConfig"
    EXTENDED_CARD = "GetExtendedAgentCard"

    @property
    def streaming(self) -> bool:
        """True when the answer is an SSE stream rather than one result."""
        return self in (Operation.STREAM, Operation.SUBSCRIBE)


@dataclass(frozen=True)
class Method:
    """A JSON-RPC method name: the operation it invokes, in which protocol version."""

    name: str
    operation: Operation
    version: ProtocolVersion


_V03_METHOD_NAMES: Mapping[Operation, str] = MappingProxyType(
    {
        Operation.SEND: "message/send",
        Operation.STREAM: "message/stream",
        Operation.GET_TASK: "tasks/get",
        Operation.CANCEL: "tasks/cancel",
        Operation.SUBSCRIBE: "tasks/resubscribe",
        Operation.PUSH_CREATE: "tasks/pushNotificationConfig/set",
        Operation.PUSH_GET: "tasks/pushNotificationConfig/get",
        Operation.PUSH_LIST: "tasks/pushNotificationConfig/list",
        Operation.PUSH_DELETE: "tasks/pushNotificationConfig/delete",
        Operation.EXTENDED_CARD: "agent/getAuthenticatedExtendedCard",
        # ListTasks has no 0.3 JSON-RPC method (0.3 had it in gRPC/REST only).
    }
)

METHODS: Mapping[str, Method] = MappingProxyType(
    {
        **{op.value: Method(op.value, op, ProtocolVersion.V1_0) for op in Operation},
        **{name: Method(name, op, ProtocolVersion.V0_3) for op, name in _V03_METHOD_NAMES.items()},
    }
)


def lookup_method(name: str) -> Method:
    """The method called ``name``; raises :class:`MethodNotFound` for anything else."""
    method = METHODS.get(name)
    if method is None:
        raise MethodNotFound(f"Method not found: {name!r:.100}")
    return method


def method_name(operation: Operation, version: str) -> str:
    """The JSON-RPC method to call ``operation`` on a ``version`` agent.

    Raises :class:`UnsupportedOperation` for ListTasks on 0.3, which had no such method.
    """
    if version == ProtocolVersion.V1_0:
        return operation.value
    name = _V03_METHOD_NAMES.get(operation)
    if name is None:
        raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")
    return name


_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


def negotiate_version(
    headers: Mapping[str, object] | Iterable[tuple[str | bytes, str | bytes]],
    query: Mapping[str, object] | None = None,
) -> ProtocolVersion:
    """The protocol version a request asks for.

    Reads the ``A2A-Version`` header, else the ``A2A-Version`` query parameter the spec also
    allows, else 0.3. Only Major.Minor is compared (``0.3.0`` is 0.3). Raises
    :class:`VersionNotSupported` for anything that is not 1.0 or 0.3.
    """
    values = _header_values(headers, VERSION_HEADER)
    if not values and query is not None:
        values = _flatten(query.get(VERSION_HEADER))
    raw = next((value.strip() for value in values if value.strip()), "")
    if not raw:
        return ProtocolVersion.V0_3
    match = _VERSION.fullmatch(raw)
    if match is not None:
        major_minor = f"{int(match[1])}.{int(match[2])}"
        if major_minor in SUPPORTED_VERSIONS:
            return ProtocolVersion(major_minor)
    raise VersionNotSupported(
        f"A2A version {raw!r:.40} is not supported; use one of: 1.0, 0.3",
        metadata={"requestedVersion": raw[:40], "supportedVersions": "1.0,0.3"},
    )


def check_method_version(method: Method, negotiated: ProtocolVersion) -> None:
    """Refuse a 1.0 method name on a request that did not ask for 1.0.

    The method name decides the version of a JSON-RPC request, because the two name sets
    are disjoint. Like a2a-sdk, a 1.0 name needs ``A2A-Version: 1.0`` (a missing header
    means 0.3), while 0.3 names are served whatever the header says, since 0.3 clients
    predate the header.
    """
    if method.version == ProtocolVersion.V1_0 and negotiated != ProtocolVersion.V1_0:
        raise VersionNotSupported(
            f"{method.name} is an A2A 1.0 method; send the header {VERSION_HEADER}: 1.0",
            metadata={"requestedVersion": str(negotiated), "supportedVersions": "1.0,0.3"},
        )


def requested_extensions(
    headers: Mapping[str, object] | Iterable[tuple[str | bytes, str | bytes]],
) -> tuple[str, ...]:
    """Extension URIs the client activates, from ``A2A-Extensions`` and ``X-A2A-Extensions``.

    Values are comma-separated, repeated headers are merged, whitespace is trimmed, empty
    entries are dropped and duplicates are kept once, in first-seen order. Entries that
    cannot be URIs (non-ASCII or control characters) are dropped like any extension the
    server does not know: they could not be forwarded in a header either.
    """
    uris: dict[str, None] = {}
    for name in (EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER):
        for value in _header_values(headers, name):
            for uri in value.split(","):
                uri = uri.strip()
                if uri and uri.isascii() and uri.isprintable():
                    uris[uri] = None
    return tuple(uris)


def activation_header_name(version: str) -> str:
    """The header that lists activated extensions in ``version``: 1.0 or the 0.3 ``X-`` one."""
    return EXTENSIONS_HEADER if version == ProtocolVersion.V1_0 else LEGACY_EXTENSIONS_HEADER


def _header_values(
    headers: Mapping[str, object] | Iterable[tuple[str | bytes, str | bytes]], name: str
) -> list[str]:
    # ASGI gives names as bytes: compared as bytes, without decoding every header's name.
    wanted = name.lower()
    wanted_bytes = wanted.encode("latin-1")
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    values: list[str] = []
    for key, value in pairs:
        if isinstance(key, bytes):
            matches = key.lower() == wanted_bytes
        else:
            matches = str(key).lower() == wanted
        if matches:
            values.extend(_flatten(value))
    return values


def _flatten(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, bytes):
        return [value.decode("latin-1")]
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [item for part in value for item in _flatten(part)]
    return [str(value)]
