"""Probe results and health events in the Django admin: read-only records, written only by the
health jobs, with filters by agent, level, outcome and category (probes) or kind and state
(events). The Agent admin shows each agent's latest ones (``registry.admin``)."""

from __future__ import annotations

from django.contrib import admin

from registry.admin import ReadOnlyAdmin
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
