"""A member call of a team task and its answer: what the call gave (``MemberAnswer``), a
member task another process carries followed as a call (``FollowedMember``), and the
messages a member gets and gives, read and written for the team router."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from registry import selection
from registry.extensions import CLIENT_ROUTING_URI
from registry.filters import InvalidQueryError
from routing.models import RoutingHop
from routing.router import (
    USER,
    Deliver,
    Fail,
    Park,
    Reply,
    TeamView,
)
from tasks_app import gateway, streams
from tasks_app.gateway import ownership
from tasks_app.lifecycle import ACTIVE, TaskState, to_wire_v1
from tasks_app.models import Task
from tasks_app.protocol import events as a2a_events
from tasks_app.services import snapshot_of

Outcome = RoutingHop.Outcome
WIRE_STATE = {state: to_wire_v1(state) for state in TaskState}
STATE_OF_WIRE = {wire: state for state, wire in WIRE_STATE.items()}


@dataclass(frozen=True)
class MemberAnswer:
    """What one member call gave: the answer (``{"message"}`` or ``{"task"}``) and its state in
    our storage spelling (``completed`` for a Message)."""

    answer: dict[str, Any]
    state: str
    latency_ms: float
    upstream_task_id: str = ""
    upstream_context_id: str = ""
    unreachable: bool = False  # the call itself failed: the agent gave no answer of its own

    @property
    def failed(self) -> bool:
        return self.state in (TaskState.FAILED, TaskState.REJECTED)


class FollowedMember:
    """A member's task another relay process carries (it took the task over from a process
    that stopped), followed through the relay's own record of it, as a subscriber would,
    until it ends or waits on its client: to the conversation, the same as the
    ``gateway.Exchange`` the stopped process had. Its end is recorded by whoever drives it."""

    end = None

    def __init__(self, task: Task) -> None:
        self.task = task
        self.answer: dict[str, Any] = {}

    async def events(self):
        child = self.task
        async with gateway.following(child.id) as followed:
            await sync_to_async(child.refresh_from_db)()
            if ownership.being_driven(child):
                async for item in followed.events(
                    after=child.last_sequence, keepalive=FOLLOW_CHECK_SECONDS
                ):
                    if item is streams.KEEPALIVE:  # quiet: has it ended unseen?
                        await sync_to_async(child.refresh_from_db)()
                        if ownership.being_driven(child):
                            continue
                        break
                    event, final = item
                    if final:
                        break
                    yield gateway.Step(event)
        await sync_to_async(child.refresh_from_db)()
        self.answer = {"task": snapshot_of(child)}

    def store_end(self) -> list[gateway.Published]:
        return []

    @property
    def upstream_task_id(self) -> str:
        return self.task.upstream_task_id

    @property
    def upstream_context_id(self) -> str:
        return self.task.upstream_context_id


FOLLOW_CHECK_SECONDS = 5.0
"""How long a followed member task may stay quiet before its row is read again."""


def answer_of(
    call: gateway.Exchange | FollowedMember | MemberAnswer, started: float
) -> MemberAnswer:
    """The member's answer once its exchange is over. A task that did not end (its exchange
    stopped early) counts as failed."""
    if isinstance(call, MemberAnswer):
        return call
    answer = call.answer
    state = STATE_OF_WIRE.get(
        answer.get("task", {}).get("status", {}).get("state"), TaskState.COMPLETED
    )
    # No end of the member's own (its exchange failed at the transport or stopped early): the
    # answer is the relay's error text, not the member's.
    unreachable = isinstance(call, gateway.Exchange) and call.end is None and state != "canceled"
    if state in ACTIVE:
        answer = failed_task(answer["task"], f"agent {call.task.target_id!r} stopped answering")
        state = TaskState.FAILED
        unreachable = True
    return MemberAnswer(
        answer,
        state,
        (time.perf_counter() - started) * 1000,
        upstream_task_id=call.upstream_task_id,
        upstream_context_id=call.upstream_context_id,
        unreachable=unreachable and state == TaskState.FAILED,
    )


def failed_task(task: dict[str, Any], text: str) -> dict[str, Any]:
    said = a2a_events.message(
        message_id=f"{task.get('id', 'call')}-failed",
        role=a2a_events.ROLE_AGENT,
        parts=a2a_events.text_parts(text),
    )
    return {"task": {**task, "status": a2a_events.task_status(TaskState.FAILED, message=said)}}


def failed_answer(text: str, started: float) -> MemberAnswer:
    latency_ms = (time.perf_counter() - started) * 1000
    return MemberAnswer(failed_task({}, text), TaskState.FAILED, latency_ms, unreachable=True)


def answer_message(answer: dict[str, Any]) -> dict[str, Any] | None:
    if "message" in answer:
        return answer["message"]
    return answer.get("task", {}).get("status", {}).get("message")


def text_of(message: dict[str, Any] | None) -> str:
    parts = (message or {}).get("parts", [])
    return "\n".join(part["text"] for part in parts if isinstance(part.get("text"), str))


def as_next_message(
    answer: dict[str, Any], *, answerer: str, message_id: str, artifacts: bool = True
) -> dict[str, Any]:
    """A member's answer as the message the next member gets: its parts (and, for a task, the
    parts of its artifacts unless ``artifacts`` is false: a workflow member's repeat its
    steps' and its output, which its message holds), metadata and extensions, from the
    user's side."""
    source = answer_message(answer) or {}
    parts = [*source.get("parts", [])]
    for artifact in answer.get("task", {}).get("artifacts", []) if artifacts else ():
        parts += artifact.get("parts", [])
    return a2a_events.message(
        message_id=message_id,
        role=a2a_events.ROLE_USER,
        parts=parts or a2a_events.text_parts(f"(agent '{answerer}' answered with no content)"),
        metadata=source.get("metadata") or None,
        extensions=source.get("extensions") or None,
    )


