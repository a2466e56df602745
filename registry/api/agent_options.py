"""How the relay treats one agent's calls, in the registry API: its retries, its failover and
the token it sends on a caller's behalf."""

from __future__ import annotations

from django.core.validators import URLValidator
from rest_framework import serializers

from registry.models import Agent

_URL = URLValidator(schemes=["http", "https"])


def _http_url(value: str) -> None:
    """An http(s) URL, or empty."""
    if value:
        _URL(value)


class RetriesSerializer(serializers.Serializer):
    """How the relay retries a send to the agent that failed (docs: Safe retries)."""

    attempts = serializers.IntegerField(
        source="retry_attempts",
        min_value=1,
        max_value=10,
        required=False,
        help_text="Tries of a send that did not reach the agent; 1 never retries.",
    )
    baseDelayMs = serializers.IntegerField(
        source="retry_base_delay_ms",
        min_value=0,
        max_value=60_000,
        required=False,
        help_text="The first pause between two tries; each next one may double (jittered).",
    )
    deadlineSeconds = serializers.IntegerField(
        source="retry_deadline_seconds",
        min_value=1,
        max_value=600,
        required=False,
        help_text="No try starts later than this after the first.",
    )
    idempotent = serializers.BooleanField(
        required=False,
        help_text="The agent runs a message id once: sends that may have reached it are "
        "retried too.",
    )


class FailoverSerializer(serializers.Serializer):
    """Where a send goes when the agent cannot take it, beside the alternates set in the admin
    (docs: Safe retries, Failover)."""

    sameSkill = serializers.BooleanField(
        source="failover_same_skill",
        required=False,
        help_text="When the agent and its alternates cannot take a send, it may go to any "
        "healthy agent declaring a skill with the same id.",
    )


class DelegationSerializer(serializers.Serializer):
    """Which token the agent gets on a caller's behalf (docs: Identity, Delegated tokens)."""

    mode = serializers.ChoiceField(
        source="delegation_mode",
        choices=Agent.DelegationMode.choices,
        required=False,
        help_text="none: the stored credential; pass: the caller's bearer JWT when its aud "
        "names the agent; exchange: a token for the agent by RFC 8693 token exchange.",
    )
    audience = serializers.CharField(
        source="delegation_audience",
        max_length=500,
        allow_blank=True,
        required=False,
        help_text="The aud the agent accepts; empty takes the agent's URL.",
    )
    tokenUrl = serializers.CharField(
        source="delegation_token_url",
        max_length=2048,
        allow_blank=True,
        required=False,
        validators=[_http_url],
        help_text="The token-exchange endpoint; empty takes the caller's issuer's exchangeUrl.",
    )
    scopes = serializers.CharField(
        source="delegation_scopes",
        max_length=500,
        allow_blank=True,
        required=False,
        help_text="Scopes asked for the agent, separated by spaces.",
    )
    narrow = serializers.BooleanField(
        source="delegation_narrow",
        required=False,
        help_text="A caller lacking some scopes gets a token with those it holds; false: the "
        "call is refused.",
    )
