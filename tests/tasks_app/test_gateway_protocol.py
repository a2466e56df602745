"""The gateway end to end: a relay of real processes (daphne and ``manage.py run_grpc``), real
a2a-sdk agents behind it, and the official a2a-sdk client in front, over JSON-RPC and HTTP+JSON
in A2A 1.0 and 0.3, and over gRPC (1.0).

Two axes: the client's binding and version, and the agent's: every case runs in front of
a2a-sdk agents served over JSON-RPC (and HTTP+JSON), and its 1.0 cases also in front of the same
agents served over gRPC only (``tests.grpc_agents``; ids ending ``-grpc-agent``).
"""

from __future__ import annotations

import asyncio
import queue
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    MethodNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from routing.demo.agents import WRITER, app_factory, build_agent_app
from tests.agents import (
    ASKS_FOR_INPUT,
    CHUNKED_STREAMER,
    CHUNKS,
    NeverFinishes,
    chunked_streaming_agent,
    echo_variant,
    input_required_agent,
    never_finishing_agent,
    task_spec,
    v0_3_only_agent,
    v1_only_agent,
)
from tests.grpc_agents import grpc_agent
from tests.live import (
    FREE_PORT,
    GRPC_PROTOCOL,
    PROTOCOLS,
    Recording,
    eventually,
    gated_agent,
    gated_spec,
    new_gate,
)

RELAY_ENV = {"RELAY_GRPC_PORT": FREE_PORT}
STREAM_SECONDS = 15.0
V1_PROTOCOLS = [p for p in PROTOCOLS if p[1] == "1.0"]
V1_PROTOCOL_IDS = [f"{binding}-{version}" for binding, version in V1_PROTOCOLS]

JSONRPC_AGENT, GRPC_AGENT = "jsonrpc-agent", "grpc-agent"
"""The agent axis: the a2a-sdk agent behind the relay served over JSON-RPC (and HTTP+JSON, 1.0
and 0.3), or the same agent served over gRPC only (registered as ``grpc-<name>``)."""


def cases(client_protocols: list[tuple[str, str]], *agents: str) -> list[Any]:
    """(binding, version, upstream[, agent]) for every client protocol of ``client_protocols``
    and gRPC, in front of the JSON-RPC agents (ids as before the gRPC axes: ``JSONRPC-1.0``),
    and for every 1.0 one in front of the gRPC agents (``JSONRPC-1.0-grpc-agent``). ``agents``
    (when given) are more agents in front of the JSON-RPC ones: the first alone has a gRPC
    twin."""
    rows = []
    clients = [*client_protocols, GRPC_PROTOCOL]
    for upstream in (JSONRPC_AGENT, GRPC_AGENT):
        for binding, version in clients:
            if upstream == GRPC_AGENT and version != "1.0":
                continue
            suffix = "" if upstream == JSONRPC_AGENT else f"-{GRPC_AGENT}"
            for agent in agents[: 1 if upstream == GRPC_AGENT else None] or [None]:
                values = (binding, version, upstream) + ((agent,) if agent else ())
                prefix = f"{agent}-" if agent else ""
                rows.append(pytest.param(*values, id=f"{prefix}{binding}-{version}{suffix}"))
    return rows


protocols = pytest.mark.parametrize(("binding", "version", "upstream"), cases(PROTOCOLS))
v1_protocols = pytest.mark.parametrize(("binding", "version", "upstream"), cases(V1_PROTOCOLS))


def at(agent: str, upstream: str) -> str:
    """The id of ``agent`` served over the upstream binding of the case."""
    return agent if upstream == JSONRPC_AGENT else f"grpc-{agent}"


def saw_cancel(agent: Recording) -> bool:
    return any(
        b"CancelTask" in r.body or b"tasks/cancel" in r.body or r.path.endswith(":cancel")
        for r in agent.posts()
    )


NEVER = Recording(never_finishing_agent)
GRPC_CANCELED: list[str] = []
"""The tasks the gRPC ``never`` agent was told to cancel."""


class RecordedNever(NeverFinishes):
    async def cancel(self, context, event_queue) -> None:
        GRPC_CANCELED.append(context.task_id or "")
        await super().cancel(context, event_queue)


def told_cancel(upstream: str) -> bool:
    return saw_cancel(NEVER) if upstream == JSONRPC_AGENT else bool(GRPC_CANCELED)


