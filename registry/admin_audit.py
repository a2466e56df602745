"""The audit log in the admin: read-only, written by the services."""

from __future__ import annotations

from django.contrib import admin

from registry.admin_display import RELAY_CSS, ReadOnlyAdmin, json_block
from registry.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """Who registered, changed or deleted agents, teams and keys. Read-only: entries are written
    by the services, never by hand."""

    list_display = ("at", "actor", "action", "object_type", "object_id")
    list_filter = ("object_type", "action")
    search_fields = ("actor", "object_id")
    date_hierarchy = "at"
    fields = ("at", "actor", "action", "object_type", "object_id", "changes_json")
    readonly_fields = fields

    @admin.display(description="Changes")
    def changes_json(self, entry: AuditEntry) -> str:
        return json_block(entry.changes) if entry.changes else "—"

    class Media:
        css = RELAY_CSS