def for_member(message: dict[str, Any]) -> dict[str, Any]:
    """A message without the ids of the team's conversation (the member's are set by the
    gateway)."""
    return {
        key: value
        for key, value in message.items()
        if key not in ("taskId", "contextId", "referenceTaskIds")
    }


def member_extensions(activated: tuple[str, ...], *, routing: bool) -> tuple[str, ...]:
    """The extensions a member call activates: the caller's, with the routing extension only
    for a member that speaks it (the router fills its metadata), each once."""
    others = tuple(uri for uri in activated if uri != CLIENT_ROUTING_URI)
    return tuple(dict.fromkeys((*others, *((CLIENT_ROUTING_URI,) if routing else ()))))


def outcome_of(answer: MemberAnswer, decision) -> str:
    if decision is None:
        return Outcome.CANCELED
    if answer.unreachable:
        return Outcome.FAILED
    if isinstance(decision, Fail):
        return Outcome.CAPPED
    if answer.failed:
        return Outcome.FAILED
    if isinstance(decision, Park):
        return Outcome.PARKED
    return Outcome.ROUTED if isinstance(decision, Deliver) else Outcome.REPLIED


def next_id(decision) -> str:
    if isinstance(decision, Deliver):
        return decision.target
    return USER if isinstance(decision, Reply | Park) else ""


def routing_errors(hop: Deliver, decision) -> str:
    """The routing error the member got with its message and, when its answer goes to the
    caller because its recipient was refused, that one too."""
    notes = [hop.routing_error, decision.routing_error if isinstance(decision, Reply) else None]
    return "; ".join(note for note in notes if note)


def peer_ids(message: dict[str, Any]) -> list[str]:
    routing = (message.get("metadata") or {}).get(CLIENT_ROUTING_URI) or {}
    return [card["id"] for card in routing.get("agentCards", [])]


def select_member(
    view: TeamView, message: dict[str, Any], *, skip: frozenset[str] = frozenset()
) -> tuple[str, str] | None:
    """The healthy member (not in ``skip``) the agent selector (``registry.selection``) ranks
    first for the message's text, and why; None when none matches or the message has no
    text."""
    try:
        text = selection.message_text(message)
    except InvalidQueryError:
        return None
    healthy = frozenset(m.id for m in view.members if m.healthy and m.id not in skip)
    if not healthy:
        return None
    chosen = selection.select(
        request=selection.SelectRequest(
            text=text, team_id=view.id, limit=3, healthy_only=True, agent_ids=healthy
        )
    )
    for candidate in chosen.selections:
        if candidate.agent_id in healthy:
            return candidate.agent_id, f"chosen by the agent selector: {candidate.why}"
    return None
