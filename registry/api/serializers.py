"""Registry JSON, in camelCase like A2A itself."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from urllib.parse import urlsplit

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from registry.api.agent_options import (
    DelegationSerializer,
    FailoverSerializer,
    RetriesSerializer,
)
from registry.models import (
    Agent,
    CardSnapshot,
    DeclaredExtension,
    Skill,
    Team,
    TeamMembership,
)
from registry.services import Credentials
from relay_project.public_url import relay_base_url


class SkillSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="skill_id")
    inputModes = serializers.JSONField(source="input_modes")
    outputModes = serializers.JSONField(source="output_modes")

    class Meta:
        model = Skill
        fields = ["id", "name", "description", "tags", "examples", "inputModes", "outputModes"]


class ExtensionSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeclaredExtension
        fields = ["uri", "description", "required", "params"]


class BreakerSerializer(serializers.Serializer):
    """The circuit breaker on real calls: closed, open (calls fail fast) or half_open."""

    state = serializers.CharField(source="breaker_state")
    failures = serializers.IntegerField(source="breaker_failures")
    openedAt = serializers.DateTimeField(source="breaker_opened_at", allow_null=True)


class HealthSerializer(serializers.Serializer):
    state = serializers.CharField(source="health")
    checkedAt = serializers.DateTimeField(source="health_checked_at", allow_null=True)
    latencyMs = serializers.FloatField(source="health_latency_ms", allow_null=True)
    detail = serializers.CharField(source="health_detail")
    consecutiveFailures = serializers.IntegerField(source="health_failures")
    nextCheckAt = serializers.DateTimeField(source="next_probe_at", allow_null=True)
    breaker = BreakerSerializer(source="*")


class CapabilitiesSerializer(serializers.Serializer):
    streaming = serializers.BooleanField()
    pushNotifications = serializers.BooleanField(source="push_notifications")
    extendedAgentCard = serializers.BooleanField(source="extended_card")
    extensions = ExtensionSerializer(many=True)


class ProviderSerializer(serializers.Serializer):
    organization = serializers.CharField(source="provider_organization")
    url = serializers.CharField(source="provider_url")


class SignatureSerializer(serializers.Serializer):
    """What the relay found about the signatures of the agent's stored card."""

    status = serializers.CharField(
        source="signature_status", help_text="verified, unsigned or invalid"
    )
    keyId = serializers.CharField(source="signature_kid", help_text="The kid that signed it.")
    keySetUrl = serializers.CharField(source="signature_jku", help_text="The key set's URL.")
    detail = serializers.CharField(source="signature_detail")
    checkedAt = serializers.DateTimeField(source="signature_checked_at", allow_null=True)
    required = serializers.BooleanField(
        source="require_signature",
        help_text="Whether a card without a valid signature is refused (the stored one kept).",
    )
    refusedAt = serializers.DateTimeField(source="card_refused_at", allow_null=True)
    refusedReason = serializers.CharField(
        source="card_refused_reason", help_text="Why the last fetched card was refused."
    )


class OriginSerializer(serializers.Serializer):
    """Where a mirrored agent comes from: the peer relay and the agent's id there."""

    relay = serializers.CharField(source="origin_peer.url")
    relayName = serializers.CharField(source="origin_peer.name")
    id = serializers.CharField(source="origin_id")
    mode = serializers.CharField(source="origin_peer.mode")


class AgentSerializer(serializers.ModelSerializer):
    """An agent as the registry shows it. Credentials are never returned, only whether set."""

    cardUrl = serializers.CharField(source="card_url")
    mcpServer = serializers.BooleanField(
        source="mcp_server", help_text="An MCP server whose tools are its skills."
    )
    invocationUrl = serializers.CharField(source="invocation_url")
    protocolVersions = serializers.JSONField(source="protocol_versions")
    cardProtocolVersion = serializers.CharField(source="card_protocol_version")
    capabilities = CapabilitiesSerializer(source="*")
    defaultInputModes = serializers.JSONField(source="default_input_modes")
    defaultOutputModes = serializers.JSONField(source="default_output_modes")
    provider = ProviderSerializer(source="*")
    documentationUrl = serializers.CharField(source="documentation_url")
    iconUrl = serializers.CharField(source="icon_url")
    skills = SkillSerializer(many=True)
    health = HealthSerializer(source="*")
    hasCredentials = serializers.BooleanField(source="has_credentials")
    credentialKind = serializers.CharField(
        source="credential_kind",
        allow_null=True,
        help_text="bearer, header or basic; null without credentials (never the value).",
    )
    supportsClientRouting = serializers.BooleanField(source="supports_client_routing")
    retries = RetriesSerializer(source="*")
    failover = FailoverSerializer(source="*")
    delegation = DelegationSerializer(source="*")
    signature = SignatureSerializer(source="*")
    origin = serializers.SerializerMethodField(
        help_text="null for agents registered here; for agents mirrored from a peer relay, "
        "{relay, relayName, id, mode} (read-only here)."
    )
    cardFetchedAt = serializers.DateTimeField(source="card_fetched_at")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = Agent
        fields = [
            "id",
            "name",
            "description",
            "status",
            "version",
            "cardUrl",
            "mcpServer",
            "invocationUrl",
            "cardProtocolVersion",
            "protocolVersions",
            "bindings",
            "interfaces",
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "provider",
            "documentationUrl",
            "iconUrl",
            "skills",
            "health",
            "hasCredentials",
            "credentialKind",
            "supportsClientRouting",
            "retries",
            "failover",
            "delegation",
            "signature",
            "origin",
            "cardFetchedAt",
            "createdAt",
            "updatedAt",
        ]

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {
                "relay": {"type": "string", "description": "The peer relay's base URL."},
                "relayName": {"type": "string"},
                "id": {"type": "string", "description": "The agent's id at the peer."},
                "mode": {"type": "string", "enum": ["via_origin", "direct"]},
            },
            "required": ["relay", "relayName", "id", "mode"],
        }
    )
    def get_origin(self, agent: Agent) -> dict | None:
        return OriginSerializer(agent).data if agent.origin_peer_id else None


