"""The usage dashboard, for staff: volume, success rate, latency (p50, p95) and cost by agent,
team or key over the last day, week or month, an hourly chart drawn as SVG on the server
(``routing.metrics``), and a drill-down from a row to its latest calls and their task pages.
Reads from ``tasks_app.usage.reports``."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render
from django.utils import timezone

from registry.models import ApiKey
from routing import metrics
from tasks_app.models import UsageRecord
from tasks_app.usage import reports
from tasks_app.usage.records import money_text

PERIODS = {"day": 1, "week": 7, "month": 30}
GROUPS = ("agent", "team", "key")
DRILL_DOWN = 50
_FIELD = {"agent": "agent_id", "team": "team_id", "key": "caller_id"}


@staff_member_required
def usage_page(request):
    period = request.GET.get("period") if request.GET.get("period") in PERIODS else "day"
    group = request.GET.get("group") if request.GET.get("group") in GROUPS else "agent"
    chosen = request.GET.get("id", "")[:64]
    until = timezone.now()
    since = until - timedelta(days=PERIODS[period])
    subject = _subject(group, chosen)
    filters = {"agent": chosen} if group == "agent" and chosen else {}
    filters |= {"team": chosen} if group == "team" and chosen else {}
    caller_id = subject.pk if isinstance(subject, ApiKey) else None
    rows = reports.usage_totals(since=since, until=until, group=group)
    hours = reports.usage_totals(
        since=since, until=until, group="hour", filters=filters, caller_id=caller_id
    )
    series = metrics.hourly_series(
        since,
        until,
        [
            metrics.HourCounts(
                start=hour,
                latency_avg_ms=found.latency_sum_ms / found.calls if found.calls else None,
                tasks_completed=found.calls - found.failed,
                tasks_failed=found.failed,
            )
            for hour, found in hours.items()
        ],
    )
    keys = dict(
        ApiKey.objects.filter(pk__in=[k for k in rows if group == "key"]).values_list("pk", "name")
    )
    context = {
        "period": period,
        "periods": list(PERIODS),
        "group": group,
        "groups": GROUPS,
        "chosen": chosen,
        "rows": [
            {"id": value, "label": keys.get(value, value) or "—", **found.as_json()}
            for value, found in sorted(rows.items(), key=lambda item: -item[1].calls)
        ],
        "chart": metrics.hour_chart(series),
        "calls": _latest(group, subject, chosen) if chosen else [],
        "total": sum(found.calls for found in hours.values()),
    }
    return render(request, "routing/usage.html", context)


def _subject(group: str, chosen: str):
    if group == "key" and chosen.isdigit():
        return ApiKey.objects.filter(pk=int(chosen)).first()
    return chosen


def _latest(group: str, subject, chosen: str) -> list[UsageRecord]:
    value = subject.pk if isinstance(subject, ApiKey) else chosen
    if value is None:
        return []
    calls = list(UsageRecord.objects.filter(**{_FIELD[group]: value}).order_by("-at")[:DRILL_DOWN])
    for call in calls:
        call.cost_text = "—" if call.cost is None else money_text(call.cost)
    return calls
