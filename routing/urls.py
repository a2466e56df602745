"""A task's routing trace and the conversation page; the registry's agent list and agent page,
which show health; the team pages. (Teams answer A2A calls at
``/a2a/teams/{id}/`` through the A2A consumer: ``relay_project.routing`` sends them there.)"""

from django.urls import path

from routing import (
    agent_pages,
    analytics_pages,
    api,
    prometheus,
    team_pages,
    template_api,
    usage_api,
    views,
    workflow_pages,
)
from routing.workflows import api as workflow_api
from routing.workflows import card as workflow_card

urlpatterns = [
    path("a2a/tasks/<str:task_id>/trace", api.TaskTraceView.as_view(), name="task-trace"),
    # Not an A2A path: relay_project.routing leaves it to Django.
    path(
        "a2a/agents/<slug:agent_id>/metrics", api.AgentMetricsView.as_view(), name="agent-metrics"
    ),
    path("a2a/teams/<slug:team_id>/metrics", api.TeamMetricsView.as_view(), name="team-metrics"),
    path(
        "a2a/workflows/<slug:workflow_id>/metrics",
        api.WorkflowMetricsView.as_view(),
        name="workflow-metrics",
    ),
    # No trailing slash: /a2a/workflows/{id}/ is kept for the workflow's own A2A endpoint.
    path("a2a/workflows", workflow_api.WorkflowListView.as_view(), name="workflows"),
    path(
        "a2a/workflows/<slug:workflow_id>",
        workflow_api.WorkflowDetailView.as_view(),
        name="workflow",
    ),
    path(
        "a2a/workflows/<slug:workflow_id>/.well-known/agent-card.json",
        workflow_card.workflow_agent_card,
        name="workflow-agent-card",
    ),
    path("a2a/usage", usage_api.UsageView.as_view(), name="usage"),
    path("a2a/quotas", usage_api.QuotaListView.as_view(), name="quotas"),
    path("a2a/quotas/<str:quota_id>", usage_api.QuotaDetailView.as_view(), name="quota"),
    path("a2a/templates", template_api.TemplateListView.as_view(), name="templates"),
    path("tasks/<str:task_id>/", views.task_page, name="task-page"),
    path("metrics", prometheus.MetricsView.as_view(), name="metrics"),
    path("", agent_pages.registry_page, name="registry-page"),
    path("agents/<str:agent_id>/", agent_pages.agent_page, name="agent-page"),
    path("analytics/", analytics_pages.analytics_page, name="analytics-page"),
    path("analytics/tasks/", analytics_pages.analytics_tasks_page, name="analytics-tasks-page"),
    path("teams/", team_pages.team_list_page, name="team-list-page"),
    path("teams/<str:team_id>/", team_pages.team_page, name="team-page"),
    path("workflows/", workflow_pages.workflow_list_page, name="workflow-list-page"),
    path("workflows/<slug:workflow_id>/", workflow_pages.workflow_page, name="workflow-page"),
    path(
        "workflows/<slug:workflow_id>/runs/<str:task_id>/",
        workflow_pages.workflow_run_page,
        name="workflow-run-page",
    ),
]
