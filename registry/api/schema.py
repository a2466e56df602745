"""What the API docs say beyond what the views and serializers tell drf-spectacular: the bearer
API key, the two error bodies, each operation's error answers, and example values.

The examples are checked against their schemas by ``tests/test_api_schema.py``, and sent to a
live relay, so they stay answers the relay really gives.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """Declares ``registry.auth.ApiKeyAuthentication`` as HTTP bearer, so the docs page's
    Authorize button takes an API key and "Try it out" sends it."""

    target_class = "registry.auth.ApiKeyAuthentication"
    name = "bearerAuth"
    priority = 1

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key of this relay (`manage.py create_api_key NAME` prints "
            "one), sent as `Authorization: Bearer <key>`.",
        }


# --- error bodies ---------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable for clients, e.g. invalid_request, "
        "invalid_query, not_found, duplicate, upstream_error."
    )
    message = serializers.CharField(help_text="What went wrong, for a person.")
    fields = serializers.DictField(
        required=False, help_text="invalid_request: the message of each bad field, by name."
    )
    missing = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="invalid_card: the card's missing fields.",
    )
    problems = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="invalid_workflow: every problem of the document, each naming its step "
        "and field.",
    )


class ErrorSerializer(serializers.Serializer):
    """The registry API's error body."""

    error = ErrorDetailSerializer()


class StatusDetailSerializer(serializers.Serializer):
    code = serializers.IntegerField(help_text="The HTTP status.")
    status = serializers.CharField(help_text="google.rpc.Code name, e.g. INVALID_ARGUMENT.")
    message = serializers.CharField()
    details = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="google.rpc ErrorInfo, BadRequest, ...",
    )


class StatusErrorSerializer(serializers.Serializer):
    """The A2A HTTP+JSON binding's error body (``google.rpc.Status``), used by the task API."""

    error = StatusDetailSerializer()


REGISTRY_ERRORS = {
    400: (
        "invalid_request",
        "Bad input: the message names the field or parameter and why",
        "url: 'agent.example.com' has no scheme: write the full URL, e.g. "
        "'https://agent.example.com' (or http:// for a plain HTTP agent)",
    ),
    401: (
        "not_authenticated",
        "No API key, or one that is unknown, revoked or expired",
        "invalid, revoked or expired API key",
    ),
    403: (
        "permission_denied",
        "The key may not do this",
        "only the key that registered this agent, or an admin key, may change it",
    ),
    404: ("not_found", "No such agent or team", "no agent with id 'weather'"),
    409: (
        "duplicate",
        "It exists already, or is in use",
        "an agent with id 'weather' already exists",
    ),
    413: (
        "too_large",
        "The body is larger than the relay accepts",
        "the request body is larger than the limit of 2621440 bytes",
    ),
    422: (
        "upstream_error",
        "The agent's card could not be had or used (the agent's answer, never the caller's)",
        "the agent at https://weather.example.com/.well-known/"
        "agent-card.json answered HTTP 401: it refused the relay; give the agent's "
        "credentials (credentials: {kind, value}) so the relay can send them",
    ),
    429: (
        "throttled",
        "Over this key's calls per minute; see Retry-After",
        "Request was throttled. Expected available in 12 seconds.",
    ),
}

