"""A team as an A2A agent: ``TeamTarget`` runs a caller's message through the team's members
with the pure router (``routing.router``), one member call per hop. A member call's answer is
read in ``routing.team_answers``, its events become the team task's in
``routing.team_events``, and teams are loaded as targets in ``routing.team_loading``.

Each member is called through the gateway, as a child task of the team task (same caller,
``parent`` = the team task), so every call is persisted, cancelable and visible like any other.
A member keeps its own upstream context across the turns of one team conversation
(``MemberContext``). Every hop is stored (``RoutingHop``: the task's trace).

A team behaves, for its caller, exactly as its member would called directly (issue 12): the
team task shows what the member sends, as it sends it, and nothing of the relay's own. A
streaming caller's member streams, a blocking caller's member is called blocking (so the team
task records, and pushes to its webhooks, what an agent's task would). Every member event is
forwarded with ``metadata[URI] = {"member", "hop"}`` naming where it comes from, and the team
task's history holds the caller's messages and the members' messages. Then:

- Reply: the member's end is the team task's end (its state, its message without its routing
  data; ``completed`` for a Message): its last status update, or its task when it answered a
  blocking call with one. Every member's artifacts became the team task's artifacts as they came.
- Deliver (the conversation goes on): the member's answer is forwarded as a ``working`` update
  naming that member and hop, and the next member gets it.
- Park: the team task waits in input-required (or auth-required) with the member's question;
  the caller's next message on it goes back to that member, on the member's own child task.
- Fail (hop limit): the team task ends ``failed``, its message naming the limit.
- Unavailable (the default agent is unhealthy or gone): the team task ends ``failed`` at once,
  saying so; no member is called. (A task, not an A2A error: a streaming caller gets it as an
  ordinary final event.)

Decisions where the spec is silent:

- A member task that ends ``canceled`` ends the team task ``canceled``, with the member's final
  update as it is: it was canceled with the team task, or by the caller on purpose (the
  caller owns the child tasks too).
- A member call that fails itself (an A2A error, an unreachable agent, a stream that stopped)
  ends the team task ``failed`` with the reason in its status message, as the agent called
  directly would: the relay's error text is never routed on as if a member had said it. A
  member that answers the caller's own message with an A2A error before any event (a
  follow-up on a task it no longer knows, after a restart) gives that error, as the agent
  called directly does: a blocking caller gets it as the call's error, the task left as it
  was; a streaming caller gets the task failed with it. A member that answers with a
  ``failed`` task of its own is routed like any answer (rule 2).
- A member's task snapshot (its stream's first event, a blocking call's answer) is merged into
  the team task: a member's task that only opened (``submitted``) while the team task is past
  that adds nothing. A member's task that goes on working after the call's answer is
  followed (the gateway follows the agent's task) until it ends; then the conversation
  routes on.
- The next member receives the answer's message parts followed by the parts of the answering
  task's artifacts: the work itself, not only "done".
- A member that declares no usable interface counts as unhealthy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from registry import access, policy
from registry.extensions import CLIENT_ROUTING_URI
from registry.models import Agent, Team
from relay_project import tracing
from routing import breaker, selectors, services, team_answers, team_events
from routing.models import RoutingHop
from routing.router import (
    USER,
    Deliver,
    Fail,
    Member,
    Park,
    Reply,
    TeamView,
    decision_from_answer,
    first_hop,
    interrupted_state,
    next_hop,
    parse_recipient,
    prepare_message,
    prepare_reply,
)
from routing.team_answers import MemberAnswer
from tasks_app import gateway
from tasks_app.lifecycle import INTERRUPTED, TaskState
from tasks_app.models import Task
from tasks_app.protocol.errors import A2AError, TaskNotCancelable, UnsupportedOperation
from tasks_app.services import snapshot_of, status_event
from tasks_app.usage import quotas


@dataclass(frozen=True)
class RecordedHop:
    """A hop about to be stored, and the member's (context, open task) stored before it."""

    hop: RoutingHop
    known: tuple[str, str]


@dataclass(frozen=True)
class LoadedTeam:
    """What a call to a team needs that changes only when the team, its memberships or its
    members' cards do: kept per process (``team_target``). ``agents`` are the agent members
    that can be called; ``members`` is every member as the router sees it, its health not yet
    known; ``workflows`` the ids of the workflow members."""

    id: str
    name: str
    default_agent: str
    max_hops: int
    agents: dict[str, gateway.AgentTarget]
    members: tuple[Member, ...]
    no_recipient: str = Team.NoRecipient.DEFAULT_AGENT
    workflows: tuple[str, ...] = ()


