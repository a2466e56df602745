"""The team router: which member gets the next message, under the client-routing extension.

Pure: plain values in, plain values out, standard library only, so it runs without Django and
its tests need no database. It implements the client-routing extension
(``https://ranch.woi.dev/extensions/client-routing/v1``); the Django side
loads the team, calls members and records hops, in one straight loop (``call_member`` and
``answer_as_next_message`` are its own)::

    hop = first_hop(team, caller_message, parked_on=team_task_parked_on)
    message, hops_done = caller_message, 0
    while isinstance(hop, Deliver):
        outgoing, headers = prepare_message(
            message, team=team, target=hop.target, sender=hop.sender,
            handoffs=hop.handoffs, routing_error=hop.routing_error,
        )
        answer = call_member(hop.target, outgoing, headers)  # also records the hop
        hops_done += 1
        hop = next_hop(
            team, answerer=hop.target, sent_by=hop.sender, handoffs=hop.handoffs,
            answer=answer, hops_done=hops_done,
        )
        message = answer_as_next_message(answer)  # role, upstream task/context ids
    # hop is now Reply or Park (send prepare_reply(answer, ...)), Fail or Unavailable.

Where the spec is silent, this module decides (each rule is also in the docstrings below):

- "user" and "sender" are reserved words: an agent whose id is "user" or "sender" cannot be
  named as a recipient. Both words match whatever their case.
- A caller whose message names "user", "sender", a non-member or an unhealthy member reaches the
  default agent, with a routingError saying why (rule 3 applied to rule 1).
- A parked team task (rule 5) resumes at the agent that asked for input even when the caller's
  message names someone else; if that agent is gone or unhealthy, the default agent gets the
  message with a routingError.
- An unhealthy (or missing) default agent: a caller message that would reach it ends at once as
  ``Unavailable``; an answer that would fall back to it goes to the caller with a routingError.
- "sender" from an agent whose message came from the caller means "reply to the caller".
- ``handoffs`` narrow the next agent's peer list and are enforced: that agent may name only a
  listed agent, the agent that sent it the message, "user" or "sender"; naming another member is
  refused like a non-member (rule 3). They apply to the next agent whoever it is, including the
  default agent after a fallback, and last one hop. The caller cannot set handoffs.
- An input-required or auth-required answer parks the task even if it names a recipient, and
  even at the hop cap: parking and replying need no further call, so only a delivery can fail.
- Any other task state (completed, failed, rejected, canceled) is an answer like a Message and is
  routed by rules 2-3; the Django side must wait until a member's task is terminal or interrupted
  before asking for the next hop.
- A legacy ``x-recipient`` is read from callers too, and is stripped from every message the
  router forwards (it is routing data, and an agent echoing it back would repeat the last hop).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from registry.extensions import CLIENT_ROUTING_URI

MAX_HOPS = 10

USER = "user"
SENDER = "sender"
LEGACY_RECIPIENT_KEY = "x-recipient"

INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
_INTERRUPTED_STATES = {
    INPUT_REQUIRED: INPUT_REQUIRED,
    AUTH_REQUIRED: AUTH_REQUIRED,
    "input-required": INPUT_REQUIRED,  # 0.3 spelling
    "auth-required": AUTH_REQUIRED,
}


# Team ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """A team member as the router sees it.

    ``capabilities`` are the member's skill tags, or its skill ids when it has no tags.
    ``protocol_version`` is the Major.Minor the relay speaks to it ("1.0", "0.3").
    """

    id: str
    name: str = ""
    description: str = ""
    capabilities: tuple[str, ...] = ()
    supports_routing: bool = False
    healthy: bool = True
    protocol_version: str = "1.0"

    def __post_init__(self) -> None:
        object.__setattr__(self, "capabilities", tuple(self.capabilities))


@dataclass(frozen=True)
class TeamView:
    """A team: its members (in display order), its default agent and its hop limit.

    ``max_hops`` is clamped to 1..MAX_HOPS. A default agent that is not among the members is
    treated as unavailable rather than raising.
    """

    id: str
    members: tuple[Member, ...]
    default_agent: str
    max_hops: int = MAX_HOPS

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))
        object.__setattr__(self, "max_hops", min(max(int(self.max_hops), 1), MAX_HOPS))

    def member(self, agent_id: str) -> Member | None:
        """The member with this id, or None."""
        return next((member for member in self.members if member.id == agent_id), None)


# What an agent (or the caller) asks for ----------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """The routing data in a message's metadata.

    ``recipient`` is an agent id, USER, SENDER, or None for no decision. ``handoffs`` is None
    when not given; an empty tuple means "the next agent may route to no other agent".
    """

    recipient: str | None = None
    reason: str = ""
    handoffs: tuple[str, ...] | None = None


# What the router decides -------------------------------------------------------------------------


@dataclass(frozen=True)
class Deliver:
    """Call ``target`` with the message; ``sender`` is USER or the id of the agent whose answer
    it is. ``handoffs`` narrow the target's peer list, ``routing_error`` tells it why it got a
    message meant for someone else, ``reason`` is the sender's own explanation for the trace."""

    target: str
    sender: str
    routing_error: str | None = None
    handoffs: tuple[str, ...] | None = None
    reason: str = ""


