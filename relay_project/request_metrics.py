"""The relay's own HTTP traffic as Prometheus metrics, counted by an ASGI middleware in front of
everything daphne serves (A2A calls through the consumer and Django's requests alike).

- ``relay_http_requests_total{kind, status}``: requests answered, by route kind and status;
- ``relay_http_request_duration_seconds{kind}``: the time until the response's status and
  headers were sent. A stream counts the time it took to start, not how long it stayed open.

Route kinds: ``a2a`` (A2A calls and agent cards), ``api`` (the registry, team and task APIs,
the API docs), ``metrics`` (scrapes of ``/metrics``), ``pages`` (everything else: the web
pages, the admin, static files).

The counters live in this process's memory: each relay process (each daphne) exposes its own
at its own ``/metrics``, as Prometheus expects of a multi-process deployment scraped per
target. ``REGISTRY`` is the collector registry ``/metrics`` writes out; ``routing.prometheus``
adds the numbers read from the database at scrape time.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from relay_project.routing import a2a_route

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "relay_http_requests",
    "HTTP requests the relay answered, by route kind and status.",
    ["kind", "status"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "relay_http_request_duration_seconds",
    "Seconds until the response's status and headers were sent, by route kind.",
    ["kind"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)

API_PREFIXES = ("/a2a/", "/api/")
CARD_MARKER = "/.well-known/agent"


def route_kind(scope) -> str:
    """a2a, api, metrics or pages (see the module docstring)."""
    path = scope["path"]
    if path == "/metrics":
        return "metrics"
    if CARD_MARKER in path:
        return "a2a"
    if path.startswith(API_PREFIXES):
        return "a2a" if path.startswith("/a2a/") and a2a_route(scope) is not None else "api"
    return "pages"


# The labelled children, kept: labels() takes a lock and builds a key on every call.
_counters: dict[tuple[str, str], Any] = {}
_histograms: dict[str, Any] = {}


def _record(kind: str, status: str, seconds: float) -> None:
    counter = _counters.get((kind, status))
    if counter is None:
        counter = _counters.setdefault((kind, status), REQUESTS.labels(kind, status))
    histogram = _histograms.get(kind)
    if histogram is None:
        histogram = _histograms.setdefault(kind, DURATION.labels(kind))
    counter.inc()
    histogram.observe(seconds)


class RequestMetricsMiddleware:
    """Wraps an ASGI application; counts every HTTP request it answers. An application that
    fails before answering counts as a 500; a request whose client left before any answer is
    not counted."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        kind = route_kind(scope)
        started = time.perf_counter()
        answered = False

        async def counting_send(message):
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                _record(kind, str(message["status"]), time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            if not answered:
                _record(kind, "500", time.perf_counter() - started)
            raise
