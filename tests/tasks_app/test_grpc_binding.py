"""The gRPC binding end to end: a relay of real processes (daphne and ``manage.py run_grpc``),
real a2a-sdk agents behind it served over JSON-RPC, and the official a2a-sdk gRPC client in
front, addressed by the ``GRPC`` interface the relay's cards list (its ``tenant`` names the
agent or team)."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
    a2a_pb2_grpc,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.rpc import error_details_pb2

from routing.demo.agents import ECHO, WRITER, Skill, app_factory, build_agent_app
from tests.agents import MIRROR, chunked_streaming_agent, input_required_agent, v1_only_agent
from tests.live import FREE_PORT, Recording, gated_agent, manage, new_gate, sdk_client
from tests.tasks_app.test_gateway_protocol import (
    NEVER,
    collect,
    fold,
    kind,
    next_event,
    only,
    saw_cancel,
    send_request,
    task_id_of,
    text_of,
    wait_for_state,
)

RELAY_ENV = {"RELAY_GRPC_PORT": FREE_PORT, "RELAY_GRPC_METRICS_PORT": FREE_PORT}
GRPC = "GRPC"
MIRRORED = Recording(lambda url: build_agent_app(MIRROR, base_url=url, versions=("1.0",)))
INSIDER_SKILL = Skill(id="insider", name="Insider", description="For known callers.", tags=("x",))


@pytest.fixture(scope="module", autouse=True)
def grpc_relay(relay):
    """The relay's gRPC server, and the agents and team the tests call through it."""
    relay.serve_agent("echo-v1", v1_only_agent)
    relay.serve_agent("writer", app_factory(WRITER))
    relay.serve_agent("chunked", chunked_streaming_agent)
    relay.serve_agent("asks", input_required_agent)
    relay.serve_agent("never", NEVER)
    relay.serve_agent("gated", gated_agent)
    relay.serve_agent("mirror", MIRRORED)
    relay.serve_agent(
        "insider",
        lambda url: build_agent_app(ECHO, base_url=url, extended_skills=(INSIDER_SKILL,)),
    )
    manage(
        relay.env,
        "shell",
        "-c",
        "from registry.teams import team_create; "
        "team_create(team_id='writers', name='Writers', members=['writer', 'echo-v1'], "
        "default_agent='writer')",
    )
    with relay.grpc_server() as address:
        yield address


def grpc_client(relay, agent_id: str, **options):
    return relay.client(agent_id, GRPC, "1.0", **options)


def team_card(relay, team_id: str) -> dict:
    response = httpx.get(f"{relay.url}/a2a/teams/{team_id}/.well-known/agent-card.json", timeout=10)
    response.raise_for_status()
    return response.json()


async def raw_call(address: str, method: str, request, metadata=()):
    """A call with the generated stub, for what the SDK client hides: (response or None,
    the AioRpcError or None)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            return await getattr(stub, method)(request, metadata=metadata, timeout=20), None
        except grpc.aio.AioRpcError as error:
            return None, error


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    from a2a.utils.grpc_status import status_from_call

    status = status_from_call(error)
    assert status is not None, "no google.rpc.Status in the trailers"
    assert status.code == error.code().value[0]
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo in the status")


# --- the cards ----------------------------------------------------------------------------


def test_every_card_lists_the_grpc_interface_with_its_target_as_tenant(relay, grpc_relay):
    agent = relay.card("writer")
    team = team_card(relay, "writers")
    for card, tenant in ((agent, "agents/writer"), (team, "teams/writers")):
        grpc_interfaces = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == GRPC]
        assert grpc_interfaces == [
            {
                "url": f"http://{grpc_relay}",
                "protocolBinding": GRPC,
                "protocolVersion": "1.0",
                "tenant": tenant,
            }
        ]
        # Still the HTTP bindings first: clients that prefer the card's order keep them.
        assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"


async def test_the_extended_card_over_grpc_is_the_relays_with_both_addresses(relay, grpc_relay):
    """GetExtendedAgentCard over gRPC: the agent's extended card as the relay serves it, its
    HTTP interfaces at daphne's address (RELAY_PUBLIC_URL of the gRPC process) and its gRPC
    interface with the agent as tenant; no address of the agent's."""
    async with grpc_client(relay, "insider", streaming=False) as client:
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert [skill.id for skill in card.skills][-1] == "insider"
    interfaces = {(i.protocol_binding, i.url, i.tenant) for i in card.supported_interfaces}
    http = f"{relay.url}/a2a/agents/insider/"
    assert ("JSONRPC", http, "") in interfaces
    assert (GRPC, f"http://{grpc_relay}", "agents/insider") in interfaces
    assert relay.agents["insider"].rstrip("/") not in str(card)


