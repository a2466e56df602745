"""What an agent's card says, in the admin: its skills and declared extensions (inlines of the
agent's page) and the card history. All read-only: a card refresh replaces them."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from registry.admin_display import RELAY_CSS, ReadOnlyAdmin, chips, extension_badge, json_block
from registry.models import CardSnapshot, DeclaredExtension, Skill


class SkillInline(admin.TabularInline):
    """The card's skills, as the last fetch left them: read-only, a refresh replaces them."""

    model = Skill
    fields = ("skill_id", "name", "description", "tag_list", "example_list", "modes")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Tags")
    def tag_list(self, skill: Skill) -> str:
        return chips(skill.tags)

    @admin.display(description="Examples")
    def example_list(self, skill: Skill) -> str:
        return (
            format_html_join("", "<div>“{}”</div>", ((example,) for example in skill.examples))
            or "—"
        )

    @admin.display(description="Input → output")
    def modes(self, skill: Skill) -> str:
        return format_html(
            "{} → {}",
            ", ".join(skill.effective_input_modes) or "—",
            ", ".join(skill.effective_output_modes) or "—",
        )


class DeclaredExtensionInline(admin.TabularInline):
    """Extensions the card declares: read-only, a refresh replaces them."""

    model = DeclaredExtension
    fields = ("extension", "description", "required", "params_json")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name = "declared extension"

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="URI")
    def extension(self, declared: DeclaredExtension) -> str:
        return format_html("{}<br><code>{}</code>", extension_badge(declared.uri), declared.uri)

    @admin.display(description="Params")
    def params_json(self, declared: DeclaredExtension) -> str:
        return json_block(declared.params) if declared.params else "—"


@admin.register(CardSnapshot)
class CardSnapshotAdmin(ReadOnlyAdmin):
    """The card history: what each fetch that changed the card stored. Read-only."""

    list_display = ("agent", "fetched_at", "protocol_version", "short_hash", "source_url")
    list_select_related = ("agent",)
    list_filter = ("protocol_version",)
    search_fields = ("agent__id", "agent__name", "content_hash")
    date_hierarchy = "fetched_at"
    ordering = ("agent_id", "-fetched_at", "-id")
    fields = (
        "agent",
        "fetched_at",
        "protocol_version",
        "content_hash",
        "source_url",
        "raw_json",
        "normalized_json",
    )
    readonly_fields = fields

    class Media:
        css = RELAY_CSS

    @admin.display(description="Hash", ordering="content_hash")
    def short_hash(self, snapshot: CardSnapshot) -> str:
        return format_html(
            '<code title="{}">{}</code>', snapshot.content_hash, snapshot.content_hash[:12]
        )

    @admin.display(description="Card as fetched")
    def raw_json(self, snapshot: CardSnapshot) -> str:
        return json_block(snapshot.raw)

    @admin.display(description="Card as 1.0 ProtoJSON")
    def normalized_json(self, snapshot: CardSnapshot) -> str:
        return json_block(snapshot.normalized)