@dataclass(frozen=True)
class Reply:
    """The last answer is the team's reply to the caller, with ``routing_error`` when a routing
    decision could not be followed."""

    routing_error: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class Park:
    """The team task waits in ``state`` (INPUT_REQUIRED or AUTH_REQUIRED); the caller's next
    message on it goes to ``agent``. The answer goes to the caller."""

    agent: str
    state: str
    reason: str = ""


@dataclass(frozen=True)
class Fail:
    """The team task ends failed with ``message``: the hop limit was reached."""

    message: str


@dataclass(frozen=True)
class Unavailable:
    """The team cannot take the caller's message at all: its default agent is unavailable."""

    message: str


Hop = Deliver | Reply | Park | Fail | Unavailable


# Reading routing data --------------------------------------------------------------------------


def parse_recipient(metadata: Any) -> Decision:
    """Reads the routing decision from a message's (or task's) metadata.

    Looks at ``metadata[URI]`` (``recipient`` as a plain string or as a tagged object
    ``{"type": "agent", "id": ...}`` / ``{"type": "user"}`` / ``{"type": "sender"}``, plus
    ``reason`` and ``handoffs``), then at the legacy top-level ``metadata["x-recipient"]`` string
    when the extension names no recipient. Never raises: values of the wrong type are ignored, so
    garbage reads as no decision.
    """
    if not isinstance(metadata, dict):
        return Decision()
    routing = metadata.get(CLIENT_ROUTING_URI)
    if not isinstance(routing, dict):
        routing = {}
    recipient = _recipient(routing.get("recipient"))
    if recipient is None:
        recipient = _recipient(metadata.get(LEGACY_RECIPIENT_KEY))
    reason = routing.get("reason")
    return Decision(
        recipient=recipient,
        reason=reason.strip() if isinstance(reason, str) else "",
        handoffs=_handoffs(routing.get("handoffs")),
    )


def decision_from_answer(answer: Any) -> Decision:
    """Reads the routing decision from an agent's answer: a Message, or a Task (each field taken
    from the task's ``status.message`` metadata when there, else from ``Task.metadata``).

    Also accepts the answer wrapped as ``{"message": ...}`` or ``{"task": ...}``. The task's
    history is not read: it holds earlier messages, not this answer. Never raises.
    """
    answer = _unwrap(answer)
    if not isinstance(answer, dict):
        return Decision()
    if not _is_task(answer):
        return parse_recipient(answer.get("metadata"))
    status_message = _status_message(answer)
    first = parse_recipient(status_message.get("metadata") if status_message else None)
    then = parse_recipient(answer.get("metadata"))
    return Decision(
        recipient=first.recipient if first.recipient is not None else then.recipient,
        reason=first.reason or then.reason,
        handoffs=first.handoffs if first.handoffs is not None else then.handoffs,
    )


def interrupted_state(answer: Any) -> str | None:
    """INPUT_REQUIRED or AUTH_REQUIRED when the answer is a task waiting on its client (1.0 or
    0.3 spelling), else None. Never raises."""
    answer = _unwrap(answer)
    if not isinstance(answer, dict) or not _is_task(answer):
        return None
    state = answer["status"].get("state")
    return _INTERRUPTED_STATES.get(state) if isinstance(state, str) else None


