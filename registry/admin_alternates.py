"""The agent admin's alternates: agents that serve a send when this one is down, in order."""

from __future__ import annotations

from django.contrib import admin

from registry.models import AgentAlternate


class AgentAlternateInline(admin.TabularInline):
    model = AgentAlternate
    fk_name = "agent"
    fields = ("order", "alternate")
    raw_id_fields = ("alternate",)
    extra = 0
    verbose_name = "alternate"
    verbose_name_plural = (
        "alternates: agents that serve a send when this one is down, lowest order first"
    )
