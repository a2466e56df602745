"""The forms of the agent admin: register an agent by URL, and change what an operator may
change, the agent's credential included (write-only: the stored value is never sent back)."""

from __future__ import annotations

from django import forms
from django.utils.html import escape

from registry import services
from registry.models import Agent


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
    mcp_server = forms.BooleanField(
        required=False,
        label="MCP server",
        help_text="The URL is an MCP server's endpoint (streamable HTTP): the relay lists its "
        "tools and writes its card, one skill per tool.",
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
            *services.RETRY_FIELDS,
            *services.FAILOVER_FIELDS,
            *services.DELEGATION_FIELDS,
            *services.MCP_FIELDS,
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
