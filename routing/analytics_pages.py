"""The analytics dashboard for staff: ``/analytics/`` (the relay's volume, success rate,
latency and cost over 24 hours, 7 days or 30 days, by agent, team, workflow, key and team
member hop, from the hourly roll-ups) and ``/analytics/tasks/`` (the calls behind one line of
it, each linking to its task). Staff only, like the task page: others go to the admin login.
Each page runs a fixed number of queries, whatever the number of agents or calls."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from routing import analytics
from routing.analytics_charts import Series, Stack, bar_chart, line_chart

_LABEL_FORMATS = {"24h": "%H:%M", "7d": "%a %H:%M", "30d": "%b %d"}


def _range_of(request) -> tuple[str, str]:
    """The range asked for and an error for an unknown one (the default range is shown)."""
    asked = request.GET.get("range") or analytics.DEFAULT_RANGE
    if asked not in analytics.RANGES:
        return analytics.DEFAULT_RANGE, f"range: {asked!r} is not one of 24h, 7d, 30d"
    return asked, ""


@staff_member_required
def analytics_page(request):
    range_key, error = _range_of(request)
    focus = next(
        ((name, request.GET[name]) for name in analytics.DIMENSIONS if request.GET.get(name)),
        None,
    )
    board = analytics.dashboard(range_key=range_key, focus=focus)
    focus_query = urlencode({focus[0]: focus[1]}) + "&" if focus else ""
    labels = [bucket.start.strftime(_LABEL_FORMATS[range_key]) for bucket in board.series]
    stats = [bucket.stats for bucket in board.series]
    charts = [
        bar_chart(
            title="Calls",
            labels=labels,
            stacks=[
                Stack("chart-ok", "completed", [s.completed for s in stats]),
                Stack("chart-failed", "failed", [s.failed for s in stats]),
                Stack("chart-other", "other", [s.calls - s.completed - s.failed for s in stats]),
            ],
        ),
        line_chart(
            title="Success rate",
            labels=labels,
            series=[Series("chart-line-rate", "success", [s.success_rate for s in stats])],
            unit="%",
            ceiling=1.0,
        ),
        line_chart(
            title="Latency",
            labels=labels,
            series=[
                Series("chart-line-p50", "p50", [s.p50_ms for s in stats]),
                Series("chart-line-p95", "p95", [s.p95_ms for s in stats]),
            ],
            unit="ms",
        ),
        bar_chart(
            title="Cost",
            labels=labels,
            stacks=[Stack("chart-cost", "cost", [float(s.cost) for s in stats])],
            unit="$",
        ),
    ]
    tables = [
        {
            "key": name,
            "title": title,
            "rows": [
                {
                    "row": row,
                    "query": urlencode({"range": range_key, **row.filters}),
                }
                for row in board.tables[name]
            ],
        }
        for name, title in analytics.DIMENSIONS.items()
    ]
    context = {
        "board": board,
        "charts": charts,
        "tables": tables,
        "ranges": analytics.RANGES.values(),
        "focus_query": focus_query,
        "error": error,
    }
    return render(request, "relay/analytics.html", context, status=400 if error else 200)


@staff_member_required
def analytics_tasks_page(request):
    range_key, error = _range_of(request)
    filters = {
        name: value
        for name, value in request.GET.items()
        if name != "range" and value and not error
    }
    try:
        drill = analytics.drill_down(range_key=range_key, filters=filters)
    except analytics.BadFilter as bad:
        error = str(bad)
        drill = analytics.DrillDown(
            range=analytics.RANGES[range_key], since=None, filters=filters, records=[], more=False
        )
    context = {
        "drill": drill,
        "error": error,
        "filters": filters,
        "back": urlencode({"range": range_key}),
        "ranges": analytics.RANGES.values(),
        "filter_query": urlencode(filters) + "&" if filters else "",
    }
    return render(request, "relay/analytics_tasks.html", context, status=400 if error else 200)
