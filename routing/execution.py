"""A team as an A2A agent: ``TeamTarget`` runs a caller's message through the team's members
with the pure router (``routing.router``), one member call per hop.

Each member is called through the gateway, as a child task of the team task (same caller,
``parent`` = the team task), so every call is persisted, cancelable and visible like any other.
A member keeps its own upstream context across the turns of one team conversation
(``MemberContext``). Every hop is stored (``RoutingHop``) and published on the team task as a
``working`` status update whose message is a one-line note ("triage -> researcher: matched
words: research") with the hop in its ``metadata[URI].hop``, so a streaming caller sees the
conversation as it happens (and the team task's history keeps it). Then:

- Reply: the answer (without its routing data) is the team task's final status message, in the
  answering member's terminal state (``completed`` for a Message). Every member's artifacts
  became the team task's artifacts as they came.
- Park: the team task waits in input-required (or auth-required) with the member's question;
  the caller's next message on it goes back to that member, on the member's own child task.
- Fail (hop limit): the team task ends ``failed``, its message naming the limit.
- Unavailable (the default agent is unhealthy or gone): the team task ends ``failed`` at once,
  saying so; no member is called. (A task, not an A2A error: a streaming caller gets it as an
  ordinary final event.)

Decisions where the spec is silent:

- A member task that ends ``canceled`` ends the team task ``canceled``: it was canceled with the
  team task, or by the caller on purpose (the caller owns the child tasks too).
- A member call the gateway refuses (an A2A error, an unreachable agent) is a ``failed`` answer
  whose text says why, routed like any answer (rule 2): a worker's failure reaches the default
  agent, the default agent's reaches the caller (the team task then ends ``failed``).
- A member answering a blocking call with a task still ``working`` (it does not stream) is
  polled until it ends or waits, up to ``RELAY_UPSTREAM_TIMEOUT``.
- The next member receives the answer's message parts followed by the parts of the answering
  task's artifacts: the work itself, not only "done".
- A member that declares no usable interface counts as unhealthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from registry.extensions import CLIENT_ROUTING_URI
from registry.models import Agent
from routing import breaker, selectors, services
from routing.models import RoutingHop
from routing.router import (
    USER,
    Deliver,
    Fail,
    Member,
    Park,
    Reply,
    TeamView,
    first_hop,
    next_hop,
    prepare_message,
    prepare_reply,
)
from tasks_app import gateway, upstream
from tasks_app.lifecycle import ACTIVE, TaskState, to_wire_v1
from tasks_app.models import Task
from tasks_app.protocol.errors import A2AError, TaskNotCancelable

Outcome = RoutingHop.Outcome
WIRE_STATE = {state: to_wire_v1(state) for state in TaskState}
STATE_OF_WIRE = {wire: state for state, wire in WIRE_STATE.items()}
POLL_SECONDS = (0.2, 0.5, 1.0, 2.0)
"""Waits between refreshes of a member task that answered still working (then 2 s each)."""


@dataclass(frozen=True)
class MemberAnswer:
    """What one member call gave: the answer (``{"message"}`` or ``{"task"}``) and its state in
    our storage spelling (``completed`` for a Message)."""

    answer: dict[str, Any]
    state: str
    latency_ms: float
    upstream_task_id: str = ""
    upstream_context_id: str = ""
    record_end: Callable[[], list[gateway.Published]] | None = field(
        default=None, compare=False, repr=False)
    """Records the member task's last event, held back to be stored with the hop."""

    @property
    def failed(self) -> bool:
        return self.state in (TaskState.FAILED, TaskState.REJECTED)


@dataclass(frozen=True)
class LoadedTeam:
    """What a call to a team needs that changes only when the team, its memberships or its
    members' cards do: kept per process (``team_target``). ``agents`` are the members that can
    be called; ``members`` is every member as the router sees it, its health not yet known."""

    id: str
    name: str
    default_agent: str
    max_hops: int
    agents: dict[str, gateway.AgentTarget]
    members: tuple[Member, ...]


