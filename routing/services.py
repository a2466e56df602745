"""Writes of the team router: one routing hop, and a member's upstream ids in a conversation."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from routing.models import MemberContext, RoutingHop, TeamCall, TeamWorkflowMember
from tasks_app import gateway
from tasks_app import services as task_services
from tasks_app.models import Task

TEXT_EXCERPT = 500
"""Characters of the message passed on that a hop keeps."""


class WorkflowMemberClash(ValueError):
    """A workflow member whose id is an agent member's of the same team: the router names
    members by id, so one of them could never be called."""


def team_workflows_set(*, team_id: str, workflows: list[tuple[str, int, bool]]) -> None:
    """Makes the team's workflow members exactly ``workflows`` (workflow id, order, enabled),
    in one transaction. Raises WorkflowMemberClash naming a workflow whose id is an agent
    member's of the team."""
    from registry.models import TeamMembership

    ids = [workflow_id for workflow_id, _, _ in workflows]
    with transaction.atomic():
        clash = sorted(
            TeamMembership.objects.filter(team_id=team_id, agent_id__in=ids).values_list(
                "agent_id", flat=True
            )
        )
        if clash:
            raise WorkflowMemberClash(
                f"workflow {clash[0]!r} has the id of an agent member of this team; members "
                "are named by their ids, so one of them could never be called"
            )
        TeamWorkflowMember.objects.filter(team_id=team_id).exclude(workflow_id__in=ids).delete()
        for workflow_id, order, enabled in workflows:
            TeamWorkflowMember.objects.update_or_create(
                team_id=team_id,
                workflow_id=workflow_id,
                defaults={"order": order, "enabled": enabled},
            )


def hop_new(
    *,
    task_id: str,
    order: int,
    from_id: str,
    to_id: str,
    outcome: str,
    next_id: str = "",
    reason: str = "",
    routing_error: str = "",
    peers_offered: list[str] | None = None,
    text: str = "",
    latency_ms: float | None = None,
    upstream_task_id: str = "",
    upstream_context_id: str = "",
    handoffs: tuple[str, ...] | None = None,
) -> RoutingHop:
    """One hop of a team task, not yet stored (``hop_save`` stores it), with the upstream ids
    of the member task it opened or continued (none when the call failed before the gateway
    opened one) and the handoffs its answer gave the next member (None: none named)."""
    return RoutingHop(
        task_id=task_id,
        order=order,
        from_id=from_id,
        to_id=to_id,
        reason=reason,
        routing_error=routing_error,
        peers_offered=peers_offered or [],
        text=text[:TEXT_EXCERPT],
        latency_ms=latency_ms,
        outcome=outcome,
        next_id=next_id,
        upstream_task_id=upstream_task_id,
        upstream_context_id=upstream_context_id,
        handoffs=list(handoffs) if handoffs is not None else None,
    )


def team_call_save(
    *, task_id: str, metadata: dict[str, Any] | None, extensions: tuple[str, ...], streaming: bool
) -> None:
    """Stores how the caller called the team for a message on its task (one statement; the
    previous message's call is replaced): what a process taking the task over needs to call
    the members after it as this one would have."""
    TeamCall.objects.bulk_create(
        [
            TeamCall(
                task_id=task_id,
                metadata=metadata or {},
                extensions=list(extensions),
                streaming=streaming,
                updated_at=timezone.now(),
            )
        ],
        update_conflicts=True,
        unique_fields=["task"],
        update_fields=["metadata", "extensions", "streaming", "updated_at"],
    )


def hop_save(
    hop: RoutingHop,
    *,
    team_id: str,
    context_id: str,
    member_task_open: bool = False,
    known: tuple[str, str] = ("", ""),
) -> None:
    """Stores a hop (inside the caller's transaction: the team task's hop event is written
    with it) and keeps the member's conversation for its next turn in this team conversation:
    its upstream context, and its upstream task while that stays open (``member_task_open``,
    a parked member). ``known`` is the (context, open task) stored before; the row is written
    only when that changes, so a member that keeps its context costs no write."""
    hop.save(force_insert=True)
    open_task = hop.upstream_task_id if member_task_open else ""
    if hop.upstream_context_id and (hop.upstream_context_id, open_task) != tuple(known):
        MemberContext.objects.bulk_create(
            [
                MemberContext(
                    team_id=team_id,
                    context_id=context_id,
                    agent_id=hop.to_id,
                    upstream_context_id=hop.upstream_context_id,
                    upstream_task_id=open_task,
                    updated_at=timezone.now(),
                )
            ],
            update_conflicts=True,
            unique_fields=["team", "context_id", "agent"],
            update_fields=["upstream_context_id", "upstream_task_id", "updated_at"],
        )


def hop_record(
    *,
    hop: RoutingHop,
    team_id: str,
    team_task: Task,
    events: list[dict[str, Any]],
    member_exchange: gateway.Exchange | None = None,
    member_task_open: bool = False,
    known: tuple[str, str] = ("", ""),
    error: str = "",
) -> list[gateway.Published]:
    """Records one hop in one transaction: the event that ended the member's task (held back
    by its exchange), the hop and the member's conversation (``hop_save``), and the team
    task's ``events`` (the member's end as the team task's: its answer, its artifacts not
    forwarded yet; ``error`` the reason of a failure). Returns what to publish once it committed."""
    with transaction.atomic():
        published = member_exchange.store_end() if member_exchange is not None else []
        _hop_order_free(hop)
        hop_save(
            hop,
            team_id=team_id,
            context_id=team_task.context_id,
            member_task_open=member_task_open,
            known=known,
        )
        published += task_events_record(task=team_task, events=events, error=error)
    return published


def _hop_order_free(hop: RoutingHop) -> None:
    """Gives ``hop`` the next free order of its task when another call of the task took its
    own: a follow-up to a member still working makes two calls of one team task, each
    planned after the hops recorded when it began."""
    if RoutingHop.objects.filter(task_id=hop.task_id, order=hop.order).exists():
        last = RoutingHop.objects.filter(task_id=hop.task_id).order_by("-order").first()
        hop.order = last.order + 1


def task_events_record(
    *, task: Task, events: list[dict[str, Any]], error: str = ""
) -> list[gateway.Published]:
    """Records events of a team task in one transaction (a task that ended meanwhile ignores
    them), with ``error`` as the reason it fails; returns what to publish."""
    published = []
    with transaction.atomic():
        for event in events:
            recorded = task_services.task_record(task=task, event=event)
            if recorded.event is not None:
                published.append(
                    gateway.Published(
                        task.id,
                        recorded.sequence,
                        recorded.event,
                        task.state in gateway.FINAL_STATES,
                    )
                )
        if error and published:
            Task.objects.filter(pk=task.pk).update(error=error[:2000])
            task.error = error[:2000]
    return published


def hop_as_json(hop: RoutingHop) -> dict[str, Any]:
    """A hop as the trace API shows it."""
    return {
        "order": hop.order,
        "from": hop.from_id,
        "to": hop.to_id,
        "reason": hop.reason,
        "routingError": hop.routing_error,
        "peersOffered": hop.peers_offered,
        "text": hop.text,
        "latencyMs": round(hop.latency_ms, 1) if hop.latency_ms is not None else None,
        "outcome": hop.outcome,
        "next": hop.next_id,
        "upstreamTaskId": hop.upstream_task_id,
        "upstreamContextId": hop.upstream_context_id,
        "handoffs": hop.handoffs,
        "at": hop.created_at.isoformat(),
    }
