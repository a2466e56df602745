"""Relay tasks, their events, and push-notification configs.

A relay task is the relay's own record of one A2A task: its own id (the only id clients see),
the upstream agent's task and context ids it maps to, and the state the state machine allows.
States change only through compare-and-set writes in ``tasks_app.services``.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from tasks_app.lifecycle import TERMINAL, TaskState


def new_id() -> str:
    return str(uuid.uuid4())


class TaskQuerySet(models.QuerySet):
    def visible_to(self, caller) -> TaskQuerySet:
        """Tasks a caller may see: those it created. No caller (an internal call) sees none."""
        if caller is None:
            return self.none()
        return self.filter(caller=caller)

    def open(self) -> TaskQuerySet:
        return self.exclude(state__in=[state.value for state in TERMINAL])


_KEPT = models.Q(usage_latency_ms__isnull=False)

USAGE_INDEXES = [
    models.Index(fields=["caller", "-completed_at"], condition=_KEPT, name="usage_caller_at"),
    models.Index(fields=["agent", "-completed_at"], condition=_KEPT, name="usage_agent_at"),
    models.Index(
        fields=["target_kind", "target_id", "-completed_at"],
        condition=_KEPT,
        name="usage_target_at",
    ),
    models.Index(
        fields=["usage_team_id", "-completed_at"],
        condition=~models.Q(usage_team_id=""),
        name="usage_team_at",
    ),
    models.Index(
        fields=["usage_workflow_id", "-completed_at"],
        condition=~models.Q(usage_workflow_id=""),
        name="usage_workflow_at",
    ),
    models.Index(fields=["completed_at"], condition=_KEPT, name="usage_at"),
]
"""The usage records' indexes, on the tasks that kept one (what ``UsageRecord`` reads by:
time, caller, agent, target, team, workflow)."""


class Task(models.Model):
    State = models.TextChoices("State", [(s.name, s.value) for s in TaskState])

    id = models.CharField(primary_key=True, max_length=64, default=new_id, editable=False)
    context_id = models.CharField(max_length=200)
    target_kind = models.CharField(
        max_length=10, default="agent", help_text="What the caller addressed: agent or team."
    )
    target_id = models.CharField(max_length=64, default="")
    agent = models.ForeignKey(
        "registry.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
        db_index=False,  # task_agent_created leads with it
    )
    upstream_task_id = models.CharField(max_length=200, blank=True)
    upstream_context_id = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=TaskState.SUBMITTED)
    status_message = models.JSONField(null=True, blank=True)
    status_timestamp = models.DateTimeField(default=timezone.now)
    history = models.JSONField(default=list, blank=True)
    artifacts = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # For a send that named a skill (tasks_app.skill_targets): which agent the relay chose and
    # why. Shown to the caller as metadata.relaySelection, whatever the agent's own metadata.
    selection = models.JSONField(null=True, blank=True, editable=False)
    # When the send to the agent was tried more than once (tasks_app.gateway.retries): each
    # try, its number and why it failed. Shown to the caller as metadata.relayAttempts.
    attempts = models.JSONField(null=True, blank=True, editable=False)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        db_index=False,  # task_parent
    )
    delegation_chain = models.JSONField(default=list, blank=True)
    caller = models.ForeignKey(
        "registry.ApiKey",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
        db_index=False,  # task_caller_time leads with it
    )
    client_version = models.CharField(
        max_length=8, blank=True, help_text="The A2A version the caller spoke."
    )
    last_sequence = models.PositiveIntegerField(default=0)
    has_push_configs = models.BooleanField(default=False, editable=False)
    remote_streams = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="Streams that follow the task from outside the exchange that drives it (a "
        "SubscribeToTask, a team following its member), possibly in other relay processes. "
        "While there are any, every event recorded on PostgreSQL wakes them with a NOTIFY; "
        "otherwise only the task's end does.",
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    owner = models.CharField(
        max_length=64,
        blank=True,
        default="",
        editable=False,
        help_text="The relay process driving the exchange with the agent (a RelayProcess id); "
        "empty while nobody needs to (the task ended or waits on the client).",
    )
    send_key = models.CharField(
        max_length=210,
        blank=True,
        default="",
        editable=False,
        help_text="The send that opened the task, as its caller named it for safe retries: "
        "'key:' and its Idempotency-Key, or 'message:' and its messageId "
        "(tasks_app.idempotency). Unique per caller; empty for a send without one.",
    )
    send_hash = models.CharField(
        max_length=64,
        blank=True,
        default="",
        editable=False,
        help_text="SHA-256 of the canonical request that opened the task under send_key: a "
        "repeat with another body is refused.",
    )

    # The call's usage record, kept with the write that ends the task (``UsageRecord`` reads
    # them): null ``usage_latency_ms`` means none was kept (the task is open, or
    # RELAY_USAGE_RECORDS is off). On the task's own row, the end's one UPDATE writes them:
    # a row of their own cost an INSERT more per call (docs/benchmarks.md).
    usage_team_id = models.CharField(max_length=64, blank=True, default="", editable=False)
    usage_workflow_id = models.CharField(max_length=64, blank=True, default="", editable=False)
    usage_skill = models.CharField(max_length=200, blank=True, default="", editable=False)
    usage_error = models.CharField(max_length=500, blank=True, default="", editable=False)
    usage_latency_ms = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    usage_bytes_in = models.PositiveBigIntegerField(default=0, editable=False)
    usage_bytes_out = models.PositiveBigIntegerField(default=0, editable=False)
    usage_input_tokens = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    usage_output_tokens = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    usage_model = models.CharField(max_length=200, blank=True, default="", editable=False)
    usage_cost = models.DecimalField(
        max_digits=18, decimal_places=6, null=True, blank=True, editable=False
    )

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["-status_timestamp", "-id"]
        # Every index is written on each task's INSERT and again at its end (that update moves
        # indexed columns), so there is none a query does not need: a foreign key is served by
        # an index leading with it, and none has PostgreSQL's LIKE companion (no query on a
        # task's ids matches a pattern; migration 0009 drops the primary key's).
        indexes = [
            *USAGE_INDEXES,
            models.Index(fields=["context_id"], name="task_context"),
            # Partial: most tasks have no parent, and a lookup by parent never wants those.
            models.Index(
                fields=["parent"], condition=models.Q(parent__isnull=False), name="task_parent"
            ),
            models.Index(fields=["caller", "-status_timestamp", "-id"], name="task_caller_time"),
            models.Index(fields=["agent", "-created_at"], name="task_agent_created"),
            models.Index(
                fields=["target_kind", "target_id", "-created_at"], name="task_target_created"
            ),
            # The takeover scan reads only the tasks someone drives.
            models.Index(fields=["owner"], condition=~models.Q(owner=""), name="task_owned"),
        ]
        constraints = [
            # Partial: a send without a key writes nothing to it.
            models.UniqueConstraint(
                fields=["caller", "send_key"],
                condition=~models.Q(send_key=""),
                name="task_send_key_per_caller",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return TaskState(self.state) in TERMINAL


class RelayProcess(models.Model):
    """One relay process (a daphne, or any process that drives tasks) and its lease: the
    process renews ``lease_expires_at`` by heartbeat, and the tasks it owns are taken over by
    another process once the lease has expired (``tasks_app.gateway.ownership``)."""

    id = models.CharField(primary_key=True, max_length=64)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    lease_expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-started_at"]
        verbose_name = "relay process"
        verbose_name_plural = "relay processes"

    def __str__(self) -> str:
        return self.id

    @property
    def alive(self) -> bool:
        return self.lease_expires_at > timezone.now()


class TaskEvent(models.Model):
    """One status or artifact update of a task, numbered in the order it happened."""

    class Kind(models.TextChoices):
        TASK = "task"
        STATUS = "status"
        ARTIFACT = "artifact"

    task = models.ForeignKey(
        Task,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,  # event_sequence_per_task leads with it
    )
    sequence = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    payload = models.JSONField(help_text="The event as a 1.0 StreamResponse.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["task", "sequence"], name="event_sequence_per_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.sequence} {self.kind}"


class PushNotificationConfig(models.Model):
    """Where to POST a task's updates. Credentials and token are encrypted at rest."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="push_configs")
    config_id = models.CharField(max_length=200)
    url = models.URLField(max_length=2048)
    token = models.TextField(blank=True)
    auth_scheme = models.CharField(max_length=50, blank=True)
    auth_credentials = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Set while a delivery job holds the config's lease: one job at a time sends its events.
    delivering_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["task", "created_at"]
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="push_config_per_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.config_id}"


