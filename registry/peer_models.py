"""The peer relays whose registries this one mirrors (registry.peers)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class PeerRelay(models.Model):
    """Another Brass Relay whose registry this one mirrors (registry.peers): its agents appear
    here, read-only, marked with their origin; what the peer removes is removed here."""

    class Mode(models.TextChoices):
        VIA_ORIGIN = "via_origin", "through the origin relay"
        DIRECT = "direct", "directly at the agent"

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=2048, unique=True, help_text="The peer relay's base URL.")
    api_key = models.TextField(
        blank=True, editable=False, help_text="The peer's API key, encrypted at rest."
    )
    mode = models.CharField(
        max_length=10,
        choices=Mode.choices,
        default=Mode.VIA_ORIGIN,
        help_text="How mirrored agents are called: through the peer relay (with its API key) "
        "or directly at the agent's own card URL.",
    )
    enabled = models.BooleanField(default=True)
    synced_until = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Changes up to here are mirrored."
    )
    last_synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.CharField(max_length=500, blank=True, editable=False)
    last_report = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name = "peer relay"

    def __str__(self) -> str:
        return self.name
