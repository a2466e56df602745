"""Reads for the team router: a team as the router sees it, where a team conversation stands,
and a task's routing trace (scoped to its caller, like every task read); and an agent's
metrics and recent health, for the metrics endpoint and the registry's pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, F, Prefetch, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from registry.extensions import CLIENT_ROUTING_URI
from registry.models import Agent, DeclaredExtension, Skill, Team, TeamMembership
from routing import metrics
from routing.models import (
    HealthEvent,
    MemberContext,
    ProbeResult,
    RoutingHop,
    TaskTemplate,
    TeamCall,
    TeamWorkflowMember,
)
from routing.router import USER
from routing.task_templates import VariableError, variables
from tasks_app import selectors as task_selectors
from tasks_app.lifecycle import INTERRUPTED, TaskState
from tasks_app.models import Task


def team_with_members(team_id: str) -> tuple[Team, list[Agent]] | None:
    """An enabled team and its enabled members that are not disabled in the registry, in team
    order, each with its skills and extensions loaded (four queries). None when there is no
    such team."""
    team = Team.objects.filter(pk=team_id, enabled=True).first()
    if team is None:
        return None
    memberships = (
        TeamMembership.objects.filter(team=team, enabled=True)
        .exclude(agent__status=Agent.Status.DISABLED)
        .select_related("agent")
        .prefetch_related(
            Prefetch("agent__skills", queryset=Skill.objects.order_by("position")),
            Prefetch("agent__extensions", queryset=DeclaredExtension.objects.order_by("uri")),
        )
        .order_by("order", "agent_id")
    )
    return team, [membership.agent for membership in memberships]


def team_workflow_members(team_id: str) -> list[tuple[str, str, str]]:
    """The team's enabled workflow members whose workflows are enabled, in team order, as
    (id, name, description) (one query)."""
    return list(
        TeamWorkflowMember.objects.filter(team_id=team_id, enabled=True, workflow__enabled=True)
        .order_by("order", "workflow_id")
        .values_list("workflow_id", "workflow__name", "workflow__description")
    )


@dataclass(frozen=True)
class MemberState:
    """A member's health and circuit breaker (state, failures, since, version) as stored."""

    health: str
    breaker: tuple[str, int, datetime | None, int]


MEMBER_STATE_FIELDS = (
    "status",
    "health",
    "breaker_state",
    "breaker_failures",
    "breaker_opened_at",
    "breaker_version",
)


def member_states(agent_ids: list[str]) -> dict[str, MemberState]:
    """The stored health and breaker of these agents, by id, leaving out disabled ones: one
    query, read at every team call."""
    return {
        pk: MemberState(health, (state, failures, since, version))
        for pk, status, health, state, failures, since, version in Agent.objects.filter(
            pk__in=agent_ids
        ).values_list("pk", *MEMBER_STATE_FIELDS)
        if status != Agent.Status.DISABLED
    }


@dataclass
class Conversation:
    """Where a team task stands when a caller's message arrives.

    ``hops_recorded``: hops already in its trace; ``parked_on``: the member the message goes
    to, on its own task (``parked_child_id``): the member that asked for input when the
    message answers it, or the member still working on the task's previous message
    (``working``: the message is a follow-up to that member task, as it would be to the
    agent's own task); ``contexts``: each member's (upstream context, open upstream task) in
    this conversation. The team target keeps it up to date as its hops go.
    """

    hops_recorded: int = 0
    parked_on: str | None = None
    parked_child_id: str | None = None
    contexts: dict[str, tuple[str, str]] = field(default_factory=dict)
    working: bool = False