STATUS_ERRORS = {
    400: ("INVALID_ARGUMENT", "Bad input: the details name the field"),
    401: ("UNAUTHENTICATED", "No API key, or one that is unknown, revoked or expired"),
    404: ("NOT_FOUND", "No such task, agent or team for this key"),
    413: ("INVALID_ARGUMENT", "The body is larger than the relay accepts"),
    429: ("RESOURCE_EXHAUSTED", "Over this key's (or the agent's) calls per minute"),
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Registry API error answers, with an example each."""
    answers = {}
    for code in codes:
        error_code, description, message = REGISTRY_ERRORS[code]
        answers[code] = OpenApiResponse(
            ErrorSerializer,
            description=description,
            examples=[
                OpenApiExample(
                    f"{code} {error_code}",
                    value={"error": {"code": error_code, "message": message}},
                    response_only=True,
                    status_codes=[str(code)],
                )
            ],
        )
    return answers


def task_errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Task API error answers (``google.rpc.Status``), with an example each."""
    answers = {}
    for code in codes:
        status, description = STATUS_ERRORS[code]
        answers[code] = OpenApiResponse(
            StatusErrorSerializer,
            description=description,
            examples=[
                OpenApiExample(
                    f"{code} {status}",
                    value={"error": {"code": code, "status": status, "message": description}},
                    response_only=True,
                    status_codes=[str(code)],
                )
            ],
        )
    return answers


# --- example values -------------------------------------------------------------------------

AGENT_ID = OpenApiParameter(
    "agent_id",
    str,
    OpenApiParameter.PATH,
    description="An agent id.",
    examples=[OpenApiExample("weather", value="weather")],
)
TEAM_ID = OpenApiParameter(
    "team_id",
    str,
    OpenApiParameter.PATH,
    description="A team id.",
    examples=[OpenApiExample("crew", value="crew")],
)

AGENT = {
    "id": "weather",
    "name": "Weather Agent",
    "description": "Forecasts and current conditions for any city.",
    "status": "active",
    "version": "1.0.0",
    "cardUrl": "https://weather.example.com/.well-known/agent-card.json",
    "mcpServer": False,
    "invocationUrl": "",
    "cardProtocolVersion": "1.0",
    "protocolVersions": ["1.0"],
    "bindings": ["JSONRPC"],
    "interfaces": [
        {
            "url": "https://weather.example.com/a2a/v1",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
    ],
    "capabilities": {
        "streaming": False,
        "pushNotifications": False,
        "extendedAgentCard": False,
        "extensions": [],
    },
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "provider": {"organization": "Example Weather", "url": "https://weather.example.com"},
    "documentationUrl": "",
    "iconUrl": "",
    "skills": [
        {
            "id": "forecast",
            "name": "Forecast",
            "description": "Forecasts for a city.",
            "tags": ["weather", "forecast"],
            "examples": ["Will it rain in Lyon tomorrow?"],
            "inputModes": [],
            "outputModes": [],
        }
    ],
    "health": {
        "state": "healthy",
        "checkedAt": "2026-01-05T10:00:00Z",
        "latencyMs": 41.5,
        "detail": "",
        "consecutiveFailures": 0,
        "nextCheckAt": "2026-01-05T10:01:00Z",
        "breaker": {"state": "closed", "failures": 0, "openedAt": None},
    },
    "hasCredentials": True,
    "credentialKind": "bearer",
    "supportsClientRouting": False,
    "retries": {"attempts": 3, "baseDelayMs": 200, "deadlineSeconds": 10, "idempotent": False},
    "failover": {"sameSkill": False},
    "delegation": {
        "mode": "none",
        "audience": "",
        "tokenUrl": "",
        "scopes": "",
        "narrow": True,
    },
    "signature": {
        "status": "verified",
        "keyId": "weather-2026",
        "keySetUrl": "https://weather.example.com/.well-known/jwks.json",
        "detail": "signed with key 'weather-2026'",
        "checkedAt": "2026-01-05T09:00:00Z",
        "required": False,
        "refusedAt": None,
        "refusedReason": "",
    },
    "origin": None,
    "cardFetchedAt": "2026-01-05T09:00:00Z",
    "createdAt": "2026-01-05T09:00:00Z",
    "updatedAt": "2026-01-05T09:00:00Z",
}

REGISTER = {
    "url": "https://weather.example.com",
    "id": "weather",
    "credentials": {"kind": "bearer", "value": "the-agent's-token"},
}

UPDATE = {"description": "Forecasts for every city in Europe.", "status": "deprecated"}

CARD = {
    "name": "Weather Agent",
    "description": "Forecasts and current conditions for any city.",
    "version": "1.0.0",
    "supportedInterfaces": [
        {
            "url": "https://weather.example.com/a2a/v1",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
    ],
    "capabilities": {"streaming": False, "pushNotifications": False},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [
        {
            "id": "forecast",
            "name": "Forecast",
            "description": "Forecasts for a city.",
            "tags": ["weather", "forecast"],
        }
    ],
}

HISTORY = {
    "snapshots": [
        {
            "id": 2,
            "contentHash": "9f2c41d07a" + "0" * 54,
            "protocolVersion": "1.0",
            "sourceUrl": "https://weather.example.com/.well-known/agent-card.json",
            "fetchedAt": "2026-01-06T09:00:00Z",
            "diff": [
                "--- 23b2269d1a98",
                "+++ 9f2c41d07a00",
                "@@ -1 +1 @@",
                '-  "version": "1.0.0",',
                '+  "version": "1.1.0",',
            ],
        },
        {
            "id": 1,
            "contentHash": "23b2269d1a98" + "0" * 52,
            "protocolVersion": "1.0",
            "sourceUrl": "https://weather.example.com/.well-known/agent-card.json",
            "fetchedAt": "2026-01-05T09:00:00Z",
            "diff": [],
        },
    ]
}

SKILL_MATCHES = {
    "matches": [
        {
            "agentId": "weather",
            "agentName": "Weather Agent",
            "skillId": "forecast",
            "name": "Forecast",
            "description": "Forecasts for a city.",
            "tags": ["weather", "forecast"],
            "score": 0.82,
            "health": "healthy",
            "meaning": 0.71,
            "words": 1.0,
            "latencyMs": 42.0,
        },
    ],
    "search": {"mode": "semantic"},
}

TEAM = {
    "id": "crew",
    "name": "Crew",
    "description": "A writer with a weather expert.",
    "defaultAgent": "writer",
    "maxRoutingHops": 10,
    "noRecipient": "default_agent",
    "enabled": True,
    "members": [
        {
            "id": "writer",
            "name": "Writer",
            "order": 0,
            "enabled": True,
            "health": "healthy",
            "supportsClientRouting": True,
        },
        {
            "id": "weather",
            "name": "Weather Agent",
            "order": 1,
            "enabled": True,
            "health": "healthy",
            "supportsClientRouting": False,
        },
    ],
    "a2aUrl": "https://relay.example.com/a2a/teams/crew/",
    "cardUrl": "https://relay.example.com/a2a/teams/crew/.well-known/agent-card.json",
    "createdAt": "2026-01-05T09:00:00Z",
    "updatedAt": "2026-01-05T09:00:00Z",
}

TEAM_CREATE = {
    "id": "crew",
    "name": "Crew",
    "description": "A writer with a weather expert.",
    "members": ["writer", "weather"],
    "defaultAgent": "writer",
    "maxRoutingHops": 10,
}

TEAM_UPDATE = {"maxRoutingHops": 5, "enabled": False}


def example(name: str, value, *, request: bool = False, status: int = 200) -> OpenApiExample:
    if request:
        return OpenApiExample(name, value=value, request_only=True)
    return OpenApiExample(name, value=value, response_only=True, status_codes=[str(status)])


AI_CATALOG = {
    "specVersion": "0.9",
    "host": {
        "displayName": "Brass Relay",
        "identifier": "relay.example.com",
        "documentationUrl": "https://relay.example.com/api/docs",
    },
    "entries": [
        {
            "identifier": "urn:air:relay.example.com:agent:weather",
            "displayName": "Weather",
            "type": "application/a2a-agent-card+json",
            "mediaType": "application/a2a-agent-card+json",
            "url": "https://relay.example.com/a2a/agents/weather/.well-known/agent-card.json",
            "description": "Forecasts for any city.",
            "tags": ["weather", "forecast"],
            "capabilities": ["forecast"],
            "representativeQueries": ["Will it rain in Oslo tomorrow?"],
            "version": "2.1.0",
            "updatedAt": "2026-01-01T12:00:00Z",
            "extensions": {
                "brassRelay": {"kind": "agent", "id": "weather", "signature": "verified"}
            },
        }
    ],
}
CATALOG_IMPORT = {"url": "https://agents.example.com"}
CATALOG_IMPORT_REPORT = {
    "catalogUrl": "https://agents.example.com/.well-known/ai-catalog.json",
    "added": [{"identifier": "urn:air:agents.example.com:agent:alpha", "agentId": "alpha"}],
    "updated": [],
    "unchanged": [{"identifier": "urn:air:agents.example.com:agent:beta", "agentId": "beta"}],
    "refused": [
        {
            "identifier": "urn:air:agents.example.com:mcp:tools",
            "code": "not_a2a",
            "reason": "type application/mcp-server-card+json is not an A2A agent card",
        }
    ],
}
REMOVED = {"removed": [{"id": "weather", "at": "2026-01-01T12:00:00Z"}]}