class TeamTarget(gateway.Target):
    """A team, answering as one A2A agent (kind "team"): the loaded team, with its members'
    health and circuit breakers as stored at the time of the call (``states``, from
    ``selectors.member_states``; a member missing there was disabled meanwhile)."""

    def __init__(self, team: LoadedTeam, states: dict[str, selectors.MemberState]) -> None:
        super().__init__(
            kind="team",
            id=team.id,
            name=team.name,
            streaming=True,
            declared_extensions=(CLIENT_ROUTING_URI,),
            announces_task=True,
        )
        self.members: dict[str, gateway.AgentTarget] = {}
        view_members = []
        for member in team.members:
            state = states.get(member.id)
            if state is None:
                continue
            target = team.agents.get(member.id)
            if target is not None:
                breaker.remember(target, state.breaker)
                self.members[member.id] = target
            healthy = (target is not None and state.health != Agent.Health.UNHEALTHY
                       and not breaker.blocks(target))
            view_members.append(dataclasses.replace(member, healthy=healthy))
        self.view = TeamView(
            id=team.id,
            members=tuple(view_members),
            default_agent=team.default_agent,
            max_hops=team.max_hops,
        )

    async def run(self, task, request, ctx, *, stream):
        message = request["message"]
        if message.get("taskId") or message.get("contextId"):
            conversation = await sync_to_async(selectors.conversation_of)(
                team_id=self.id, task=task)
        else:  # a new conversation: nothing of it is stored yet
            conversation = selectors.Conversation()
        hop = first_hop(self.view, message, parked_on=conversation.parked_on)
        hops_done = 0
        while isinstance(hop, Deliver):
            outgoing, headers = prepare_message(
                _for_member(message),
                team=self.view,
                target=hop.target,
                sender=hop.sender,
                handoffs=hop.handoffs,
                routing_error=hop.routing_error,
            )
            answer = await self._call(
                task, ctx, hop.target, outgoing, conversation, routing=bool(headers),
                metadata=request.get("metadata"),
            )
            hops_done += 1
            decision = self._decide(hop, answer, hops_done)
            recorded, save = self._hop(task, conversation, hop, outgoing, answer, decision)
            # The hop, the artifacts it brought and, when the conversation ends here, the
            # team task's answer: recorded in one round trip.
            then = [_artifact_step(task, artifact)
                    for artifact in answer.answer.get("task", {}).get("artifacts", [])]
            if decision is None:
                text = f"the task of member '{hop.target}' was canceled"
                then.append(_final_step(task, TaskState.CANCELED, text=text))
            elif not isinstance(decision, Deliver):
                then.append(_ending(task, decision, answer))
            yield dataclasses.replace(_hop_step(task, recorded), also=save, then=tuple(then))
            message = _as_next_message(
                answer.answer, answerer=hop.target, message_id=f"{task.id}-hop-{recorded.order}"
            )
            hop = decision
        if hops_done == 0:  # nobody could be called: the default agent is unavailable
            yield _ending(task, hop, None)

    def _decide(self, hop: Deliver, answer: MemberAnswer, hops_done: int):
        """Where the member's answer goes next; None when its task was canceled (the team task
        then ends canceled too)."""
        if answer.state == TaskState.CANCELED:
            return None
        return next_hop(
            self.view,
            answerer=hop.target,
            sent_by=hop.sender,
            handoffs=hop.handoffs,
            answer=answer.answer,
            hops_done=hops_done,
        )

    def _hop(
        self,
        task: Task,
        conversation: selectors.Conversation,
        hop: Deliver,
        outgoing: dict[str, Any],
        answer: MemberAnswer,
        decision,
    ) -> tuple[RoutingHop, Callable[[], list[gateway.Published]]]:
        """The hop, and the write that stores it, with the end of the member's task, in the
        transaction of the team task's hop event; ``conversation`` moves on to what the
        member's conversation now is."""
        parked = isinstance(decision, Park)
        recorded = services.hop_new(
            task_id=task.id,
            order=conversation.hops_recorded + 1,
            from_id=hop.sender,
            to_id=hop.target,
            reason=hop.reason,
            routing_error=_routing_errors(hop, decision),
            peers_offered=_peer_ids(outgoing),
            text=_text_of(outgoing),
            latency_ms=answer.latency_ms,
            outcome=_outcome(answer, decision),
            next_id=_next_id(decision),
            upstream_task_id=answer.upstream_task_id,
            upstream_context_id=answer.upstream_context_id,
        )
        known = conversation.contexts.get(hop.target, ("", ""))  # before it moves on below

        def save() -> list[gateway.Published]:
            published = answer.record_end() if answer.record_end else []
            services.hop_save(recorded, team_id=self.id, context_id=task.context_id,
                              member_task_open=parked, known=known)
            return published

        conversation.hops_recorded = recorded.order
        conversation.parked_on = conversation.parked_child_id = None
        if recorded.upstream_context_id:
            conversation.contexts[hop.target] = (
                recorded.upstream_context_id,
                recorded.upstream_task_id if parked else "",
            )
        return recorded, save

    async def _call(
        self,
        task: Task,
        ctx: gateway.CallContext,
        agent_id: str,
        message: dict[str, Any],
        conversation: selectors.Conversation,
        *,
        routing: bool,
        metadata: dict[str, Any] | None = None,
    ) -> MemberAnswer:
        """Calls one member through the gateway, as a child task of the team task, and waits
        until that task ends or waits on its client; the event that ends it is recorded with
        the hop (``MemberAnswer.record_end``). A member that asked the caller for input gets
        the answer on that same task; any other continues its upstream context of this
        conversation. The caller's request metadata and activated extensions go with the
        call, as they would to the agent called directly (the routing extension only to a
        member that speaks it, never twice). Never raises for the member's failures: they
        come back as a ``failed`` answer saying why."""
        started = time.perf_counter()
        member = self.members.get(agent_id)
        if member is None:
            return _failed_answer(f"agent {agent_id!r} cannot be called", started)
        resume_id = conversation.parked_child_id if agent_id == conversation.parked_on else None
        if resume_id:
            message = dict(message, taskId=resume_id)
        child_ctx = gateway.CallContext(
            caller=ctx.caller,
            extensions=_member_extensions(ctx.extensions, routing=routing),
            delegation=(*ctx.delegation, f"team:{self.id}"),
            parent_task_id=task.id,
            upstream_context_id="" if resume_id else conversation.contexts.get(agent_id, ("",))[0],
        )
        try:
            request = {"message": message, **({"metadata": metadata} if metadata else {})}
            sent = await gateway.send_for_task(member, child_ctx, request)
            answer = sent.answer
            if sent.held is None:
                answer = await _until_settled(member, child_ctx, answer)
        except A2AError as error:
            return _failed_answer(f"agent {agent_id!r}: {error.message}", started)
        state = STATE_OF_WIRE.get(
            answer.get("task", {}).get("status", {}).get("state"), TaskState.COMPLETED
        )
        return MemberAnswer(
            answer, state, (time.perf_counter() - started) * 1000,
            upstream_task_id=sent.upstream_task_id,
            upstream_context_id=sent.upstream_context_id,
            record_end=sent.held.record if sent.held else None,
        )

    async def cancel_upstream(self, task, ctx):
        """Cancels the member tasks in flight (or waiting) for this team task, at the relay and
        at the agents. A member task that ends meanwhile is fine."""
        as_caller = gateway.CallContext(caller=ctx.caller)  # nothing of the team's call leaks
        for child in await sync_to_async(selectors.open_children)(parent_id=task.id):
            with contextlib.suppress(TaskNotCancelable):
                await gateway.cancel_task(self.members.get(child.target_id), as_caller, child.id)

    def owns(self, task) -> bool:
        return task.target_kind == "team" and task.target_id == self.id