@pytest.fixture(scope="module", autouse=True)
def agents(relay):
    relay.serve_agent("echo-v1", v1_only_agent)
    relay.serve_agent("echo-v03", v0_3_only_agent)
    relay.serve_agent("chunked", chunked_streaming_agent)
    relay.serve_agent(
        "chunked-v03",
        lambda url: build_agent_app(CHUNKED_STREAMER, base_url=url, versions=("0.3",)),
    )
    relay.serve_agent("asks", input_required_agent)
    relay.serve_agent("never", NEVER)
    relay.serve_agent("writer", app_factory(WRITER))
    relay.serve_agent("gated", gated_agent)
    never = task_spec("never-finishes", "Never Finishes", "Works until cancelled.", RecordedNever)
    specs = {
        "echo-v1": echo_variant("echo-v1", "Echo 1.0 Agent"),
        "chunked": CHUNKED_STREAMER,
        "asks": ASKS_FOR_INPUT,
        "never": never,
        "writer": WRITER,
        "gated": gated_spec(),
    }
    with ExitStack() as stack:
        for name, spec in specs.items():
            relay.register(stack.enter_context(grpc_agent(spec)).base_url, at(name, GRPC_AGENT))
        stack.enter_context(relay.grpc_server())
        yield


# --- helpers -----------------------------------------------------------------------------


def user_message(text: str, **fields: Any) -> Message:
    return Message(
        message_id=f"m-{uuid.uuid4().hex[:12]}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        **fields,
    )


def send_request(
    text: str, *, return_immediately: bool = False, **fields: Any
) -> SendMessageRequest:
    request = SendMessageRequest(message=user_message(text, **fields))
    if return_immediately:
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    return request


def kind(event: StreamResponse) -> str:
    return event.WhichOneof("payload")


async def collect(stream, *, limit: int = 50) -> list[StreamResponse]:
    """All events of a stream, which must close within STREAM_SECONDS."""
    events = []
    async with asyncio.timeout(STREAM_SECONDS):
        async for event in stream:
            events.append(event)
            assert len(events) <= limit, "the stream does not close"
    return events


async def only(stream) -> StreamResponse:
    events = await collect(stream)
    assert len(events) == 1, [kind(e) for e in events]
    return events[0]


def text_of(parts) -> str:
    return "".join(part.text for part in parts)


def task_id_of(event: StreamResponse) -> str:
    return event.task.id if kind(event) == "task" else getattr(event, kind(event)).task_id


async def next_event(iterator) -> StreamResponse:
    async with asyncio.timeout(STREAM_SECONDS):
        return await anext(iterator)


@dataclass
class Folded:
    """What a client folding a task stream knows at its end."""

    state: int = 0
    status_text: str = ""
    artifacts: dict[str, str] = field(default_factory=dict)


def fold(events: list[StreamResponse]) -> Folded:
    folded = Folded()
    for event in events:
        if kind(event) == "task":
            folded.state = event.task.status.state
            folded.status_text = text_of(event.task.status.message.parts)
            folded.artifacts = {a.name: text_of(a.parts) for a in event.task.artifacts}
        elif kind(event) == "status_update":
            folded.state = event.status_update.status.state
            folded.status_text = text_of(event.status_update.status.message.parts)
        elif kind(event) == "artifact_update":
            update = event.artifact_update
            before = folded.artifacts.get(update.artifact.name, "") if update.append else ""
            folded.artifacts[update.artifact.name] = before + text_of(update.artifact.parts)
    return folded


def refused(error: type[A2AError], binding: str, version: str, http_status: int):
    """What the SDK client raises for an A2A error the relay answers. Its 0.3 REST client
    reads no error body (it looks for a ``type`` member neither SDK 1.x servers nor the relay
    send), only the status: 404 as MethodNotFoundError, anything else as A2AClientError."""
    if (binding, version) == ("HTTP+JSON", "0.3"):
        if http_status == 404:
            return pytest.raises(MethodNotFoundError)
        return pytest.raises(A2AClientError, match=f"HTTP Error {http_status}")
    return pytest.raises(error)


async def wait_for_state(client, task_id: str, state: int) -> Any:
    async def reached():
        task = await client.get_task(GetTaskRequest(id=task_id))
        return task if task.status.state == state else None

    return await eventually(reached, f"task {task_id} reaching {TaskState.Name(state)}")