def conversation_of(*, team_id: str, task: Task) -> Conversation:
    """The state of the team conversation ``task`` belongs to (four queries at most)."""
    last = RoutingHop.objects.filter(task=task).order_by("-order").first()
    contexts = {
        agent_id: (upstream_context_id, upstream_task_id)
        for agent_id, upstream_context_id, upstream_task_id in MemberContext.objects.filter(
            team_id=team_id, context_id=task.context_id
        ).values_list("agent_id", "upstream_context_id", "upstream_task_id")
    }
    working = (
        Task.objects.filter(parent=task)
        .open()
        .exclude(state__in=[state.value for state in INTERRUPTED])
        .order_by("-created_at")
        .values_list("pk", "agent_id", "target_id", "created_at")
        .first()
    )
    if working is not None and (
        last is None
        or working[3] > last.created_at
        or (last.outcome == RoutingHop.Outcome.PARKED and last.to_id in working[1:3])
    ):
        # A member still works on the previous message (its hop not recorded yet): the
        # follow-up goes to its task, as it would to the agent's own.
        child_id, agent_id, target_id, _ = working
        hops = last.order if last is not None else 0
        return Conversation(hops, agent_id or target_id, child_id, contexts, working=True)
    if last is None:
        return Conversation(contexts=contexts)
    parked_on = parked_child_id = None
    # A parked task runs again only for the caller's answer (the gateway has already moved it
    # back to working by then).
    if last.outcome == RoutingHop.Outcome.PARKED:
        parked_on = last.to_id
        parked_child_id = (
            Task.objects.filter(parent=task)
            .filter(Q(agent_id=parked_on) | Q(target_id=parked_on))
            .filter(state__in=[state.value for state in INTERRUPTED])
            .order_by("-created_at")
            .values_list("pk", flat=True)
            .first()
        )
    return Conversation(last.order, parked_on, parked_child_id, contexts)


@dataclass(frozen=True)
class HopInFlight:
    """The hop of a team task its relay process was carrying when it stopped: the member's
    task (``child``), who sent it its message (``sender``, USER or the member whose answer it
    is), the routing error it got with it, the message itself, how many hops the caller's
    message had made before it (``hops_done``), the handoffs it was given (None: none), and
    how the caller called the team for that message (``call``; None for a task whose call was
    not stored)."""

    child: Task
    sender: str
    routing_error: str | None
    message: dict
    hops_done: int
    handoffs: tuple[str, ...] | None = None
    call: TeamCall | None = None


def hop_in_flight(*, task: Task) -> HopInFlight | None:
    """The hop a team task was on when its relay process stopped, for the process that takes
    the task over (four queries at most): its latest member task, when that was opened after
    the last recorded hop (or is the parked member's task the caller answered) and its
    member still works on it or ended it. None when there is none to follow: the process
    stopped before it called a member, between two hops, or before the parked member took the
    caller's answer."""
    last = RoutingHop.objects.filter(task=task).order_by("-order").first()
    child = Task.objects.filter(parent=task).order_by("-created_at").first()
    if child is None or TaskState(child.state) in INTERRUPTED:
        return None
    if last is not None and last.outcome == RoutingHop.Outcome.PARKED:
        if child.agent_id != last.to_id:
            return None
        sent = [message for message in child.history if message.get("role") == "ROLE_USER"]
        sender, message = USER, (sent[-1] if sent else {})
    elif last is None or child.created_at > last.created_at:
        sender, message = (last.to_id if last else USER), (child.history or [{}])[0]
    else:
        return None
    routing = (message.get("metadata") or {}).get(CLIENT_ROUTING_URI) or {}
    if isinstance(routing.get("sender"), str) and routing["sender"]:
        sender = routing["sender"]
    hops_done, handoffs = 0, None
    if sender != USER and last is not None:
        if last.next_id == (child.agent_id or child.target_id) and last.handoffs is not None:
            handoffs = tuple(last.handoffs)  # what the answer it was given named
        from_user = (
            RoutingHop.objects.filter(task=task, from_id=USER)
            .order_by("-order")
            .values_list("order", flat=True)
            .first()
        )
        hops_done = last.order - (from_user or 1) + 1
    call = TeamCall.objects.filter(task=task).first()
    return HopInFlight(
        child, sender, routing.get("routingError") or None, message, hops_done, handoffs, call
    )


def open_children(*, parent_id: str) -> list[Task]:
    """The member tasks of a team task that have not ended (in flight or waiting)."""
    return list(Task.objects.filter(parent_id=parent_id).open().order_by("created_at"))


def trace_for_caller(*, caller, task_id: str) -> tuple[Task, list[RoutingHop]] | None:
    """A task and its hops in order, when this caller created it; None otherwise (a missing
    task and another caller's look the same)."""
    task = task_selectors.task_for_caller(caller=caller, task_id=task_id)
    if task is None:
        return None
    return task, list(RoutingHop.objects.filter(task=task).order_by("order"))