def _load_team(team_id: str) -> LoadedTeam | None:
    loaded = selectors.team_with_members(team_id)
    if loaded is None:
        return None
    team, agents = loaded
    targets: dict[str, gateway.AgentTarget] = {}
    for agent in agents:
        with contextlib.suppress(upstream.NoUsableInterfaceError):
            targets[agent.pk] = gateway.AgentTarget(agent)
    return LoadedTeam(
        id=team.pk,
        name=team.name,
        default_agent=team.default_agent_id,
        max_hops=team.max_routing_hops,
        agents=targets,
        members=tuple(_member(agent, targets.get(agent.pk)) for agent in agents),
    )


_teams = gateway.TargetCache(_load_team, gateway.target_cache_seconds)
"""Loaded teams (four queries each). A saved or deleted team, membership or agent (a new card
saves its agent) drops them all, through the signals RoutingConfig.ready connects."""


def team_target(team_id: str) -> TeamTarget | None:
    """The team as a gateway target, or None when there is no enabled team with this id. Its
    members' health and breakers are read at each call (one query), so the health jobs'
    verdicts count at once, from any process."""
    team = _teams.get(team_id)
    if team is None:
        return None
    return TeamTarget(team, selectors.member_states([member.id for member in team.members]))


def team_changed(sender, **kwargs) -> None:
    """post_save and post_delete receiver for what a loaded team is made of."""
    forget_team_targets()


