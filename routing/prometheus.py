"""``GET /metrics``: the relay in the Prometheus text format (0.0.4).

Besides the request counters of ``relay_project.request_metrics`` (kept in each process), a
collector reads the database at every scrape (three queries):

- ``relay_tasks{state}``: tasks by state;
- ``relay_agents{health}`` and ``relay_agent_breakers{state}``: agents by health state and
  by circuit-breaker state; ``relay_agent_health{agent, state}`` is 1 for each agent's
  current health state and 0 for the others, and ``relay_agent_latency_seconds{agent}`` its
  last probe's latency;
- ``relay_probe_results_last_hour{level, outcome}``: probe results of the last hour, by level
  and outcome (``ok``, or the failure's category);
- ``relay_database_up``: 0 when the database could not be read (the other database numbers are
  then missing from that scrape, which still answers).

Open to everyone while RELAY_METRICS_PUBLIC is on (the default); otherwise staff users and
admin API keys only.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from rest_framework import permissions
from rest_framework.views import APIView

from registry.api.schema import errors
from registry.auth import caller_key
from registry.models import Agent
from relay_project.request_metrics import REGISTRY
from routing.models import ProbeResult
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task

logger = logging.getLogger(__name__)

# generate_latest writes this format for names like ours (no UTF-8 outside the legacy set).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class RelayStateCollector:
    """Tasks, agents and probe results as gauges, read from the database when scraped."""

    def describe(self):
        # Described without a query: registering the collector must not touch the database.
        return []

    def collect(self):
        up = GaugeMetricFamily(
            "relay_database_up", "1 when this scrape could read the relay's database."
        )
        try:
            families = self._from_database()
        except DatabaseError:
            logger.exception("metrics: the database could not be read")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _from_database(self) -> list[GaugeMetricFamily]:
        tasks = GaugeMetricFamily("relay_tasks", "Tasks by state.", labels=["state"])
        by_state = dict(Task.objects.order_by().values_list("state").annotate(n=Count("id")))
        for state in TaskState:
            tasks.add_metric([state.value], by_state.get(state.value, 0))

        agents = list(
            Agent.objects.order_by("id").values_list(
                "id", "health", "breaker_state", "health_latency_ms"
            )
        )
        healths = Counter(health for _, health, _, _ in agents)
        breakers = Counter(breaker for _, _, breaker, _ in agents)
        by_health = GaugeMetricFamily("relay_agents", "Agents by health state.", labels=["health"])
        for health in Agent.Health.values:
            by_health.add_metric([health], healths[health])
        by_breaker = GaugeMetricFamily(
            "relay_agent_breakers", "Agents by circuit-breaker state.", labels=["state"]
        )
        for breaker in Agent.Breaker.values:
            by_breaker.add_metric([breaker], breakers[breaker])
        health_of = GaugeMetricFamily(
            "relay_agent_health",
            "1 for the agent's current health state, 0 for the others.",
            labels=["agent", "state"],
        )
        latency_of = GaugeMetricFamily(
            "relay_agent_latency_seconds",
            "The latency of the agent's last probe.",
            labels=["agent"],
        )
        for agent_id, health, _, latency_ms in agents:
            for state in Agent.Health.values:
                health_of.add_metric([agent_id, state], 1 if state == health else 0)
            if latency_ms is not None:
                latency_of.add_metric([agent_id], latency_ms / 1000)

        probes = GaugeMetricFamily(
            "relay_probe_results_last_hour",
            "Probe results of the last hour by level and outcome (ok, or the failure's category).",
            labels=["level", "outcome"],
        )
        since = timezone.now() - timedelta(hours=1)
        rows = (
            ProbeResult.objects.filter(checked_at__gt=since)
            .order_by()
            .values_list("level", "ok", "category")
            .annotate(n=Count("id"))
        )
        for level, ok, category, count in rows:
            probes.add_metric([level, "ok" if ok else (category or "failed")], count)
        return [tasks, by_health, by_breaker, health_of, latency_of, probes]


REGISTRY.register(RelayStateCollector())


class MetricsPermission(permissions.BasePermission):
    """Everyone while RELAY_METRICS_PUBLIC is on; otherwise staff users and admin keys."""

    message = "metrics need an admin API key or a staff login (RELAY_METRICS_PUBLIC is off)"

    def has_permission(self, request, view) -> bool:
        if settings.RELAY_METRICS_PUBLIC:
            return True
        key = caller_key(request)
        if key is not None:
            return key.is_admin
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)


class MetricsView(APIView):
    permission_classes = [MetricsPermission]

    @extend_schema(
        operation_id="metrics",
        summary="The relay's metrics for Prometheus",
        description="Request, task, health and probe metrics in the Prometheus text format. "
        "Public while RELAY_METRICS_PUBLIC is on; otherwise an admin key or a staff login.",
        responses={
            200: OpenApiResponse(
                OpenApiTypes.STR,
                description=("The Prometheus text exposition format 0.0.4"),
                examples=[
                    OpenApiExample(
                        "A few lines",
                        response_only=True,
                        value=(
                            "# HELP relay_agents Agents by health state.\n"
                            "# TYPE relay_agents gauge\n"
                            'relay_agents{health="healthy"} 3.0\n'
                        ),
                    )
                ],
            ),
            **errors(401, 403),
        },
    )
    def get(self, request) -> HttpResponse:
        return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE)