class WriteSerializer(serializers.Serializer):
    """A request body that refuses fields it does not know (400 naming each, with the closest
    known field), so a misspelt field is never silently ignored."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            known = [name for name, field in self.fields.items() if not field.read_only]
            unknown = [name for name in data if name not in known]
            if unknown:
                raise serializers.ValidationError(
                    {name: [unknown_field_message(name, known)] for name in unknown}
                )
        return super().to_internal_value(data)


def unknown_field_message(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or [
        field for field in known if field.lower() == name.lower()
    ]
    hint = f"did you mean {close[0]}?" if close else f"the fields are {', '.join(known)}"
    return f"is not a field here; {hint}"


class HttpUrlField(serializers.URLField):
    """An http(s) URL; one without a scheme, or with another, gets a message saying what to
    write instead of Django's bare "Enter a valid URL"."""

    def to_internal_value(self, data):
        if isinstance(data, str) and data.strip():
            text = data.strip()
            scheme = urlsplit(text).scheme.lower() if "://" in text else ""
            if not scheme:
                raise serializers.ValidationError(
                    f"{text[:200]!r} has no scheme: write the full URL, e.g. "
                    f"'https://{text[:200]}' (or http:// for a plain HTTP agent)"
                )
            if scheme not in ("http", "https"):
                raise serializers.ValidationError(
                    f"must be an http:// or https:// URL, not {scheme}://"
                )
        return super().to_internal_value(data)


class AgentRefreshSerializer(AgentSerializer):
    """The answer of a refresh (for the schema): the agent, and whether its card changed."""

    cardChanged = serializers.BooleanField(
        read_only=True, help_text="Whether the card changed (and a new snapshot was stored)."
    )

    class Meta(AgentSerializer.Meta):
        fields = [*AgentSerializer.Meta.fields, "cardChanged"]


HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+\Z"
HEADER_VALUE = r"^(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?\Z"
CREDENTIAL_KINDS = ["bearer", "header", "basic"]


class CredentialsSerializer(WriteSerializer):
    """``{"kind": "bearer"|"header"|"basic", "headerName"?, "value"}``: bearer sends
    ``Authorization: Bearer <value>``, basic ``Authorization: Basic`` of ``value`` given as
    ``user:password``, header sends ``value`` in ``headerName``. The first shape of this API,
    ``{"headerName", "headerValue"}``, is still accepted as kind header."""

    kind = serializers.ChoiceField(choices=CREDENTIAL_KINDS, required=False)
    headerName = serializers.RegexField(
        HEADER_NAME,
        max_length=100,
        required=False,
        error_messages={"invalid": "headerName must be an HTTP header name"},
    )
    # Printable ASCII, inner spaces and tabs: what an HTTP client can send as a header value.
    # Anything else would be stored, then fail every call to the agent.
    value = serializers.RegexField(
        HEADER_VALUE,
        max_length=4096,
        trim_whitespace=False,
        required=False,
        write_only=True,
        error_messages={
            "invalid": "value must be printable ASCII, with no space or tab at either end"
        },
    )
    headerValue = serializers.RegexField(
        HEADER_VALUE,
        max_length=4096,
        trim_whitespace=False,
        required=False,
        write_only=True,
        error_messages={
            "invalid": "headerValue must be printable ASCII, with no space or tab at either end"
        },
    )

    def validate(self, data):
        if "value" in data and "headerValue" in data:
            raise serializers.ValidationError({"value": "give value or headerValue, not both"})
        value = data.get("value", data.get("headerValue"))
        kind = data.get("kind") or "header"
        if value is None:
            raise serializers.ValidationError({"value": "the credential's value is required"})
        if any(character in value for character in "\r\n\x00"):
            raise serializers.ValidationError(
                {"value": "the value cannot hold line breaks or NUL characters"}
            )
        if kind == "header" and not data.get("headerName"):
            raise serializers.ValidationError(
                {"headerName": "a header credential needs headerName"}
            )
        if kind != "header" and data.get("headerName"):
            raise serializers.ValidationError(
                {
                    "headerName": f"a {kind} credential is sent in Authorization; "
                    "headerName is only for kind header"
                }
            )
        if kind == "basic" and ":" not in value:
            raise serializers.ValidationError({"value": "a basic credential is user:password"})
        return Credentials(data.get("headerName", ""), value, kind)