class PushDelivery(models.Model):
    """One event to deliver to one push config. A config's deliveries are sent in the order of
    their ids (the order of the task's events), each retried with backoff before the next."""

    class Outcome(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    config = models.ForeignKey(
        PushNotificationConfig, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.ForeignKey(TaskEvent, null=True, on_delete=models.CASCADE)
    payload = models.JSONField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "push deliveries"

    def __str__(self) -> str:
        return f"{self.config} {self.outcome}"


class RelayEndpoint(models.Model):
    """Where the relay's own A2A endpoint (``/a2a/relay/``) forwards: one agent or team.

    One row at most; without it, the ``RELAY_DEFAULT_TARGET`` setting decides.
    """

    class Kind(models.TextChoices):
        AGENT = "agent"
        TEAM = "team"

    target_kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.AGENT)
    target_id = models.SlugField(max_length=64, help_text="The agent's or team's id.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "relay endpoint"

    def __str__(self) -> str:
        return f"/a2a/relay/ -> {self.target_kind} {self.target_id}"


class ClientTaskId(models.Model):
    """A task's id as its caller chose it: the ``id`` of the task API's early task shape. It
    is unique per API key, so one caller's ids never collide with or reach another's tasks;
    the relay's own id stays the task's primary key."""

    task = models.OneToOneField(
        Task, primary_key=True, on_delete=models.CASCADE, related_name="client_task_id"
    )
    caller = models.ForeignKey(
        "registry.ApiKey", on_delete=models.CASCADE, related_name="client_task_ids"
    )
    client_id = models.CharField(max_length=128)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["caller", "client_id"], name="client_task_id_per_caller"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.client_id} -> {self.task_id}"


class UsageRecord(models.Model):
    """One call's usage, kept with the task's end (``tasks_app.usage.records``): who
    (``caller``, a key or a bearer principal's row), what (target, agent, team, skill), how
    it ended, how long it took, the bytes in and out, and the tokens and cost when known. A
    team call and each of its hops (a member task, ``parent_task_id`` the team call's task)
    are records of their own, as are a workflow run and its steps (``workflow_id`` on each);
    the cost is on the agents' records only. Read only: a view of the tasks that kept one
    (migration 0016), so a record goes with its task; the hourly roll-ups (``UsageHour``)
    keep the sums."""

    task = models.OneToOneField(
        Task,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="usage",
    )
    at = models.DateTimeField(help_text="When the task ended.")
    caller = models.ForeignKey(
        "registry.ApiKey", null=True, on_delete=models.DO_NOTHING, db_constraint=False
    )
    target_kind = models.CharField(max_length=10)
    target_id = models.CharField(max_length=64)
    agent = models.ForeignKey(
        "registry.Agent", null=True, on_delete=models.DO_NOTHING, db_constraint=False
    )
    team_id = models.CharField(max_length=64)
    workflow_id = models.CharField(max_length=64, help_text="A workflow's run and its steps.")
    parent_task_id = models.CharField(
        max_length=64, help_text="For a team hop: the task of the team call."
    )
    skill = models.CharField(max_length=200)
    state = models.CharField(max_length=20)
    error = models.CharField(max_length=500)
    latency_ms = models.PositiveBigIntegerField()
    bytes_in = models.PositiveBigIntegerField()
    bytes_out = models.PositiveBigIntegerField()
    input_tokens = models.PositiveBigIntegerField(null=True)
    output_tokens = models.PositiveBigIntegerField(null=True)
    model = models.CharField(max_length=200)
    cost = models.DecimalField(max_digits=18, decimal_places=6, null=True)

    class Meta:
        managed = False
        db_table = "tasks_app_usagerecord"
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.task_id} {self.target_kind} {self.target_id} {self.state}"


class UsageHour(models.Model):
    """The usage records of one hour, summed per (caller, target, agent, team, workflow, hop
    or not):
    what reports over days read (``tasks_app.usage.rollups`` writes them hourly)."""

    hour = models.DateTimeField()
    caller = models.ForeignKey(
        "registry.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, db_index=False
    )
    target_kind = models.CharField(max_length=10)
    target_id = models.CharField(max_length=64)
    agent_id = models.CharField(max_length=64, blank=True)
    team_id = models.CharField(max_length=64, blank=True)
    workflow_id = models.CharField(max_length=64, blank=True, default="", db_default="")
    hop = models.BooleanField(default=False)
    calls = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    latency_sum_ms = models.PositiveBigIntegerField(default=0)
    latency_p50_ms = models.PositiveBigIntegerField(default=0)
    latency_p95_ms = models.PositiveBigIntegerField(default=0)
    bytes_in = models.PositiveBigIntegerField(default=0)
    bytes_out = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)

    class Meta:
        ordering = ["-hour"]
        indexes = [
            models.Index(fields=["hour"], name="usage_hour"),
            models.Index(fields=["caller", "hour"], name="usage_hour_caller"),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}:00 {self.target_kind} {self.target_id}"
