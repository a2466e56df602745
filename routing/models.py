"""What the team router records (every hop of a conversation, and each member's own upstream
context, so multi-turn conversations continue with every member) and what the health jobs
record (every probe result and every change of an agent's health state), and the registry's
teams as routing's admin shows them."""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils import timezone

from registry import models as registry_models


class MemberContext(models.Model):
    """One member's upstream ids within one team conversation (a relay context)."""

    team = models.ForeignKey("registry.Team", on_delete=models.CASCADE, related_name="+")
    context_id = models.CharField(max_length=200, help_text="The team conversation's context.")
    agent = models.ForeignKey("registry.Agent", on_delete=models.CASCADE, related_name="+")
    upstream_context_id = models.CharField(max_length=200, blank=True)
    upstream_task_id = models.CharField(
        max_length=200,
        blank=True,
        help_text="The member's open task (in flight or waiting for input), if any.",
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "context_id", "agent"], name="member_context_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.context_id}/{self.agent_id}"


class RoutingHop(models.Model):
    """One call to one member during a team task, in order."""

    class Outcome(models.TextChoices):
        ROUTED = "routed", "passed on to another member"
        REPLIED = "replied", "answered the caller"
        PARKED = "parked", "waits for the caller's input"
        FAILED = "failed", "the call failed"
        CAPPED = "capped", "stopped at the hop limit"
        CANCELED = "canceled", "canceled"

    task = models.ForeignKey("tasks_app.Task", on_delete=models.CASCADE, related_name="hops")
    order = models.PositiveIntegerField()
    from_id = models.CharField(max_length=64, help_text='"user" or the sending agent')
    to_id = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    routing_error = models.TextField(blank=True)
    peers_offered = models.JSONField(default=list, blank=True)
    text = models.TextField(blank=True, help_text="The start of the message passed on.")
    latency_ms = models.FloatField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    next_id = models.CharField(max_length=64, blank=True, help_text="Who the answer went to next.")
    upstream_task_id = models.CharField(max_length=200, blank=True)
    upstream_context_id = models.CharField(max_length=200, blank=True)
    handoffs = models.JSONField(
        null=True,
        blank=True,
        help_text="The handoffs this hop's answer gave the member it went to next (null: none "
        "named; an empty list: that member may route to no other member).",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task", "order"]
        constraints = [
            models.UniqueConstraint(fields=["task", "order"], name="hop_order_per_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.order} {self.from_id}->{self.to_id}"


class TeamCall(models.Model):
    """How the caller called a team for the latest message on a team task, as every member
    called for that message gets it: the request's metadata, the extensions the caller
    activated, and whether it streams or blocks. Stored when the message's routing starts, so
    a relay process that takes the task over calls the members after it the same way."""

    task = models.OneToOneField(
        "tasks_app.Task", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    metadata = models.JSONField(default=dict, blank=True)
    extensions = models.JSONField(default=list, blank=True)
    streaming = models.BooleanField(default=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.task_id} ({'streaming' if self.streaming else 'blocking'})"


class ProbeResult(models.Model):
    """One health check of one agent at one level, or one real call (passive health)."""

    class Level(models.TextChoices):
        CARD = "card", "card fetches and parses"
        TRANSPORT = "transport", "the interface answers A2A"
        READINESS = "readiness", "a real message is answered"
        CALL = "call", "a real call through the gateway"

    class Category(models.TextChoices):
        NONE = "", "ok"
        DNS = "dns", "DNS"
        REFUSED = "refused", "connection refused"
        TLS = "tls", "TLS"
        TIMEOUT = "timeout", "timeout"
        HTTP_STATUS = "http_status", "HTTP status"
        INVALID_CARD = "invalid_card", "invalid card"
        PROTOCOL = "protocol", "protocol error"
        UNSAFE_URL = "unsafe_url", "refused URL"

    agent = models.ForeignKey(
        "registry.Agent", on_delete=models.CASCADE, related_name="probe_results"
    )
    level = models.CharField(max_length=9, choices=Level.choices)
    ok = models.BooleanField()
    latency_ms = models.FloatField(null=True, blank=True)
    category = models.CharField(max_length=12, choices=Category.choices, blank=True)
    detail = models.CharField(max_length=500, blank=True)
    checked_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-checked_at", "-id"]
        indexes = [models.Index(fields=["agent", "-checked_at"], name="probe_agent_time")]

    def __str__(self) -> str:
        return f"{self.agent_id} {self.level} {'ok' if self.ok else self.category}"


class HealthEvent(models.Model):
    """A change of an agent's health state or circuit breaker, for admins to read."""

    agent = models.ForeignKey(
        "registry.Agent", on_delete=models.CASCADE, related_name="health_events"
    )
    kind = models.CharField(
        max_length=8,
        default="health",
        help_text='"health" (the state) or "breaker" (passive health).',
    )
    from_state = models.CharField(max_length=12)
    to_state = models.CharField(max_length=12)
    reason = models.CharField(max_length=500, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["agent", "-at"], name="health_event_agent_time")]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.from_state} -> {self.to_state}"


class Team(registry_models.Team):
    """The registry's teams, shown in the admin's routing section ("Teams, routing and health")
    with their members' health and their conversations. A proxy: same table, same rows."""

    class Meta:
        proxy = True


class Workflow(models.Model):
    """A fixed pipeline of agent, team and workflow calls (``routing.workflows``), called as
    one A2A agent. ``source`` is its YAML document; ``definition`` the same document as data,
    checked; ``targets`` the registered ids its ``agent:``, ``team:`` and ``workflow:`` names
    resolved to when it was saved."""

    id = models.SlugField(primary_key=True, max_length=64, help_text="The slug in its URLs.")
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100, default="1")
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    source = models.TextField(help_text="The YAML document, as imported or last saved.")
    definition = models.JSONField(default=dict, help_text="The document as data.")
    targets = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"agent": {name: id}, "team": {...}, "workflow": {...}}',
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.id

    def get_absolute_url(self) -> str:
        """Its page, linked from the admin ("View on site")."""
        return reverse("workflow-page", args=[self.pk])


