from django.urls import path

from tasks_app.api import cards, views

urlpatterns = [
    path("a2a/agents/<slug:target_id>/.well-known/agent-card.json", cards.agent_card,
         name="agent-relay-card"),
    path("a2a/agents/<slug:target_id>/", views.JsonRpcView.as_view(), {"kind": "agent"},
         name="agent-jsonrpc"),
    path("a2a/agents/<slug:target_id>/<path:rest>", views.RestView.as_view(), {"kind": "agent"},
         name="agent-rest"),
]
