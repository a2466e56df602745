"""Admin for tasks (read-only: tasks change only through the gateway) and for the target of
the relay's own endpoint.

A task's page reads top to bottom: its state and where it went, links to the conversation page
(``/tasks/{id}/``, with the routing diagram), the answer, the artifacts (text, JSON, file
links), a timeline of its events, then the details; the stored JSON comes last, folded.
"""

import json

from django.contrib import admin
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from tasks_app import task_display
from tasks_app.models import PushDelivery, PushNotificationConfig, RelayEndpoint, Task, TaskEvent

# The admin shows the relay pages' badges and JSON blocks.
RELAY_CSS = {"all": ["relay/relay.css"]}
TIMELINE_EVENTS = 200


def _pretty(value) -> str:
    return format_html(
        '<pre class="json">{}</pre>',
        json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False),
    )


def _page_url(name: str, *args) -> str:
    """A page of the relay by URL name, or "" when no app serves it."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["short_id", "target", "state_badge", "caller", "created_at", "updated_at"]
    list_display_links = ["short_id"]
    list_filter = ["state", "target_kind", "client_version"]
    search_fields = ["id", "context_id", "target_id", "upstream_task_id"]
    list_select_related = ["caller"]
    date_hierarchy = "created_at"
    fieldsets = [
        (None, {"fields": ["overview", "error"]}),
        ("Answer", {"fields": ["answer"]}),
        ("Artifacts", {"fields": ["artifacts_shown"]}),
        ("Timeline", {"fields": ["timeline"]}),
        (
            "Details",
            {
                "fields": [
                    "context_id",
                    "upstream_task_id",
                    "upstream_context_id",
                    "client_version",
                    "parent",
                    "delegation_chain",
                    "completed_at",
                    "expires_at",
                ]
            },
        ),
        (
            "Stored JSON",
            {
                "classes": ["collapse"],
                "fields": [
                    "status_pretty",
                    "history_pretty",
                    "artifacts_pretty",
                    "metadata_pretty",
                ],
            },
        ),
    ]
    readonly_fields = [
        "overview",
        "error",
        "answer",
        "artifacts_shown",
        "timeline",
        "context_id",
        "upstream_task_id",
        "upstream_context_id",
        "client_version",
        "parent",
        "delegation_chain",
        "completed_at",
        "expires_at",
        "status_pretty",
        "history_pretty",
        "artifacts_pretty",
        "metadata_pretty",
    ]

    class Media:
        css = RELAY_CSS

    # -- the list --

    @admin.display(description="Task", ordering="id")
    def short_id(self, task: Task) -> str:
        return format_html('<code title="{}">{}…</code>', task.pk, task.pk[:13])

    @admin.display(description="Target", ordering="target_id")
    def target(self, task: Task) -> str:
        return f"{task.target_kind} {task.target_id}"

    @admin.display(description="State", ordering="state")
    def state_badge(self, task: Task) -> str:
        return format_html(
            '<span class="task-state task-state-{}">{}</span>', task.state, task.state
        )

    # -- the page --

    @admin.display(description="Task")
    def overview(self, task: Task) -> str:
        page_name = "team-page" if task.target_kind == "team" else "agent-page"
        return render_to_string(
            "admin/tasks_app/task_overview.html",
            {
                "task": task,
                "target_url": _page_url(page_name, task.target_id) if task.target_id else "",
                "conversation_url": _page_url("task-page", task.pk),
            },
        )

    @admin.display(description="Last message")
    def answer(self, task: Task) -> str:
        message = task.status_message or {}
        return render_to_string(
            "admin/tasks_app/parts.html",
            {
                "parts": task_display.shown_parts(message.get("parts")),
                "empty": "No message with the current state.",
            },
        )

    @admin.display(description="Artifacts")
    def artifacts_shown(self, task: Task) -> str:
        artifacts = [
            {
                "name": artifact.get("name") or artifact.get("artifactId") or "artifact",
                "description": artifact.get("description") or "",
                "parts": task_display.artifact_parts(artifact.get("parts")),
            }
            for artifact in (task.artifacts or [])
            if isinstance(artifact, dict)
        ]
        return render_to_string("admin/tasks_app/artifacts.html", {"artifacts": artifacts})

    @admin.display(description="Events")
    def timeline(self, task: Task) -> str:
        events = list(
            TaskEvent.objects.filter(task=task)
            .order_by("sequence")
            .values_list("sequence", "created_at", "kind", "payload")[: TIMELINE_EVENTS + 1]
        )
        entries = [
            task_display.timeline_entry(sequence=sequence, at=at, kind=kind, payload=payload)
            for sequence, at, kind, payload in events[:TIMELINE_EVENTS]
        ]
        return render_to_string(
            "admin/tasks_app/timeline.html",
            {
                "entries": entries,
                "more": max(task.last_sequence - TIMELINE_EVENTS, 0)
                if len(events) > TIMELINE_EVENTS
                else 0,
            },
        )

    @admin.display(description="Status")
    def status_pretty(self, task):
        return _pretty(task.status_message)

    @admin.display(description="History")
    def history_pretty(self, task):
        return _pretty(task.history)

    @admin.display(description="Artifacts")
    def artifacts_pretty(self, task):
        return _pretty(task.artifacts)

    @admin.display(description="Metadata")
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
    readonly_fields = [
        "config",
        "event",
        "outcome",
        "attempts",
        "last_error",
        "created_at",
        "delivered_at",
    ]
    exclude = ["payload"]


@admin.register(RelayEndpoint)
class RelayEndpointAdmin(admin.ModelAdmin):
    list_display = ["__str__", "updated_at"]

    def has_add_permission(self, request):
        return not RelayEndpoint.objects.exists()