# --- messages, streams, tasks -------------------------------------------------------------


async def test_send_returns_the_finished_task_which_every_binding_then_sees(relay):
    async with grpc_client(relay, "writer", streaming=False) as client:
        task = (await only(client.send_message(send_request("notes on tides")))).task
        again = await client.get_task(GetTaskRequest(id=task.id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.name for a in task.artifacts] == ["draft"]
    assert "notes on tides" in text_of(task.artifacts[0].parts)
    assert again.id == task.id and again.status.state == TaskState.TASK_STATE_COMPLETED
    # One gateway: the task the gRPC call opened is the one JSON-RPC reads.
    async with relay.client("writer", "JSONRPC", "1.0", streaming=False) as client:
        seen = await client.get_task(GetTaskRequest(id=task.id))
    assert seen.id == task.id
    assert text_of(seen.artifacts[0].parts) == text_of(task.artifacts[0].parts)


async def test_a_message_reply_comes_back_as_a_message(relay):
    async with grpc_client(relay, "echo-v1", streaming=False) as client:
        reply = await only(client.send_message(send_request("hi there", context_id="ctx-9")))
    assert kind(reply) == "message"
    assert text_of(reply.message.parts) == "hi there"
    assert reply.message.context_id == "ctx-9"


async def test_a_stream_carries_the_task_then_the_chunks_in_order(relay):
    async with grpc_client(relay, "chunked") as client:
        events = await collect(client.send_message(send_request("tell me a story")))
    assert kind(events[0]) == "task"
    assert {task_id_of(event) for event in events} == {events[0].task.id}
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert fold(events).artifacts == {"story": "Once upon a time."}


async def test_input_required_then_the_answer_resumes_the_same_task(relay):
    async with grpc_client(relay, "asks") as client:
        asked = await collect(client.send_message(send_request("greet someone")))
        assert fold(asked).state == TaskState.TASK_STATE_INPUT_REQUIRED
        task_id = asked[0].task.id
        answered = await collect(client.send_message(send_request("Ada", task_id=task_id)))
        full = await client.get_task(GetTaskRequest(id=task_id))
        one = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        none = await client.get_task(GetTaskRequest(id=task_id, history_length=0))
    assert {task_id_of(event) for event in answered} == {task_id}
    assert fold(answered).artifacts == {"greeting": "Hello, Ada!"}
    assert len(full.history) >= 3
    assert [m.message_id for m in one.history] == [full.history[-1].message_id]
    assert len(none.history) == 0


async def test_list_tasks_lists_the_callers_tasks_of_the_target(relay):
    key = relay.keys[2]
    async with grpc_client(relay, "writer", key=key, streaming=False) as client:
        made = [
            (await only(client.send_message(send_request(t, context_id="ctx-grpc")))).task.id
            for t in ("one", "two", "three")
        ]
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-grpc"))
        page = await client.list_tasks(ListTasksRequest(context_id="ctx-grpc", page_size=2))
        rest = await client.list_tasks(
            ListTasksRequest(context_id="ctx-grpc", page_size=2, page_token=page.next_page_token)
        )
        with pytest.raises(InvalidParamsError):
            await client.list_tasks(ListTasksRequest(page_size=101))
    assert [t.id for t in listed.tasks] == made[::-1]
    assert listed.total_size == 3
    assert [t.id for t in page.tasks] + [t.id for t in rest.tasks] == made[::-1]
    assert rest.next_page_token == ""
    async with grpc_client(relay, "writer", key=relay.keys[1]) as stranger:
        assert (
            list((await stranger.list_tasks(ListTasksRequest(context_id="ctx-grpc"))).tasks) == []
        )


async def test_cancel_mid_flight_ends_the_stream_and_a_second_cancel_is_refused(relay):
    async with grpc_client(relay, "never") as client:
        stream = client.send_message(send_request("work forever"))
        task_id = task_id_of(await next_event(stream))
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = await collect(stream)
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
    assert saw_cancel(NEVER)


async def test_a_late_subscriber_gets_the_task_then_live_events(relay):
    gate_name, gate = new_gate()
    async with grpc_client(relay, "gated", streaming=False) as client:
        started = await only(client.send_message(send_request(gate_name, return_immediately=True)))
        assert started.task.status.state == TaskState.TASK_STATE_SUBMITTED
        task_id = task_id_of(started)
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
    async with grpc_client(relay, "gated") as client:
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        current = await next_event(subscription)
        assert kind(current) == "task" and current.task.id == task_id
        gate.put("late")
        gate.put(None)
        live = await collect(subscription)
        finished = await client.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(UnsupportedOperationError):
            await collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
    assert [kind(e) for e in live] == ["artifact_update", "status_update"]
    assert text_of(live[0].artifact_update.artifact.parts) == "late"
    assert live[1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_task_daphne_drives_is_followed_live_over_grpc(relay):
    gate_name, gate = new_gate()
    async with relay.client("gated", "JSONRPC", "1.0", streaming=False) as client:
        started = await only(client.send_message(send_request(gate_name, return_immediately=True)))
        task_id = task_id_of(started)
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
    async with grpc_client(relay, "gated") as client:
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        assert kind(await next_event(subscription)) == "task"
        gate.put("from the other process")
        gate.put(None)
        live = await collect(subscription)
    assert text_of(live[0].artifact_update.artifact.parts) == "from the other process"
    assert live[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_client_leaving_mid_stream_does_not_stop_the_task(relay):
    gate_name, gate = new_gate()
    async with grpc_client(relay, "gated") as client:
        stream = client.send_message(send_request(gate_name))
        task_id = task_id_of(await next_event(stream))
        await stream.aclose()
    async with grpc_client(relay, "gated") as client:
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
        gate.put("still here")
        gate.put(None)
        task = await wait_for_state(client, task_id, TaskState.TASK_STATE_COMPLETED)
    assert text_of(task.artifacts[0].parts) == "still here"


async def test_push_configs_are_created_read_listed_and_deleted(relay):
    async with grpc_client(relay, "asks", streaming=False) as client:
        task = (await only(client.send_message(send_request("greet someone")))).task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=task.id, id="hook-1", url="http://127.0.0.1:9/push", token="s3cret"
            )
        )
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        after = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
            )
    assert (created.task_id, created.id, created.url) == (
        task.id,
        "hook-1",
        "http://127.0.0.1:9/push",
    )
    assert got.url == created.url and got.id == "hook-1"
    assert [c.id for c in listed.configs] == ["hook-1"]
    assert list(after.configs) == []