# Deciding --------------------------------------------------------------------------------------


def first_hop(
    team: TeamView,
    caller_message: Any,
    parked_on: str | None = None,
    selected: tuple[str, str] | None = None,
) -> Hop:
    """Where a message from the team's caller goes (rules 1, 3 and 5). Returns Deliver with
    sender USER, or Unavailable when the message would reach an unavailable default agent.

    A parked task resumes at ``parked_on``, the agent that asked for input, whatever the message
    names. Otherwise the member named by ``metadata[URI].recipient`` gets it, else
    ``selected`` (the member a team that selects chose for the message, and why, as
    ``(agent id, reason)``) when it is an available member, else the default agent. Never
    raises for a bad recipient: a non-member, an unhealthy member, "user" or "sender" falls
    back to the default agent with a routingError saying why.
    """
    metadata = caller_message.get("metadata") if isinstance(caller_message, dict) else None
    decision = parse_recipient(metadata)
    reason = decision.reason
    if parked_on:
        wanted, reason = parked_on, ""
        refusal = _refusal(team, parked_on, label=f"agent '{parked_on}', which asked for input,")
    elif decision.recipient is None:
        wanted, refusal = team.default_agent, None
        if selected is not None and _refusal(team, selected[0]) is None:
            wanted, reason = selected
    elif decision.recipient in (USER, SENDER):
        wanted = team.default_agent
        refusal = f"the caller can only name a team member, not '{decision.recipient}'"
    else:
        wanted, refusal = decision.recipient, _refusal(team, decision.recipient)

    if refusal is None and wanted != team.default_agent:
        return Deliver(target=wanted, sender=USER, reason=reason)
    if not _is_available(team, team.default_agent):
        message = f"the team's default agent '{team.default_agent}' is unavailable"
        if refusal and wanted != team.default_agent:
            message = f"{message}; {refusal}"
        return Unavailable(message)
    return Deliver(target=team.default_agent, sender=USER, routing_error=refusal, reason=reason)


def next_hop(
    team: TeamView,
    *,
    answerer: str,
    sent_by: str,
    answer: Any,
    hops_done: int,
    handoffs: tuple[str, ...] | None = None,
    selected: tuple[str, str] | None = None,
    may_hand: Callable[[str, str], str | None] | None = None,
) -> Hop:
    """Where ``answerer``'s answer goes (rules 2-5).

    ``sent_by`` is who sent the answerer its message (USER or an agent id), ``handoffs`` the
    handoffs it was given (Deliver.handoffs), ``hops_done`` the calls already made for this
    caller message, including the one that produced ``answer``.

    Returns Park for an input-required or auth-required task; Reply for "user", for "sender" when
    the caller sent the message, and for no decision from the default agent; otherwise Deliver to
    the named agent (or back to the sender), or to the default agent when there is no decision.
    Never raises for a bad recipient: a non-member, the answerer itself, an unhealthy member or
    one outside ``handoffs`` sends the answer to the default agent with a routingError saying
    why, or to the caller with that note when the default agent is the answerer or unavailable.
    A delivery once ``hops_done`` reached the team's limit returns Fail instead.

    ``selected`` (a team that selects: the member the selector chose for an answer that names
    no recipient, and why) takes the place of the default agent for such an answer of a member
    other than the default agent, when it is an available member other than the answerer.

    ``may_hand(from, to)`` (the access rules) gives the reason a hand-off is forbidden, or
    None. A forbidden recipient is refused like any other (to the default agent with the
    reason as routingError); when handing to the default agent is forbidden too, the answer
    goes to the caller with the reasons.
    """
    decision = decision_from_answer(answer)
    state = interrupted_state(answer)
    if state is not None:
        return Park(agent=answerer, state=state, reason=decision.reason)

    def deliver(
        target: str, routing_error: str | None = None, reason: str | None = None
    ) -> Deliver | Fail:
        if hops_done >= team.max_hops:
            return Fail(f"routing stopped after {team.max_hops} hops (the team's limit)")
        return Deliver(
            target=target,
            sender=answerer,
            routing_error=routing_error,
            handoffs=decision.handoffs,
            reason=reason or decision.reason,
        )

    default = team.default_agent
    recipient = sent_by if decision.recipient == SENDER else decision.recipient
    if recipient == USER or (recipient is None and answerer == default):
        return Reply(reason=decision.reason)
    if recipient is None and selected is not None:
        chosen, why = selected
        if (
            chosen != answerer
            and _refusal(team, chosen, answerer=answerer) is None
            and (may_hand is None or may_hand(answerer, chosen) is None)
        ):
            return deliver(chosen, reason=why)
    refusal = None
    if recipient is not None:
        refusal = (
            _refusal(team, recipient, answerer=answerer)
            or _handoff_refusal(
                recipient, answerer=answerer, handoffs=handoffs, always_allowed=(sent_by, default)
            )
            or (may_hand(answerer, recipient) if may_hand is not None else None)
        )
        if refusal is None:
            return deliver(recipient)
        if answerer == default:
            return Reply(routing_error=refusal, reason=decision.reason)
    if not _is_available(team, default):
        if recipient != default:  # else the refusal already says the default is unavailable
            unavailable = f"the default agent '{default}' is unavailable"
            refusal = f"{refusal}; {unavailable}" if refusal else unavailable
        return Reply(routing_error=refusal, reason=decision.reason)
    if recipient == default and refusal is not None:
        # The default agent, available, refused only by an access rule.
        return Reply(routing_error=refusal, reason=decision.reason)
    forbidden = may_hand(answerer, default) if may_hand is not None else None
    if forbidden:
        refusal = f"{refusal}; {forbidden}" if refusal else forbidden
        return Reply(routing_error=refusal, reason=decision.reason)
    return deliver(default, refusal)


