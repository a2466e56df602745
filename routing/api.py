"""``GET /a2a/tasks/{taskId}/trace``: a task's routing trace, scoped to its caller like every
task read (another key gets 404 TaskNotFound in the HTTP+JSON error envelope).

``GET /a2a/agents/{id}/metrics`` and ``GET /a2a/teams/{id}/metrics``: an agent's or a team's
metrics, registry reads (the usage part from ``tasks_app.usage.reports``)."""

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
from registry.api.schema import AGENT_ID, TEAM_ID, errors
from registry.auth import RegistryReadPermission
from registry.models import Team
from routing import selectors, services
from routing.workflows.api import WORKFLOW_ID
from routing.workflows.selectors import workflow_get
from tasks_app.api import replies, task_api_docs
from tasks_app.api.task_api import TaskApiView, http_reply
from tasks_app.protocol.errors import TaskNotFound
from tasks_app.services import iso
from tasks_app.snapshots import V1_STATE
from tasks_app.usage import reports
from tasks_app.usage.records import money_text


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


TEAM_METRICS_EXAMPLE = {
    "teamId": "crew",
    "successRate": 0.95,
    "avgLatency": 2410.5,
    "p95Latency": 5020.0,
    "costPerTask": "0.042",
    "last24Hours": {
        "tasks": 20,
        "completed": 19,
        "failed": 1,
        "inputTokens": 96000,
        "outputTokens": 21000,
        "cost": "0.84",
    },
}
WORKFLOW_METRICS_EXAMPLE = {
    "workflowId": "weather-report",
    **{key: value for key, value in TEAM_METRICS_EXAMPLE.items() if key != "teamId"},
}
METRICS_EXAMPLE.update(
    {k: v for k, v in TEAM_METRICS_EXAMPLE.items() if k not in ("teamId", "successRate")}
)


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
        body = metrics_json(selectors.agent_metrics(agent_id=agent_id, hours=hours))
        found = reports.scores(kind="agent", subject_id=agent_id)
        return Response({**body, **scores_json(found, success_rate=body["successRate"])})


class TeamMetricsView(APIView):
    """A team's last 24 hours in the design notes' shape: its calls' outcomes and latency,
    its hops' tokens and cost."""

    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="team_metrics",
        summary="A team's success rate, latency and cost",
        description="The team's calls over the last 24 hours; tokens and cost are those of "
        "its hops (the member calls). Amounts are decimal strings.",
        parameters=[TEAM_ID],
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                examples=[OpenApiExample("A day", value=TEAM_METRICS_EXAMPLE, response_only=True)],
            ),
            **errors(401, 404, 429),
        },
    )
    def get(self, request: Request, team_id: str) -> Response:
        if not Team.objects.filter(pk=team_id).exists():
            raise NotFound(f"no team with id {team_id!r}")
        found = reports.scores(kind="team", subject_id=team_id)
        return Response({"teamId": team_id, **scores_json(found)})


class WorkflowMetricsView(APIView):
    """A workflow's last 24 hours in the design notes' shape: its runs' outcomes and latency,
    its steps' tokens and cost (a run costs what its steps cost)."""

    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="workflow_metrics",
        summary="A workflow's success rate, latency and cost",
        description="The workflow's runs over the last 24 hours; tokens and cost are those of "
        "its steps. Amounts are decimal strings.",
        parameters=[WORKFLOW_ID],
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                examples=[
                    OpenApiExample(
                        "A day",
                        value=WORKFLOW_METRICS_EXAMPLE,
                        response_only=True,
                    )
                ],
            ),
            **errors(401, 404, 429),
        },
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        if workflow_get(workflow_id=workflow_id) is None:
            raise NotFound(f"no workflow with id {workflow_id!r}")
        found = reports.scores(kind="workflow", subject_id=workflow_id)
        return Response({"workflowId": workflow_id, **scores_json(found)})


def _money(value) -> str | None:
    return None if value is None else money_text(value)


def scores_json(found: reports.Scores, *, success_rate: float | None = None) -> dict[str, Any]:
    """The design notes' keys: success rate, average and p95 latency (ms), cost per task, and
    the last 24 hours' counts, tokens and cost (amounts as decimal strings).
    ``success_rate``: the rate the caller already has (an agent's, probes included)."""
    return {
        "successRate": success_rate if success_rate is not None else _ratio(found.success_rate),
        "avgLatency": _ms(found.latency_avg_ms),
        "p95Latency": _ms(found.latency_p95_ms),
        "costPerTask": _money(found.cost_per_task),
        "last24Hours": {
            "tasks": found.tasks,
            "completed": found.completed,
            "failed": found.failed,
            "inputTokens": found.input_tokens,
            "outputTokens": found.output_tokens,
            "cost": _money(found.cost),
        },
    }


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