class AgentRegisterSerializer(WriteSerializer):
    url = HttpUrlField(max_length=2048, help_text="The agent's base URL or card URL.")
    id = serializers.SlugField(max_length=64, required=False)
    invocationUrl = HttpUrlField(
        max_length=2048,
        required=False,
        default="",
        help_text="Where calls go, when not the URL the card names.",
    )
    credentials = CredentialsSerializer(
        required=False,
        help_text="Sent on card fetches, probes and calls; stored encrypted, never returned.",
    )
    requireSignature = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Refuse the card unless one of its signatures verifies.",
    )
    mcpServer = serializers.BooleanField(
        required=False,
        default=False,
        help_text="`url` is an MCP server (streamable HTTP): the relay lists its tools and "
        "writes its card, one skill per tool.",
    )


class AgentUpdateSerializer(WriteSerializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    invocationUrl = HttpUrlField(
        max_length=2048,
        required=False,
        allow_blank=True,
        source="invocation_url",
        help_text="Where calls go; empty to use the URL the card names.",
    )
    status = serializers.ChoiceField(choices=Agent.Status.choices, required=False)
    credentials = CredentialsSerializer(required=False, allow_null=True)
    requireSignature = serializers.BooleanField(
        required=False,
        source="require_signature",
        help_text="Refuse a fetched card whose signature does not verify (the stored card is "
        "kept and the refusal recorded).",
    )
    retries = RetriesSerializer(source="*", required=False)
    failover = FailoverSerializer(source="*", required=False)
    delegation = DelegationSerializer(source="*", required=False)


class SnapshotSerializer(serializers.ModelSerializer):
    contentHash = serializers.CharField(source="content_hash")
    protocolVersion = serializers.CharField(source="protocol_version")
    sourceUrl = serializers.CharField(source="source_url")
    fetchedAt = serializers.DateTimeField(source="fetched_at")
    diff = serializers.SerializerMethodField(
        help_text="Unified diff from the previous snapshot (empty for the first)."
    )

    class Meta:
        model = CardSnapshot
        fields = ["id", "contentHash", "protocolVersion", "sourceUrl", "fetchedAt", "diff"]

    def get_diff(self, snapshot) -> list[str]:
        return self.context["diffs"].get(snapshot.pk, [])


class SkillMatchSerializer(serializers.Serializer):
    agentId = serializers.CharField(source="skill.agent_id")
    agentName = serializers.CharField(source="skill.agent.name")
    skillId = serializers.CharField(source="skill.skill_id")
    name = serializers.CharField(source="skill.name")
    description = serializers.CharField(source="skill.description")
    tags = serializers.JSONField(source="skill.tags")
    score = serializers.FloatField()
    health = serializers.CharField(source="skill.agent.health")
    meaning = serializers.FloatField(
        help_text="Cosine similarity of the question and the skill, 0 to 1 (0 in word search)"
    )
    words = serializers.FloatField(help_text="Share of the question's words the skill contains")
    latencyMs = serializers.FloatField(
        source="skill.agent.health_latency_ms",
        allow_null=True,
        help_text="The agent's latest measured latency",
    )


class SearchModeSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(
        choices=["semantic", "lexical", "filters"],
        help_text="semantic: by meaning and words; lexical: by words only (the reason says "
        "why); filters: no question was asked",
    )
    reason = serializers.CharField(required=False)


class SnapshotHistorySerializer(serializers.Serializer):
    """The shape of ``GET /a2a/registry/{id}/history`` (for the schema)."""

    snapshots = SnapshotSerializer(many=True)


class SkillMatchPageSerializer(serializers.Serializer):
    """The shape of ``GET /a2a/skills`` (for the schema)."""

    matches = SkillMatchSerializer(many=True)
    search = SearchModeSerializer()


# --- Teams ----------------------------------------------------------------------------------


def team_urls(request, team_id: str) -> tuple[str, str]:
    """The absolute ``(a2aUrl, cardUrl)`` of a team, at the relay's public URL."""
    base = relay_base_url(request, f"/a2a/teams/{team_id}/")
    return base, f"{base}.well-known/agent-card.json"


class TeamMemberSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="agent_id")
    name = serializers.CharField(source="agent.name")
    health = serializers.CharField(source="agent.health")
    supportsClientRouting = serializers.BooleanField(source="agent.supports_client_routing")

    class Meta:
        model = TeamMembership
        fields = ["id", "name", "order", "enabled", "health", "supportsClientRouting"]


