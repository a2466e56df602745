"""Pure operations on canonical (1.0 ProtoJSON) tasks, messages and stream events.

- ``IdMap`` rewrites task and context ids between the relay's ids (the only ones clients see)
  and an upstream agent's ids, in both directions, everywhere they occur.
- ``apply_event`` folds a ``statusUpdate`` or ``artifactUpdate`` into a task snapshot, the way
  a client folding the stream would (artifact chunks appended by ``artifactId``).
- ``trim`` applies ``historyLength`` and ``includeArtifacts`` to a task for a response.

Imports no Django: the gateway, the router and their tests share it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tasks_app.lifecycle import TaskState, to_wire_v1
from tasks_app.protocol import events as a2a_events

JsonDict = dict[str, Any]

# Storage spelling <-> 1.0 wire names, from the one state table in tasks_app.lifecycle.
V1_STATE = {state.value: to_wire_v1(state) for state in TaskState}
STATE_FROM_V1 = {wire: state for state, wire in V1_STATE.items()}


@dataclass(frozen=True)
class IdMap:
    """Relay ids on one side, upstream ids on the other. An empty upstream id means "not
    known yet": nothing is rewritten towards it."""

    task_id: str
    context_id: str
    upstream_task_id: str = ""
    upstream_context_id: str = ""

    def message_to_upstream(self, message: JsonDict) -> JsonDict:
        """The message as the upstream agent must see it: its own task and context ids."""
        out = dict(message)
        if out.get("taskId"):
            if self.upstream_task_id:
                out["taskId"] = self.upstream_task_id
            else:
                out.pop("taskId")
        context = self.upstream_context_id or self.context_id
        if context:
            out["contextId"] = context
        return out

    def to_relay(self, value: Any) -> Any:
        """A task, message, or stream response from upstream, with the relay's ids and its
        status timestamps in RFC 3339 UTC (``utc_timestamp``): every answer and event of an
        agent passes here, so clients that read timestamps strictly can parse them all."""
        if isinstance(value, list):
            return [self.to_relay(item) for item in value]
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if (
                key in ("taskId", "id")
                and isinstance(item, str)
                and self._is_upstream_task(key, value)
            ):
                out[key] = self.task_id
            elif key == "contextId" and isinstance(item, str):
                out[key] = self.context_id
            elif key in ("task", "message", "statusUpdate", "artifactUpdate", "status", "history"):
                out[key] = self.to_relay(item)
            elif key == "timestamp" and isinstance(item, str):
                # Only a status has a timestamp among the objects walked here.
                if (moment := utc_timestamp(item)) is not None:
                    out[key] = moment
            else:
                out[key] = item
        return out

    def _is_upstream_task(self, key: str, container: JsonDict) -> bool:
        # "id" names the task only on a Task object (it has "status"); elsewhere "id" may be a
        # config id. A taskId always names the task.
        return key == "taskId" or "status" in container


