"""The admin of trusted token issuers (which identity providers' JWTs are callers, and how a
token's claims map to a principal) and of access rules (who may call what, which team member
may hand to which). Every change is in the audit log."""

from __future__ import annotations

from django import forms
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
    secret_fields: tuple[str, ...] = ()
    """Form fields whose values the audit entry leaves out (it says they changed)."""

    def save_model(self, request, obj, form, change: bool) -> None:
        changes = {
            name: "(changed)" if name in self.secret_fields else str(form.cleaned_data.get(name))
            for name in form.changed_data
        }
        with transaction.atomic():
            obj.save()
            services.audit_record(
                actor=services.actor_of(user=request.user),
                action="update" if change else "create",
                object_type=self.audit_type,
                object_id=str(obj.pk),
                changes=changes,
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


class TokenIssuerForm(forms.ModelForm):
    """The issuer, with its introspection client's secret write-only: stored encrypted, the
    stored value never sent back."""

    client_secret = forms.CharField(
        required=False,
        strip=False,
        label="Client secret",
        help_text="The introspection client's secret: stored encrypted, never shown again. "
        "Leave empty to keep the stored one.",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_client_secret = forms.BooleanField(
        required=False, label="Remove the stored client secret"
    )

    class Meta:
        model = TokenIssuer
        fields = (  # the admin's fieldsets order them
            "issuer",
            "enabled",
            "discovery_url",
            "jwks_url",
            "audience",
            "algorithms",
            "leeway",
            *_MAPPING,
            "token_url",
            "exchange_url",
            "introspection_url",
            "client_id",
        )

    def clean(self):
        cleaned = super().clean()
        # Before the model's own clean (in _post_clean), which checks the issuer is complete.
        if cleaned.get("client_secret"):
            self.instance.set_client_secret(cleaned["client_secret"])
        elif cleaned.get("clear_client_secret"):
            self.instance.set_client_secret("")
        return cleaned


@admin.register(TokenIssuer)
class TokenIssuerAdmin(AuditedAdmin):
    audit_type = "tokenissuer"
    form = TokenIssuerForm
    secret_fields = ("client_secret",)
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
        (
            "Opaque tokens (introspection, RFC 7662)",
            {
                "fields": (
                    "introspection_url",
                    "client_id",
                    "client_secret",
                    "clear_client_secret",
                )
            },
        ),
    )