# Writing routing data --------------------------------------------------------------------------


def peer_cards(
    team: TeamView, *, target: str, handoffs: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """The ``agentCards`` offered to ``target``: every other healthy member, in team order,
    narrowed to ``handoffs`` when given (ids there that are not members are ignored)."""
    return [
        {
            "id": member.id,
            "name": member.name,
            "description": member.description,
            "capabilities": list(member.capabilities),
            "supportsClientRouting": member.supports_routing,
        }
        for member in team.members
        if member.id != target and member.healthy and (handoffs is None or member.id in handoffs)
    ]


def prepare_message(
    message: dict[str, Any],
    *,
    team: TeamView,
    target: str,
    sender: str,
    handoffs: tuple[str, ...] | None = None,
    routing_error: str | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Returns a new message for ``target`` and the extra HTTP headers of the call to it; the
    input message is never changed.

    Any routing data already in the message (``metadata[URI]``, the URI in ``extensions``, a
    legacy ``x-recipient``) is removed first. A target that declares the extension then gets the
    URI once in ``extensions``, ``metadata[URI] = {"agentCards", "sender"}`` (+ "routingError")
    and the activation header: ``X-A2A-Extensions`` for a 0.x target, else ``A2A-Extensions``.
    Its value names only this extension; merge it with any other activated ones. A target that
    does not declare it (or is not a member) gets no routing data and no header. All other
    metadata and extensions are kept as they were.
    """
    prepared = copy.deepcopy(message)
    _strip_routing(prepared)
    member = team.member(target)
    if member is None or not member.supports_routing:
        return prepared, {}
    routing: dict[str, Any] = {
        "agentCards": peer_cards(team, target=target, handoffs=handoffs),
        "sender": sender,
    }
    if routing_error:
        routing["routingError"] = routing_error
    _attach_routing(prepared, routing, is_message=True)
    header = "X-A2A-Extensions" if member.protocol_version.startswith("0.") else "A2A-Extensions"
    return prepared, {header: CLIENT_ROUTING_URI}


def prepare_reply(answer: dict[str, Any], *, routing_error: str | None = None) -> dict[str, Any]:
    """Returns a copy of a member's answer fit to go to the team's caller; the input is never
    changed.

    The member's routing data (recipient, reason, handoffs, x-recipient) is removed from the
    message and, for a task, from ``status.message`` and ``Task.metadata``: it was meant for this
    team's router, and a caller that is itself a team would misread it. With ``routing_error``,
    ``metadata[URI] = {"routingError": ...}`` is set on the message (for a task, on its status
    message, or on the task when it has none).
    """
    prepared = copy.deepcopy(answer)
    inner = _unwrap(prepared)
    if not isinstance(inner, dict):
        return prepared
    if not _is_task(inner):
        _strip_routing(inner)
        if routing_error:
            _attach_routing(inner, {"routingError": routing_error}, is_message=True)
        return prepared
    status_message = _status_message(inner)
    _strip_routing(inner)
    if status_message is not None:
        _strip_routing(status_message)
    if routing_error:
        carrier = status_message if status_message is not None else inner
        _attach_routing(
            carrier, {"routingError": routing_error}, is_message=status_message is not None
        )
    return prepared


# Helpers ---------------------------------------------------------------------------------------


def _recipient(value: Any) -> str | None:
    """A recipient as a plain string (USER, SENDER or an agent id), or None when unreadable."""
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "agent":
            value = value.get("id")
        elif isinstance(kind, str) and kind.strip().lower() in (USER, SENDER):
            return kind.strip().lower()
        else:
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    return value.lower() if value.lower() in (USER, SENDER) else value


def _handoffs(value: Any) -> tuple[str, ...] | None:
    """Handoffs as a tuple of agent ids; anything but a list of strings is ignored (None)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(dict.fromkeys(item.strip() for item in value if item.strip()))


def _refusal(
    team: TeamView, agent_id: str, *, answerer: str | None = None, label: str = ""
) -> str | None:
    """Why ``agent_id`` cannot get the message, or None when it can."""
    label = label or f"recipient '{agent_id}'"
    member = team.member(agent_id)
    if member is None:
        return f"{label} is not a member of this team"
    if agent_id == answerer:
        return f"agent '{answerer}' cannot route to itself"
    if not member.healthy:
        return f"{label} is unavailable (unhealthy)"
    return None


def _handoff_refusal(
    recipient: str,
    *,
    answerer: str,
    handoffs: tuple[str, ...] | None,
    always_allowed: tuple[str, ...],
) -> str | None:
    """Why the answerer may not name ``recipient`` under the handoffs it was given, or None.

    Its sender and the default agent stay reachable whatever the handoffs: naming the sender is
    the same as saying "sender", and a refused recipient would fall back to the default anyway.
    """
    if handoffs is None or recipient in handoffs or recipient in always_allowed:
        return None
    allowed = ", ".join(handoffs) or "none"
    return f"recipient '{recipient}' is not among the handoffs '{answerer}' was given ({allowed})"


def _is_available(team: TeamView, agent_id: str) -> bool:
    member = team.member(agent_id)
    return member is not None and member.healthy


def _unwrap(answer: Any) -> Any:
    """The Message or Task inside a ``{"message": ...}`` / ``{"task": ...}`` response."""
    if isinstance(answer, dict) and "status" not in answer and "parts" not in answer:
        for key in ("task", "message"):
            if isinstance(answer.get(key), dict):
                return answer[key]
    return answer


def _is_task(answer: dict[str, Any]) -> bool:
    return isinstance(answer.get("status"), dict)


def _status_message(task: dict[str, Any]) -> dict[str, Any] | None:
    message = task["status"].get("message")
    return message if isinstance(message, dict) else None


def _strip_routing(carrier: dict[str, Any]) -> None:
    """Removes the extension's data from a message or task, in place."""
    metadata = carrier.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop(CLIENT_ROUTING_URI, None)
        metadata.pop(LEGACY_RECIPIENT_KEY, None)
    extensions = carrier.get("extensions")
    if isinstance(extensions, list) and CLIENT_ROUTING_URI in extensions:
        carrier["extensions"] = [uri for uri in extensions if uri != CLIENT_ROUTING_URI]


def _attach_routing(carrier: dict[str, Any], routing: dict[str, Any], *, is_message: bool) -> None:
    """Sets ``metadata[URI]`` on a stripped message or task, in place; a message also lists the
    URI in ``extensions``."""
    if not isinstance(carrier.get("metadata"), dict):
        carrier["metadata"] = {}
    carrier["metadata"][CLIENT_ROUTING_URI] = routing
    if is_message:
        extensions = carrier.get("extensions")
        carrier["extensions"] = [
            *(extensions if isinstance(extensions, list) else []),
            CLIENT_ROUTING_URI,
        ]
