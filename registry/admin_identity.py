"""The admin of trusted token issuers: which identity providers' JWTs are callers, and how a
token's claims map to a principal. Every change is in the audit log."""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction

from registry import services
from registry.identity_models import TokenIssuer

_MAPPING = (
    "subject_claim",
    "scopes_claim",
    "call_scope",
    "read_scope",
    "register_scope",
    "admin_scope",
)


@admin.register(TokenIssuer)
class TokenIssuerAdmin(admin.ModelAdmin):
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
    )

    def save_model(self, request, obj: TokenIssuer, form, change: bool) -> None:
        with transaction.atomic():
            obj.save()
            services.audit_record(
                actor=services.actor_of(user=request.user),
                action="update" if change else "create",
                object_type="tokenissuer",
                object_id=str(obj.pk),
                changes={name: form.cleaned_data.get(name) for name in form.changed_data},
            )

    def delete_model(self, request, obj: TokenIssuer) -> None:
        with transaction.atomic():
            services.audit_record(
                actor=services.actor_of(user=request.user),
                action="delete",
                object_type="tokenissuer",
                object_id=str(obj.pk),
                changes={"issuer": obj.issuer},
            )
            obj.delete()
