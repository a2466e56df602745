"""Admin for tasks (read-only: tasks change only through the gateway) and for the target of
the relay's own endpoint."""

import json

from django.contrib import admin
from django.utils.html import format_html

from tasks_app.models import PushDelivery, PushNotificationConfig, RelayEndpoint, Task, TaskEvent


def _pretty(value) -> str:
    return format_html("<pre style='white-space:pre-wrap;max-width:70em'>{}</pre>",
                       json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class TaskEventInline(admin.TabularInline):
    model = TaskEvent
    fields = ["sequence", "kind", "created_at", "payload_pretty"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ["sequence"]

    @admin.display(description="payload")
    def payload_pretty(self, event):
        return _pretty(event.payload)

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["id", "target_kind", "target_id", "state", "caller", "created_at",
                    "updated_at"]
    list_filter = ["state", "target_kind", "client_version"]
    search_fields = ["id", "context_id", "target_id", "upstream_task_id"]
    list_select_related = ["caller"]
    date_hierarchy = "created_at"
    inlines = [TaskEventInline]
    fields = ["id", "context_id", "target_kind", "target_id", "agent", "state", "error",
              "upstream_task_id", "upstream_context_id", "caller", "client_version",
              "parent", "delegation_chain", "created_at", "updated_at", "completed_at",
              "expires_at", "status_pretty", "history_pretty", "artifacts_pretty",
              "metadata_pretty"]
    readonly_fields = fields

    @admin.display(description="status message")
    def status_pretty(self, task):
        return _pretty(task.status_message)

    @admin.display(description="history")
    def history_pretty(self, task):
        return _pretty(task.history)

    @admin.display(description="artifacts")
    def artifacts_pretty(self, task):
        return _pretty(task.artifacts)

    @admin.display(description="metadata")
    def metadata_pretty(self, task):
        return _pretty(task.metadata)


@admin.register(PushNotificationConfig)
class PushNotificationConfigAdmin(ReadOnlyAdmin):
    list_display = ["config_id", "task", "url", "auth_scheme", "created_at"]
    search_fields = ["config_id", "task__id", "url"]
    # Token and credentials are encrypted and never shown.
    fields = ["config_id", "task", "url", "auth_scheme", "created_at"]
    readonly_fields = fields


@admin.register(PushDelivery)
class PushDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["config", "outcome", "attempts", "last_error", "created_at", "delivered_at"]
    list_filter = ["outcome"]
    list_select_related = ["config"]
    readonly_fields = ["config", "event", "outcome", "attempts", "last_error", "created_at",
                       "delivered_at"]
    exclude = ["payload"]


@admin.register(RelayEndpoint)
class RelayEndpointAdmin(admin.ModelAdmin):
    list_display = ["__str__", "updated_at"]

    def has_add_permission(self, request):
        return not RelayEndpoint.objects.exists()
