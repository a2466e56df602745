"""The admin of trusted token issuers (which identity providers' JWTs are callers, and how a
token's claims map to a principal) and of access rules (who may call what, which team member
may hand to which). Every change is in the audit log."""

from __future__ import annotations

from django.contrib import admin
from django.db import models, transaction

from registry import services
from registry.identity_models import AccessRule, TokenIssuer

_MAPPING = (
    "subject_claim",
    "scopes_claim",
    "call_scope",
    "read_scope",
    "register_scope",
    "admin_scope",
)


class AuditedAdmin(admin.ModelAdmin):
    """Saves and deletes with an audit entry, in one transaction."""

    audit_type = ""

    def save_model(self, request, obj, form, change: bool) -> None:
        with transaction.atomic():
            obj.save()
            services.audit_record(
                actor=services.actor_of(user=request.user),
                action="update" if change else "create",
                object_type=self.audit_type,
                object_id=str(obj.pk),
                changes={name: str(form.cleaned_data.get(name)) for name in form.changed_data},
            )

    def delete_model(self, request, obj) -> None:
        with transaction.atomic():
            services.audit_record(
                actor=services.actor_of(user=request.user),
                action="delete",
                object_type=self.audit_type,
                object_id=str(obj.pk),
                changes={"name": str(obj)},
            )
            obj.delete()


@admin.register(AccessRule)
class AccessRuleAdmin(AuditedAdmin):
    """Rules are tried by position, the first that holds decides; with none, everything is
    allowed as before. The condition is checked when saved."""

    audit_type = "accessrule"
    list_display = ("name", "kind", "effect", "position", "enabled", "condition")
    list_editable = ("enabled",)
    list_filter = ("kind", "effect", "enabled")
    search_fields = ("name", "condition", "message")
    fields = ("name", "kind", "effect", "condition", "message", "position", "enabled")


@admin.register(TokenIssuer)
class TokenIssuerAdmin(AuditedAdmin):
    audit_type = "tokenissuer"
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = ("issuer", "audience", "discovery_url", "jwks_url", "enabled")
    list_filter = ("enabled",)
    search_fields = ("issuer", "audience")
    fieldsets = (
        (None, {"fields": ("issuer", "enabled")}),
        (
            "Verification",
            {"fields": ("discovery_url", "jwks_url", "audience", "algorithms", "leeway")},
        ),
        ("Claims to principal", {"fields": _MAPPING}),
        ("Shown in the cards", {"fields": ("token_url",)}),
        ("Delegation to agents", {"fields": ("exchange_url",)}),
    )
