"""The agent admin: the list with its filters, the agent's page (card, health, signature,
credential), registering by URL and re-fetching cards. Writes go through ``registry.services``."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IS_POPUP_VAR, csrf_protect_m
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from registry import secrets, selectors, services
from registry.admin_alternates import AgentAlternateInline
from registry.admin_cards import DeclaredExtensionInline, SkillInline
from registry.admin_display import RELAY_CSS, chips, json_block
from registry.admin_forms import AgentChangeForm, AgentRegisterForm
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Agent, CardSnapshot, DeclaredExtension
from registry.views import card_history


class DeclaredExtensionFilter(admin.SimpleListFilter):
    """Agents that declare one extension URI, chosen among those any agent declares."""

    title = "declared extension"
    parameter_name = "extension"

    def lookups(self, request, model_admin):
        uris = DeclaredExtension.objects.order_by("uri").values_list("uri", flat=True).distinct()
        return [(uri, "client routing" if uri == CLIENT_ROUTING_URI else uri) for uri in uris]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return selectors.filter_agents(queryset, selectors.AgentFilters(extension=self.value()))


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentChangeForm
    list_display = (
        "id",
        "name",
        "status",
        "health_badge",
        "versions",
        "streaming",
        "client_routing",
        "card_fetched_at",
    )
    list_display_links = ("id", "name")
    # Every column comes from the agent row itself (client routing from its facet column), so
    # the list needs no joins or prefetches.
    list_select_related = False
    list_filter = (
        "status",
        "health",
        "card_protocol_version",
        DeclaredExtensionFilter,
        "streaming",
        "signature_status",
        ("origin_peer", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("id", "name", "description", "card_url")
    ordering = ("id",)
    inlines = (SkillInline, DeclaredExtensionInline, AgentAlternateInline)
    actions = ("refetch_cards",)
    fieldsets = (
        (None, {"fields": ("id", "name", "description", "status", "invocation_url")}),
        (
            "Credential",
            {
                "fields": (
                    "credential_status",
                    "credential_kind",
                    "credential_header_name",
                    "credential_header_value",
                    "clear_credentials",
                ),
            },
        ),
        (
            "Card",
            {
                "fields": (
                    "card_url",
                    "mcp_server",
                    "version",
                    "card_protocol_version",
                    "versions",
                    "interfaces_table",
                    "capabilities",
                    "default_modes",
                    "provider",
                    "documentation_url",
                    "icon_url",
                    "card_fetched_at",
                ),
            },
        ),
        (
            "Health",
            {
                "fields": (
                    "health_badge",
                    "health_checked_at",
                    "health_latency_ms",
                    "health_detail",
                    "breaker_state",
                    "breaker_failures",
                    "breaker_opened_at",
                ),
            },
        ),
        (
            "Signature and origin",
            {"fields": ("signature_summary", "require_signature", "origin_summary")},
        ),
        ("Probes", {"fields": services.PROBE_FIELDS}),
        ("Streams", {"fields": services.STREAM_FIELDS}),
        ("Retries", {"fields": services.RETRY_FIELDS}),
        ("Failover", {"fields": services.FAILOVER_FIELDS}),
        ("Delegation", {"fields": services.DELEGATION_FIELDS}),
        ("MCP", {"fields": services.MCP_FIELDS}),
        ("Current card", {"fields": ("current_card",)}),
        ("Card history", {"fields": ("history",)}),
        ("Record", {"fields": ("created_by", "created_at", "updated_at")}),
    )
    readonly_fields = (
        "id",
        "credential_status",
        "card_url",
        "mcp_server",
        "version",
        "card_protocol_version",
        "versions",
        "interfaces_table",
        "capabilities",
        "default_modes",
        "provider",
        "documentation_url",
        "icon_url",
        "card_fetched_at",
        "health_badge",
        "health_checked_at",
        "health_latency_ms",
        "health_detail",
        "breaker_state",
        "breaker_failures",
        "breaker_opened_at",
        "current_card",
        "history",
        "created_by",
        "created_at",
        "updated_at",
        "signature_summary",
        "origin_summary",
    )
    register_fieldsets = (
        (None, {"fields": ("url", "agent_id", "invocation_url")}),
        (
            "Credential",
            {"fields": ("credential_kind", "credential_header_name", "credential_header_value")},
        ),
    )

    class Media:
        css = RELAY_CSS

    # -- columns and read-only fields --

    @admin.display(description="Health", ordering="health")
    def health_badge(self, agent: Agent) -> str:
        return format_html(
            '<span class="health health-{}" title="{}"><span class="dot"></span>{}</span>',
            agent.health,
            agent.health_detail,
            agent.get_health_display(),
        )

    @admin.display(description="A2A")
    def versions(self, agent: Agent) -> str:
        return ", ".join(agent.protocol_versions) or "—"

    @admin.display(description="Routing", boolean=True)
    def client_routing(self, agent: Agent) -> bool:
        return agent.supports_client_routing

    @admin.display(description="Interfaces")
    def interfaces_table(self, agent: Agent) -> str:
        if not agent.interfaces:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            (
                (i.get("url", ""), i.get("protocolBinding", ""), i.get("protocolVersion", ""))
                for i in agent.interfaces
            ),
        )
        return format_html(
            "<table><thead><tr><th>URL</th><th>Binding</th><th>Version</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="Capabilities")
    def capabilities(self, agent: Agent) -> str:
        names = [
            name
            for name, on in [
                ("streaming", agent.streaming),
                ("push notifications", agent.push_notifications),
                ("extended card", agent.extended_card),
                ("client routing", agent.supports_client_routing),
            ]
            if on
        ]
        return chips(names) if names else "—"

    @admin.display(description="Default modes")
    def default_modes(self, agent: Agent) -> str:
        return format_html(
            "in: {} · out: {}",
            ", ".join(agent.default_input_modes) or "—",
            ", ".join(agent.default_output_modes) or "—",
        )

    @admin.display(description="Provider")
    def provider(self, agent: Agent) -> str:
        return " · ".join(v for v in (agent.provider_organization, agent.provider_url) if v) or "—"

    @admin.display(description="Stored credential")
    def credential_status(self, agent: Agent) -> str:
        if not agent.has_credentials:
            return "none"
        try:
            shown = secrets.mask(secrets.decrypt(agent.auth_header_value))
        except ValueError:
            shown = "cannot be decrypted with the current key"
        if agent.credential_kind == Agent.CredentialKind.HEADER:
            return format_html("<code>{}</code> is set ({})", agent.auth_header_name, shown)
        return format_html("{} is set ({})", agent.get_auth_kind_display(), shown)

    @admin.display(description="Signature")
    def signature_summary(self, agent: Agent) -> str:
        line = format_html(
            "<strong>{}</strong>{}",
            agent.get_signature_status_display(),
            format_html(" (key <code>{}</code>)", agent.signature_kid)
            if agent.signature_kid
            else "",
        )
        if agent.signature_detail:
            line = format_html("{}: {}", line, agent.signature_detail)
        if agent.card_refused_reason:
            line = format_html(
                "{}<br>A newer card was refused at {} and the one before kept: {}",
                line,
                agent.card_refused_at,
                agent.card_refused_reason,
            )
        return line

    @admin.display(description="Origin")
    def origin_summary(self, agent: Agent) -> str:
        if agent.origin_peer_id is None:
            return "registered here"
        return format_html(
            "mirrored from the peer relay <strong>{}</strong> ({}), id <code>{}</code>; "
            "read-only here",
            agent.origin_peer.name,
            agent.origin_peer.url,
            agent.origin_id,
        )

    def has_change_permission(self, request, obj=None) -> bool:
        # A mirror of a peer relay's agent changes at its origin only.
        if obj is not None and obj.origin_peer_id is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.origin_peer_id is not None:
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="Card as fetched")
    def current_card(self, agent: Agent) -> str:
        snapshot = agent.current_snapshot
        return json_block(snapshot.raw) if snapshot else "—"

    @admin.display(description="Snapshots")
    def history(self, agent: Agent) -> str:
        # The template escapes every card value; render_to_string returns it marked safe.
        return render_to_string(
            "registry/_card_history.html",
            {"history": card_history(selectors.agent_snapshots(agent=agent))},
        )

    # -- writes through the services --

    def save_model(self, request, obj: Agent, form: AgentChangeForm, change: bool) -> None:
        if not change:  # adding goes through add_view and services.agent_register
            raise PermissionDenied
        fields = {
            name: form.cleaned_data[name]
            for name in form.changed_data
            if name in AgentChangeForm.Meta.fields
        }
        fields |= form.credentials_change()
        if fields:
            services.agent_update(
                agent=obj, fields=fields, actor=services.actor_of(user=request.user)
            )

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Snapshots are the agent's history and go with it; their admin is read-only, so the
        # permission to delete the agent is the one that counts.
        perms_needed.discard(CardSnapshot._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj: Agent) -> None:
        services.agent_delete(agent=obj, actor=services.actor_of(user=request.user))

    def delete_queryset(self, request, queryset) -> None:
        for agent in queryset:
            services.agent_delete(agent=agent, actor=services.actor_of(user=request.user))

    @csrf_protect_m
    def add_view(self, request, form_url="", extra_context=None):
        """Registers an agent by URL with ``services.agent_register``. Unlike the model form
        this replaces, it runs outside a transaction: the card is fetched before the service
        opens its own, so no database lock is held while waiting on the agent."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = AgentRegisterForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                agent = services.agent_register(
                    url=form.cleaned_data["url"],
                    agent_id=form.cleaned_data["agent_id"] or None,
                    invocation_url=form.cleaned_data["invocation_url"],
                    credentials=form.credentials(),
                    actor=services.actor_of(user=request.user),
                    mcp_server=form.cleaned_data["mcp_server"],
                )
            except services.RegistryError as error:
                form.add_error(None, f"The agent could not be registered: {error.message}")
            else:
                self.log_addition(request, agent, [{"added": {}}])
                self.message_user(
                    request,
                    f"Registered “{agent.id}” ({agent.name}, A2A "
                    f"{', '.join(agent.protocol_versions) or '?'}) from {agent.card_url}.",
                    messages.SUCCESS,
                )
                if "_addanother" in request.POST:
                    return HttpResponseRedirect(request.path)
                return HttpResponseRedirect(
                    reverse(
                        "admin:registry_agent_change",
                        args=[agent.pk],
                        current_app=self.admin_site.name,
                    )
                )
        admin_form = helpers.AdminForm(
            form, list(self.register_fieldsets), {}, (), model_admin=self
        )
        context = {
            **self.admin_site.each_context(request),
            "title": "Register an agent",
            "subtitle": None,
            "adminform": admin_form,
            "object_id": None,
            "original": None,
            "is_popup": IS_POPUP_VAR in request.GET,
            "to_field": None,
            "media": self.media + admin_form.media,
            "inline_admin_formsets": [],
            "errors": helpers.AdminErrorList(form, []),
            "preserved_filters": self.get_preserved_filters(request),
            "show_save_and_continue": False,
            **(extra_context or {}),
        }
        return self.render_change_form(request, context, add=True, form_url=form_url)

    @admin.action(description="Re-fetch cards", permissions=["change"])
    def refetch_cards(self, request, queryset) -> None:
        """Fetches each selected agent's card again and says which changed, which did not, and
        which could not be fetched (and why)."""
        changed, unchanged, failed = [], [], []
        for agent in queryset.order_by("id"):
            try:
                refreshed = services.agent_card_refresh(agent=agent)
            except services.RegistryError as error:
                failed.append(f"{agent.id} ({error.message})")
                continue
            (changed if refreshed else unchanged).append(agent.id)
        if changed:
            self.message_user(
                request,
                f"Card changed, new snapshot stored: {', '.join(changed)}.",
                messages.SUCCESS,
            )
        if unchanged:
            self.message_user(request, f"Card unchanged: {', '.join(unchanged)}.", messages.INFO)
        if failed:
            self.message_user(request, f"Could not fetch: {'; '.join(failed)}.", messages.ERROR)
