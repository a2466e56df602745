"""ASGI entry point: ``daphne relay_project.asgi:application`` (or uvicorn).

A2A protocol calls go to the Channels consumer; everything else to Django
(see ``relay_project.routing``).

A server process also runs the relay's background work from its start: the heartbeat of the
process's lease and the scan that takes over the tasks of relay processes that died
(``tasks_app.gateway.supervisor``). At that start its heap is frozen out of the garbage
collector's full passes (``relay_project.heap``). Daphne has no ASGI lifespan events, so it is started
when the Twisted reactor runs; other servers (uvicorn) start it at ``lifespan.startup``.
"""

import os
import sys

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")
django_application = get_asgi_application()

# Imported after Django is set up: they load models.
from channels.routing import ProtocolTypeRouter  # noqa: E402

from relay_project.heap import freeze_startup_heap  # noqa: E402
from relay_project.request_metrics import RequestMetricsMiddleware  # noqa: E402
from relay_project.routing import A2ARouter  # noqa: E402
from routing.mcp import server as mcp_server  # noqa: E402
from tasks_app.agui.consumer import AgUiConsumer  # noqa: E402
from tasks_app.consumers import A2AConsumer  # noqa: E402
from tasks_app.gateway import supervisor  # noqa: E402


def _start_background_work() -> None:
    freeze_startup_heap()
    supervisor.ensure_running(takeover=True)


async def lifespan(scope, receive, send):
    """uvicorn's lifespan events: the background work starts with the server."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            _start_background_work()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


# Every HTTP request is counted for /metrics (relay_project.request_metrics).
application = ProtocolTypeRouter(
    {
        "http": RequestMetricsMiddleware(
            # /mcp and under it: the MCP server (routing.mcp).
            mcp_server.mounted(
                A2ARouter(django_application, A2AConsumer.as_asgi(), AgUiConsumer.as_asgi())
            )
        ),
        "lifespan": lifespan,
    }
)

if "daphne.server" in sys.modules:
    import asyncio

    from twisted.internet import reactor

    # Twisted runs these just before asyncio's loop starts: start once the loop runs.
    reactor.callWhenRunning(lambda: asyncio.get_event_loop().call_soon(_start_background_work))
