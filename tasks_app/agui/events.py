"""A2A stream events (canonical 1.0 JSON, in the relay's ids) as AG-UI events, built with the
``ag-ui-protocol`` package's own types. Pure: no Django.

One ``RunEvents`` per run. It opens the run, then turns each A2A event into AG-UI events:

- a team hop (``metadata[CLIENT_ROUTING_URI] = {member, hop}`` on the member's events, as
  ``routing.team_events`` tags them) opens a ``STEP_STARTED`` named after the member, closed
  by ``STEP_FINISHED`` when the next hop begins or the run ends;
- a workflow step (``metadata[WORKFLOW_STEP_KEY] = {step, key, state, kind, target}``, as
  ``routing.workflows.run_steps`` tags its events) opens a ``STEP_STARTED`` named after the
  step's id at its first event, closed by ``STEP_FINISHED`` when its task ends (or the run
  does): steps of a ``parallel`` are open together, each under its own name;
- an agent's message (a status update's, a task's, or the answer itself) is a text message,
  once per A2A message id; a text artifact is a text message whose chunks are
  ``TEXT_MESSAGE_CONTENT`` deltas, ended by the artifact's last chunk;
- data and file parts are ``CUSTOM`` events (``a2a.data``, ``a2a.file``);
- the task's id, context and state go out as a ``STATE_SNAPSHOT`` (``{"a2a": {...}}``) when
  the task appears and when it ends.

The run ends with ``RUN_FINISHED`` (``completed``; ``canceled`` as the cancelled outcome; a
task waiting on the caller as an interrupt whose id is the A2A task id, for the next run's
``resume``) or ``RUN_ERROR`` (``failed``, ``rejected``, or an error of the relay).
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from ag_ui.core.version import PROTOCOL_VERSION

from registry.extensions import CLIENT_ROUTING_URI
from tasks_app.agui.inputs import STATE_KEY, WAITING_STATES
from tasks_app.protocol.events import WORKFLOW_STEP_KEY

COMPLETED = "TASK_STATE_COMPLETED"
CANCELED = "TASK_STATE_CANCELED"
FAILED_STATES = ("TASK_STATE_FAILED", "TASK_STATE_REJECTED")
DATA_EVENT = "a2a.data"
FILE_EVENT = "a2a.file"
STEP_ENDED = ("completed", "failed", "canceled", "rejected")
"""The states (storage spelling, as a workflow step's tag names them) of a step that ended."""
INTERRUPT_REASONS = {
    "TASK_STATE_INPUT_REQUIRED": "input_required",
    "TASK_STATE_AUTH_REQUIRED": "auth_required",
}


class RunEvents:
    """The AG-UI events of one run, from the A2A events of its stream, in order."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.task_id = ""
        self.context_id = ""
        self.state = ""
        self.question = ""
        self._step: str | None = None
        self._hop: Any = None
        self._speaker: str | None = None  # who the text of the event at hand comes from
        self._workflow_steps: dict[str, str] = {}  # open workflow steps: key -> step id
        self._open: dict[str, str] = {}  # artifact id -> its open text message id
        self._said: set[str] = set()  # the A2A message ids already sent as text
        self._artifacts: set[str] = set()  # the artifacts already sent (a task repeats them)

    def started(self) -> list[BaseEvent]:
        return [
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
            )
        ]

    def translate(self, event: dict[str, Any]) -> list[BaseEvent]:
        """The AG-UI events of one A2A stream event."""
        kind, body = next(iter(event.items()))
        if not isinstance(body, dict):
            return []
        if kind == "message":
            return self._said_message(body, name=None)
        metadata = body.get("metadata")
        tag = _workflow_tag(metadata)
        if isinstance(tag, dict):
            out = self._workflow_step_started(tag)
            self._speaker = tag.get("step") if isinstance(tag.get("step"), str) else None
        else:
            out = self._hop_of(metadata)
            self._speaker = self._step
        if kind == "task":
            out += self._task(body)
        elif kind == "statusUpdate":
            out += self._status(body)
        elif kind == "artifactUpdate":
            out += self._artifact(body)
        if isinstance(tag, dict) and tag.get("state") in STEP_ENDED:
            out += self._workflow_step_finished(tag.get("key"))
        return out

    def finished(self) -> list[BaseEvent]:
        """The run's end once the A2A stream ended: RUN_FINISHED or RUN_ERROR."""
        out = self._closed()
        if self.state in FAILED_STATES:
            reason = self.question or f"the task ended {self.state.removeprefix('TASK_STATE_')}"
            return [*out, RunErrorEvent(message=reason, code=self.state)]
        if self.task_id:
            out.append(self._snapshot())
        result = {"taskId": self.task_id, "contextId": self.context_id, "state": self.state}
        if self.state in INTERRUPT_REASONS:
            interrupt = Interrupt(
                id=self.task_id,
                reason=INTERRUPT_REASONS[self.state],
                message=self.question or None,
                metadata={"taskId": self.task_id, "contextId": self.context_id},
            )
            outcome: Any = RunFinishedInterruptOutcome(interrupts=[interrupt])
        elif self.state == CANCELED:
            outcome = RunFinishedCancelledOutcome()
        else:
            outcome = None
        finished = RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=outcome,
            result=result if self.task_id and outcome is None else None,
        )
        return [*out, finished]

    def failed(self, message: str, code: str) -> list[BaseEvent]:
        """The run's end after an error of the relay (``code``: the A2A error's reason)."""
        return [*self._closed(), RunErrorEvent(message=message, code=code)]

    # --- one A2A event ------------------------------------------------------------------

    def _task(self, task: dict[str, Any]) -> list[BaseEvent]:
        fresh = not self.task_id
        self.task_id = task.get("id") or self.task_id
        self.context_id = task.get("contextId") or self.context_id
        out: list[BaseEvent] = []
        for artifact in task.get("artifacts") or []:
            if artifact.get("artifactId") not in self._artifacts:
                out += self._artifact({"artifact": artifact, "lastChunk": True})
        out += self._status(task)
        if fresh and not self._final():
            out.append(self._snapshot())
        return out

    def _status(self, body: dict[str, Any]) -> list[BaseEvent]:
        self.task_id = body.get("taskId") or self.task_id
        self.context_id = body.get("contextId") or self.context_id
        status = body.get("status") or {}
        self.state = status.get("state") or self.state
        message = status.get("message")
        if not isinstance(message, dict) or message.get("role") == "ROLE_USER":
            return []
        if self.state in INTERRUPT_REASONS or self.state in FAILED_STATES:
            self.question = text_of(message.get("parts")) or self.question
        return self._said_message(message, name=self._speaker)

    def _artifact(self, body: dict[str, Any]) -> list[BaseEvent]:
        artifact = body.get("artifact") or {}
        artifact_id = str(artifact.get("artifactId") or "")
        self._artifacts.add(artifact_id)
        out: list[BaseEvent] = []
        for part in artifact.get("parts") or []:
            if "text" in part:
                message_id = self._open.get(artifact_id)
                if message_id is None:
                    message_id = f"{self.task_id}-{artifact_id}-{len(self._said)}"
                    self._said.add(message_id)
                    self._open[artifact_id] = message_id
                    out.append(
                        TextMessageStartEvent(
                            message_id=message_id, role="assistant", name=self._speaker
                        )
                    )
                if part["text"]:
                    out.append(TextMessageContentEvent(message_id=message_id, delta=part["text"]))
            else:
                out += _custom(part, {"artifactId": artifact_id})
        if body.get("lastChunk") and artifact_id in self._open:
            out.append(TextMessageEndEvent(message_id=self._open.pop(artifact_id)))
        return out

    def _said_message(self, message: dict[str, Any], *, name: str | None) -> list[BaseEvent]:
        message_id = str(message.get("messageId") or f"{self.task_id}-{len(self._said)}")
        if message_id in self._said:
            return []
        self._said.add(message_id)
        out: list[BaseEvent] = []
        text = text_of(message.get("parts"))
        if text:
            out += [
                TextMessageStartEvent(message_id=message_id, role="assistant", name=name),
                TextMessageContentEvent(message_id=message_id, delta=text),
                TextMessageEndEvent(message_id=message_id),
            ]
        for part in message.get("parts") or []:
            if "text" not in part:
                out += _custom(part, {"messageId": message_id})
        return out

    def _hop_of(self, metadata: Any) -> list[BaseEvent]:
        """STEP events when the event names a team hop (or workflow step) other than the
        current one."""
        origin = metadata.get(CLIENT_ROUTING_URI) if isinstance(metadata, dict) else None
        if not isinstance(origin, dict):
            return []
        name = origin.get("step") or origin.get("member")
        hop = origin.get("hop", name)
        if not isinstance(name, str) or (name, hop) == (self._step, self._hop):
            return []
        out = self._step_closed()
        self._step, self._hop = name, hop
        out.append(StepStartedEvent(step_name=name, metadata={"hop": hop}))
        return out

    def _workflow_step_started(self, tag: dict[str, Any]) -> list[BaseEvent]:
        """STEP_STARTED for a workflow step's first event, naming the step and its target."""
        key, name = tag.get("key"), tag.get("step")
        if not isinstance(key, str) or not isinstance(name, str) or key in self._workflow_steps:
            return []
        self._workflow_steps[key] = name
        return [StepStartedEvent(step_name=name, metadata=_step_metadata(tag))]

    def _workflow_step_finished(self, key: Any) -> list[BaseEvent]:
        name = self._workflow_steps.pop(key, None) if isinstance(key, str) else None
        if name is None:
            return []
        return [StepFinishedEvent(step_name=name, metadata={"key": key})]

    # --- the end ------------------------------------------------------------------------

    def _final(self) -> bool:
        return self.state in (COMPLETED, CANCELED, *FAILED_STATES, *WAITING_STATES)

    def _snapshot(self) -> StateSnapshotEvent:
        snapshot = {"taskId": self.task_id, "contextId": self.context_id, "state": self.state}
        return StateSnapshotEvent(snapshot={STATE_KEY: snapshot})

    def _step_closed(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for key in list(self._workflow_steps):
            out += self._workflow_step_finished(key)
        if self._step is None:
            return out
        name, hop = self._step, self._hop
        self._step = self._hop = None
        return [*out, StepFinishedEvent(step_name=name, metadata={"hop": hop})]

    def _closed(self) -> list[BaseEvent]:
        """Ends what is open: the artifacts' text messages, then the step."""
        out: list[BaseEvent] = [TextMessageEndEvent(message_id=m) for m in self._open.values()]
        self._open.clear()
        return out + self._step_closed()


def text_of(parts: Any) -> str:
    """The text of a message's parts, joined."""
    return "".join(part["text"] for part in parts or () if isinstance(part.get("text"), str))


def _workflow_tag(metadata: Any) -> dict[str, Any] | None:
    """The workflow step an event names, unless it names a team hop (the team's own call of
    a workflow member is a hop of the team's run)."""
    if not isinstance(metadata, dict) or isinstance(metadata.get(CLIENT_ROUTING_URI), dict):
        return None
    tag = metadata.get(WORKFLOW_STEP_KEY)
    return tag if isinstance(tag, dict) else None


def _step_metadata(tag: dict[str, Any]) -> dict[str, Any]:
    """A workflow step's STEP_STARTED metadata: its key, and the agent (team, workflow) it
    calls (``{"agent": id}``)."""
    out: dict[str, Any] = {"key": tag.get("key")}
    kind, target = tag.get("kind"), tag.get("target")
    if isinstance(kind, str) and isinstance(target, str):
        out[kind] = target
    return out


def _custom(part: dict[str, Any], where: dict[str, str]) -> list[BaseEvent]:
    """A data or file part as a CUSTOM event naming where it came from (``where``: the
    message's or artifact's id)."""
    if "data" in part:
        return [CustomEvent(name=DATA_EVENT, value={**where, "data": part["data"]})]
    if "raw" in part or "url" in part:
        return [CustomEvent(name=FILE_EVENT, value={**where, "file": part})]
    return []
