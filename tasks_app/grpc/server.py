"""The gRPC server: ``grpc.aio`` serving the relay's ``A2AService`` (``tasks_app.grpc.service``)
on RELAY_GRPC_BIND:RELAY_GRPC_PORT, in a process of its own beside daphne (``manage.py
run_grpc``). Like a daphne process it holds a relay process lease, heartbeats it and takes
over the tasks of relay processes that died (``tasks_app.gateway.supervisor``), and runs its
database work in RELAY_DATABASE_THREADS threads.

With RELAY_GRPC_METRICS_PORT it serves its Prometheus metrics (``relay_grpc_calls_total``,
``relay_grpc_call_duration_seconds``) over HTTP on that port.

Messages larger than RELAY_MAX_BODY_BYTES are refused by gRPC itself (RESOURCE_EXHAUSTED),
as daphne refuses such a body.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import grpc
from a2a.types import a2a_pb2_grpc
from django.conf import settings
from prometheus_client import start_http_server

from relay_project.request_metrics import REGISTRY
from tasks_app.gateway import KEEPALIVE_SECONDS, supervisor
from tasks_app.grpc.service import RelayA2AService

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 5.0


def build_server(address: str) -> tuple[grpc.aio.Server, int]:
    """A server with the relay's A2AService on ``address`` (``host:port``; port 0 picks a free
    one): (server, port bound). Not started."""
    # HTTP/2 pings on an idle connection as often as the HTTP streams' keep-alive comments, so
    # proxies keep a quiet subscription open.
    options = [("grpc.keepalive_time_ms", int(KEEPALIVE_SECONDS * 1000))]
    if settings.RELAY_MAX_BODY_BYTES:
        options.append(("grpc.max_receive_message_length", settings.RELAY_MAX_BODY_BYTES))
    server = grpc.aio.server(options=options)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(RelayA2AService(), server)
    port = server.add_insecure_port(address)
    if not port:
        raise OSError(f"the gRPC server could not bind {address}")
    return server, port


async def serve(bind: str, port: int, *, on_ready=None) -> None:
    """Serves until SIGTERM or SIGINT, then stops within STOP_GRACE_SECONDS."""
    server, bound = build_server(f"{bind}:{port}")
    await server.start()
    if settings.RELAY_GRPC_METRICS_PORT:
        # Its call counters, for Prometheus to scrape from this process as from each daphne.
        start_http_server(settings.RELAY_GRPC_METRICS_PORT, addr=bind, registry=REGISTRY)
    supervisor.ensure_running(takeover=True)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stopping.set)
    logger.info("gRPC A2A server listening on %s:%s", bind, bound)
    if on_ready is not None:
        on_ready(bound)
    await stopping.wait()
    await server.stop(STOP_GRACE_SECONDS)
