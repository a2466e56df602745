"""The builders of the A2A objects the relay writes: canonical 1.0 ProtoJSON that the SDK reads
back unchanged, and the only place the relay spells a status update, an artifact update or a
message."""

from __future__ import annotations

import ast
from pathlib import Path

from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from tasks_app.lifecycle import TaskState
from tasks_app.protocol import events
from tasks_app.protocol.convert import stream_response_from_v1
from tasks_app.protocol.validation import parse_v1
from tasks_app.protocol.versions import Dialect

ROOT = Path(__file__).resolve().parents[2]


def said(text: str) -> dict:
    return events.message(
        message_id="m-1",
        role=events.ROLE_AGENT,
        parts=events.text_parts(text),
        task_id="t-1",
        context_id="c-1",
    )


def assert_canonical(message_type: str, built: dict) -> None:
    """What the SDK parses and writes back, and what the relay's own validation keeps."""
    proto = ParseDict(built, getattr(a2a_pb2, message_type)())
    assert MessageToDict(proto) == built
    assert parse_v1(message_type, built) == built


def test_a_status_event_with_a_message_is_canonical_proto_json():
    status = events.task_status(
        TaskState.INPUT_REQUIRED, message=said("which city?"), timestamp="2026-11-28T10:00:00Z"
    )
    built = events.status_event(task_id="t-1", context_id="c-1", status=status)
    assert built["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert_canonical("StreamResponse", built)


def test_a_status_event_takes_the_storage_spelling_of_a_state():
    built = events.status_event(
        task_id="t-1", context_id="c-1", status=events.task_status("canceled"), metadata={"k": 1}
    )
    assert built == {
        "statusUpdate": {
            "taskId": "t-1",
            "contextId": "c-1",
            "status": {"state": "TASK_STATE_CANCELED"},
            "metadata": {"k": 1},
        }
    }
    assert_canonical("StreamResponse", built)


def test_an_artifact_event_leaves_false_flags_out():
    artifact = {"artifactId": "a-1", "parts": events.text_parts("chunk")}
    plain = events.artifact_event(task_id="t-1", context_id="c-1", artifact=artifact)
    assert "append" not in plain["artifactUpdate"]
    assert "lastChunk" not in plain["artifactUpdate"]
    assert_canonical("StreamResponse", plain)
    last = events.artifact_event(
        task_id="t-1", context_id="c-1", artifact=artifact, append=True, last_chunk=True
    )
    assert last["artifactUpdate"]["append"] is True
    assert last["artifactUpdate"]["lastChunk"] is True
    assert_canonical("StreamResponse", last)


def test_a_task_snapshot_leaves_empty_lists_and_metadata_out():
    task = events.task_snapshot(
        task_id="t-1",
        context_id="c-1",
        status=events.task_status(TaskState.COMPLETED, message=said("done")),
        artifacts=[],
        history=[said("done")],
        metadata={},
    )
    assert set(task) == {"id", "contextId", "status", "history"}
    assert_canonical("Task", task)


def test_a_built_terminal_status_event_ends_a_03_stream():
    built = events.status_event(
        task_id="t-1", context_id="c-1", status=events.task_status(TaskState.FAILED)
    )
    legacy = stream_response_from_v1(built, Dialect.V03_JSONRPC)
    assert legacy["kind"] == "status-update"
    assert legacy["status"]["state"] == "failed"
    assert legacy["final"] is True


# Example requests shown in the API docs and snippets, and the 0.3 <-> 1.0 converter, which
# maps objects it is given rather than building them.
_NOT_PRODUCERS = {
    "registry/api/select.py",
    "routing/call_snippets.py",
    "tasks_app/api/task_api_docs.py",
    "tasks_app/protocol/events.py",
    "tasks_app/protocol/objects.py",
}


def test_no_module_but_the_builders_spells_out_an_event_or_a_message():
    found = []
    for app in ("registry", "relay_project", "routing", "tasks_app"):
        for path in sorted((ROOT / app).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if "migrations" in path.parts or name in _NOT_PRODUCERS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Dict):
                    continue
                keys = {
                    key.value: value
                    for key, value in zip(node.keys, node.values, strict=True)
                    if isinstance(key, ast.Constant)
                }
                update = any(
                    isinstance(keys.get(kind), ast.Dict)
                    for kind in ("statusUpdate", "artifactUpdate")
                )
                if update or {"messageId", "role"} <= keys.keys():
                    found.append(f"{name}:{node.lineno}")
    assert found == [], "build these with tasks_app.protocol.events: " + ", ".join(found)