def trace_of(task_id: str) -> tuple[Task, list[RoutingHop]] | None:
    """A task and its hops in order, whoever created it (for staff pages)."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        return None
    return task, list(RoutingHop.objects.filter(task=task).order_by("order"))


def team_conversations(*, team_id: str, limit: int = 10) -> list[Task]:
    """A team's latest tasks, newest first, each with its routing hops in order (two queries,
    whatever the number of tasks or hops)."""
    return list(
        Task.objects.filter(target_kind="team", target_id=team_id)
        .only("id", "state", "created_at", "error")
        .order_by("-created_at", "-id")
        .prefetch_related(Prefetch("hops", queryset=RoutingHop.objects.order_by("order")))[:limit]
    )


# --- Agent metrics and health history -------------------------------------------------------

METRICS_MAX_HOURS = 168
PROBE_SAMPLE = 50_000
TASK_SAMPLE = 20_000
SPARKLINE_POINTS = 30
SPARKLINE_HOURS = 24
ENDED_BADLY = (TaskState.FAILED, TaskState.REJECTED)


@dataclass(frozen=True)
class AgentMetrics:
    """An agent's numbers over the last ``hours`` (see ``routing.metrics`` for what each
    means), with the hourly series."""

    agent_id: str
    hours: int
    since: datetime
    until: datetime
    probes: int
    probes_ok: int
    latency_avg_ms: float | None
    latency_p95_ms: float | None
    tasks_by_state: dict[str, int]
    duration_avg_ms: float | None
    duration_p95_ms: float | None
    series: list[metrics.HourCounts]
    tasks_retried: int = 0
    """Ended tasks whose send was tried more than once (``Task.attempts``)."""
    tasks_failed_over: int = 0
    """Ended tasks whose first send went to another agent (``Task.selection``)."""
    tasks_failed_over_same_skill: int = 0
    """Of those, the ones served by an agent with the same skill (the opt-in)."""

    @property
    def tasks_completed(self) -> int:
        return self.tasks_by_state.get(TaskState.COMPLETED, 0)

    @property
    def tasks_failed(self) -> int:
        return sum(self.tasks_by_state.get(state, 0) for state in ENDED_BADLY)

    @property
    def success_rate(self) -> float | None:
        successes = self.probes_ok + self.tasks_completed
        return metrics.rate(successes, self.probes + self.tasks_completed + self.tasks_failed)

    @property
    def probe_success_rate(self) -> float | None:
        return metrics.rate(self.probes_ok, self.probes)


def agent_metrics(*, agent_id: str, hours: int = 24, now: datetime | None = None) -> AgentMetrics:
    """The agent's probes (by ``checked_at``) and its tasks called at it directly (target
    kind agent, by the time they ended) over the last ``hours`` (1 to METRICS_MAX_HOURS).

    Counts and the average latency are exact (SQL aggregates). The hourly series, the p95
    latency and the task durations are computed in Python (``routing.metrics``) over the
    latest PROBE_SAMPLE probes and TASK_SAMPLE ended tasks of the window: a week of probes
    every 15 seconds fits. No date truncation in SQL: SQLite would run it in Python per row.
    Four queries."""
    until = now or timezone.now()
    since = until - timedelta(hours=hours)
    probes = ProbeResult.objects.filter(
        agent_id=agent_id, checked_at__gt=since, checked_at__lte=until
    )
    ended = Task.objects.filter(
        target_kind="agent", target_id=agent_id, completed_at__gt=since, completed_at__lte=until
    )
    failed_over = Q(selection__failoverFrom=agent_id)  # served by an alternate of this agent
    totals = probes.aggregate(
        total=Count("id"), ok=Count("id", filter=Q(ok=True)), latency=Avg("latency_ms")
    )
    counted = (
        ended.order_by()
        .values_list("state")
        .annotate(
            n=Count("id"),
            retried=Count("id", filter=Q(attempts__isnull=False)),
            failed_over=Count("id", filter=failed_over),
            same_skill=Count("id", filter=failed_over & Q(selection__has_key="sameSkill")),
        )
    )
    tasks_by_state = {state: n for state, n, *_ in counted}
    tasks_retried = sum(retried for _, _, retried, _, _ in counted)
    probe_rows = list(
        probes.order_by("-checked_at").values_list("checked_at", "ok", "latency_ms")[:PROBE_SAMPLE]
    )
    task_rows = list(
        ended.order_by("-completed_at").values_list("completed_at", "state", "created_at")[
            :TASK_SAMPLE
        ]
    )
    durations = [
        (completed - created).total_seconds() * 1000
        for completed, state, created in task_rows
        if state == TaskState.COMPLETED
    ]
    outcomes = [
        (completed, state == TaskState.COMPLETED, state in ENDED_BADLY)
        for completed, state, _ in task_rows
    ]
    return AgentMetrics(
        agent_id=agent_id,
        hours=hours,
        since=since,
        until=until,
        probes=totals["total"],
        probes_ok=totals["ok"],
        latency_avg_ms=totals["latency"],
        latency_p95_ms=metrics.percentile(
            [latency for _, _, latency in probe_rows if latency is not None], 0.95
        ),
        tasks_by_state=tasks_by_state,
        duration_avg_ms=metrics.average(durations),
        duration_p95_ms=metrics.percentile(durations, 0.95),
        series=metrics.hourly_series(since, until, metrics.hour_counts(probe_rows, outcomes)),
        tasks_retried=tasks_retried,
        tasks_failed_over=sum(n for *_, n, _ in counted),
        tasks_failed_over_same_skill=sum(n for *_, n in counted),
    )


def recent_probe_samples(
    *, agent_ids: list[str], now: datetime | None = None, points: int = SPARKLINE_POINTS
) -> dict[str, list[tuple[float | None, bool]]]:
    """For each agent, its latest ``points`` probes of the last SPARKLINE_HOURS as
    (latency ms or None, ok), oldest first. One query for any number of agents."""
    if not agent_ids:
        return {}
    since = (now or timezone.now()) - timedelta(hours=SPARKLINE_HOURS)
    rows = (
        ProbeResult.objects.filter(agent_id__in=agent_ids, checked_at__gt=since)
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=F("agent_id"),
                order_by=[F("checked_at").desc(), F("id").desc()],
            )
        )
        .filter(rank__lte=points)
        .order_by("agent_id", "checked_at", "id")
        .values_list("agent_id", "latency_ms", "ok")
    )
    samples: dict[str, list[tuple[float | None, bool]]] = {}
    for agent_id, latency, ok in rows:
        samples.setdefault(agent_id, []).append((latency, ok))
    return samples


def recent_health_events(*, agent_id: str, limit: int = 20) -> list[HealthEvent]:
    """The agent's latest health and breaker changes, newest first."""
    return list(HealthEvent.objects.filter(agent_id=agent_id).order_by("-at", "-id")[:limit])