def utc_timestamp(value: str) -> str | None:
    """``value`` as RFC 3339 in UTC (``2026-11-28T16:58:00.944Z``), as ProtoJSON readers (the
    a2a-sdk clients, the relay's gRPC server) require. A timestamp without a zone, as fasta2a
    agents send (``2026-11-28T16:58:00.944946``), is read as UTC; one that is not ISO 8601 at
    all is None, and the caller drops it (a status's timestamp is optional)."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def trim(
    task: JsonDict, *, history_length: int | None = None, include_artifacts: bool = True
) -> JsonDict:
    """``historyLength``: None keeps all, 0 drops the history, n keeps the n most recent
    messages. Artifacts are omitted (not emptied) unless included."""
    out = dict(task)
    if history_length is not None:
        if history_length <= 0:
            out.pop("history", None)
        elif "history" in out:
            out["history"] = out["history"][-history_length:]
    if not include_artifacts:
        out.pop("artifacts", None)
    return out


def state_of(task_or_event: JsonDict) -> str | None:
    """Our storage spelling of a canonical task's or status update's state, or None."""
    return STATE_FROM_V1.get((task_or_event.get("status") or {}).get("state", ""))


def apply_event(task: JsonDict, event: JsonDict) -> JsonDict:
    """Folds one StreamResponse into a task snapshot and returns the new snapshot.

    ``task`` replaces the snapshot; ``statusUpdate`` replaces the status and merges metadata;
    ``artifactUpdate`` adds an artifact, or appends parts to the one with the same id when
    ``append`` is set. A ``message`` event leaves the task as it is.
    """
    if "task" in event:
        return copy.deepcopy(event["task"])
    out = dict(task)
    if "statusUpdate" in event:
        update = event["statusUpdate"]
        out["status"] = update.get("status", out.get("status"))
        message = (update.get("status") or {}).get("message")
        if message:
            out["history"] = [*out.get("history", []), message]
        if update.get("metadata"):
            out["metadata"] = {**out.get("metadata", {}), **update["metadata"]}
    elif "artifactUpdate" in event:
        update = event["artifactUpdate"]
        artifact = update.get("artifact") or {}
        artifacts = [dict(a) for a in out.get("artifacts", [])]
        for existing in artifacts:
            if existing.get("artifactId") == artifact.get("artifactId"):
                if update.get("append"):
                    existing["parts"] = [*existing.get("parts", []), *artifact.get("parts", [])]
                else:
                    existing.clear()
                    existing.update(artifact)
                break
        else:
            artifacts.append(artifact)
        out["artifacts"] = artifacts
    return out


def changes_between(before: JsonDict, after: JsonDict) -> list[JsonDict]:
    """The events that take the task ``before`` to the task ``after`` (both canonical Task
    dicts, relay ids): an artifactUpdate for each artifact that is new, grew (``append`` with
    the new parts) or changed, in ``after``'s order, and a statusUpdate when the status
    changed, before the artifacts while the task goes on and after them when it ends. For a
    snapshot the agent gave (a resubscription's first event, a GetTask poll) so that a stream
    gets each change as an event, as if it had followed the agent all along."""
    ids = {
        "task_id": before.get("id", after.get("id")),
        "context_id": before.get("contextId", after.get("contextId")),
    }
    artifacts = []
    known = {artifact.get("artifactId"): artifact for artifact in before.get("artifacts", [])}
    for artifact in after.get("artifacts", []):
        old = known.get(artifact.get("artifactId"))
        if old == artifact:
            continue
        parts, old_parts = artifact.get("parts", []), (old or {}).get("parts", [])
        if (
            old is not None
            and parts[: len(old_parts)] == old_parts
            and len(parts) > len(old_parts)
            and {k: v for k, v in artifact.items() if k != "parts"}
            == {k: v for k, v in old.items() if k != "parts"}
        ):
            grown = dict(artifact, parts=parts[len(old_parts) :])
            artifacts.append(a2a_events.artifact_event(**ids, artifact=grown, append=True))
        else:
            artifacts.append(a2a_events.artifact_event(**ids, artifact=artifact))
    status = after.get("status") or {}
    if status == (before.get("status") or {}) or not status.get("state"):
        return artifacts
    update = [a2a_events.status_event(**ids, status=status)]
    ends = status["state"] not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    return artifacts + update if ends else update + artifacts


def iso(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds and a Z, as ProtoJSON timestamps are written."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"  # "+00:00"


def relay_metadata(task) -> dict[str, Any]:
    """The task's metadata as the caller sees it: the agent's, with what the relay adds: which
    agent a skill send chose (``relaySelection``) and the tries of a retried send
    (``relayAttempts``)."""
    attempts = getattr(task, "attempts", None)
    if not task.selection and not attempts:
        return task.metadata
    added = {"relaySelection": task.selection, "relayAttempts": attempts}
    return {**(task.metadata or {}), **{key: value for key, value in added.items() if value}}


def snapshot_of(task) -> dict[str, Any]:
    """The canonical Task dict of a stored task (a ``Task`` row; relay ids)."""
    return a2a_events.task_snapshot(
        task_id=task.id,
        context_id=task.context_id,
        status=a2a_events.task_status(
            task.state, message=task.status_message or None, timestamp=iso(task.status_timestamp)
        ),
        history=task.history,
        artifacts=task.artifacts,
        metadata=relay_metadata(task),
    )
