"""Agents, what their cards say, and the API keys that call the relay."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone


class AgentQuerySet(models.QuerySet):
    def with_card(self) -> AgentQuerySet:
        """Agents with their skills and extensions loaded in two queries, whatever the count."""
        return self.select_related("origin_peer").prefetch_related(
            models.Prefetch("skills", queryset=Skill.objects.order_by("position")),
            models.Prefetch("extensions", queryset=DeclaredExtension.objects.order_by("uri")),
        )

    def callable(self) -> AgentQuerySet:
        """Agents the gateway may forward to: not disabled."""
        return self.exclude(status=Agent.Status.DISABLED)


class Agent(models.Model):
    """A registered A2A agent. Card-derived fields are refreshed from the latest snapshot."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        DEPRECATED = "deprecated"
        DISABLED = "disabled"

    class Health(models.TextChoices):
        UNKNOWN = "unknown"
        HEALTHY = "healthy"
        DEGRADED = "degraded"
        UNHEALTHY = "unhealthy"

    id = models.SlugField(primary_key=True, max_length=64)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    card_url = models.URLField(max_length=2048, help_text="Where the card was found.")
    invocation_url = models.URLField(
        max_length=2048, blank=True, help_text="Overrides the endpoint the card reports for itself."
    )
    mcp_server = models.BooleanField(default=False, help_text="An MCP server, not an A2A agent.")
    version = models.CharField(max_length=100, blank=True, help_text="The agent's own version.")
    card_protocol_version = models.CharField(max_length=10, blank=True)
    protocol_versions = models.JSONField(default=list, blank=True)
    bindings = models.JSONField(default=list, blank=True)
    interfaces = models.JSONField(default=list, blank=True)
    streaming = models.BooleanField(default=False)
    push_notifications = models.BooleanField(default=False)
    extended_card = models.BooleanField(default=False)
    default_input_modes = models.JSONField(default=list, blank=True)
    default_output_modes = models.JSONField(default=list, blank=True)
    provider_organization = models.CharField(max_length=200, blank=True)
    provider_url = models.URLField(max_length=2048, blank=True)
    documentation_url = models.URLField(max_length=2048, blank=True)
    icon_url = models.URLField(max_length=2048, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)

    class CredentialKind(models.TextChoices):
        NONE = "", "none"
        BEARER = "bearer", "bearer token"
        HEADER = "header", "API key header"
        BASIC = "basic", "basic (user:password)"

    class ScaleToZeroProbes(models.TextChoices):
        CARD = "card", "card level only"
        NONE = "none", "not probed"

    class SignatureStatus(models.TextChoices):
        UNSIGNED = "unsigned"
        VERIFIED = "verified"
        INVALID = "invalid"

    class DelegationMode(models.TextChoices):
        NONE = "none", "the stored credential"
        PASS = "pass", "the caller's token"
        EXCHANGE = "exchange", "an exchanged token (RFC 8693)"

    class Breaker(models.TextChoices):
        CLOSED = "closed"
        OPEN = "open"
        HALF_OPEN = "half_open", "half-open"

    # The credential the relay sends upstream (card fetch, probes, calls). With ``kind`` bearer
    # the value is the token, with header the header name is auth_header_name, with basic the
    # value is "user:password". The value is encrypted at rest; see registry.secrets.
    auth_kind = models.CharField(
        max_length=8, choices=CredentialKind.choices, blank=True, default=CredentialKind.NONE
    )
    auth_header_name = models.CharField(max_length=100, blank=True)
    auth_header_value = models.TextField(blank=True, editable=False)

    # Health, filled by the probes in routing.health and by real calls (the circuit breaker).
    health = models.CharField(max_length=12, choices=Health.choices, default=Health.UNKNOWN)
    health_checked_at = models.DateTimeField(null=True, blank=True)
    health_latency_ms = models.FloatField(null=True, blank=True)
    health_detail = models.CharField(max_length=500, blank=True)
    health_failures = models.PositiveIntegerField(
        default=0, editable=False, help_text="Consecutive failed probes."
    )
    health_successes = models.PositiveIntegerField(
        default=0, editable=False, help_text="Consecutive successful probes."
    )
    # How this agent is probed. Empty values take the RELAY_HEALTH_* settings.
    probe_interval_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds between probes; empty takes the default."
    )
    probe_timeout_seconds = models.FloatField(
        null=True, blank=True, help_text="Seconds one probe may take; empty takes the default."
    )
    readiness_probe = models.BooleanField(
        default=False, help_text="Also send a real message (costs the agent work; off by default)."
    )
    readiness_message = models.TextField(
        blank=True, help_text="The text of the readiness probe's message."
    )
    scale_to_zero = models.BooleanField(
        default=False, help_text="The agent sleeps when idle: probes must not wake it."
    )
    scale_to_zero_probes = models.CharField(
        max_length=4,
        choices=ScaleToZeroProbes.choices,
        default=ScaleToZeroProbes.CARD,
        help_text="How an agent that scales to zero is probed.",
    )
    next_probe_at = models.DateTimeField(null=True, blank=True, db_index=True, editable=False)
    # How long the relay waits on this agent's streams (empty: the RELAY_STREAM_* settings).
    stream_idle_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The longest silence between two events of this agent's streams before the "
        "relay asks the agent for the task; empty takes RELAY_STREAM_IDLE_SECONDS. "
        "Raise it for agents that think for long without a word.",
    )
    # Retries of a send that failed before the agent answered (tasks_app.gateway.retries).
    retry_attempts = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="How many times the relay tries a send that did not reach the agent "
        "(connection refused, DNS, TLS, 502/503/504, 429 with Retry-After); 1 never retries.",
    )
    retry_base_delay_ms = models.PositiveIntegerField(
        default=200,
        validators=[MaxValueValidator(60_000)],
        help_text="The first pause between two tries, in milliseconds; each next one may be "
        "twice as long (with random jitter).",
    )
    retry_deadline_seconds = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(600)],
        help_text="No try starts later than this many seconds after the first.",
    )
    idempotent = models.BooleanField(
        default=False,
        help_text="The agent runs a message id once, however often it gets it: the relay may "
        "then also retry a send that may have reached it (a timeout, a 500, a broken "
        "connection). Leave it off unless the agent deduplicates by messageId.",
    )
    failover_same_skill = models.BooleanField(
        default=False,
        help_text="When this agent and its alternates cannot take a send, it may go to any "
        "healthy agent declaring a skill with the same id (tasks_app.gateway.failover).",
    )
    # The token the relay sends the agent on a caller's behalf (tasks_app.hop_tokens).
    delegation_mode = models.CharField(
        max_length=8,
        choices=DelegationMode.choices,
        default=DelegationMode.NONE,
        help_text="none: the stored credential; pass: the caller's JWT when its aud names the "
        "agent; exchange: a token for the agent by RFC 8693 exchange (docs: Identity).",
    )
    delegation_audience = models.CharField(
        max_length=500,
        blank=True,
        help_text="The aud the agent accepts; empty takes the agent's URL.",
    )
    delegation_token_url = models.URLField(
        max_length=2048,
        blank=True,
        help_text="The token-exchange endpoint; empty takes the exchangeUrl of the caller "
        "token's issuer.",
    )
    delegation_scopes = models.CharField(
        max_length=500,
        blank=True,
        help_text="The scopes asked for the agent, separated by spaces (empty: none asked).",
    )
    delegation_narrow = models.BooleanField(
        default=True,
        help_text="A caller lacking some of these scopes gets a token with those it holds; "
        "off: the call is refused.",
    )
    mcp_skill_tools = models.BooleanField(default=False, help_text="Each skill is an MCP tool too.")
    # Passive health: real calls through the gateway.
    breaker_state = models.CharField(
        max_length=9, choices=Breaker.choices, default=Breaker.CLOSED, editable=False
    )
    breaker_failures = models.PositiveIntegerField(default=0, editable=False)
    breaker_opened_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Counts the breaker's writes: a process keeps the newest copy it has seen.
    breaker_version = models.PositiveBigIntegerField(default=0, editable=False)

    # Lower-cased search text and "|"-delimited facets, written with the card. They let search
    # and filters run on this one table with no joins, so a page costs the same at any size.
    search_text = models.TextField(blank=True, editable=False)
    skill_facets = models.TextField(blank=True, editable=False)
    tag_facets = models.TextField(blank=True, editable=False)
    extension_facets = models.TextField(blank=True, editable=False)
    input_mode_facets = models.TextField(blank=True, editable=False)
    output_mode_facets = models.TextField(blank=True, editable=False)

    # The signatures of the stored card, checked when it was fetched (registry.signing).
    signature_status = models.CharField(
        max_length=8,
        choices=SignatureStatus.choices,
        default=SignatureStatus.UNSIGNED,
        editable=False,
        db_index=True,
    )
    signature_kid = models.CharField(max_length=200, blank=True, editable=False)
    signature_jku = models.URLField(max_length=2048, blank=True, editable=False)
    signature_detail = models.CharField(max_length=500, blank=True, editable=False)
    signature_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    require_signature = models.BooleanField(
        default=False,
        help_text="Refuse a card whose signature does not verify: a refresh keeps the card "
        "stored before and records why.",
    )
    card_refused_at = models.DateTimeField(null=True, blank=True, editable=False)
    card_refused_reason = models.CharField(max_length=500, blank=True, editable=False)

    # Agents mirrored from a peer relay (registry.peers) are read-only here.
    origin_peer = models.ForeignKey(
        "PeerRelay",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="mirrored_agents",
        editable=False,
    )
    origin_id = models.CharField(
        max_length=64, blank=True, editable=False, help_text="The agent's id at its origin."
    )

    current_snapshot = models.ForeignKey(
        "CardSnapshot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    card_fetched_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        "ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = AgentQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["status", "id"], name="agent_status_id"),
            models.Index(fields=["health", "id"], name="agent_health_id"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def supports_client_routing(self) -> bool:
        from registry.cards import CLIENT_ROUTING_URI

        return f"|{CLIENT_ROUTING_URI}|" in self.extension_facets

    @property
    def is_mirror(self) -> bool:
        return self.origin_peer_id is not None

    @property
    def has_credentials(self) -> bool:
        """A stored credential the relay can send: bearer and basic need only the value; a
        header (or a credential stored before kinds existed) also needs the header's name."""
        if not self.auth_header_value:
            return False
        if self.auth_kind in (self.CredentialKind.BEARER, self.CredentialKind.BASIC):
            return True
        return bool(self.auth_header_name)

    @property
    def credential_kind(self) -> str | None:
        """bearer, header or basic; None without credentials."""
        if not self.has_credentials:
            return None
        return self.auth_kind or self.CredentialKind.HEADER


class CardSnapshot(models.Model):
    """One distinct version of an agent's card. A refresh that finds the same content adds none."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="snapshots")
    raw = models.JSONField(help_text="The card exactly as fetched.")
    normalized = models.JSONField(help_text="The card as 1.0 ProtoJSON.")
    content_hash = models.CharField(max_length=64)
    protocol_version = models.CharField(max_length=10)
    source_url = models.URLField(max_length=2048)
    fetched_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-fetched_at", "-id"]
        get_latest_by = "fetched_at"
        indexes = [models.Index(fields=["agent", "-fetched_at"], name="snapshot_agent_time")]

    def __str__(self) -> str:
        return f"{self.agent_id}@{self.fetched_at:%Y-%m-%d %H:%M:%S}"


class Skill(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="skills")
    skill_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    examples = models.JSONField(default=list, blank=True)
    input_modes = models.JSONField(default=list, blank=True)
    output_modes = models.JSONField(default=list, blank=True)
    position = models.PositiveIntegerField(default=0)
    # Lower-cased text and "|"-delimited facets (modes include the agent's defaults when the
    # skill names none), so "which agent can do this" is one query on this table.
    search_text = models.TextField(blank=True, editable=False)
    tag_facets = models.TextField(blank=True, editable=False)
    input_mode_facets = models.TextField(blank=True, editable=False)
    output_mode_facets = models.TextField(blank=True, editable=False)
    # The sentence embedding of the skill (registry.embeddings: little-endian float32), the
    # model that made it, and when; empty while the model was unavailable. Search by meaning
    # keeps these in memory per process (registry.semantic) and reloads when they change.
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=64, blank=True, editable=False)
    embedded_at = models.DateTimeField(null=True, blank=True, editable=False, db_index=True)

    class Meta:
        ordering = ["agent_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "skill_id"], name="skill_unique_per_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.skill_id}"

    @property
    def effective_input_modes(self) -> list[str]:
        return self.input_modes or self.agent.default_input_modes

    @property
    def effective_output_modes(self) -> list[str]:
        return self.output_modes or self.agent.default_output_modes


class DeclaredExtension(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="extensions")
    uri = models.CharField(max_length=2048)
    description = models.TextField(blank=True)
    required = models.BooleanField(default=False)
    params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["agent_id", "uri"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "uri"], name="extension_unique_per_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.uri}"


class ApiKeyQuerySet(models.QuerySet):
    def usable(self) -> ApiKeyQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=now)
        )


class ApiKey(models.Model):
    """A key that callers send as ``Authorization: Bearer <key>``.

    Only the SHA-256 of the key is stored; the key itself is shown once, at creation. The first
    characters (``prefix``) identify it in lists and logs.
    """

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    is_admin = models.BooleanField(
        default=False,
        help_text="May change and delete any agent, not only its own, and "
        "administer teams and keys.",
    )
    # Scopes. A key that names no agent and no team may call every agent and team; one that
    # names some may call only those (a key for one team cannot call agents directly).
    can_read_registry = models.BooleanField(default=True, help_text="May read the registry.")
    can_register = models.BooleanField(default=True, help_text="May register agents.")
    can_call = models.BooleanField(default=True, help_text="May call agents and teams.")
    agents = models.ManyToManyField(
        Agent,
        blank=True,
        related_name="+",
        help_text="The agents this key may call. With no agent and no team chosen it may call "
        "every agent and team; otherwise only those chosen.",
    )
    teams = models.ManyToManyField(
        "Team",
        blank=True,
        related_name="+",
        help_text="The teams this key may call (the relay then calls their members for it). "
        "With no agent and no team chosen it may call every agent and team.",
    )
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls per minute; empty takes RELAY_RATE_LIMIT_PER_KEY."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # A principal of a trusted token issuer (registry.principals) rather than a key: made at
    # its first call, with no secret of its own (its hash is not a SHA-256 of any key).
    token_issuer = models.CharField(max_length=500, blank=True, editable=False)
    token_subject = models.CharField(max_length=255, blank=True, editable=False)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_usable(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    # DRF treats request.user as authenticated when this is true.
    is_authenticated = True
    is_staff = False


class Team(models.Model):
    """Agents that answer as one A2A agent. The default agent takes a conversation's first
    message and every answer nobody else claims; it must be an enabled member."""

    id = models.SlugField(primary_key=True, max_length=64)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    default_agent = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="default_for_teams",
        help_text="Must be an enabled member of the team.",
    )
    max_routing_hops = models.PositiveSmallIntegerField(
        default=10,
        help_text="At most this many agent calls per caller message (1 to 10).",
    )

    class NoRecipient(models.TextChoices):
        DEFAULT_AGENT = "default_agent", "the default agent"
        SELECT = "select", "the member whose skills match it best"

    no_recipient = models.CharField(
        max_length=16,
        choices=NoRecipient.choices,
        default=NoRecipient.DEFAULT_AGENT,
        help_text="Who gets a caller's message that names no member: the default agent, or the "
        "healthy member whose skills best match it (the agent selector; the default agent when "
        "none matches).",
    )
    enabled = models.BooleanField(default=True)
    members = models.ManyToManyField(Agent, through="TeamMembership", related_name="teams")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(max_routing_hops__gte=1, max_routing_hops__lte=10),
                name="team_hops_between_1_and_10",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class AgentAlternate(models.Model):
    """An agent that may serve a send to another when that one is down (its health unhealthy,
    its circuit breaker open, or a send that did not reach it out of retries): tried in
    ``order`` (tasks_app.gateway.failover)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="alternate_links")
    alternate = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["agent", "order", "alternate_id"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "alternate"], name="alternate_unique"),
            models.CheckConstraint(
                condition=~Q(agent=models.F("alternate")), name="alternate_not_itself"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} -> {self.alternate_id}"


class TeamMembership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memberships")
    order = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["team", "order", "agent_id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "agent"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.agent_id}"


class AuditEntry(models.Model):
    """Who registered, changed or deleted an agent, a team or a key, and when."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"
        REVOKE = "revoke"
        DENY = "deny"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.CharField(max_length=200, help_text='"key:<prefix>", "user:<name>" or "system".')
    action = models.CharField(max_length=8, choices=Action.choices)
    object_type = models.CharField(
        max_length=20, help_text="agent, team, apikey, tokenissuer, accessrule or handoff"
    )
    object_id = models.CharField(max_length=64)
    changes = models.JSONField(
        default=dict, blank=True, help_text="Changed fields (secrets never appear)."
    )

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id", "-at"], name="audit_object")]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.object_type} {self.object_id}"


from registry import usage_models  # noqa: E402, F401 (models of the app)
from registry.identity_models import AccessRule, TokenIssuer  # noqa: E402, F401
from registry.peer_models import PeerRelay  # noqa: E402, F401
