"""``make up`` starts the gRPC server beside daphne: ``manage.py run_relay --grpc-port`` (the
Makefile passes RELAY_GRPC_PORT, 8001) runs ``manage.py run_grpc``, names it in the banner, and
the relay's card lists its address."""

from __future__ import annotations

import grpc
import httpx
from a2a.types import ListTasksRequest, a2a_pb2_grpc

from tests.live import free_port, relay_env, wait_for
from tests.routing.test_run_relay_console import run_relay
from tests.routing.test_run_relay_health import free_run


def test_run_relay_starts_the_grpc_server_and_the_cards_list_it(tmp_path):
    env = relay_env(tmp_path / "var")
    port, grpc_port = free_port(), free_port()
    with run_relay(
        env, port, free_run(4), "--no-demo", "--no-worker", "--grpc-port", str(grpc_port)
    ) as relay:
        relay.wait_for(rf"gRPC:\s+127\.0\.0\.1:{grpc_port}")
        card = httpx.get(
            f"http://127.0.0.1:{port}/.well-known/agent-card.json",
            headers={"A2A-Version": "1.0"},
            timeout=10,
        ).json()
        assert {
            "url": f"http://127.0.0.1:{grpc_port}",
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0",
            "tenant": "relay",
        } in card["supportedInterfaces"]

        def answers_unauthenticated() -> bool:
            with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                try:
                    stub.ListTasks(ListTasksRequest(tenant="relay"), timeout=2)
                except grpc.RpcError as error:
                    return error.code() == grpc.StatusCode.UNAUTHENTICATED
            return False

        wait_for(answers_unauthenticated, "the gRPC server answering")
        assert "grpc.log" in relay.output
    assert (tmp_path / "var" / "log" / "grpc.log").exists()
