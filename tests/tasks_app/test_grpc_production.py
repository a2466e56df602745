"""The gRPC server in the production profile: daphne and ``manage.py run_grpc`` on one
PostgreSQL database and one Redis. A task daphne drives is followed live over gRPC through the
Redis channel layer, and one the gRPC process drives over JSON-RPC; the per-key rate limit is
shared through Redis. Skipped, saying why, where PostgreSQL or Redis is absent."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from a2a.types import ListTasksRequest, SubscribeToTaskRequest, TaskState
from a2a.utils.errors import A2AError

from tests.live import (
    ServiceMissingError,
    free_port,
    gated_production_relay,
    manage,
    new_gate,
)
from tests.tasks_app.test_gateway_protocol import (
    collect,
    kind,
    next_event,
    only,
    send_request,
    task_id_of,
    text_of,
    wait_for_state,
)

pytestmark = pytest.mark.production


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with ExitStack() as stack:
        try:
            relay = stack.enter_context(
                gated_production_relay(
                    tmp_path_factory.mktemp("relay-grpc-production"),
                    RELAY_GRPC_PORT=str(free_port()),
                )
            )
        except ServiceMissingError as error:
            pytest.skip(str(error))
        stack.enter_context(relay.grpc_server())
        yield relay


@pytest.mark.parametrize(
    ("driver", "follower"),
    [("JSONRPC", "GRPC"), ("GRPC", "HTTP+JSON")],
    ids=["to-grpc", "from-grpc"],
)
async def test_a_task_driven_by_one_process_is_followed_live_in_the_other(relay, driver, follower):
    gate_name, gate = new_gate()
    async with relay.client("gated", driver, "1.0", streaming=False) as client:
        started = await only(client.send_message(send_request(gate_name, return_immediately=True)))
        task_id = task_id_of(started)
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
    async with relay.client("gated", follower, "1.0") as client:
        subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
        assert kind(await next_event(subscription)) == "task"
        gate.put("live")
        gate.put(None)
        live = await collect(subscription)
    assert text_of(live[0].artifact_update.artifact.parts) == "live"
    assert live[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_key_rate_limit_is_shared_with_daphne(relay):
    key = relay.create_key("limited")
    # A limit of its own for this key (before its first call, so no process cached it yet):
    # three calls a minute, whatever binding they use.
    manage(
        relay.env,
        "shell",
        "-c",
        "from registry.models import ApiKey; "
        "ApiKey.objects.filter(name='limited').update(rate_limit_per_minute=3)",
    )
    async with relay.client("gated", "JSONRPC", "1.0", key=key) as over_http:
        await over_http.list_tasks(ListTasksRequest())
        await over_http.list_tasks(ListTasksRequest())
    async with relay.client("gated", "GRPC", "1.0", key=key) as over_grpc:
        await over_grpc.list_tasks(ListTasksRequest())
        with pytest.raises(A2AError, match="RESOURCE_EXHAUSTED|calls per minute"):
            await over_grpc.list_tasks(ListTasksRequest())
