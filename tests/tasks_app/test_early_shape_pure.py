"""The early task shape's pure conversions (no database, no HTTP)."""

from __future__ import annotations

import pytest

from tasks_app.protocol import early
from tasks_app.protocol.errors import InvalidParams


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"id": "t", "message": {}}, True),
        ({"message": {"role": "user", "parts": []}}, True),
        ({"message": {"role": "ROLE_USER", "parts": [{"type": "text", "text": "x"}]}}, True),
        ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}, False),
        ({"message": "x"}, False),
    ],
)
def test_a_body_is_early_by_its_id_its_role_spelling_or_its_part_types(body, expected):
    assert early.is_early(body) is expected


def test_an_early_send_becomes_a_1_0_request_with_every_field_carried():
    sent = early.send_request(
        {
            "id": "t-1",
            "sessionId": "s",
            "metadata": {"k": 1},
            "historyLength": 2,
            "acceptedOutputModes": ["text/plain"],
            "pushNotification": {
                "url": "https://hook.example/x",
                "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "c"},
            },
            "message": {
                "role": "user",
                "metadata": {"m": True},
                "parts": [
                    {"type": "text", "text": "hi", "metadata": {"p": 1}},
                    {"type": "file", "file": {"bytes": "AAE=", "mimeType": "a/b", "name": "f"}},
                    {"type": "file", "file": {"uri": "https://x.example/f"}},
                    {"type": "data", "data": {"d": [1]}},
                ],
            },
        }
    )
    assert sent.client_task_id == "t-1"
    message = sent.request["message"]
    assert message["role"] == "ROLE_USER" and message["contextId"] == "s"
    assert message["messageId"]
    assert message["parts"] == [
        {"text": "hi", "metadata": {"p": 1}},
        {"raw": "AAE=", "mediaType": "a/b", "filename": "f"},
        {"url": "https://x.example/f"},
        {"data": {"d": [1]}},
    ]
    assert sent.request["metadata"] == {"k": 1}
    assert sent.request["configuration"] == {
        "historyLength": 2,
        "acceptedOutputModes": ["text/plain"],
        "taskPushNotificationConfig": {
            "url": "https://hook.example/x",
            "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "c"},
        },
    }


def test_every_bad_field_of_an_early_send_is_named_at_once():
    with pytest.raises(InvalidParams) as caught:
        early.send_request(
            {"id": "", "message": {"role": "agent", "parts": [{"type": "x"}]}, "extra": 1}
        )
    fields = {violation.field for violation in caught.value.field_violations}
    assert fields == {"extra", "id", "message.role", "message.parts[0].type"}


def test_an_early_task_flattens_artifacts_and_keeps_the_status_message_beside_the_state():
    task = {
        "id": "relay-id",
        "contextId": "c",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": "name?"}]},
        },
        "artifacts": [
            {"artifactId": "a", "name": "one", "parts": [{"text": "x"}, {"data": 5}]},
            {"artifactId": "b", "parts": [{"url": "u", "mediaType": "m"}]},
        ],
    }
    assert early.early_task(task, client_task_id="mine") == {
        "id": "mine",
        "sessionId": "c",
        "status": "input-required",
        "statusMessage": {"role": "agent", "parts": [{"type": "text", "text": "name?"}]},
        "timestamp": "2026-01-01T00:00:00Z",
        "artifacts": [
            {"type": "text", "text": "x", "index": 0, "name": "one"},
            {"type": "data", "data": {"value": 5}, "index": 0, "name": "one"},
            {"type": "file", "file": {"uri": "u", "mimeType": "m"}, "index": 1},
        ],
        "metadata": {},
    }


def test_a_stream_numbers_artifacts_in_the_order_they_first_appear():
    stream = early.EarlyStream("t")
    first = stream.frames({"artifactUpdate": {"artifact": {"artifactId": "b", "parts": []}}})
    second = stream.frames({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": []}}})
    again = stream.frames(
        {
            "artifactUpdate": {
                "append": True,
                "artifact": {"artifactId": "b", "parts": [{"text": "more"}]},
            }
        }
    )
    assert [f[1]["artifact"]["index"] for f in (*first, *second, *again)] == [0, 1, 0]
    assert again[0][1]["artifact"]["append"] is True


def test_a_merged_batch_has_the_least_advanced_state_and_an_error_counts_as_failed():
    done = {"id": "a", "status": "completed", "artifacts": [{"type": "text", "text": "x"}]}
    waiting = {"id": "b", "status": "input-required", "artifacts": []}
    assert early.merge([done, waiting]) == {
        "status": "input-required",
        "taskIds": ["a", "b"],
        "artifacts": [{"type": "text", "text": "x", "taskId": "a"}],
    }
    assert early.merge([done, {"id": "c", "error": {}}])["status"] == "failed"
