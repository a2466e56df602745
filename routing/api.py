"""``GET /a2a/tasks/{taskId}/trace``: a task's routing trace, scoped to its caller like every
task read (another key gets 404 TaskNotFound in the HTTP+JSON error envelope).

``GET /a2a/agents/{id}/metrics``: an agent's metrics, a registry read."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import selectors as registry_selectors
from registry.api.schema import AGENT_ID, errors
from registry.auth import RegistryReadPermission
from routing import selectors, services
from tasks_app.api import replies, task_api_docs
from tasks_app.api.task_api import TaskApiView, http_reply
from tasks_app.protocol.errors import TaskNotFound
from tasks_app.services import iso
from tasks_app.snapshots import V1_STATE


class TaskTraceView(TaskApiView):
    @task_api_docs.trace
    async def get(self, request, task_id: str):
        found = await sync_to_async(selectors.trace_for_caller)(
            caller=request.auth, task_id=task_id
        )
        if found is None:
            raise TaskNotFound(f"no task {task_id!r}", metadata={"taskId": str(task_id)})
        task, hops = found
        body = {
            "taskId": task.id,
            "contextId": task.context_id,
            "target": {"kind": task.target_kind, "id": task.target_id},
            "state": V1_STATE[task.state],
            "hops": [services.hop_as_json(hop) for hop in hops],
        }
        return http_reply(replies.Reply(200, body, "application/json"))


_HOUR = {
    "probes": 60,
    "probesFailed": 1,
    "latencyAvgMs": 41.5,
    "tasksCompleted": 12,
    "tasksFailed": 0,
}
METRICS_EXAMPLE = {
    "agentId": "weather",
    "hours": 2,
    "since": "2026-01-05T08:00:00.000Z",
    "until": "2026-01-05T10:00:00.000Z",
    "successRate": 0.96,
    "latencyAvgMs": 812.4,
    "latencyP95Ms": 1520.0,
    "tasksCompleted": 24,
    "tasksFailed": 1,
    "tasks": {
        "completed": 24,
        "failed": 1,
        "rejected": 0,
        "canceled": 0,
        "durationAvgMs": 812.4,
        "durationP95Ms": 1520.0,
    },
    "probes": {"total": 120, "ok": 118, "failed": 2, "successRate": 0.9833},
    "series": [
        {"hour": "2026-01-05T08:00:00.000Z", **_HOUR},
        {"hour": "2026-01-05T09:00:00.000Z", **_HOUR, "tasksFailed": 1},
    ],
}


class AgentMetricsView(APIView):
    """Success rate, latency, task counts and an hourly series of one agent (``?hours=``,
    1 to 168, default 24). Definitions in ``routing.metrics``."""

    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="agent_metrics",
        summary="An agent's success rate, latency and tasks",
        description="Task outcomes and durations, probe results, and an hourly series over "
        "the last `hours`. Rates are 0 to 1 (null with nothing to count), times in "
        "milliseconds to 0.1.",
        parameters=[
            AGENT_ID,
            OpenApiParameter(
                "hours",
                int,
                description="The window, 1 to 168 hours (default 24)",
                examples=[OpenApiExample("A day", value=24)],
            ),
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **errors(400, 401, 404, 429)},
        examples=[OpenApiExample("Two hours", response_only=True, value=METRICS_EXAMPLE)],
    )
    def get(self, request: Request, agent_id: str) -> Response:
        hours = _hours(request.query_params.get("hours"))
        if not registry_selectors.agent_exists(agent_id=agent_id):
            raise NotFound(f"no agent with id {agent_id!r}")
        return Response(metrics_json(selectors.agent_metrics(agent_id=agent_id, hours=hours)))


def _hours(raw: str | None) -> int:
    if raw in (None, ""):
        return 24
    try:
        hours = int(raw)
    except ValueError:
        hours = 0
    if not 1 <= hours <= selectors.METRICS_MAX_HOURS:
        raise registry_selectors.InvalidQueryError(
            f"hours must be a whole number from 1 to {selectors.METRICS_MAX_HOURS}, not {raw!r}"
        )
    return hours


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def metrics_json(found: selectors.AgentMetrics) -> dict[str, Any]:
    """The metrics as the API writes them (camelCase, milliseconds to 0.1, rates 0 to 1)."""
    by_state = found.tasks_by_state
    return {
        "agentId": found.agent_id,
        "hours": found.hours,
        "since": iso(found.since),
        "until": iso(found.until),
        "successRate": _ratio(found.success_rate),
        "latencyAvgMs": _ms(found.latency_avg_ms),
        "latencyP95Ms": _ms(found.latency_p95_ms),
        "tasksCompleted": found.tasks_completed,
        "tasksFailed": found.tasks_failed,
        "tasks": {
            "completed": found.tasks_completed,
            "failed": by_state.get("failed", 0),
            "rejected": by_state.get("rejected", 0),
            "canceled": by_state.get("canceled", 0),
            "durationAvgMs": _ms(found.duration_avg_ms),
            "durationP95Ms": _ms(found.duration_p95_ms),
        },
        "probes": {
            "total": found.probes,
            "ok": found.probes_ok,
            "failed": found.probes - found.probes_ok,
            "successRate": _ratio(found.probe_success_rate),
        },
        "series": [
            {
                "hour": iso(hour.start),
                "probes": hour.probes,
                "probesFailed": hour.probes_failed,
                "latencyAvgMs": _ms(hour.latency_avg_ms),
                "tasksCompleted": hour.tasks_completed,
                "tasksFailed": hour.tasks_failed,
            }
            for hour in found.series
        ],
    }