class TeamWorkflowMember(models.Model):
    """A workflow that is a member of a team, beside its agents (``registry.TeamMembership``):
    the team routes to it by its id as to an agent member, and its answer is the workflow's
    output. Kept here, not in the registry, because workflows live in routing. Its id must
    not be an agent member's of the same team (``routing.team_checks``)."""

    team = models.ForeignKey(
        "registry.Team", on_delete=models.CASCADE, related_name="workflow_memberships"
    )
    workflow = models.ForeignKey(
        Workflow, on_delete=models.CASCADE, related_name="team_memberships"
    )
    order = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["team", "order", "workflow_id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "workflow"], name="team_workflow_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}: workflow {self.workflow_id}"


class WorkflowStep(models.Model):
    """One top-level step of a workflow, in order, as the admin edits it: its YAML mapping
    (with any steps nested inside), and its id, kind and target for lists and search."""

    class Kind(models.TextChoices):
        AGENT = "agent"
        TEAM = "team"
        WORKFLOW = "workflow"
        SEQUENCE = "sequence"
        BRANCH = "branch"
        PARALLEL = "parallel"
        LOOP = "loop"

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveIntegerField(default=0)
    step_id = models.CharField(max_length=64, blank=True, help_text="Filled in from the YAML.")
    kind = models.CharField(max_length=10, choices=Kind.choices, blank=True)
    target = models.CharField(max_length=200, blank=True)
    source = models.TextField(
        help_text="The step as YAML, e.g. <code>agent: summary-agent</code> and "
        '<code>input: "{{.route}}"</code> on the next line.'
    )

    class Meta:
        ordering = ["workflow", "position", "id"]

    def __str__(self) -> str:
        return f"{self.workflow_id}: {self.step_id or self.position}"


class TaskTemplate(models.Model):
    """A saved first message with typed ``{{variables}}`` (``routing.task_templates``), sent
    to an agent, a team or a workflow with fixed configuration by ``POST /a2a/tasks/template``.
    Deleting the target deletes its templates."""

    id = models.SlugField(primary_key=True, max_length=64)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    text = models.TextField(help_text="The message, with {{name}} where a variable goes.")
    variables = models.JSONField(
        default=list,
        blank=True,
        help_text='[{"name": "city", "type": "string", "default": "Paris", "description": "..."}]'
        " (types: string, integer, number, boolean; no default: the caller must give it)",
    )
    agent = models.ForeignKey(
        "registry.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    team = models.ForeignKey(
        "registry.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    workflow = models.ForeignKey(
        "routing.Workflow", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    configuration = models.JSONField(
        default=dict,
        blank=True,
        help_text="A2A 1.0 SendMessageConfiguration sent with every call, e.g. "
        '{"acceptedOutputModes": ["text/plain"], "historyLength": 0}',
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(agent__isnull=False, team__isnull=True, workflow__isnull=True)
                    | models.Q(agent__isnull=True, team__isnull=False, workflow__isnull=True)
                    | models.Q(agent__isnull=True, team__isnull=True, workflow__isnull=False)
                ),
                name="task_template_one_target",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def target(self) -> tuple[str, str]:
        """("agent", "team" or "workflow", its id)."""
        if self.agent_id:
            return ("agent", self.agent_id)
        if self.team_id:
            return ("team", self.team_id)
        return ("workflow", self.workflow_id)


class WorkflowStepRun(models.Model):
    """One call step of a workflow run (``routing.workflows.runner``): the workflow's task,
    the step's key (its id, prefixed by the loop iteration inside a loop) and the child task
    that runs it. Unique per (run, key), so a step is started once: a process that takes the
    run over finds the row and follows its child instead. The order in which steps finished
    (for ``join: first``) is read from the run's events (``run_steps.ended_order``)."""

    run = models.ForeignKey("tasks_app.Task", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    child = models.OneToOneField("tasks_app.Task", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["run", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="workflow_step_run_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.key}"
