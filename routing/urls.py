"""Teams as A2A agents (JSON-RPC at ``/a2a/teams/{id}/``, HTTP+JSON under it; streaming calls
are routed to the SSE consumer by ``relay_project.routing`` before they get here), a task's
routing trace, and the conversation page."""

from django.urls import path

from routing import api, views
from tasks_app.api.views import JsonRpcView, RestView

urlpatterns = [
    path("a2a/tasks/<str:task_id>/trace", api.TaskTraceView.as_view(), name="task-trace"),
    path(
        "a2a/teams/<slug:target_id>/", JsonRpcView.as_view(), {"kind": "team"}, name="team-jsonrpc"
    ),
    path(
        "a2a/teams/<slug:target_id>/<path:rest>",
        RestView.as_view(),
        {"kind": "team"},
        name="team-rest",
    ),
    path("tasks/<str:task_id>/", views.task_page, name="task-page"),
]