# --- a team --------------------------------------------------------------------------------


NUMBERS = {"level": 2, "items": [1, -3, 2.5], "edge": 2**53, "nested": {"count": 0}}


def ints_kept(value) -> bool:
    """``value`` is NUMBERS exactly, every integer an int (not a float equal to it)."""
    return (
        value == NUMBERS
        and type(value["level"]) is int
        and [type(item) for item in value["items"]] == [int, int, float]
        and type(value["edge"]) is int
        and type(value["nested"]["count"]) is int
    )


async def test_integers_sent_over_grpc_reach_a_json_rpc_agent_as_integers(relay):
    """Struct holds every number as a double; the relay gives the JSON agent back its ints."""
    from a2a.types import Part
    from google.protobuf.struct_pb2 import Struct, Value

    data = Value()
    data.struct_value.update(NUMBERS)
    metadata = Struct()
    metadata.update(NUMBERS)
    request = send_request("numbers")
    request.message.parts.append(Part(data=data))
    request.message.metadata.CopyFrom(metadata)
    request.metadata.CopyFrom(metadata)
    async with grpc_client(relay, "mirror", streaming=False) as client:
        task = (await only(client.send_message(request))).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    sent = [r.json() for r in MIRRORED.posts() if b"numbers" in r.body]
    assert len(sent) == 1, sent
    params = sent[0]["params"]
    assert ints_kept(params["message"]["metadata"]), params
    assert ints_kept(params["message"]["parts"][1]["data"]), params
    assert ints_kept(params["metadata"]), params
    # Stored so too: the history a JSON-RPC caller reads.
    stored = relay.call("mirror", "GetTask", {"id": task.id}).json()["result"]
    assert ints_kept(stored["history"][0]["metadata"])
    assert ints_kept(stored["history"][0]["parts"][1]["data"])


