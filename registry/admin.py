"""The registry in the Django admin.

Writes go through ``registry.services``, as the API's do: agents are added by registering a URL
(the card is fetched and parsed), edited with ``agent_update`` and re-fetched with
``agent_card_refresh``; API keys are made by ``api_key_create`` and ended by ``api_key_revoke``.
Card-derived data is read-only. Card content is always escaped; stored credentials and key
hashes are never shown.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IS_POPUP_VAR, csrf_protect_m
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape, format_html, format_html_join

from registry import secrets, selectors, services
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Agent, ApiKey, AuditEntry, CardSnapshot, DeclaredExtension, Skill
from registry.views import card_history, pretty_json

# The admin shows the registry pages' health badges, extension badges, JSON and diffs.
RELAY_CSS = {"all": ["relay/relay.css"]}


def _json_block(value) -> str:
    return format_html('<pre class="json">{}</pre>', pretty_json(value))


def _chips(values) -> str:
    return format_html_join(" ", '<span class="chip">{}</span>', ((value,) for value in values))


def _extension_badge(uri: str) -> str:
    if uri == CLIENT_ROUTING_URI:
        return format_html('<span class="ext ext-routing" title="{}">⇄ client routing</span>', uri)
    return format_html('<span class="ext" title="{}">{}</span>', uri, uri)


# --- Agents -----------------------------------------------------------------------------------


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
        return _chips(skill.tags)

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
        return format_html("{}<br><code>{}</code>", _extension_badge(declared.uri), declared.uri)

    @admin.display(description="Params")
    def params_json(self, declared: DeclaredExtension) -> str:
        return _json_block(declared.params) if declared.params else "—"


def _credential_header_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        max_length=100,
        label="Credential header",
        help_text="For kind “API key header”: the header the value is sent in, e.g. X-Api-Key.",
    )


def _credential_kind_field() -> forms.ChoiceField:
    return forms.ChoiceField(
        required=False,
        label="Credential kind",
        choices=[
            ("", "none (or a header, when a header name is given)"),
            *[(value, label) for value, label in Agent.CredentialKind.choices if value],
        ],
        # The admin renders help text as HTML: escaped, "<value>" is shown, not read as a tag.
        help_text=escape(
            "Bearer sends Authorization: Bearer <value>; basic sends the value user:password "
            "as Authorization: Basic; API key header sends the value in the header named "
            "below. Used on card fetches, probes and calls."
        ),
    )


def _credential_value_field(*, label: str, help_text: str) -> forms.CharField:
    # Write-only: the browser is never sent the stored value, not even masked.
    return forms.CharField(
        required=False,
        label=label,
        strip=False,
        help_text=help_text,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )


def _credential_kind(cleaned) -> str:
    """The kind asked for; none chosen with a header name given is a header."""
    kind = cleaned.get("credential_kind") or ""
    if not kind and cleaned.get("credential_header_name"):
        return Agent.CredentialKind.HEADER
    return kind


def _check_credential(form: forms.Form, kind: str, name: str, value: str) -> None:
    """Adds the form errors of a credential of ``kind`` given as ``name`` and ``value``."""
    if kind == Agent.CredentialKind.HEADER and not name:
        form.add_error("credential_header_name", "Name the header the value is sent in.")
    if kind in (Agent.CredentialKind.BEARER, Agent.CredentialKind.BASIC) and name:
        form.add_error(
            "credential_header_name",
            "Bearer and basic credentials are sent in Authorization; leave this empty.",
        )
    if value and any(character in value for character in "\r\n\x00"):
        form.add_error("credential_header_value", "The value cannot hold line breaks.")
    if kind == Agent.CredentialKind.BASIC and value and ":" not in value:
        form.add_error("credential_header_value", "A basic credential is user:password.")


class AgentRegisterForm(forms.Form):
    """Registers an agent by URL: the relay fetches and checks the card."""

    url = forms.CharField(
        max_length=2048,
        label="Agent or card URL",
        help_text="The agent's base URL or its card URL; the relay looks for the card at the "
        "well-known paths.",
    )
    agent_id = forms.SlugField(
        required=False,
        max_length=64,
        label="Id",
        help_text="Leave empty to derive one from the card's name.",
    )
    invocation_url = forms.URLField(
        required=False,
        max_length=2048,
        assume_scheme="https",
        label="Invocation URL",
        help_text="Call the agent here instead of where its card says.",
    )

    credential_kind = _credential_kind_field()
    credential_header_name = _credential_header_field()
    credential_header_value = _credential_value_field(
        label="Credential value", help_text="Stored encrypted; never shown again."
    )

    def clean(self):
        cleaned = super().clean()
        kind = _credential_kind(cleaned)
        name = cleaned.get("credential_header_name", "")
        value = cleaned.get("credential_header_value", "")
        if kind == Agent.CredentialKind.HEADER and bool(name) != bool(value):
            raise forms.ValidationError(
                "Give both the credential header and its value, or neither."
            )
        if kind and not value:
            self.add_error("credential_header_value", "Enter the credential's value.")
        elif value and not kind:
            self.add_error("credential_kind", "Choose how the value is sent.")
        _check_credential(self, kind, name, value)
        return cleaned

    def credentials(self) -> services.Credentials | None:
        kind = _credential_kind(self.cleaned_data)
        if not kind:
            return None
        name = self.cleaned_data["credential_header_name"]
        return services.Credentials(name, self.cleaned_data["credential_header_value"], kind)


class AgentChangeForm(forms.ModelForm):
    """What an operator may change (as ``services.agent_update``), plus the credential."""

    credential_kind = _credential_kind_field()
    credential_header_name = _credential_header_field()
    credential_header_value = _credential_value_field(
        label="New credential value", help_text="Leave empty to keep the stored value."
    )
    clear_credentials = forms.BooleanField(required=False, label="Remove the stored credential")
    invocation_url = forms.URLField(
        required=False,
        max_length=2048,
        assume_scheme="https",
        label="Invocation URL",
        help_text=Agent._meta.get_field("invocation_url").help_text,
    )

    class Meta:
        model = Agent
        fields = [
            "name",
            "description",
            "status",
            "invocation_url",
            "require_signature",
            *services.PROBE_FIELDS,
            *services.STREAM_FIELDS,
        ]

    def clean_probe_interval_seconds(self):
        interval = self.cleaned_data.get("probe_interval_seconds")
        if interval is not None and interval < 1:
            raise forms.ValidationError("Probe at most once a second (1 or more).")
        return interval

    def clean_probe_timeout_seconds(self):
        timeout = self.cleaned_data.get("probe_timeout_seconds")
        if timeout is not None and not 0 < timeout <= 300:
            raise forms.ValidationError("Give a timeout above 0 and at most 300 seconds.")
        return timeout

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "credential_header_name" in self.fields:
            self.fields["credential_header_name"].initial = self.instance.auth_header_name
        if "credential_kind" in self.fields:
            self.fields["credential_kind"].initial = self.instance.credential_kind or ""

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("clear_credentials"):
            return cleaned
        kind = _credential_kind(cleaned)
        name = cleaned.get("credential_header_name", "")
        value = cleaned.get("credential_header_value", "")
        stored_kind = self.instance.credential_kind
        if value and not kind:
            self.add_error("credential_header_name", "Name the header the value is sent in.")
            return cleaned
        if not kind and self.instance.has_credentials:
            self.add_error(
                "credential_header_name",
                "To remove the credential, tick “Remove the stored credential”.",
            )
            return cleaned
        changed = kind != (stored_kind or "") or (
            kind == Agent.CredentialKind.HEADER and name != self.instance.auth_header_name
        )
        if kind and changed and not value:
            self.add_error(
                "credential_header_value",
                "Enter the value to send in this header."
                if kind == Agent.CredentialKind.HEADER
                else "Enter the credential's value.",
            )
        _check_credential(self, kind, name, value)
        return cleaned

    def credentials_change(self) -> dict:
        """``{"credentials": ...}`` for ``agent_update`` when the credential changes, else {}."""
        if self.cleaned_data.get("clear_credentials"):
            return {"credentials": None}
        if self.cleaned_data.get("credential_header_value"):
            return {
                "credentials": services.Credentials(
                    self.cleaned_data["credential_header_name"],
                    self.cleaned_data["credential_header_value"],
                    _credential_kind(self.cleaned_data),
                )
            }
        return {}


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
    inlines = (SkillInline, DeclaredExtensionInline)
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
        ("Current card", {"fields": ("current_card",)}),
        ("Card history", {"fields": ("history",)}),
        ("Record", {"fields": ("created_by", "created_at", "updated_at")}),
    )
    readonly_fields = (
        "id",
        "credential_status",
        "card_url",
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
        return _chips(names) if names else "—"

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
        return _json_block(snapshot.raw) if snapshot else "—"

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


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the relay writes itself: shown, never added, changed or deleted by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


# --- Card snapshots ---------------------------------------------------------------------------


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
        return _json_block(snapshot.raw)

    @admin.display(description="Card as 1.0 ProtoJSON")
    def normalized_json(self, snapshot: CardSnapshot) -> str:
        return _json_block(snapshot.normalized)


# --- API keys ---------------------------------------------------------------------------------


class RevokedFilter(admin.SimpleListFilter):
    title = "revoked"
    parameter_name = "revoked"

    def lookups(self, request, model_admin):
        return [("no", "Not revoked"), ("yes", "Revoked")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(revoked_at__isnull=self.value() == "no")
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are made here and revoked here; otherwise they do not change (revoke and make a new
    one instead), so a key cannot quietly become an admin key. The key is shown once, at
    creation; only its hash is stored, and the hash is never shown."""

    list_display = (
        "name",
        "prefix",
        "is_admin",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
        "usable",
    )
    list_filter = ("is_admin", "can_call", "can_register", "can_read_registry", RevokedFilter)
    search_fields = ("name", "prefix")
    actions = ("revoke",)
    filter_horizontal = ("agents", "teams")
    scope_fields = ("can_read_registry", "can_register", "can_call", "agents", "teams")
    add_fields = ("name", "is_admin", *scope_fields, "expires_at")
    view_fields = (
        "name",
        "prefix",
        "token_issuer",
        "token_subject",
        "is_admin",
        *scope_fields,
        "created_at",
        "created_by",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )

    @admin.display(description="Usable", boolean=True)
    def usable(self, api_key: ApiKey) -> bool:
        return api_key.is_usable

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else self.view_fields

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_revoke_permission(self, request) -> bool:
        return request.user.has_perm("registry.change_apikey")

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        data = form.cleaned_data
        created, key = services.api_key_create(
            name=data["name"],
            is_admin=data["is_admin"],
            expires_at=data["expires_at"],
            created_by=request.user,
            can_read_registry=data["can_read_registry"],
            can_register=data["can_register"],
            can_call=data["can_call"],
            agents=[agent.pk for agent in data["agents"]],
            teams=[team.pk for team in data["teams"]],
        )
        # The admin goes on with ``obj`` (log entry, redirect): make it the stored key.
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(created, field.attname))
        obj._state = created._state
        self.message_user(
            request,
            format_html(
                "The new key for “{}” is <code>{}</code>. Copy it now: only its hash is "
                "stored, so it cannot be shown again.",
                created.name,
                key,
            ),
            messages.WARNING,
        )

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke(self, request, queryset) -> None:
        revoked = []
        for api_key in queryset.filter(revoked_at__isnull=True).order_by("name"):
            services.api_key_revoke(api_key=api_key, actor=services.actor_of(user=request.user))
            revoked.append(str(api_key))
        if revoked:
            self.message_user(request, f"Revoked: {', '.join(revoked)}.", messages.SUCCESS)
        else:
            self.message_user(request, "The selected keys were already revoked.", messages.INFO)

    def save_related(self, request, form, formsets, change: bool) -> None:
        """Nothing: ``api_key_create`` stored the key's agents and teams with it."""


# --- Audit log --------------------------------------------------------------------------------


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
        return _json_block(entry.changes) if entry.changes else "—"

    class Media:
        css = RELAY_CSS


# The peer relays this relay follows (their admin lives beside the peer sync), and the identity
# providers whose tokens are callers.
from registry import admin_identity, admin_peers  # noqa: E402, F401
