"""The admin of peer relays: add one (its URL, how its agents are called, and the API key this
relay sends it, stored encrypted and never shown), see when it was last mirrored and what that
did, and mirror it now."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from registry import peers, secrets
from registry.models import PeerRelay


class PeerRelayForm(forms.ModelForm):
    new_api_key = forms.CharField(
        required=False,
        label="API key",
        widget=forms.PasswordInput(render_value=False),
        help_text="An API key of the peer relay (stored encrypted, never shown). Leave empty "
        "to keep the stored one.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")
    url = forms.URLField(
        max_length=2048,
        assume_scheme="https",
        label="URL",
        help_text=PeerRelay._meta.get_field("url").help_text,
    )

    class Meta:
        model = PeerRelay
        fields = ["name", "url", "mode", "enabled"]

    def clean_url(self):
        url = self.cleaned_data["url"].rstrip("/")
        try:
            peers.check_peer_url(url)
        except peers.PeerError as error:
            raise forms.ValidationError(str(error)) from error
        return url


@admin.register(PeerRelay)
class PeerRelayAdmin(admin.ModelAdmin):
    form = PeerRelayForm
    list_display = ("name", "url", "mode", "enabled", "mirrors", "last_synced_at", "last_error")
    readonly_fields = ("key_status", "synced_until", "last_synced_at", "last_error", "report")
    fields = (
        "name",
        "url",
        "mode",
        "enabled",
        "key_status",
        "new_api_key",
        "clear_api_key",
        "synced_until",
        "last_synced_at",
        "last_error",
        "report",
    )
    actions = ("sync_now",)

    @admin.display(description="Mirrored agents")
    def mirrors(self, peer: PeerRelay) -> int:
        return peer.mirrored_agents.count()

    @admin.display(description="Stored API key")
    def key_status(self, peer: PeerRelay) -> str:
        if not peer.api_key:
            return "none"
        try:
            return f"set ({secrets.mask(secrets.decrypt(peer.api_key))})"
        except ValueError:
            return "cannot be decrypted with the current key"

    @admin.display(description="Last sync")
    def report(self, peer: PeerRelay) -> str:
        report = peer.last_report or {}
        if not report:
            return "—"
        counts = ", ".join(f"{len(report.get(k) or [])} {k}" for k in report)
        refused = "; ".join(f"{r.get('id')}: {r.get('reason')}" for r in report.get("refused", []))
        return format_html("{}{}", counts, format_html("<br>{}", refused) if refused else "")

    def save_model(self, request, obj: PeerRelay, form: PeerRelayForm, change: bool) -> None:
        if form.cleaned_data.get("clear_api_key"):
            obj.api_key = ""
        elif form.cleaned_data.get("new_api_key"):
            obj.api_key = secrets.encrypt(form.cleaned_data["new_api_key"])
        super().save_model(request, obj, form, change)

    @admin.action(description="Mirror now", permissions=["change"])
    def sync_now(self, request, queryset) -> None:
        for peer in queryset.order_by("name"):
            try:
                report = peers.peer_sync(peer=peer)
            except peers.PeerError as error:
                self.message_user(request, f"{peer.name}: {error}", messages.ERROR)
                continue
            self.message_user(request, f"{peer.name}: {report.summary()}", messages.SUCCESS)
