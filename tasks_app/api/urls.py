from django.urls import path

from tasks_app.api import cards, task_api

urlpatterns = [
    path(".well-known/agent-card.json", cards.relay_agent_card, name="relay-card"),
    path(".well-known/agent.json", cards.relay_legacy_card, name="relay-card-0.2"),
    path("a2a/relay/.well-known/agent-card.json", cards.relay_agent_card),
    # With the registry's API (/a2a/registry/{id}...), which cannot build the relay's card.
    path("a2a/registry/<slug:agent_id>/card", cards.AgentCardView.as_view(), name="registry-card"),
    path("a2a/tasks/send", task_api.SendView.as_view(), name="task-send"),
    path("a2a/tasks/sendBatch", task_api.SendBatchView.as_view(), name="task-send-batch"),
    # Served by the A2A consumer; the pattern gives the call its place in the API docs.
    path(
        "a2a/tasks/sendSubscribe", task_api.SendSubscribeView.as_view(), name="task-send-subscribe"
    ),
    path("a2a/tasks/<str:task_id>", task_api.TaskDetailView.as_view(), name="task-detail"),
    path("a2a/tasks/<str:task_id>/cancel", task_api.TaskCancelView.as_view(), name="task-cancel"),
    path(
        "a2a/agents/<slug:target_id>/.well-known/agent-card.json",
        cards.agent_card,
        name="agent-relay-card",
    ),
    path(
        "a2a/teams/<slug:team_id>/.well-known/agent-card.json",
        cards.team_agent_card,
        name="team-relay-card",
    ),
]
