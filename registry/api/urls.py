from django.urls import path

from registry.api import select, views

urlpatterns = [
    path("registry", views.RegistryView.as_view(), name="registry"),
    # Before registry/<id>: "import" and "removed" are not agent ids.
    path("registry/import", views.CatalogImportView.as_view(), name="registry-import"),
    path("registry/removed", views.RemovedAgentsView.as_view(), name="registry-removed"),
    path("registry/<slug:agent_id>", views.AgentDetailView.as_view(), name="registry-agent"),
    # registry/<id>/card is tasks_app's (the relay's version of a card is built there).
    path(
        "registry/<slug:agent_id>/refresh",
        views.AgentRefreshView.as_view(),
        name="registry-refresh",
    ),
    path(
        "registry/<slug:agent_id>/history",
        views.AgentHistoryView.as_view(),
        name="registry-history",
    ),
    path("skills", views.SkillSearchView.as_view(), name="skills"),
    path("select", select.SelectView.as_view(), name="select"),
    # No trailing slash: /a2a/teams/{id}/ is the team's A2A endpoint (tasks_app).
    path("teams", views.TeamListView.as_view(), name="teams"),
    path("teams/<slug:team_id>", views.TeamDetailView.as_view(), name="team"),
]