def forget_team_targets() -> None:
    """Drops every loaded team in this process."""
    _teams.forget()


# --- helpers ----------------------------------------------------------------------------


def _member(agent, target: gateway.AgentTarget | None) -> Member:
    """The router's view of an agent: skill tags (or ids) as capabilities. Whether it is
    healthy is decided at each call (``TeamTarget``); one that cannot be called never is."""
    skills = list(agent.skills.all())
    tags = list(dict.fromkeys(tag for skill in skills for tag in skill.tags or []))
    return Member(
        id=agent.pk,
        name=agent.name,
        description=agent.description,
        capabilities=tuple(tags or [skill.skill_id for skill in skills]),
        supports_routing=any(e.uri == CLIENT_ROUTING_URI for e in agent.extensions.all()),
        protocol_version=target.endpoint.version if target else "1.0",
    )


async def _until_settled(
    member: gateway.AgentTarget, ctx: gateway.CallContext, answer: dict[str, Any]
) -> dict[str, Any]:
    """The answer once the member's task has ended or waits on its client: a task still
    submitted or working (the member answered early) is refreshed until it settles, at most
    RELAY_UPSTREAM_TIMEOUT seconds; then it counts as failed."""
    deadline = time.monotonic() + settings.RELAY_UPSTREAM_TIMEOUT
    waits = iter(POLL_SECONDS)
    while "task" in answer and STATE_OF_WIRE.get(answer["task"]["status"]["state"]) in ACTIVE:
        if time.monotonic() > deadline:
            return _failed_task(answer["task"], f"agent {member.id!r} did not finish in time")
        await asyncio.sleep(next(waits, POLL_SECONDS[-1]))
        answer = {"task": await gateway.get_task(member, ctx, answer["task"]["id"])}
    return answer


def _ending(task: Task, hop, answer: MemberAnswer | None) -> gateway.Step:
    """The team task's last update: the reply, the question for the caller (parked), or the
    failure (hop limit, unavailable default agent), whose reason is kept in the task's
    ``error`` too."""
    if isinstance(hop, Reply):
        reply = prepare_reply(answer.answer, routing_error=hop.routing_error)
        return _final_step(task, answer.state, message=_answer_message(reply))
    if isinstance(hop, Park):
        question = _answer_message(prepare_reply(answer.answer))
        return _final_step(task, TaskState(STATE_OF_WIRE[hop.state]), message=question)
    failed = _final_step(task, TaskState.FAILED, text=hop.message)  # Fail or Unavailable
    note = functools.partial(services.task_error_note, task_id=task.id, event=failed.event)
    return dataclasses.replace(failed, also=note)


def _failed_task(task: dict[str, Any], text: str) -> dict[str, Any]:
    status = {
        "state": WIRE_STATE[TaskState.FAILED],
        "message": {
            "messageId": f"{task.get('id', 'call')}-failed",
            "role": "ROLE_AGENT",
            "parts": [{"text": text}],
        },
    }
    return {"task": {**task, "status": status}}


def _failed_answer(text: str, started: float) -> MemberAnswer:
    latency_ms = (time.perf_counter() - started) * 1000
    return MemberAnswer(_failed_task({}, text), TaskState.FAILED, latency_ms)


def _member_extensions(activated: tuple[str, ...], *, routing: bool) -> tuple[str, ...]:
    """The extensions a member call activates: the caller's, with the routing extension only
    for a member that speaks it (the router fills its metadata), each once."""
    others = tuple(uri for uri in activated if uri != CLIENT_ROUTING_URI)
    return tuple(dict.fromkeys((*others, *((CLIENT_ROUTING_URI,) if routing else ()))))