class TeamSerializer(serializers.ModelSerializer):
    """A team as the registry shows it. Needs ``request`` in the context for its URLs."""

    defaultAgent = serializers.CharField(source="default_agent_id")
    maxRoutingHops = serializers.IntegerField(source="max_routing_hops")
    noRecipient = serializers.ChoiceField(
        source="no_recipient",
        choices=Team.NoRecipient.choices,
        help_text="Who gets a caller's message that names no member: default_agent, or "
        "select (the healthy member whose skills best match it)",
    )
    members = TeamMemberSerializer(source="memberships", many=True)
    a2aUrl = serializers.SerializerMethodField(
        method_name="get_a2a_url", help_text="The team's A2A endpoint."
    )
    cardUrl = serializers.SerializerMethodField(
        method_name="get_card_url", help_text="The team's Agent Card."
    )
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = Team
        fields = [
            "id",
            "name",
            "description",
            "defaultAgent",
            "maxRoutingHops",
            "noRecipient",
            "enabled",
            "members",
            "a2aUrl",
            "cardUrl",
            "createdAt",
            "updatedAt",
        ]

    def get_a2a_url(self, team: Team) -> str:
        return team_urls(self.context["request"], team.pk)[0]

    def get_card_url(self, team: Team) -> str:
        return team_urls(self.context["request"], team.pk)[1]


def _agent_ids(**kwargs) -> serializers.ListField:
    # Whitespace is kept: the service refuses an id that is not exactly a registered one.
    return serializers.ListField(child=serializers.CharField(trim_whitespace=False), **kwargs)


class TeamCreateSerializer(WriteSerializer):
    """Only the JSON types are checked here; what makes a valid team is
    ``registry.teams.team_validate``'s to say, so the API and the admin give the same reasons."""

    id = serializers.CharField(trim_whitespace=False, allow_blank=True, default="")
    name = serializers.CharField(allow_blank=True, default="")
    description = serializers.CharField(allow_blank=True, default="")
    members = _agent_ids(default=list, help_text="Agent ids, in order.")
    defaultAgent = serializers.CharField(
        source="default_agent",
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="An enabled member.",
    )
    maxRoutingHops = serializers.IntegerField(
        source="max_routing_hops", default=10, help_text="1 to 10."
    )
    noRecipient = serializers.CharField(
        source="no_recipient",
        default="default_agent",
        help_text="default_agent, or select: the healthy member whose skills best match a "
        "message that names no member",
    )
    enabled = serializers.BooleanField(default=True)


class TeamUpdateSerializer(WriteSerializer):
    name = serializers.CharField(required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    members = _agent_ids(required=False, help_text="Replaces the members; agent ids, in order.")
    defaultAgent = serializers.CharField(
        source="default_agent", required=False, allow_null=True, allow_blank=True
    )
    maxRoutingHops = serializers.IntegerField(source="max_routing_hops", required=False)
    noRecipient = serializers.CharField(source="no_recipient", required=False)
    enabled = serializers.BooleanField(required=False)


class CatalogImportSerializer(WriteSerializer):
    url = HttpUrlField(
        max_length=2048,
        help_text="The catalog's URL, or a host whose /.well-known/ai-catalog.json is read.",
    )
    credentials = CredentialsSerializer(
        required=False,
        help_text="Sent for the catalog and stored for the agents it adds (e.g. the API key of "
        "the relay that publishes the catalog).",
    )


class ImportedEntrySerializer(serializers.Serializer):
    identifier = serializers.CharField()
    agentId = serializers.CharField()


class RefusedEntrySerializer(serializers.Serializer):
    identifier = serializers.CharField()
    code = serializers.CharField()
    reason = serializers.CharField()


class CatalogImportReportSerializer(serializers.Serializer):
    catalogUrl = serializers.CharField()
    added = ImportedEntrySerializer(many=True)
    updated = ImportedEntrySerializer(many=True)
    unchanged = ImportedEntrySerializer(many=True)
    refused = RefusedEntrySerializer(many=True)


class RemovedAgentSerializer(serializers.Serializer):
    id = serializers.CharField()
    at = serializers.DateTimeField()


class RemovedAgentsSerializer(serializers.Serializer):
    removed = RemovedAgentSerializer(many=True)
