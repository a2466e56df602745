"""The gRPC server: ``grpc.aio`` serving the relay's ``A2AService`` (``tasks_app.grpc.service``)
on RELAY_GRPC_BIND:RELAY_GRPC_PORT, in a process of its own beside daphne (``manage.py
run_grpc``). Like a daphne process it holds a relay process lease, heartbeats it and takes
over the tasks of relay processes that died (``tasks_app.gateway.supervisor``), and runs its
database work in RELAY_DATABASE_THREADS threads.

With RELAY_GRPC_METRICS_PORT it serves its Prometheus metrics (``relay_grpc_calls_total``,
``relay_grpc_call_duration_seconds``) over HTTP on that port.

Messages larger than RELAY_MAX_BODY_BYTES are refused by gRPC itself (RESOURCE_EXHAUSTED),
as daphne refuses such a body. A body that is not the request message (corrupt, or nested past
protobuf's depth limit) reaches the service as ``Unparsable`` and is refused there as an
invalid request (INVALID_ARGUMENT), after the key is checked like any other call's.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import grpc
from a2a.types import a2a_pb2_grpc
from django.conf import settings
from prometheus_client import start_http_server

from relay_project.heap import freeze_startup_heap
from relay_project.request_metrics import REGISTRY
from tasks_app.gateway import KEEPALIVE_SECONDS, supervisor
from tasks_app.grpc.service import RelayA2AService, Unparsable

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
    add_service(server, RelayA2AService())
    port = server.add_insecure_port(address)
    if not port:
        raise OSError(f"the gRPC server could not bind {address}")
    return server, port


class _Handlers:
    """Stands in for a server to a2a-sdk's generated registration, keeping its handlers."""

    def add_generic_rpc_handlers(self, handlers) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.service, self.handlers = service, handlers


def add_service(server: grpc.aio.Server, servicer: RelayA2AService) -> None:
    """Registers ``servicer`` as a2a-sdk's generated code does, but with request decoders that
    never raise: gRPC would end a call whose body does not decode with UNKNOWN and the decoder's
    Python exception as its message, before the service could answer."""
    generated = _Handlers()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, generated)
    handlers = {
        name: handler._replace(request_deserializer=_lenient(handler.request_deserializer))
        for name, handler in generated.handlers.items()
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(generated.service, handlers),)
    )
    server.add_registered_method_handlers(generated.service, handlers)


def _lenient(decode):
    def decode_or_keep_the_error(body: bytes):
        try:
            return decode(body)
        except Exception as error:  # noqa: BLE001 - protobuf raises DecodeError, and others
            deep = "depth" in str(error).lower()
            return Unparsable("nested deeper than protobuf reads" if deep else "corrupt")

    return decode_or_keep_the_error


async def serve(bind: str, port: int, *, on_ready=None) -> None:
    """Serves until SIGTERM or SIGINT, then stops within STOP_GRACE_SECONDS."""
    server, bound = build_server(f"{bind}:{port}")
    await server.start()
    if settings.RELAY_GRPC_METRICS_PORT:
        # Its call counters, for Prometheus to scrape from this process as from each daphne.
        start_http_server(settings.RELAY_GRPC_METRICS_PORT, addr=bind, registry=REGISTRY)
    freeze_startup_heap()
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
