"""``GET /a2a/usage``: usage totals, a key's own (a staff user or an admin key sees every
caller's, and may filter by key); ``/a2a/quotas`` and ``/a2a/quotas/{id}``: the quotas, for
a staff user or an admin key. Reads from ``tasks_app.usage.reports``, writes through
``registry.usage_services``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import permissions, serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import usage_services
from registry.api.schema import errors
from registry.auth import IsApiKeyOrStaff, caller_key
from registry.models import ApiKey
from registry.search_text import InvalidQueryError
from registry.services import actor_of
from registry.usage_models import Quota
from routing.workflows.selectors import workflow_get
from tasks_app.services import iso
from tasks_app.usage import reports
from tasks_app.usage.records import money_text

MAX_DAYS = 92

USAGE_EXAMPLE = {
    "since": "2026-01-05T08:00:00.000Z",
    "until": "2026-01-06T08:00:00.000Z",
    "group": "agent",
    "groups": [
        {
            "id": "weather",
            "calls": 42,
            "completed": 40,
            "failed": 2,
            "successRate": 0.9524,
            "avgLatency": 812.4,
            "p95Latency": 1520,
            "inputTokens": 50400,
            "outputTokens": 12600,
            "bytesIn": 8820,
            "bytesOut": 40110,
            "cost": "0.55",
        }
    ],
}
QUOTA_EXAMPLE = {"id": 1, "team": "crew", "callsPerDay": None, "costPerDay": "1.00"}
QUOTA = OpenApiResponse(
    OpenApiTypes.OBJECT,
    examples=[
        OpenApiExample(
            "A team's budget", value={**QUOTA_EXAMPLE, "costPerMonth": None}, response_only=True
        )
    ],
)
QUOTA_ID = OpenApiParameter(
    "quota_id",
    int,
    OpenApiParameter.PATH,
    description="A quota's id.",
    examples=[OpenApiExample("1", value=1)],
)
QUOTA_REQUEST = [
    OpenApiExample(
        "A team's daily budget", value={"team": "crew", "costPerDay": "1.00"}, request_only=True
    )
]


def sees_everyone(request) -> bool:
    """A staff user or an admin key: sees every caller's usage and manages quotas."""
    key = caller_key(request)
    if key is not None:
        return key.is_admin
    user = request.user
    return bool(user and user.is_authenticated and getattr(user, "is_staff", False))


class StaffOrAdminKey(permissions.BasePermission):
    message = "only a staff user or an admin key may manage quotas"

    def has_permission(self, request, view) -> bool:
        return sees_everyone(request)


def _moment(raw: str | None, default: datetime, name: str) -> datetime:
    if raw in (None, ""):
        return default
    parsed = parse_datetime(raw)
    if parsed is None or parsed.tzinfo is None:
        raise InvalidQueryError(f"{name} must be an ISO 8601 time with a zone, not {raw!r}")
    return parsed


class UsageView(APIView):
    """Usage totals between ``since`` and ``until`` (default: the last 24 hours), grouped by
    agent, team, workflow, key, target or hour, narrowed by ``agent``, ``team``, ``workflow``,
    ``target`` (ids) and, for staff, ``key`` (a prefix)."""

    permission_classes = [IsApiKeyOrStaff]

    @extend_schema(
        operation_id="usage",
        summary="Usage and cost, the caller's own",
        description="Calls, outcomes, latency (ms), tokens, bytes and cost (decimal strings) "
        "per group. A key sees its own calls; a staff user or an admin key sees everyone's.",
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATETIME),
            OpenApiParameter("until", OpenApiTypes.DATETIME),
            OpenApiParameter("group", str, enum=list(reports.GROUPS)),
            OpenApiParameter("agent", str),
            OpenApiParameter("team", str),
            OpenApiParameter(
                "workflow", str, description="A workflow's id: its runs and their steps"
            ),
            OpenApiParameter("target", str),
            OpenApiParameter("key", str, description="A key's prefix (staff only)"),
        ],
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                examples=[OpenApiExample("By agent", value=USAGE_EXAMPLE, response_only=True)],
            ),
            **errors(400, 401, 403, 429),
        },
    )
    def get(self, request: Request) -> Response:
        query = request.query_params
        now = timezone.now()
        until = _moment(query.get("until"), now, "until")
        since = _moment(query.get("since"), until - timedelta(hours=24), "since")
        if not since < until or until - since > timedelta(days=MAX_DAYS):
            raise InvalidQueryError(f"since must be before until, at most {MAX_DAYS} days apart")
        group = query.get("group") or "agent"
        if group not in reports.GROUPS:
            raise InvalidQueryError(f"group must be one of {', '.join(reports.GROUPS)}")
        filters = {name: query.get(name, "") for name in ("agent", "team", "workflow", "target")}
        caller_id = None
        if not sees_everyone(request):
            caller_id = request.auth.pk
        elif query.get("key"):
            key = ApiKey.objects.filter(prefix=query["key"]).first()
            caller_id = key.pk if key is not None else -1
        totals = reports.usage_totals(
            since=since, until=until, group=group, caller_id=caller_id, filters=filters, now=now
        )
        return Response(
            {
                "since": iso(since),
                "until": iso(until),
                "group": group,
                "groups": [
                    {"id": _group_id(group, value), **found.as_json()}
                    for value, found in sorted(totals.items(), key=lambda item: str(item[0]))
                ],
            }
        )


