"""A task's routing trace and the conversation page. (Teams answer A2A calls at
``/a2a/teams/{id}/`` through the A2A consumer: ``relay_project.routing`` sends them there.)"""

from django.urls import path

from routing import api, prometheus, views

urlpatterns = [
    path("a2a/tasks/<str:task_id>/trace", api.TaskTraceView.as_view(), name="task-trace"),
    # Not an A2A path: relay_project.routing leaves it to Django.
    path("a2a/agents/<slug:agent_id>/metrics", api.AgentMetricsView.as_view(),
         name="agent-metrics"),
    path("tasks/<str:task_id>/", views.task_page, name="task-page"),
    path("metrics", prometheus.MetricsView.as_view(), name="metrics"),
]
