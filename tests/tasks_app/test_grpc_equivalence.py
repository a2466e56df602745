"""The three A2A 1.0 bindings are one gateway: the same operations through the relay over
JSON-RPC, HTTP+JSON and gRPC, with the official a2a-sdk client, give the same results (the
ids and timestamps each run makes aside) and the same errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from routing.demo.agents import WRITER, app_factory
from tests.agents import chunked_streaming_agent, input_required_agent
from tests.live import FREE_PORT
from tests.tasks_app.test_gateway_protocol import (
    NEVER,
    collect,
    next_event,
    only,
    send_request,
    task_id_of,
    wait_for_state,
)

RELAY_ENV = {"RELAY_GRPC_PORT": FREE_PORT}
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
RUN_SPECIFIC = {
    "id",
    "taskId",
    "contextId",
    "messageId",
    "artifactId",
    "timestamp",
    "nextPageToken",
}


@pytest.fixture(scope="module", autouse=True)
def agents(relay):
    relay.serve_agent("writer", app_factory(WRITER))
    relay.serve_agent("asks", input_required_agent)
    relay.serve_agent("chunked", chunked_streaming_agent)
    relay.serve_agent("never", NEVER)
    with relay.grpc_server():
        yield


def normalized(value: Any, seen: dict[str, str]) -> Any:
    """``value`` with each run-specific string replaced by its order of first appearance."""
    if isinstance(value, dict):
        return {
            key: (
                seen.setdefault(item, f"<{len(seen)}>")
                if key in RUN_SPECIFIC and isinstance(item, str)
                else normalized(item, seen)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [normalized(item, seen) for item in value]
    return value


async def run_script(relay, binding: str) -> list[Any]:
    """The same operations over one binding; each outcome as 1.0 JSON or an error class."""
    outcomes: list[Any] = []
    key = relay.create_key(f"equivalence {binding}")
    context = f"ctx-{uuid.uuid4().hex[:8]}"

    async def record(operation) -> Any:
        try:
            answer = await operation
        except Exception as error:  # noqa: BLE001 - the outcome is what failed
            outcomes.append({"error": type(error).__name__})
            return None
        outcomes.append(MessageToDict(answer) if answer is not None else None)
        return answer

    async with relay.client("writer", binding, "1.0", key=key, streaming=False) as client:
        sent = await record(only(client.send_message(send_request("tides", context_id=context))))
        task_id = sent.task.id
        await record(client.get_task(GetTaskRequest(id=task_id, history_length=1)))
        await record(client.list_tasks(ListTasksRequest(context_id=context)))
        await record(client.get_task(GetTaskRequest(id="no-such-task")))
        await record(client.cancel_task(CancelTaskRequest(id=task_id)))
    async with relay.client("writer", binding, "1.0", key=key) as client:
        await record(collect(client.subscribe(SubscribeToTaskRequest(id=task_id))))
    async with relay.client("asks", binding, "1.0", key=key, streaming=False) as client:
        asked = await record(only(client.send_message(send_request("greet someone"))))
        config = TaskPushNotificationConfig(
            task_id=asked.task.id, id="hook", url="http://127.0.0.1:9/push"
        )
        await record(client.create_task_push_notification_config(config))
        await record(
            client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=asked.task.id, id="hook")
            )
        )
        await record(
            client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=asked.task.id)
            )
        )
        await record(
            client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=asked.task.id, id="hook")
            )
        )
        await record(only(client.send_message(send_request("Ada", task_id=asked.task.id))))
    async with relay.client("chunked", binding, "1.0", key=key) as client:
        events = await collect(client.send_message(send_request("a story")))
        # Chunks may be folded into the first event: only the end and the story count.
        outcomes.append(MessageToDict(events[-1]))
    async with relay.client("never", binding, "1.0", key=key) as client:
        stream = client.send_message(send_request("forever"))
        never_id = task_id_of(await next_event(stream))
        await wait_for_state(client, never_id, TaskState.TASK_STATE_WORKING)
        await record(client.cancel_task(CancelTaskRequest(id=never_id)))
        await collect(stream)
        await record(client.cancel_task(CancelTaskRequest(id=never_id)))
    return outcomes


async def test_the_three_bindings_give_the_same_results(relay):
    results = {}
    for binding in BINDINGS:
        results[binding] = normalized(await run_script(relay, binding), {})
    reference = results["JSONRPC"]
    assert reference[3] == {"error": "TaskNotFoundError"}
    assert reference[4] == {"error": "TaskNotCancelableError"}
    assert reference[5] == {"error": "UnsupportedOperationError"}
    assert reference[-1] == {"error": "TaskNotCancelableError"}
    for binding in ("HTTP+JSON", "GRPC"):
        for index, (expected, got) in enumerate(zip(reference, results[binding], strict=True)):
            assert got == expected, (binding, index)
