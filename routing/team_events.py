"""A member's events and end as the team task's events: forwarded naming the member and
hop, merged into the team task, and the team task's own last update (issue 12: the team
shows what its member sends, as it sends it)."""

from __future__ import annotations

from typing import Any

from registry.extensions import CLIENT_ROUTING_URI
from routing import team_answers
from routing.router import (
    LEGACY_RECIPIENT_KEY,
    Park,
    Reply,
    prepare_reply,
)
from routing.team_answers import STATE_OF_WIRE, WIRE_STATE, MemberAnswer
from tasks_app import snapshots
from tasks_app.lifecycle import INTERRUPTED, TERMINAL, TaskState
from tasks_app.models import Task
from tasks_app.protocol import events as a2a_events
from tasks_app.services import snapshot_of


def ending(task: Task, hop, answer: MemberAnswer | None) -> tuple[dict[str, Any], str]:
    """The team task's last update: the reply, the question for the caller (parked), or the
    failure (hop limit, unavailable default agent); and the failure's reason, kept in the
    task's ``error`` too ("" otherwise)."""
    if isinstance(hop, Reply):
        reply = prepare_reply(answer.answer, routing_error=hop.routing_error)
        return final_event(task, answer.state, message=team_answers.answer_message(reply)), ""
    if isinstance(hop, Park):
        question = team_answers.answer_message(prepare_reply(answer.answer))
        return final_event(task, TaskState(STATE_OF_WIRE[hop.state]), message=question), ""
    return final_event(task, TaskState.FAILED, text=hop.message), hop.message  # Fail, Unavailable


def held(task: Task, answer: MemberAnswer) -> set[str]:
    """The ids of the member's artifacts the team task already holds as they are."""
    held = {artifact.get("artifactId"): artifact for artifact in task.artifacts or []}
    return {
        artifact.get("artifactId")
        for artifact in answer.answer.get("task", {}).get("artifacts", [])
        if artifact.get("artifactId") in held and held[artifact.get("artifactId")] == artifact
    }


def forwarded(
    event: dict[str, Any], task: Task, *, origin: dict[str, Any], whole: bool
) -> list[dict[str, Any]]:
    """A member's event (not its last) as the team task's events, in the team task's ids and
    each saying, in its ``metadata[URI]``, which member and hop (``origin``) it comes from.

    A status or artifact update goes on as it is. A task (the member's first event, or the
    answer of a blocking call it goes on working on) is the team task with the member's
    status, artifacts and messages (``merged_task``): as that task when ``whole`` (a blocking call,
    as the agent's own answer would be), else as the updates that take the team task there
    (a stream: none when the member only repeats the state the team task is in)."""
    ids = snapshots.IdMap(task.id, task.context_id)
    mapped = ids.to_relay(event)
    for kind in ("artifactUpdate", "statusUpdate"):
        if kind in mapped:
            update = mapped[kind]
            if opened_only(update, task):
                return []
            return [{kind: {**update, "metadata": tagged(update.get("metadata"), origin)}}]
    if not isinstance(mapped.get("task"), dict):
        return []
    merged = merged_task(task, mapped["task"], origin)
    if whole:
        return [{"task": merged}]
    before = snapshot_of(task)
    if same_status(before["status"], merged["status"]):
        merged["status"] = before["status"]
    return [tag(change, origin) for change in snapshots.changes_between(before, merged)]


_MEMBER_ENDS = frozenset(state.value for state in (*TERMINAL, *INTERRUPTED))


def ends_member(event: dict[str, Any]) -> bool:
    """Whether the event is a status update that ends a member's task or makes it wait on
    its caller. A workflow member records its end itself, so its exchange cannot hold that
    event back as it does an agent's: the team leaves it to the hop's end (``member_end``)."""
    update = event.get("statusUpdate")
    return isinstance(update, dict) and snapshots.state_of(update) in _MEMBER_ENDS


