"""Routing and health in the Django admin.

- Probe results and health events: read-only records, written only by the health jobs, with
  filters by agent, level, outcome and category (probes) or kind and state (events).
- The registry's Agent admin, extended here with each agent's latest probes and events (routing
  records them, so the registry's own admin cannot show them).
- Teams, with their members' health and their latest conversations (``routing.admin_teams``).
- Workflows, with their steps edited inline (``routing.workflows.admin``).
- Task templates (``routing.admin_templates``).
"""

from __future__ import annotations

from django.contrib import admin
from django.template.loader import render_to_string
from django.urls import reverse

from registry.admin_agents import AgentAdmin
from registry.admin_display import ReadOnlyAdmin
from registry.models import Agent
from routing import selectors
from routing.models import HealthEvent, ProbeResult


@admin.register(ProbeResult)
class ProbeResultAdmin(ReadOnlyAdmin):
    list_display = ("checked_at", "agent", "level", "ok", "latency_ms", "category", "detail")
    list_filter = (("agent", admin.RelatedOnlyFieldListFilter), "level", "ok", "category")
    search_fields = ("agent__id", "detail")
    date_hierarchy = "checked_at"
    ordering = ("-checked_at", "-id")
    list_per_page = 100


@admin.register(HealthEvent)
class HealthEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "agent", "kind", "from_state", "to_state", "reason")
    list_filter = (("agent", admin.RelatedOnlyFieldListFilter), "kind", "to_state")
    search_fields = ("agent__id", "reason")
    date_hierarchy = "at"
    ordering = ("-at", "-id")
    list_per_page = 100


class AgentWithHealthAdmin(AgentAdmin):
    """The registry's Agent admin (still under "Agent registry", at the same URLs) with a
    "Health history" section before the record: the latest 50 probes and health events, and
    links to all of them."""

    fieldsets = (
        *(fieldset for fieldset in AgentAdmin.fieldsets if fieldset[0] != "Record"),
        ("Health history", {"fields": ("health_history",)}),
        *(fieldset for fieldset in AgentAdmin.fieldsets if fieldset[0] == "Record"),
    )
    readonly_fields = (*AgentAdmin.readonly_fields, "health_history")

    @admin.display(description="Latest probes and events")
    def health_history(self, agent: Agent) -> str:
        return render_to_string(
            "routing/_health_history.html",
            {
                "probes": selectors.recent_probes(agent_id=agent.pk, limit=50),
                "events": selectors.recent_health_events(agent_id=agent.pk, limit=50),
                "probes_url": reverse("admin:routing_proberesult_changelist")
                + f"?agent__id__exact={agent.pk}",
                "events_url": reverse("admin:routing_healthevent_changelist")
                + f"?agent__id__exact={agent.pk}",
            },
        )


admin.site.unregister(Agent)
admin.site.register(Agent, AgentWithHealthAdmin)

# Teams, task templates and workflows have their own modules; importing one registers it.
from routing import admin_teams, admin_templates  # noqa: E402, F401
from routing.workflows import admin as workflow_admin  # noqa: E402, F401
