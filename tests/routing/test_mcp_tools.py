"""The pure half of the MCP server: tool names, input schemas, messages and answers."""

from __future__ import annotations

import re

import pytest

from routing.mcp.catalog import Subset, UnknownPath, subset_of
from routing.mcp.tasks import POLL_INTERVAL_MS, detailed_task
from routing.mcp.tools import BadArguments, answer_of, input_schema, message_of, tool_name

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_tool_names_are_the_kind_and_id_when_those_are_valid():
    assert tool_name("agent", "echo") == "agent_echo"
    assert tool_name("team", "demo") == "team_demo"
    assert tool_name("skill", "echo", "echo") == "skill_echo_echo"


def test_a_name_that_had_to_change_is_valid_and_still_unique():
    one = tool_name("skill", "echo", "say hello/loud")
    other = tool_name("skill", "echo", "say hello loud")
    long = tool_name("agent", "a" * 64)
    assert VALID.match(one) and VALID.match(other) and VALID.match(long)
    assert one != other
    assert tool_name("skill", "echo", "say hello/loud") == one  # stable


def test_a_text_only_agent_gets_no_data_or_files_argument():
    properties = input_schema(["text/plain"])["properties"]
    assert set(properties) == {"text", "taskId"}


def test_json_and_image_modes_add_data_and_files():
    properties = input_schema(["text/plain", "application/json", "image/png"])["properties"]
    assert set(properties) == {"text", "data", "files", "taskId"}
    assert "image/png" in properties["files"]["description"]


def test_a_message_carries_text_data_and_files_as_parts():
    message = message_of(
        {
            "text": "hi",
            "data": {"a": 1},
            "files": [{"bytes": "aGk=", "mediaType": "text/csv", "name": "a.csv"}],
            "taskId": "t-1",
        },
        skill="echo",
    )
    assert message["parts"] == [
        {"text": "hi"},
        {"data": {"a": 1}},
        {"raw": "aGk=", "mediaType": "text/csv", "filename": "a.csv"},
    ]
    assert message["taskId"] == "t-1"
    assert message["metadata"] == {"skillId": "echo"}


@pytest.mark.parametrize(
    "arguments", [{}, {"text": ""}, {"text": 3}, {"data": []}, {"files": [{"name": "x"}]}]
)
def test_arguments_that_make_no_message_are_refused(arguments):
    with pytest.raises(BadArguments):
        message_of(arguments)


def test_a_completed_task_answers_with_its_artifacts_and_names_the_task():
    answer = answer_of(
        {
            "task": {
                "id": "t-1",
                "contextId": "c-1",
                "status": {
                    "state": "TASK_STATE_COMPLETED",
                    "message": {"parts": [{"text": "done"}]},
                },
                "artifacts": [{"parts": [{"text": "the draft"}, {"data": {"n": 1}}]}],
            }
        }
    )
    assert answer.texts == ("the draft",)
    assert answer.data == ({"n": 1},)
    assert answer.summary() == "the draft\n\n[A2A task t-1: completed]"
    assert answer.structured() == {
        "text": "the draft",
        "taskId": "t-1",
        "state": "completed",
        "data": {"n": 1},
    }
    assert not answer.is_error


def test_a_failed_task_is_an_error_with_its_status_message():
    answer = answer_of(
        {
            "task": {
                "id": "t",
                "status": {"state": "TASK_STATE_FAILED", "message": {"parts": [{"text": "no"}]}},
            }
        }
    )
    assert answer.is_error and answer.texts == ("no",)


def test_the_paths_under_mcp_name_their_subset():
    assert subset_of("/mcp") is None
    assert subset_of("/mcp/") is None
    assert subset_of("/mcp/teams/demo") == Subset("team", "demo")
    assert subset_of("/mcp/agents/echo/") == Subset("agent", "echo")
    with pytest.raises(UnknownPath):
        subset_of("/mcp/things/x")


# --- MCP tasks: an A2A task as the tasks extension's DetailedTask -------------------------

CREATED = "2026-11-29T10:00:00+00:00"


def a2a_task(state: str, parts=(), artifacts=(), message_id: str = "m-1") -> dict:
    return {
        "id": "t-1",
        "contextId": "c-1",
        "status": {
            "state": f"TASK_STATE_{state}",
            "timestamp": "2026-11-29T10:00:05Z",
            "message": {"messageId": message_id, "role": "ROLE_AGENT", "parts": list(parts)},
        },
        "artifacts": list(artifacts),
    }


def test_a_working_task_carries_the_agents_status_message():
    task = detailed_task(a2a_task("WORKING", [{"text": "step 2 of 4"}]), CREATED)

    assert task == {
        "taskId": "t-1",
        "status": "working",
        "statusMessage": "step 2 of 4",
        "createdAt": CREATED,
        "lastUpdatedAt": "2026-11-29T10:00:05Z",
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }


def test_a_completed_task_inlines_its_text_data_and_files_as_the_tool_result():
    parts = [
        {"text": "the report"},
        {"data": {"n": 1}},
        {"raw": "aGk=", "mediaType": "text/plain", "filename": "hi.txt"},
        {"url": "https://files.example/a.png", "mediaType": "image/png", "filename": "a.png"},
    ]
    task = detailed_task(a2a_task("COMPLETED", artifacts=[{"parts": parts}]), CREATED)

    content = task["result"]["content"]
    assert task["status"] == "completed"
    assert content[0] == {"type": "text", "text": "the report\n\n[A2A task t-1: completed]"}
    assert content[1]["resource"]["blob"] == "aGk="
    assert content[2]["type"] == "resource_link" and content[2]["uri"] == parts[3]["url"]
    assert content[3] == {"type": "text", "text": '{"n": 1}'}
    assert task["result"]["structuredContent"]["data"] == {"n": 1}
    assert task["result"]["_meta"]["relay/a2a"]["taskId"] == "t-1"


def test_a_waiting_task_asks_its_question_under_a_key_of_its_own():
    first = detailed_task(a2a_task("INPUT_REQUIRED", [{"text": "Which city?"}]), CREATED)
    second = detailed_task(
        a2a_task("INPUT_REQUIRED", [{"text": "Which day?"}], message_id="m-2"), CREATED
    )

    assert first["status"] == "input_required"
    ((key, request),) = first["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Which city?"
    assert request["params"]["requestedSchema"]["required"] == ["answer"]
    assert key != next(iter(second["inputRequests"]))


@pytest.mark.parametrize(("state", "status"), [("FAILED", "failed"), ("REJECTED", "failed")])
def test_a_failed_task_carries_a_json_rpc_error(state, status):
    task = detailed_task(a2a_task(state, [{"text": "no quota"}]), CREATED)

    assert task["status"] == status
    assert task["error"] == {"code": -32603, "message": "no quota"}
    assert "result" not in task


def test_a_canceled_task_is_cancelled_with_nothing_inlined():
    task = detailed_task(a2a_task("CANCELED"), CREATED)

    assert task["status"] == "cancelled"
    assert not {"result", "error", "inputRequests"} & set(task)