async def test_a_team_is_called_over_grpc_by_its_tenant(relay):
    card = team_card(relay, "writers")
    async with sdk_client(card, GRPC, "1.0", headers=relay.auth(), streaming=False) as client:
        task = (await only(client.send_message(send_request("notes on teams")))).task
        seen = await client.get_task(GetTaskRequest(id=task.id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "notes on teams" in text_of(task.artifacts[0].parts)
    assert seen.id == task.id
    # The team's task, not the agent's: the agent's tenant does not find it.
    async with grpc_client(relay, "echo-v1") as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task.id))


# --- errors ---------------------------------------------------------------------------------


async def test_another_keys_task_is_not_found(relay):
    async with grpc_client(relay, "writer", streaming=False) as client:
        task = (await only(client.send_message(send_request("mine")))).task
    async with grpc_client(relay, "writer", key=relay.keys[1]) as stranger:
        for call in (
            stranger.get_task(GetTaskRequest(id=task.id)),
            stranger.cancel_task(CancelTaskRequest(id=task.id)),
            collect(stranger.subscribe(SubscribeToTaskRequest(id=task.id))),
        ):
            with pytest.raises(TaskNotFoundError):
                await call


@pytest.mark.parametrize(
    ("metadata", "code", "reason"),
    [
        ((), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
        (
            (("authorization", "Bearer not-a-key"),),
            grpc.StatusCode.UNAUTHENTICATED,
            "UNAUTHENTICATED",
        ),
    ],
    ids=["no key", "unknown key"],
)
async def test_a_call_without_a_valid_key_is_unauthenticated(grpc_relay, metadata, code, reason):
    _, error = await raw_call(
        grpc_relay, "GetTask", GetTaskRequest(tenant="agents/writer", id="x"), metadata
    )
    assert error is not None and error.code() == code
    info = error_info(error)
    assert info.reason == reason
    assert info.domain == "brass-relay"


async def test_errors_carry_their_code_and_the_a2a_error_info(relay, grpc_relay):
    auth = (("authorization", f"Bearer {relay.key}"),)
    cases = [
        (
            "GetTask",
            GetTaskRequest(tenant="agents/writer", id="nope"),
            auth,
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        ),
        (
            "GetTask",
            GetTaskRequest(tenant="agents/nobody", id="x"),
            auth,
            "NOT_FOUND",
            "METHOD_NOT_FOUND",
        ),
        (
            "GetTask",
            GetTaskRequest(tenant="what/ever", id="x"),
            auth,
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        ),
        (
            "ListTasks",
            ListTasksRequest(tenant="agents/writer", page_size=101),
            auth,
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        ),
        (
            "GetTask",
            GetTaskRequest(tenant="agents/writer", id="x"),
            (*auth, ("a2a-version", "0.3")),
            "FAILED_PRECONDITION",
            "VERSION_NOT_SUPPORTED",
        ),
        (
            "GetExtendedAgentCard",
            GetExtendedAgentCardRequest(tenant="agents/writer"),
            auth,
            "FAILED_PRECONDITION",
            "UNSUPPORTED_OPERATION",
        ),
    ]
    for method, request, metadata, code, reason in cases:
        answer, error = await raw_call(grpc_relay, method, request, metadata)
        assert error is not None, (method, request, answer)
        assert error.code().name == code, (method, request, error.details())
        info = error_info(error)
        assert (info.domain, info.reason) == ("a2a-protocol.org", reason), error.details()


async def test_the_sdk_client_gets_its_typed_errors(relay):
    async with grpc_client(relay, "writer") as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))
    async with grpc_client(relay, "writer", key="not-a-key") as client:
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await client.get_task(GetTaskRequest(id="no-such-task"))


async def test_an_invalid_message_is_refused_before_anything_is_stored(relay, grpc_relay):
    from a2a.types import Message, Part, Role, SendMessageRequest

    auth = (("authorization", f"Bearer {relay.keys[2]}"),)
    empty = SendMessageRequest(
        tenant="agents/writer", message=Message(message_id="m-empty", role=Role.ROLE_USER)
    )
    nul = SendMessageRequest(
        tenant="agents/writer",
        message=Message(message_id="m-nul", role=Role.ROLE_USER, parts=[Part(text="a\x00b")]),
        metadata=None,
    )
    for request in (empty, nul):
        _, error = await raw_call(grpc_relay, "SendMessage", request, auth)
        assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(error).reason == "INVALID_PARAMS"
    listed, _ = await raw_call(
        grpc_relay, "ListTasks", ListTasksRequest(tenant="agents/writer", page_size=100), auth
    )
    assert all(
        not any(m.message_id in ("m-empty", "m-nul") for m in t.history) for t in listed.tasks
    )