# --- messages across versions ------------------------------------------------------------


@pytest.mark.parametrize(
    ("binding", "version", "upstream", "agent"), cases(PROTOCOLS, "echo-v1", "echo-v03")
)
@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
async def test_a_message_reply_crosses_protocol_versions(
    relay, binding, version, upstream, agent, streaming
):
    agent = at(agent, upstream)
    async with relay.client(agent, binding, version, streaming=streaming) as client:
        reply = await only(
            client.send_message(send_request(f"hi {agent}", context_id="conversation-7"))
        )
    assert kind(reply) == "message"
    assert reply.message.role == Role.ROLE_AGENT
    assert text_of(reply.message.parts) == f"hi {agent}"
    assert reply.message.context_id == "conversation-7"


@protocols
async def test_blocking_send_returns_the_finished_task(relay, binding, version, upstream):
    async with relay.client(at("writer", upstream), binding, version, streaming=False) as client:
        event = await only(client.send_message(send_request("notes on tides")))
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.context_id
    assert [a.name for a in task.artifacts] == ["draft"]
    assert "notes on tides" in text_of(task.artifacts[0].parts)
    assert text_of(task.history[0].parts) == "notes on tides"
    assert task.history[0].role == Role.ROLE_USER


@protocols
async def test_return_immediately_answers_before_the_work_is_done(
    relay, binding, version, upstream
):
    gate_name, gate = new_gate()
    async with relay.client(at("gated", upstream), binding, version, streaming=False) as client:
        event = await only(client.send_message(send_request(gate_name, return_immediately=True)))
        assert kind(event) == "task"
        assert event.task.status.state == TaskState.TASK_STATE_SUBMITTED
        # Regression: the background work died with the request (its sync_to_async calls went
        # to the request's executor, gone once it answered), so the task stayed submitted.
        await wait_for_state(client, event.task.id, TaskState.TASK_STATE_WORKING)
        gate.put("done")
        gate.put(None)
        task = await wait_for_state(client, event.task.id, TaskState.TASK_STATE_COMPLETED)
    assert text_of(task.artifacts[0].parts) == "done"


