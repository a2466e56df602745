"""The pure parts of the AG-UI endpoints: a run's input as an A2A request, and A2A events as
AG-UI events (``tasks_app.agui.inputs``, ``tasks_app.agui.events``). No database, no server."""

from __future__ import annotations

import json

import pytest
from ag_ui.core import EventType

from registry.extensions import CLIENT_ROUTING_URI
from tasks_app.agui.events import RunEvents
from tasks_app.agui.inputs import parse_run
from tasks_app.protocol.errors import InvalidParams


def body(**fields) -> bytes:
    return json.dumps({"threadId": "t-1", "runId": "r-1", "messages": [], **fields}).encode()


def user(content, id="u-1"):
    return {"id": id, "role": "user", "content": content}


def test_the_last_user_message_is_sent_in_the_threads_context():
    run = parse_run(
        body(
            messages=[
                user("first", id="u-0"),
                {"id": "a-1", "role": "assistant", "content": "hi"},
                user("second"),
            ]
        )
    )

    assert run.request == {
        "message": {
            "messageId": "u-1",
            "role": "ROLE_USER",
            "contextId": "t-1",
            "parts": [{"text": "second"}],
        }
    }


def test_media_parts_become_file_parts():
    content = [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "data", "value": "aGk=", "mimeType": "image/png"}},
        {"type": "document", "source": {"type": "url", "value": "https://example.com/a.pdf"}},
    ]

    parts = parse_run(body(messages=[user(content)])).request["message"]["parts"]

    assert parts == [
        {"text": "look"},
        {"raw": "aGk=", "mediaType": "image/png"},
        {"url": "https://example.com/a.pdf"},
    ]


def test_a_resumed_interrupt_continues_its_task_with_the_payload():
    resume = [{"interruptId": "task-9", "status": "resolved", "payload": {"name": "Ada"}}]

    message = parse_run(body(messages=[user("ignored")], resume=resume)).request["message"]

    assert message["taskId"] == "task-9"
    assert message["parts"] == [{"data": {"name": "Ada"}}]


def test_a_cancelled_interrupt_leaves_its_task_and_opens_a_new_one():
    resume = [{"interruptId": "task-9", "status": "cancelled"}]

    message = parse_run(body(messages=[user("new")], resume=resume)).request["message"]

    assert "taskId" not in message
    assert message["parts"] == [{"text": "new"}]


def test_the_state_of_a_waiting_task_continues_it_without_resume_entries():
    state = {"a2a": {"taskId": "task-9", "state": "TASK_STATE_INPUT_REQUIRED"}}
    finished = {"a2a": {"taskId": "task-8", "state": "TASK_STATE_COMPLETED"}}

    waiting = parse_run(body(messages=[user("Ada")], state=state)).request["message"]
    done = parse_run(body(messages=[user("Ada")], state=finished)).request["message"]

    assert waiting["taskId"] == "task-9"
    assert "taskId" not in done


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"[]", "body"),
        (body(messages=[]), "messages"),
        (body(messages=[user("")]), "messages"),
        (body(threadId="x" * 201, messages=[user("hi")]), "threadId"),
        (json.dumps({"threadId": "t", "messages": []}).encode(), "runId"),
    ],
)
def test_a_body_that_is_no_run_is_refused_naming_the_field(raw, field):
    with pytest.raises(InvalidParams) as refused:
        parse_run(raw)

    assert [v.field for v in refused.value.field_violations][0].startswith(field)


def types(events) -> list[str]:
    return [event.type.value for event in events]


def status(state, text=None, *, origin=None, message_id="m-1"):
    update = {"taskId": "task-1", "contextId": "t-1", "status": {"state": state}}
    if text is not None:
        update["status"]["message"] = {
            "messageId": message_id,
            "role": "ROLE_AGENT",
            "parts": [{"text": text}],
        }
    if origin is not None:
        update["metadata"] = {CLIENT_ROUTING_URI: origin}
    return {"statusUpdate": update}


def test_a_failed_task_ends_the_run_with_run_error_saying_why():
    run = RunEvents("t-1", "r-1")
    run.translate(status("TASK_STATE_FAILED", "the disk is full"))

    (error,) = run.finished()

    assert error.type == EventType.RUN_ERROR
    assert (error.message, error.code) == ("the disk is full", "TASK_STATE_FAILED")


def test_a_canceled_task_ends_the_run_cancelled():
    run = RunEvents("t-1", "r-1")
    run.translate(status("TASK_STATE_CANCELED"))

    finished = run.finished()[-1]

    assert finished.outcome.type == "cancelled"


def test_data_and_file_parts_are_custom_events():
    run = RunEvents("t-1", "r-1")
    event = {
        "artifactUpdate": {
            "taskId": "task-1",
            "artifact": {
                "artifactId": "a-1",
                "parts": [{"data": {"rows": 2}}, {"url": "https://example.com/f.csv"}],
            },
            "lastChunk": True,
        }
    }

    custom = run.translate(event)

    assert [(e.name, e.value) for e in custom] == [
        ("a2a.data", {"artifactId": "a-1", "data": {"rows": 2}}),
        ("a2a.file", {"artifactId": "a-1", "file": {"url": "https://example.com/f.csv"}}),
    ]


def test_a_message_repeated_by_the_final_task_is_said_once():
    run = RunEvents("t-1", "r-1")
    said = run.translate(status("TASK_STATE_WORKING", "hello"))
    task = {
        "task": {
            "id": "task-1",
            "contextId": "t-1",
            "status": status("TASK_STATE_COMPLETED", "hello")["statusUpdate"]["status"],
        }
    }

    again = run.translate(task)

    assert types(said) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    assert "TEXT_MESSAGE_START" not in types(again)


def test_each_hop_is_a_step_closed_before_the_next_and_before_the_end():
    run = RunEvents("t-1", "r-1")
    first = run.translate(status("TASK_STATE_WORKING", "a", origin={"member": "a", "hop": 1}))
    second = run.translate(
        status("TASK_STATE_COMPLETED", "b", origin={"member": "a", "hop": 2}, message_id="m-2")
    )
    end = run.finished()

    assert types(first)[0] == "STEP_STARTED"
    assert types(second)[:2] == ["STEP_FINISHED", "STEP_STARTED"]
    assert [e.step_name for e in second[:2]] == ["a", "a"]
    assert types(end)[0] == "STEP_FINISHED" and types(end)[-1] == "RUN_FINISHED"


def test_an_artifact_left_open_is_ended_before_the_run_finishes():
    run = RunEvents("t-1", "r-1")
    run.translate(
        {
            "artifactUpdate": {
                "taskId": "task-1",
                "artifact": {"artifactId": "s", "parts": [{"text": "x"}]},
            }
        }
    )

    assert types(run.finished())[0] == "TEXT_MESSAGE_END"