class TeamTarget(gateway.Target):
    """A team, answering as one A2A agent (kind "team"): the loaded team, with its members'
    health and circuit breakers as stored at the time of the call (``states``, from
    ``selectors.member_states``; a member missing there was disabled meanwhile) and its
    workflow members as gateway targets (``workflows``; one missing there was disabled or
    deleted meanwhile). A workflow member is routed to as an agent member is, by its id: it
    takes no part in client routing, and has no health or breaker of its own (its steps'
    agents have theirs)."""

    def __init__(
        self,
        team: LoadedTeam,
        states: dict[str, selectors.MemberState],
        workflows: dict[str, gateway.Target] | None = None,
    ) -> None:
        super().__init__(
            kind="team",
            id=team.id,
            name=team.name,
            streaming=True,
            declared_extensions=(CLIENT_ROUTING_URI,),
            announces_task=True,
        )
        self.members: dict[str, gateway.Target] = {}
        view_members = []
        for member in team.members:
            if member.id in team.workflows:
                workflow = (workflows or {}).get(member.id)
                if workflow is not None:
                    self.members[member.id] = workflow
                    view_members.append(dataclasses.replace(member, healthy=True))
                continue
            state = states.get(member.id)
            if state is None:
                continue
            target = team.agents.get(member.id)
            if target is not None:
                breaker.remember(target, state.breaker)
                self.members[member.id] = target
            healthy = (
                target is not None
                and state.health != Agent.Health.UNHEALTHY
                and not breaker.blocks(target)
            )
            view_members.append(dataclasses.replace(member, healthy=healthy))
        self.view = TeamView(
            id=team.id,
            members=tuple(view_members),
            default_agent=team.default_agent,
            max_hops=team.max_hops,
        )
        self.no_recipient = team.no_recipient
        self.workflows = frozenset(team.workflows)

    async def run(self, task, request, ctx, *, stream):
        """The conversation, hop by hop. Every event is recorded here (``recorded`` steps):
        each member event as it happens, forwarded to the team task naming its member and hop
        (``team_events.forwarded``), and each hop with the end of the member task that made it and what
        that end means for the team task (``team_events.member_end``), in one transaction
        (``services.hop_record``)."""
        message = request["message"]
        if message.get("taskId") or message.get("contextId"):
            conversation = await sync_to_async(selectors.conversation_of)(
                team_id=self.id, task=task
            )
        else:  # a new conversation: nothing of it is stored yet
            conversation = selectors.Conversation()
        selected = None
        if (
            self.no_recipient == Team.NoRecipient.SELECT
            and not conversation.parked_on
            and parse_recipient(message.get("metadata")).recipient is None
        ):
            selected = await sync_to_async(team_answers.select_member)(self.view, message)
        hop = first_hop(self.view, message, parked_on=conversation.parked_on, selected=selected)
        # Kept for a process that may take the task over: the members it calls get the same.
        await sync_to_async(services.team_call_save)(
            task_id=task.id,
            metadata=request.get("metadata"),
            extensions=ctx.extensions,
            streaming=stream,
        )
        span = None
        if tracing.enabled():
            span = tracing.workflow_span(
                name=self.name, target_id=self.id, task=task, parent=ctx.trace
            )
            ctx = dataclasses.replace(ctx, trace=tracing.within(span))
        steps = self._route(
            task,
            ctx,
            hop,
            message,
            conversation,
            stream=stream,
            metadata=request.get("metadata"),
            # The caller answered: the team works again once its member takes the answer.
            resumed=TaskState(task.state) in INTERRUPTED,
        )
        if span is not None:
            steps = tracing.in_workflow(steps, span)
        async with contextlib.aclosing(steps):
            async for step in steps:
                yield step

    async def resume(self, task, ctx):
        """Takes over a team task whose relay process stopped while a member worked on it
        (``selectors.hop_in_flight``): follows that member's task, which the process taking
        it over resumes like any agent's (``FollowedMember``), forwarding its events; then records
        the hop and routes on as ``run`` does, as the stopped process would have: the members
        after it are called as the caller called the team for that message (streaming or
        blocking, with its request metadata and activated extensions, as stored when the
        message's routing started: ``TeamCall``), and the member's answer is routed under the
        handoffs it was given (stored with the hop that gave them). The member's artifacts
        the team task already holds as they are (forwarded before the process stopped) are
        not sent again when its task ends. A task stopped with no member at work (before the
        first call, between two hops) cannot be resumed: it ends failed saying so. A task
        whose call was not stored (begun before the relay kept it) goes on streaming, with
        no metadata or extensions."""
        found = await sync_to_async(selectors.hop_in_flight)(task=task)
        if found is None:
            raise UnsupportedOperation(
                "the relay process that ran this team's task stopped while no member was at "
                "work on it, so the conversation cannot be followed"
            )
        conversation = await sync_to_async(selectors.conversation_of)(team_id=self.id, task=task)
        stream, metadata = True, None
        if found.call is not None:
            ctx = dataclasses.replace(ctx, extensions=tuple(found.call.extensions))
            stream, metadata = found.call.streaming, found.call.metadata
        hop = Deliver(
            target=found.child.agent_id or found.child.target_id,
            sender=found.sender,
            routing_error=found.routing_error,
            handoffs=found.handoffs,
        )
        steps = self._route(
            task,
            ctx,
            hop,
            found.message,
            conversation,
            stream=stream,
            metadata=metadata,
            following=found,
        )
        async with contextlib.aclosing(steps):
            async for step in steps:
                yield step

    async def _route(
        self,
        task: Task,
        ctx: gateway.CallContext,
        hop,
        message: dict[str, Any],
        conversation: selectors.Conversation,
        *,
        stream: bool,
        metadata: dict[str, Any] | None = None,
        following: selectors.HopInFlight | None = None,
        resumed: bool = False,
    ):
        """The hops from ``hop`` on, until the conversation ends or waits on the caller; the
        first one the member task ``following`` (taken over) when given. A ``resumed`` team
        task (the caller answered its question) works again at the member's first event or
        answer, as an agent's task does: a member that refuses the caller's message with an
        A2A error of its own (its task is unknown to it, say) leaves the team task as it was,
        and the error is the caller's answer, as the agent's would be."""
        hops_done = following.hops_done if following is not None else 0
        handoff_rules = access.cached_rules(policy.HANDOFF)
        if handoff_rules is None:
            handoff_rules = await sync_to_async(access.rules)(policy.HANDOFF)
        may_hand = access.HandoffCheck(ctx.caller, self.id, handoff_rules)
        called: set[str] = set()  # the members called for this message (a selection skips them)
        handed: list[str] = []  # the members that answered before, in order: the trace so far
        while isinstance(hop, Deliver):
            started = time.perf_counter()
            order = conversation.hops_recorded + 1
            followed = following is not None
            if following is not None:
                outgoing = following.message
                call: gateway.Exchange | team_answers.FollowedMember | MemberAnswer = (
                    team_answers.FollowedMember(following.child)
                )
                following = None
            else:
                outgoing, headers = prepare_message(
                    team_answers.for_member(message),
                    team=self.view,
                    target=hop.target,
                    sender=hop.sender,
                    handoffs=hop.handoffs,
                    routing_error=hop.routing_error,
                )
                call = await self._open(
                    task,
                    ctx,
                    hop.target,
                    outgoing,
                    conversation,
                    routing=bool(headers),
                    metadata=metadata,
                    stream=stream,
                    actors=tuple(f"agent:{member}" for member in handed),
                )
            forwarded: set[str] = set()
            origin = {"member": hop.target, "hop": order}
            if not isinstance(call, MemberAnswer):
                seen = False
                try:
                    async for step in call.events():
                        seen = True
                        if resumed:
                            resumed = False
                            yield await _recorded(task, status_event(task, TaskState.WORKING))
                        if hop.target in self.workflows and team_events.ends_member(step.event):
                            continue  # a workflow records its end itself: member_end says it
                        events = team_events.forwarded(
                            step.event, task, origin=origin, whole=not stream
                        )
                        for event in events:
                            if "artifactUpdate" in event:
                                forwarded.add(event["artifactUpdate"]["artifact"].get("artifactId"))
                            yield await _recorded(task, event, answered=step.answered)
                        if step.answered and not events:  # the answer is the task as it stands
                            yield gateway.Step(
                                {"task": snapshot_of(task)}, recorded=True, answered=True
                            )
                except A2AError as error:
                    if hop.sender == USER and not seen:
                        # The agent refused the caller's own message: its answer, as on the
                        # agent's path (never a failure of the team or of the agent's health).
                        raise
                    call = team_answers.failed_answer(
                        f"agent {hop.target!r}: {error.message}", started
                    )
            answer = team_answers.answer_of(call, started)
            if resumed:
                resumed = False
                yield await _recorded(task, status_event(task, TaskState.WORKING))
            unreachable = answer.unreachable
            if followed:  # what the stopped process forwarded is not sent again
                forwarded |= team_events.held(task, answer)
            hops_done += 1
            called.add(hop.target)
            handed.append(hop.target)
            selected = await self._selection_for(hop, answer, called)
            decision = self._decide(hop, answer, hops_done, selected, may_hand)
            if may_hand.refused:
                await sync_to_async(may_hand.audit)()
            if unreachable and decision is not None:
                # The member gave no answer of its own: the team fails as the agent would,
                # instead of routing the relay's error text on as if the member had said it.
                decision = Fail(
                    message=team_answers.text_of(team_answers.answer_message(answer.answer))
                )
            recorded = self._hop(task, conversation, hop, outgoing, answer, decision)
            # The member's end, as the team task's: its last update when the conversation ends
            # here (with the artifacts not forwarded as they came), a `working` update with its
            # answer when the conversation goes on, or the team's failure (the hop limit).
            end = call.end.event if not isinstance(call, MemberAnswer) and call.end else None
            error = ""
            if isinstance(decision, Fail):
                events = team_events.member_end(
                    task, answer, None, origin, forwarded, going_on=True
                )
                events.append(
                    team_events.final_event(task, TaskState.FAILED, text=decision.message)
                )
                error = decision.message
            else:
                events = team_events.member_end(
                    task,
                    answer,
                    end,
                    origin,
                    forwarded,
                    going_on=isinstance(decision, Deliver),
                    whole=not stream,
                    routing_error=getattr(decision, "routing_error", None),
                )
            exchange = call if isinstance(call, gateway.Exchange) else None
            published = await sync_to_async(services.hop_record)(
                hop=recorded.hop,
                team_id=self.id,
                team_task=task,
                events=events,
                member_task_open=isinstance(decision, Park),
                known=recorded.known,
                member_exchange=exchange,
                error=error,
            )
            conversation.hops_recorded = max(conversation.hops_recorded, recorded.hop.order)
            for each in published:
                await each.send()
            if (
                not stream
                and isinstance(decision, Reply)
                and "message" in answer.answer
                and order == 1
            ):
                # A single exchange the member answered with a Message: so does the team (its
                # task, completed with that message, stays for the trace).
                reply = prepare_reply(answer.answer, routing_error=decision.routing_error)
                yield gateway.Step(
                    {"message": team_events.as_team_message(reply["message"], task)}, recorded=True
                )
                return
            for each in published:
                if each.task_id == task.id:
                    yield gateway.Step(each.event, recorded=True)
            message = team_answers.as_next_message(
                answer.answer,
                answerer=hop.target,
                message_id=f"{task.id}-hop-{order}",
                artifacts=hop.target not in self.workflows,
            )
            hop = decision
        if hops_done == 0:  # nobody could be called: the default agent is unavailable
            if resumed:
                yield await _recorded(task, status_event(task, TaskState.WORKING))
            ending, error = team_events.ending(task, hop, None)
            published = await sync_to_async(services.task_events_record)(
                task=task, events=[ending], error=error
            )
            for each in published:
                await each.send()
                yield gateway.Step(each.event, recorded=True)

    async def _selection_for(
        self, hop: Deliver, answer: MemberAnswer, called: set[str]
    ) -> tuple[str, str] | None:
        """For a team that selects, the member the selector ranks first for an answer that
        names no recipient (of a member other than the default agent, whose answer ends the
        turn), among the healthy members not yet called for this message, and why."""
        if (
            self.no_recipient != Team.NoRecipient.SELECT
            or hop.target == self.view.default_agent
            or answer.state == TaskState.CANCELED
            or interrupted_state(answer.answer) is not None
            or decision_from_answer(answer.answer).recipient is not None
        ):
            return None
        message = team_answers.as_next_message(
            answer.answer, answerer=hop.target, message_id="selection"
        )
        return await sync_to_async(team_answers.select_member)(
            self.view, message, skip=frozenset(called)
        )

    def _decide(
        self,
        hop: Deliver,
        answer: MemberAnswer,
        hops_done: int,
        selected: tuple[str, str] | None = None,
        may_hand: access.HandoffCheck | None = None,
    ):
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
            selected=selected,
            may_hand=may_hand,
        )

    def _hop(
        self,
        task: Task,
        conversation: selectors.Conversation,
        hop: Deliver,
        outgoing: dict[str, Any],
        answer: MemberAnswer,
        decision,
    ) -> RecordedHop:
        """The hop, not yet stored, with the member's conversation as stored before it;
        ``conversation`` moves on to what the member's conversation now is."""
        parked = isinstance(decision, Park)
        row = services.hop_new(
            task_id=task.id,
            order=conversation.hops_recorded + 1,
            from_id=hop.sender,
            to_id=hop.target,
            reason=hop.reason,
            routing_error=team_answers.routing_errors(hop, decision),
            peers_offered=team_answers.peer_ids(outgoing),
            text=team_answers.text_of(outgoing),
            latency_ms=answer.latency_ms,
            outcome=team_answers.outcome_of(answer, decision),
            next_id=team_answers.next_id(decision),
            upstream_task_id=answer.upstream_task_id,
            upstream_context_id=answer.upstream_context_id,
            handoffs=decision.handoffs if isinstance(decision, Deliver) else None,
        )
        known = conversation.contexts.get(hop.target, ("", ""))  # before it moves on below
        conversation.hops_recorded = row.order
        conversation.parked_on = conversation.parked_child_id = None
        if row.upstream_context_id:
            conversation.contexts[hop.target] = (
                row.upstream_context_id,
                row.upstream_task_id if parked else "",
            )
        return RecordedHop(row, known)

    async def _open(
        self,
        task: Task,
        ctx: gateway.CallContext,
        agent_id: str,
        message: dict[str, Any],
        conversation: selectors.Conversation,
        *,
        routing: bool,
        metadata: dict[str, Any] | None = None,
        stream: bool = True,
        actors: tuple[str, ...] = (),
    ) -> gateway.Exchange | MemberAnswer:
        """Opens the member's task, a child of the team task, and the exchange that drives it
        (the member streams when it can: its events are forwarded as they come). A member that
        asked the caller for input gets the answer on that same task; any other continues its
        upstream context of this conversation. The caller's request metadata and activated
        extensions go with the call, as they would to the agent called directly (the routing
        extension only to a member that speaks it, never twice). ``actors``: the members that
        answered before it (the act chain of a token exchanged for it). Never raises for the
        member's failures: they come back as a ``failed`` answer saying why."""
        started = time.perf_counter()
        member = self.members.get(agent_id)
        if member is None:
            return team_answers.failed_answer(f"agent {agent_id!r} cannot be called", started)
        refused = await quotas.hop_refused(ctx.caller, team_id=self.id, agent_id=agent_id)
        if refused is not None:
            return team_answers.failed_answer(refused, started)
        resume_id = conversation.parked_child_id if agent_id == conversation.parked_on else None
        if resume_id:
            message = dict(message, taskId=resume_id)
        child_ctx = gateway.CallContext(
            caller=ctx.caller,
            extensions=team_answers.member_extensions(ctx.extensions, routing=routing),
            delegation=(*ctx.delegation, f"team:{self.id}"),
            parent_task_id=task.id,
            actors=actors,
            upstream_context_id="" if resume_id else conversation.contexts.get(agent_id, ("",))[0],
            trace=ctx.trace,
        )
        request = {"message": message, **({"metadata": metadata} if metadata else {})}
        try:
            opened = await sync_to_async(gateway.open_task)(member, child_ctx, request)
        except A2AError as error:
            return team_answers.failed_answer(f"agent {agent_id!r}: {error.message}", started)
        steps = member.run(opened.task, request, child_ctx, stream=stream and member.streaming)
        return gateway.Exchange(member, opened.task, steps, fresh=opened.fresh)

    async def cancel_upstream(self, task, ctx):
        """Cancels the member tasks in flight (or waiting) for this team task, at the relay and
        at the agents. A member task that ends meanwhile is fine."""
        as_caller = gateway.CallContext(caller=ctx.caller)  # nothing of the team's call leaks
        for child in await sync_to_async(selectors.open_children)(parent_id=task.id):
            with contextlib.suppress(TaskNotCancelable):
                await gateway.cancel_task(self.members.get(child.target_id), as_caller, child.id)

    def owns(self, task) -> bool:
        return task.target_kind == "team" and task.target_id == self.id


async def _recorded(task: Task, event: dict[str, Any], *, answered: bool = False) -> gateway.Step:
    """Records and publishes one event of the team task; the step that tells the driver."""
    await gateway.record(task, gateway.Step(event))
    return gateway.Step(event, recorded=True, answered=answered)
