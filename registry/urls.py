from django.urls import path

from registry import views

urlpatterns = [
    path("", views.registry_page, name="registry-page"),
    path("agents/<str:agent_id>/", views.agent_page, name="agent-page"),
]
