"""The admin of agents' prices and of quotas on keys, agents, teams and workflows; every change
is in the audit log. (What the calls cost is in the usage records, ``tasks_app``.)"""

from __future__ import annotations

from django.contrib import admin

from registry.admin_identity import AuditedAdmin
from registry.usage_models import AgentPrice, Quota


@admin.register(AgentPrice)
class AgentPriceAdmin(AuditedAdmin):
    """A call of the agent costs ``per_call`` plus its reported tokens at the prices per
    million; applies to the calls that end from now on."""

    audit_type = "agentprice"
    list_display = ("agent", "per_call", "per_million_input_tokens", "per_million_output_tokens")
    list_select_related = ("agent",)
    search_fields = ("agent__id", "agent__name")
    autocomplete_fields = ("agent",)
    fields = ("agent", "per_call", "per_million_input_tokens", "per_million_output_tokens")


@admin.register(Quota)
class QuotaAdmin(AuditedAdmin):
    """A quota names one key, agent, team or workflow (by its id); an empty limit does not
    apply. Days and months are UTC; a refused call is in the audit log."""

    audit_type = "quota"
    list_display = ("__str__", "calls_per_day", "cost_per_day", "cost_per_month")
    list_select_related = ("api_key", "agent", "team")
    autocomplete_fields = ("api_key", "agent")  # teams are few: a plain choice
    fields = (
        "api_key",
        "agent",
        "team",
        "workflow",
        "calls_per_day",
        "cost_per_day",
        "cost_per_month",
    )