def _group_id(group: str, value: Any) -> Any:
    if group == "hour":
        return iso(value)
    if group == "key":
        return ApiKey.objects.filter(pk=value).values_list("prefix", flat=True).first() or ""
    return value


class QuotaSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    key = serializers.CharField(required=False, help_text="An API key's prefix")
    agent = serializers.CharField(required=False)
    team = serializers.CharField(required=False)
    workflow = serializers.CharField(required=False)
    callsPerDay = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    costPerDay = serializers.DecimalField(
        18, 6, required=False, allow_null=True, min_value=0, coerce_to_string=True
    )
    costPerMonth = serializers.DecimalField(
        18, 6, required=False, allow_null=True, min_value=0, coerce_to_string=True
    )


def quota_json(quota: Quota) -> dict[str, Any]:
    kind, _ = quota.subject
    return {
        "id": quota.pk,
        kind: quota.api_key.prefix if kind == "key" else quota.subject[1],
        "callsPerDay": quota.calls_per_day,
        "costPerDay": None if quota.cost_per_day is None else money_text(quota.cost_per_day),
        "costPerMonth": None if quota.cost_per_month is None else money_text(quota.cost_per_month),
    }


class QuotaListView(APIView):
    permission_classes = [StaffOrAdminKey]

    @extend_schema(
        operation_id="quota_list",
        summary="The quotas",
        description="Every quota of the relay: calls per day, cost per day and per month, on "
        "a key (by prefix), an agent, a team or a workflow. Staff and admin keys only.",
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                examples=[
                    OpenApiExample(
                        "One quota",
                        value={"quotas": [{**QUOTA_EXAMPLE, "costPerMonth": None}]},
                        response_only=True,
                    )
                ],
            ),
            **errors(401, 403, 429),
        },
    )
    def get(self, request: Request) -> Response:
        rows = Quota.objects.select_related("api_key")
        return Response({"quotas": [quota_json(quota) for quota in rows]})

    @extend_schema(
        operation_id="quota_create",
        summary="Set a quota on a key, an agent, a team or a workflow",
        description="Names exactly one of key (a prefix), agent, team or workflow; limits left "
        "out do not apply. A subject has one quota at most (409). Audited. A workflow's quota "
        "is checked when it is called and before each of its steps; its cost is its steps'.",
        request=QuotaSerializer,
        examples=QUOTA_REQUEST,
        responses={201: QUOTA, **errors(400, 401, 403, 404, 409, 429)},
    )
    def post(self, request: Request) -> Response:
        fields = QuotaSerializer(data=request.data)
        fields.is_valid(raise_exception=True)
        workflow = fields.validated_data.get("workflow")
        if workflow and workflow_get(workflow_id=workflow) is None:
            raise NotFound(f"no workflow {workflow!r}")
        quota = usage_services.quota_create(actor=_actor(request), **_limits(fields))
        return Response(quota_json(quota), status=201)


class QuotaDetailView(APIView):
    permission_classes = [StaffOrAdminKey]

    def _quota(self, quota_id: str) -> Quota:
        quota = None
        if quota_id.isdigit():
            quota = Quota.objects.select_related("api_key").filter(pk=int(quota_id)).first()
        if quota is None:
            raise NotFound(f"no quota {quota_id}")
        return quota

    @extend_schema(
        operation_id="quota_read",
        summary="A quota",
        description="One quota by its id. Staff and admin keys only.",
        parameters=[QUOTA_ID],
        responses={200: QUOTA, **errors(401, 403, 404, 429)},
    )
    def get(self, request: Request, quota_id: str) -> Response:
        return Response(quota_json(self._quota(quota_id)))

    @extend_schema(
        operation_id="quota_update",
        summary="Change a quota's limits",
        description="Changes the limits given (null removes one); the subject stays. Audited.",
        parameters=[QUOTA_ID],
        request=QuotaSerializer,
        examples=QUOTA_REQUEST,
        responses={200: QUOTA, **errors(400, 401, 403, 404, 429)},
    )
    def patch(self, request: Request, quota_id: str) -> Response:
        quota = self._quota(quota_id)
        fields = QuotaSerializer(data=request.data, partial=True)
        fields.is_valid(raise_exception=True)
        limits = {k: v for k, v in _limits(fields).items() if k not in SUBJECTS}
        usage_services.quota_update(actor=_actor(request), quota=quota, **limits)
        return Response(quota_json(quota))

    @extend_schema(
        operation_id="quota_delete",
        summary="Remove a quota",
        description="The subject has no limit of its own after this. Audited.",
        parameters=[QUOTA_ID],
        responses={204: None, **errors(401, 403, 404, 429)},
    )
    def delete(self, request: Request, quota_id: str) -> Response:
        usage_services.quota_delete(actor=_actor(request), quota=self._quota(quota_id))
        return Response(status=204)


SUBJECTS = ("key", "agent", "team", "workflow")


def _limits(fields: QuotaSerializer) -> dict[str, Any]:
    names = {
        "key": "key",
        "agent": "agent",
        "team": "team",
        "workflow": "workflow",
        "callsPerDay": "calls_per_day",
        "costPerDay": "cost_per_day",
        "costPerMonth": "cost_per_month",
    }
    return {names[name]: value for name, value in fields.validated_data.items()}


def _actor(request) -> str:
    return actor_of(key=caller_key(request), user=request.user)
