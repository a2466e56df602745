"""Reads for the team router: a team as the router sees it, where a team conversation stands,
and a task's routing trace (scoped to its caller, like every task read)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch, Q

from registry.models import Agent, DeclaredExtension, Skill, Team, TeamMembership
from routing.models import MemberContext, RoutingHop
from tasks_app import selectors as task_selectors
from tasks_app.lifecycle import INTERRUPTED
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


@dataclass
class Conversation:
    """Where a team task stands when a caller's message arrives.

    ``hops_recorded``: hops already in its trace; ``parked_on``: the member that asked for
    input when the message answers it; ``parked_child_id``: that member's child task, waiting
    to continue; ``contexts``: each member's (upstream context, open upstream task) in this
    conversation. The team target keeps it up to date as its hops go.
    """

    hops_recorded: int = 0
    parked_on: str | None = None
    parked_child_id: str | None = None
    contexts: dict[str, tuple[str, str]] = field(default_factory=dict)


def conversation_of(*, team_id: str, task: Task) -> Conversation:
    """The state of the team conversation ``task`` belongs to (three queries at most)."""
    last = RoutingHop.objects.filter(task=task).order_by("-order").first()
    contexts = {
        agent_id: (upstream_context_id, upstream_task_id)
        for agent_id, upstream_context_id, upstream_task_id in MemberContext.objects.filter(
            team_id=team_id, context_id=task.context_id
        ).values_list("agent_id", "upstream_context_id", "upstream_task_id")
    }
    if last is None:
        return Conversation(contexts=contexts)
    parked_on = parked_child_id = None
    # A parked task runs again only for the caller's answer (the gateway has already moved it
    # back to working by then).
    if last.outcome == RoutingHop.Outcome.PARKED:
        parked_on = last.to_id
        parked_child_id = (
            Task.objects.filter(parent=task, agent_id=parked_on)
            .filter(state__in=[state.value for state in INTERRUPTED])
            .order_by("-created_at")
            .values_list("pk", flat=True)
            .first()
        )
    return Conversation(last.order, parked_on, parked_child_id, contexts)


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


# --- health --------------------------------------------------------------------------------


def agents_to_probe(*, now, agent_ids: list[str] | None = None) -> list[Agent]:
    """The agents a sweep probes now: not disabled, not a scale-to-zero agent that must not be
    probed, and due (never probed, or their next probe time has come). Naming ``agent_ids``
    picks those agents whether due or not. One query, with the current card's hash."""
    queryset = (
        Agent.objects.callable()
        .exclude(scale_to_zero=True, scale_to_zero_probes=Agent.ScaleToZeroProbes.NONE)
        .select_related("current_snapshot")
        .only(
            "id", "card_url", "invocation_url", "interfaces", "auth_kind", "auth_header_name",
            "auth_header_value", "health", "health_failures", "health_successes",
            "probe_interval_seconds", "probe_timeout_seconds", "readiness_probe",
            "readiness_message", "scale_to_zero", "scale_to_zero_probes",
            "current_snapshot__content_hash",
        )
        .order_by("id")
    )
    if agent_ids is not None:
        return list(queryset.filter(pk__in=agent_ids))
    return list(queryset.filter(Q(next_probe_at__isnull=True) | Q(next_probe_at__lte=now)))
