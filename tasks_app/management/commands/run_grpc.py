"""``manage.py run_grpc``: the relay's gRPC A2A server (``tasks_app.grpc``), a process of its
own beside daphne, sharing its database and (in production) its Redis."""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tasks_app.grpc import server


class Command(BaseCommand):
    help = (
        "Serves A2A over gRPC for every agent and team (the request's tenant names the "
        "target: agents/<id>, teams/<id>, relay). Port: --port, else RELAY_GRPC_PORT."
    )

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=None, help="Address to bind (RELAY_GRPC_BIND).")
        parser.add_argument("--port", type=int, default=None, help="Port (RELAY_GRPC_PORT).")

    def handle(self, *args, bind, port, **options):
        bind = bind or settings.RELAY_GRPC_BIND
        port = port if port is not None else settings.RELAY_GRPC_PORT
        if not port:
            raise CommandError("no port: set RELAY_GRPC_PORT or pass --port")
        if port != settings.RELAY_GRPC_PORT:
            self.stderr.write(
                f"note: cards list the gRPC interface with RELAY_GRPC_PORT "
                f"({settings.RELAY_GRPC_PORT or 'unset'}), not {port}"
            )
        asyncio.run(
            server.serve(
                bind,
                port,
                on_ready=lambda bound: self.stdout.write(
                    f"gRPC A2A server on {bind}:{bound}", ending="\n"
                ),
            )
        )