def member_end(
    task: Task,
    answer: MemberAnswer,
    end: dict[str, Any] | None,
    origin: dict[str, Any],
    forwarded: set[str],
    *,
    going_on: bool,
    whole: bool = False,
    routing_error: str | None = None,
) -> list[dict[str, Any]]:
    """The end of a member's task as the team task's events, naming ``origin``.

    When the conversation ends here it is the team task's end as the member's was (its state,
    its message without the member's routing data, ``routing_error`` added): the member's task
    itself when ``whole`` and the member ended with one (a blocking call), else its artifacts
    not ``forwarded`` yet and its last status update. When the conversation goes on
    (``going_on``) it is a ``working`` update with the member's answer, after those artifacts.
    """
    reply = prepare_reply(answer.answer, routing_error=None if going_on else routing_error)
    ids = snapshots.IdMap(task.id, task.context_id)
    reply = ids.to_relay(reply)
    if "message" in reply:
        member_task: dict[str, Any] = {}
        status = a2a_events.task_status(TaskState.COMPLETED, message=reply["message"])
    else:
        member_task = reply.get("task") or {}
        status = dict(member_task.get("status") or {})
    if not going_on and whole and end is not None and "task" in end:
        return [{"task": merged_task(task, member_task, origin)}]
    events = [
        tag(a2a_events.artifact_event(**_ids(task), artifact=artifact, last_chunk=True), origin)
        for artifact in member_task.get("artifacts", [])
        if artifact.get("artifactId") not in forwarded
    ]
    if going_on:
        status = a2a_events.task_status(TaskState.WORKING, message=status.get("message") or None)
    own = ((end or {}).get("statusUpdate") or {}).get("metadata") if not going_on else None
    events.append(
        a2a_events.status_event(**_ids(task), status=status, metadata=tagged(own, origin))
    )
    return events


def merged_task(task: Task, member_task: dict[str, Any], origin: dict[str, Any]) -> dict[str, Any]:
    """The team task as the member's task (team ids) leaves it: the member's status (unless it
    only opened: ``opened_only``), its artifacts over the team task's (by id), the team task's
    history with the member's messages it does not hold yet (the messages the team sent the
    member are not the caller's: left out), the member's metadata (without routing data) with
    ``origin``."""
    team = snapshot_of(task)
    opening = opened_only(member_task, task) or not (member_task.get("status") or {}).get("state")
    merged = dict(team, status=team["status"] if opening else member_task["status"])
    artifacts = {artifact.get("artifactId"): artifact for artifact in team.get("artifacts", [])}
    for artifact in member_task.get("artifacts", []):
        artifacts[artifact.get("artifactId")] = artifact
    if artifacts:
        merged["artifacts"] = list(artifacts.values())
    history = team.get("history", [])
    held = {message.get("messageId") for message in history}
    added = [
        message
        for message in member_task.get("history", [])
        if message.get("role") == "ROLE_AGENT" and message.get("messageId") not in held
    ]
    if history or added:
        merged["history"] = [*history, *added]
    merged["metadata"] = {
        **team.get("metadata", {}),
        **tagged(member_task.get("metadata"), origin),
    }
    return merged


def opened_only(body: dict[str, Any], task: Task) -> bool:
    """A member's task or status update that only says its task opened (``submitted``) while
    the team task is past that: the team task has nothing to mirror."""
    state = (body.get("status") or {}).get("state")
    return state == WIRE_STATE[TaskState.SUBMITTED] and task.state != TaskState.SUBMITTED


def same_status(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """The same state and message (the timestamp aside)."""
    return all(before.get(key) == after.get(key) for key in ("state", "message"))


def tagged(metadata: dict[str, Any] | None, origin: dict[str, Any]) -> dict[str, Any]:
    """Metadata naming ``origin`` under the routing extension, instead of any routing data."""
    kept = {
        key: value
        for key, value in (metadata or {}).items()
        if key not in (CLIENT_ROUTING_URI, LEGACY_RECIPIENT_KEY)
    }
    return {**kept, CLIENT_ROUTING_URI: origin}


def tag(event: dict[str, Any], origin: dict[str, Any]) -> dict[str, Any]:
    kind, body = next(iter(event.items()))
    return {kind: {**body, "metadata": tagged(body.get("metadata"), origin)}}


def as_team_message(message: dict[str, Any], task: Task) -> dict[str, Any]:
    """A member's answer message as the team's own: in the team's context, of no task."""
    return {**{k: v for k, v in message.items() if k != "taskId"}, "contextId": task.context_id}


def final_event(
    task: Task, state: TaskState, *, message: dict[str, Any] | None = None, text: str = ""
) -> dict[str, Any]:
    """The team task's status update in ``state``: with the relay's ``text``, or ``message``
    (without empty metadata or extensions) in the team task."""
    if text:
        message = a2a_events.message(
            message_id=f"{task.id}-{state.value}",
            role=a2a_events.ROLE_AGENT,
            parts=a2a_events.text_parts(text),
        )
    if message is not None:
        message = {
            **{k: v for k, v in message.items() if v or k not in ("metadata", "extensions")},
            "taskId": task.id,
            "contextId": task.context_id,
        }
    status = a2a_events.task_status(state, message=message)
    return a2a_events.status_event(**_ids(task), status=status)


def _ids(task: Task) -> dict[str, str]:
    return {"task_id": task.id, "context_id": task.context_id}