async def test_requested_extensions_the_target_lacks_are_not_echoed(relay, grpc_relay):
    auth = (("authorization", f"Bearer {relay.key}"), ("a2a-extensions", "urn:x-unknown"))
    async with grpc.aio.insecure_channel(grpc_relay) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        call = stub.ListTasks(ListTasksRequest(tenant="agents/writer", page_size=1), metadata=auth)
        await asyncio.wait_for(call, 20)
        initial = await call.initial_metadata()
    assert "a2a-extensions" not in dict(initial or ())


# --- metrics ----------------------------------------------------------------------------------


def counted(relay, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    port = relay.env["RELAY_GRPC_METRICS_PORT"]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


async def test_the_grpc_process_counts_its_calls(relay, grpc_relay):
    ok = {"method": "SendMessage", "code": "OK"}
    refused = {"method": "GetTask", "code": "UNAUTHENTICATED"}
    ok_before = counted(relay, "relay_grpc_calls_total", **ok)
    refused_before = counted(relay, "relay_grpc_calls_total", **refused)
    async with grpc_client(relay, "echo-v1", streaming=False) as client:
        await only(client.send_message(send_request("count me")))
    await raw_call(grpc_relay, "GetTask", GetTaskRequest(tenant="agents/echo-v1", id="x"))
    assert counted(relay, "relay_grpc_calls_total", **ok) == ok_before + 1
    assert counted(relay, "relay_grpc_calls_total", **refused) == refused_before + 1
    assert counted(relay, "relay_grpc_call_duration_seconds_count", method="SendMessage") >= 1


# --- the relay's own endpoint -------------------------------------------------------------------


async def test_the_relay_tenant_and_no_tenant_reach_the_default_target(relay, grpc_relay):
    from a2a.types import Message, Part, Role, SendMessageRequest

    manage(
        relay.env,
        "shell",
        "-c",
        "from tasks_app.relay_endpoint import default_target_set; "
        "default_target_set(kind='agent', target_id='echo-v1')",
    )
    card = httpx.get(f"{relay.url}/a2a/relay/.well-known/agent-card.json", timeout=10).json()
    async with sdk_client(card, GRPC, "1.0", headers=relay.auth(), streaming=False) as client:
        reply = await only(client.send_message(send_request("to the relay")))
    assert text_of(reply.message.parts) == "to the relay"
    request = SendMessageRequest(
        message=Message(message_id="m-no-tenant", role=Role.ROLE_USER, parts=[Part(text="bare")])
    )
    answer, error = await raw_call(
        grpc_relay, "SendMessage", request, (("authorization", f"Bearer {relay.key}"),)
    )
    assert error is None, error
    assert text_of(answer.message.parts) == "bare"


def deep_struct_request(depth: int) -> bytes:
    """A SendMessageRequest whose metadata nests ``depth`` Structs, as bytes: protobuf's
    parser refuses a message nested deeper than its recursion limit (100)."""
    from google.protobuf import struct_pb2

    value = struct_pb2.Value(string_value="bottom")
    for _ in range(depth):
        inner = struct_pb2.Value()
        inner.struct_value.fields["x"].CopyFrom(value)
        value = inner
    request = SendMessageRequest(
        tenant="agents/writer",
        message=Message(message_id="m-deep", role=Role.ROLE_USER, parts=[Part(text="hi")]),
    )
    request.metadata.fields["x"].CopyFrom(value)
    return request.SerializeToString()


@pytest.mark.parametrize(
    "body",
    [b"\xff\xff\xff\xff", b"\x0a\x05ab", deep_struct_request(90)],
    ids=["garbage", "truncated", "90-deep-struct"],
)
async def test_a_body_that_is_not_the_request_message_is_invalid_argument(relay, grpc_relay, body):
    auth = (("authorization", f"Bearer {relay.key}"),)
    async with grpc.aio.insecure_channel(grpc_relay) as channel:
        for method in ("SendMessage", "SendStreamingMessage"):
            path = f"/lf.a2a.v1.A2AService/{method}"
            call = (
                channel.unary_unary(path)(body, metadata=auth, timeout=20)
                if method == "SendMessage"
                else channel.unary_stream(path)(body, metadata=auth, timeout=20).read()
            )
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await call
            error = raised.value
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, error.details())
            assert "class" not in error.details() and "request message" in error.details()
            assert error_info(error).reason == "INVALID_REQUEST"
