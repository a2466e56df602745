"""Probe results and health events in the Django admin: read-only records, written only by the
health jobs, with filters by agent, level, outcome and category (probes) or kind and state
(events). The Agent admin shows each agent's latest ones (``registry.admin``)."""

from __future__ import annotations

from django.contrib import admin

from routing.models import HealthEvent, ProbeResult
from tasks_app.admin import ReadOnlyAdmin as NoAddNoChangeAdmin


class ReadOnlyAdmin(NoAddNoChangeAdmin):
    """Records nobody edits nor deletes in the admin: they can be listed, filtered and read."""

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


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
