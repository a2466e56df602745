from django.urls import path

from registry.api import views

urlpatterns = [
    path("registry", views.RegistryView.as_view(), name="registry"),
    path("registry/<slug:agent_id>", views.AgentDetailView.as_view(), name="registry-agent"),
    path("registry/<slug:agent_id>/card", views.AgentCardView.as_view(), name="registry-card"),
    path("registry/<slug:agent_id>/refresh", views.AgentRefreshView.as_view(),
         name="registry-refresh"),
    path("registry/<slug:agent_id>/history", views.AgentHistoryView.as_view(),
         name="registry-history"),
    path("skills", views.SkillSearchView.as_view(), name="skills"),
]
