"""The API key admin: keys are made with ``api_key_create`` (shown once) and ended with
``api_key_revoke``; the stored hash is never shown."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.html import format_html

from registry import services
from registry.models import ApiKey


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