def recent_probes(*, agent_id: str, limit: int = 50) -> list[ProbeResult]:
    """The agent's latest probe results, newest first."""
    return list(
        ProbeResult.objects.filter(agent_id=agent_id).order_by("-checked_at", "-id")[:limit]
    )


# --- health --------------------------------------------------------------------------------


def agents_to_probe(*, now, agent_ids: list[str] | None = None, claim: bool = False) -> list[Agent]:
    """The agents a sweep probes now: not disabled, not a scale-to-zero agent that must not be
    probed, and due (never probed, or their next probe time has come). Naming ``agent_ids``
    picks those agents whether due or not. One query, with the current card's hash. With
    ``claim`` (inside a transaction) the rows are locked, and rows another sweep has locked
    are skipped: two sweeps never pick the same agent."""
    queryset = (
        Agent.objects.callable()
        .exclude(scale_to_zero=True, scale_to_zero_probes=Agent.ScaleToZeroProbes.NONE)
        .select_related("current_snapshot")
        .only(
            "id",
            "card_url",
            "invocation_url",
            "interfaces",
            "auth_kind",
            "auth_header_name",
            "auth_header_value",
            "health",
            "health_failures",
            "health_successes",
            "probe_interval_seconds",
            "probe_timeout_seconds",
            "readiness_probe",
            "readiness_message",
            "scale_to_zero",
            "scale_to_zero_probes",
            "current_snapshot__content_hash",
        )
        .order_by("id")
    )
    if claim:
        queryset = queryset.select_for_update(skip_locked=True, of=("self",))
    if agent_ids is not None:
        return list(queryset.filter(pk__in=agent_ids))
    return list(queryset.filter(Q(next_probe_at__isnull=True) | Q(next_probe_at__lte=now)))


@dataclass(frozen=True)
class TemplateListing:
    """A task template as a target's page lists it: the row and its variables' declarations
    as JSON (name, type, default?, description?)."""

    template: Any
    variables: list[dict[str, Any]]


def task_templates_for(*, kind: str, target_id: str) -> list[TemplateListing]:
    """The task templates sent to one agent, team or workflow (``kind``), by id (one query)."""
    rows = TaskTemplate.objects.filter(**{f"{kind}_id": target_id}).order_by("id")
    listed = []
    for row in rows:
        try:
            declared = [variable.as_json() for variable in variables(row.variables)]
        except VariableError:
            declared = []  # saved outside the admin's checks: listed without variables
        listed.append(TemplateListing(row, declared))
    return listed