# --- streaming ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("binding", "version", "upstream", "agent"), cases(PROTOCOLS, "chunked", "chunked-v03")
)
async def test_a_stream_starts_with_the_task_and_carries_the_chunks_in_order(
    relay, binding, version, upstream, agent
):
    async with relay.client(at(agent, upstream), binding, version) as client:
        events = await collect(client.send_message(send_request("tell me a story")))
    assert kind(events[0]) == "task"
    task_id = events[0].task.id
    assert all(task_id_of(event) == task_id for event in events)
    assert kind(events[-1]) == "status_update"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    # The first event is the task as it is then; it may already hold the first chunks.
    before = [text_of(a.parts) for a in events[0].task.artifacts]
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert chunks, "no artifact chunk was streamed"
    assert "".join(before) + "".join(text_of(c.artifact.parts) for c in chunks) == "".join(CHUNKS)
    first_streamed = len(CHUNKS) - len(chunks)
    assert [c.append for c in chunks] == [i > 0 for i in range(first_streamed, len(CHUNKS))]
    assert [c.last_chunk for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert {c.artifact.artifact_id for c in chunks} == {"story"}


@protocols
async def test_input_required_closes_the_stream_and_the_answer_streams_to_completion(
    relay, binding, version, upstream
):
    async with relay.client(at("asks", upstream), binding, version) as client:
        events = await collect(client.send_message(send_request("greet someone")))
        assert kind(events[0]) == "task"
        asked = fold(events)
        assert asked.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert asked.status_text == "What name should I greet?"
        task_id, context_id = events[0].task.id, events[0].task.context_id

        # Regression: the agent's first answer to the resumed task is an artifact, which the
        # relay took as final while the task still read input-required, closing the stream.
        follow_up = await collect(
            client.send_message(send_request("Ada", task_id=task_id, context_id=context_id))
        )
    assert kind(follow_up[0]) == "task"
    assert {task_id_of(event) for event in follow_up} == {task_id}
    answered = fold(follow_up)
    assert answered.state == TaskState.TASK_STATE_COMPLETED
    assert answered.artifacts == {"greeting": "Hello, Ada!"}


@protocols
async def test_blocking_send_returns_at_input_required_and_resumes_the_same_task(
    relay, binding, version, upstream
):
    async with relay.client(at("asks", upstream), binding, version, streaming=False) as client:
        first = (await only(client.send_message(send_request("greet someone")))).task
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        second = (await only(client.send_message(send_request("Grace", task_id=first.id)))).task
    assert second.id == first.id
    assert second.context_id == first.context_id
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(second.artifacts[0].parts) == "Hello, Grace!"
    assert [text_of(m.parts) for m in second.history if m.role == Role.ROLE_USER] == [
        "greet someone",
        "Grace",
    ]


# --- GetTask ------------------------------------------------------------------------------


@protocols
async def test_get_task_applies_history_length(relay, binding, version, upstream):
    async with relay.client(at("asks", upstream), binding, version, streaming=False) as client:
        first = (await only(client.send_message(send_request("greet someone")))).task
        await only(client.send_message(send_request("Lin", task_id=first.id)))
        full = await client.get_task(GetTaskRequest(id=first.id))
        none = await client.get_task(GetTaskRequest(id=first.id, history_length=0))
        one = await client.get_task(GetTaskRequest(id=first.id, history_length=1))
        two = await client.get_task(GetTaskRequest(id=first.id, history_length=2))
    assert len(full.history) >= 3
    if version == "1.0":
        assert len(none.history) == 0
    else:
        # 0.3's historyLength 0 means "no limit" (see tasks_app.protocol.convert).
        assert none.history == full.history
    assert [m.message_id for m in one.history] == [full.history[-1].message_id]
    assert [m.message_id for m in two.history] == [m.message_id for m in full.history[-2:]]
    assert full.status.state == TaskState.TASK_STATE_COMPLETED


@protocols
async def test_another_key_cannot_see_a_task(relay, other_key, binding, version, upstream):
    async with relay.client(at("writer", upstream), binding, version, streaming=False) as client:
        task = (await only(client.send_message(send_request("mine")))).task
    async with relay.client(at("writer", upstream), binding, version, key=other_key) as stranger:
        with refused(TaskNotFoundError, binding, version, 404):
            await stranger.get_task(GetTaskRequest(id=task.id))
        with refused(TaskNotFoundError, binding, version, 404):
            await stranger.cancel_task(CancelTaskRequest(id=task.id))
        with refused(TaskNotFoundError, binding, version, 404):
            await collect(stranger.subscribe(SubscribeToTaskRequest(id=task.id)))
        with refused(TaskNotFoundError, binding, version, 404):
            await stranger.send_message(send_request("me too", task_id=task.id)).__anext__()


# --- CancelTask ---------------------------------------------------------------------------


@protocols
async def test_cancel_mid_flight_cancels_upstream_and_ends_the_open_stream(
    relay, binding, version, upstream
):
    async with relay.client(at("never", upstream), binding, version) as client:
        stream = client.send_message(send_request("work forever"))
        first = await next_event(stream)
        task_id = task_id_of(first)
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = await collect(stream)
        assert kind(rest[-1]) == "status_update"
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == TaskState.TASK_STATE_CANCELED
        # Canceled at the agent too: the relay would say so in the status otherwise.
        assert "could not be told" not in text_of(stored.status.message.parts)
        # 409 on the 0.3 REST surface, as the 0.3 SDK server answers; 400 in 1.0.
        with refused(TaskNotCancelableError, binding, version, 409 if version == "0.3" else 400):
            await client.cancel_task(CancelTaskRequest(id=task_id))
    assert told_cancel(upstream)


# --- SubscribeToTask / tasks/resubscribe --------------------------------------------------


async def start_gated(
    relay, binding: str, version: str, upstream: str = JSONRPC_AGENT
) -> tuple[str, queue.Queue]:
    """A gated task, started with returnImmediately and seen working; returns its id and
    its gate."""
    gate_name, gate = new_gate()
    async with relay.client(at("gated", upstream), binding, version, streaming=False) as client:
        started = await only(client.send_message(send_request(gate_name, return_immediately=True)))
        await wait_for_state(client, started.task.id, TaskState.TASK_STATE_WORKING)
    return started.task.id, gate


@protocols
async def test_a_late_subscriber_gets_the_current_task_then_live_events(
    relay, binding, version, upstream
):
    task_id, gate = await start_gated(relay, binding, version, upstream)
    gate.put("early ")
    async with relay.client(at("gated", upstream), binding, version) as client:

        async def has_early_chunk():
            task = await client.get_task(GetTaskRequest(id=task_id))
            return task.artifacts and text_of(task.artifacts[0].parts) == "early "

        await eventually(has_early_chunk, "the first chunk reaching the relay")
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        current = await next_event(subscription)
        assert kind(current) == "task"
        assert current.task.id == task_id
        assert current.task.status.state == TaskState.TASK_STATE_WORKING
        assert text_of(current.task.artifacts[0].parts) == "early "
        gate.put("late")
        gate.put(None)
        live = await collect(subscription)
    assert [kind(e) for e in live] == ["artifact_update", "status_update"]
    assert text_of(live[0].artifact_update.artifact.parts) == "late"
    assert live[0].artifact_update.append
    assert live[1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@protocols
async def test_two_subscribers_get_the_same_events_in_the_same_order(
    relay, binding, version, upstream
):
    task_id, gate = await start_gated(relay, binding, version, upstream)
    gated = at("gated", upstream)
    async with (
        relay.client(gated, binding, version) as one,
        relay.client(gated, binding, version) as two,
        relay.client(gated, binding, version) as three,
    ):
        first = one.subscribe(SubscribeToTaskRequest(id=task_id))
        second = two.subscribe(SubscribeToTaskRequest(id=task_id))
        leaving = three.subscribe(SubscribeToTaskRequest(id=task_id))
        # Each has its snapshot, so each is in the task's group before any chunk comes.
        assert kind(await next_event(first)) == "task"
        assert kind(await next_event(second)) == "task"
        assert kind(await next_event(leaving)) == "task"
        await leaving.aclose()  # one subscriber leaving changes nothing for the others
        for chunk in ("a", "b", "c", "d"):
            gate.put(chunk)
        gate.put(None)
        got_one, got_two = await asyncio.gather(collect(first), collect(second))
    assert [text_of(e.artifact_update.artifact.parts) for e in got_one[:-1]] == list("abcd")
    assert got_one == got_two
    assert got_one[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@protocols
async def test_subscribing_to_a_finished_task_is_unsupported(relay, binding, version, upstream):
    async with relay.client(at("writer", upstream), binding, version, streaming=False) as client:
        task = (await only(client.send_message(send_request("done soon")))).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    async with relay.client(at("writer", upstream), binding, version) as client:
        with refused(UnsupportedOperationError, binding, version, 400):
            await collect(client.subscribe(SubscribeToTaskRequest(id=task.id)))


@protocols
async def test_a_client_leaving_mid_stream_does_not_stop_the_task(
    relay, binding, version, upstream
):
    gate_name, gate = new_gate()
    async with relay.client(at("gated", upstream), binding, version) as client:
        stream = client.send_message(send_request(gate_name))
        task_id = task_id_of(await next_event(stream))
        await stream.aclose()
    # A new connection: the first one is gone with its client.
    async with relay.client(at("gated", upstream), binding, version) as client:
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
        gate.put("still here")
        gate.put(None)
        task = await wait_for_state(client, task_id, TaskState.TASK_STATE_COMPLETED)
    assert text_of(task.artifacts[0].parts) == "still here"


# --- ListTasks (1.0 bindings; 0.3 has no ListTasks in JSON-RPC and none in the SDK's REST) --


@pytest.fixture(scope="module")
def other_key(relay):
    return relay.keys[1]


@pytest.fixture(scope="module")
def lister(relay):
    """A key of its own with, per upstream binding, four tasks, oldest first: three completed
    writer tasks (the first two in one context) and one input-required task."""
    key = relay.keys[2]

    async def make(upstream: str) -> list[Any]:
        tasks = []
        writer, asks = at("writer", upstream), at("asks", upstream)
        async with relay.client(writer, "JSONRPC", "1.0", key=key, streaming=False) as client:
            for text, context in (
                ("one", "ctx-list-a"),
                ("two", "ctx-list-a"),
                ("three", "ctx-list-b"),
            ):
                tasks.append(
                    (await only(client.send_message(send_request(text, context_id=context)))).task
                )
        async with relay.client(asks, "JSONRPC", "1.0", key=key, streaming=False) as client:
            tasks.append((await only(client.send_message(send_request("greet")))).task)
        return tasks

    return key, {upstream: asyncio.run(make(upstream)) for upstream in (JSONRPC_AGENT, GRPC_AGENT)}


@v1_protocols
async def test_list_tasks_pages_the_callers_tasks_newest_first(
    relay, lister, binding, version, upstream
):
    key, tasks = lister[0], lister[1][upstream]
    # Listed through an agent's URL: that agent's tasks (the writer's three).
    newest_first = [task.id for task in reversed(tasks[:3])]
    async with relay.client(at("writer", upstream), binding, version, key=key) as client:
        everything = await client.list_tasks(ListTasksRequest())
        page_one = await client.list_tasks(ListTasksRequest(page_size=2))
        page_two = await client.list_tasks(
            ListTasksRequest(page_size=2, page_token=page_one.next_page_token)
        )
    assert [t.id for t in everything.tasks] == newest_first
    assert everything.total_size == 3
    assert everything.next_page_token == ""
    assert [t.id for t in page_one.tasks] == newest_first[:2]
    assert page_one.page_size == 2
    assert page_one.total_size == 3
    assert page_one.next_page_token
    assert [t.id for t in page_two.tasks] == newest_first[2:]
    assert page_two.next_page_token == ""


@v1_protocols
async def test_list_tasks_filters_and_omits_artifacts_unless_asked(
    relay, lister, binding, version, upstream
):
    key, tasks = lister[0], lister[1][upstream]
    async with relay.client(at("writer", upstream), binding, version, key=key) as client:
        in_context = await client.list_tasks(ListTasksRequest(context_id="ctx-list-a"))
        completed = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
        with_artifacts = await client.list_tasks(ListTasksRequest(include_artifacts=True))
    assert [t.id for t in in_context.tasks] == [tasks[1].id, tasks[0].id]
    assert in_context.total_size == 2
    assert len(completed.tasks) == 3
    assert all(not t.artifacts for t in in_context.tasks)
    assert all(t.artifacts[0].name == "draft" for t in with_artifacts.tasks)
    async with relay.client(at("asks", upstream), binding, version, key=key) as client:
        waiting = await client.list_tasks(
            ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED)
        )
        done = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
    assert [t.id for t in waiting.tasks] == [tasks[3].id]
    assert list(done.tasks) == []


@v1_protocols
@pytest.mark.parametrize("page_size", [101, -1])
async def test_list_tasks_refuses_a_page_size_out_of_range(
    relay, binding, version, upstream, page_size
):
    async with relay.client(at("writer", upstream), binding, version) as client:
        with pytest.raises(InvalidParamsError):
            await client.list_tasks(ListTasksRequest(page_size=page_size))


@v1_protocols
async def test_list_tasks_shows_another_key_nothing(
    relay, lister, other_key, binding, version, upstream
):
    async with relay.client(at("writer", upstream), binding, version, key=other_key) as client:
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-list-a"))
    assert list(listed.tasks) == []
    assert listed.total_size == 0
    assert listed.next_page_token == ""


# --- the card the relay serves for an agent -----------------------------------------------


def test_the_agent_card_points_at_the_relay_and_can_be_cached(relay):
    url = f"{relay.agent_url('chunked')}.well-known/agent-card.json"
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200
    card = response.json()
    interfaces = {
        (i["protocolBinding"], i["protocolVersion"]): i["url"] for i in card["supportedInterfaces"]
    }
    assert set(interfaces) == {*PROTOCOLS, GRPC_PROTOCOL}
    grpc_address = interfaces.pop(GRPC_PROTOCOL)
    assert grpc_address == f"http://127.0.0.1:{relay.env['RELAY_GRPC_PORT']}"
    assert all(u.rstrip("/") == relay.agent_url("chunked").rstrip("/") for u in interfaces.values())
    assert card["url"].rstrip("/") == relay.agent_url("chunked").rstrip("/")
    assert card["capabilities"]["streaming"] is True
    assert "max-age" in response.headers["Cache-Control"]
    etag = response.headers["ETag"]
    again = httpx.get(url, headers={"If-None-Match": etag}, timeout=10)
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["ETag"] == etag
    changed = httpx.get(url, headers={"If-None-Match": 'W/"something-else"'}, timeout=10)
    assert changed.status_code == 200