def _for_member(message: dict[str, Any]) -> dict[str, Any]:
    """A message without the ids of the team's conversation (the member's are set by the
    gateway)."""
    return {
        key: value
        for key, value in message.items()
        if key not in ("taskId", "contextId", "referenceTaskIds")
    }


def _as_next_message(answer: dict[str, Any], *, answerer: str, message_id: str) -> dict[str, Any]:
    """A member's answer as the message the next member gets: its parts (and, for a task, the
    parts of its artifacts), metadata and extensions, from the user's side."""
    source = _answer_message(answer) or {}
    parts = [*source.get("parts", [])]
    for artifact in answer.get("task", {}).get("artifacts", []):
        parts += artifact.get("parts", [])
    message = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": parts or [{"text": f"(agent '{answerer}' answered with no content)"}],
    }
    for key in ("metadata", "extensions"):
        if source.get(key):
            message[key] = source[key]
    return message


def _answer_message(answer: dict[str, Any]) -> dict[str, Any] | None:
    if "message" in answer:
        return answer["message"]
    return answer.get("task", {}).get("status", {}).get("message")


def _outcome(answer: MemberAnswer, decision) -> str:
    if decision is None:
        return Outcome.CANCELED
    if isinstance(decision, Fail):
        return Outcome.CAPPED
    if answer.failed:
        return Outcome.FAILED
    if isinstance(decision, Park):
        return Outcome.PARKED
    return Outcome.ROUTED if isinstance(decision, Deliver) else Outcome.REPLIED


def _next_id(decision) -> str:
    if isinstance(decision, Deliver):
        return decision.target
    return USER if isinstance(decision, Reply | Park) else ""


def _routing_errors(hop: Deliver, decision) -> str:
    """The routing error the member got with its message and, when its answer goes to the
    caller because its recipient was refused, that one too."""
    notes = [hop.routing_error, decision.routing_error if isinstance(decision, Reply) else None]
    return "; ".join(note for note in notes if note)


def _peer_ids(message: dict[str, Any]) -> list[str]:
    routing = (message.get("metadata") or {}).get(CLIENT_ROUTING_URI) or {}
    return [card["id"] for card in routing.get("agentCards", [])]


def _text_of(message: dict[str, Any] | None) -> str:
    parts = (message or {}).get("parts", [])
    return "\n".join(part["text"] for part in parts if isinstance(part.get("text"), str))


def _hop_note(hop: RoutingHop) -> str:
    """The one-line text of a hop update: "triage -> researcher: matched words: research"."""
    note = f"{hop.from_id} -> {hop.to_id}"
    if hop.reason:
        note += f": {hop.reason}"
    if hop.routing_error:
        note += f" (routing error: {hop.routing_error})"
    return note


def _status_step(task: Task, state: TaskState, message: dict[str, Any] | None) -> gateway.Step:
    status: dict[str, Any] = {"state": WIRE_STATE[state]}
    if message is not None:
        message = {
            key: value
            for key, value in message.items()
            if value or key not in ("metadata", "extensions")
        }
        status["message"] = dict(message, taskId=task.id, contextId=task.context_id)
    return gateway.Step(
        {"statusUpdate": {"taskId": task.id, "contextId": task.context_id, "status": status}}
    )


def _relay_message(message_id: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}], **fields}


def _hop_step(task: Task, hop: RoutingHop) -> gateway.Step:
    """The hop as a ``working`` update: its note as the status message, the hop itself in the
    message's ``metadata[URI].hop`` (so the team task's history keeps every hop too)."""
    note = _relay_message(
        f"{task.id}-hop-{hop.order}",
        _hop_note(hop),
        metadata={CLIENT_ROUTING_URI: {"hop": services.hop_as_json(hop)}},
    )
    return _status_step(task, TaskState.WORKING, note)


def _artifact_step(task: Task, artifact: dict[str, Any]) -> gateway.Step:
    return gateway.Step(
        {
            "artifactUpdate": {
                "taskId": task.id,
                "contextId": task.context_id,
                "artifact": artifact,
                "lastChunk": True,
            }
        }
    )


def _final_step(
    task: Task, state: TaskState, *, message: dict[str, Any] | None = None, text: str = ""
) -> gateway.Step:
    if text:
        message = _relay_message(f"{task.id}-{state.value}", text)
    return _status_step(task, state, message)
