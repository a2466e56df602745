"""Pieces the registry's admin pages share: the relay's stylesheet, escaped JSON blocks, chips,
extension badges, and the admin of records the relay writes itself (read-only)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from registry.cards import CLIENT_ROUTING_URI
from registry.views import pretty_json

# The admin shows the registry pages' health badges, extension badges, JSON and diffs.
RELAY_CSS = {"all": ["relay/relay.css"]}


def json_block(value) -> str:
    return format_html('<pre class="json">{}</pre>', pretty_json(value))


def chips(values) -> str:
    return format_html_join(" ", '<span class="chip">{}</span>', ((value,) for value in values))


def extension_badge(uri: str) -> str:
    if uri == CLIENT_ROUTING_URI:
        return format_html('<span class="ext ext-routing" title="{}">⇄ client routing</span>', uri)
    return format_html('<span class="ext" title="{}">{}</span>', uri, uri)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the relay writes itself: shown, never added, changed or deleted by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
