"""What a call costs and how much a caller, an agent or a team may spend: an agent's prices
and the quotas on keys, agents and teams (docs/concepts/usage.md). Amounts are Decimals in the
relay's one currency (RELAY_USAGE_CURRENCY), never floats."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

MONEY = {
    "max_digits": 18,
    "decimal_places": 6,
    "validators": [MinValueValidator(Decimal(0))],
}
"""Amounts: up to 999,999,999,999 with six decimals (a millionth of a cent is below any
price per token the relay needs)."""


class AgentPrice(models.Model):
    """What one call of an agent costs: a price per call plus prices per million input and
    output tokens (the tokens the agent reports with the usage extension)."""

    agent = models.OneToOneField(
        "registry.Agent", primary_key=True, on_delete=models.CASCADE, related_name="price"
    )
    per_call = models.DecimalField(default=Decimal(0), help_text="Charged for every call.", **MONEY)
    per_million_input_tokens = models.DecimalField(
        default=Decimal(0), help_text="Per million input (prompt) tokens.", **MONEY
    )
    per_million_output_tokens = models.DecimalField(
        default=Decimal(0), help_text="Per million output (completion) tokens.", **MONEY
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "agent price"

    def __str__(self) -> str:
        return f"price of {self.agent_id}"


class Quota(models.Model):
    """A limit on one API key (or bearer principal), one agent, one team or one workflow: calls
    per day and cost per day or per month (UTC days and months). Empty limits do not apply. A
    call over any limit that applies to it (its caller's, its agent's, its team's, its
    workflow's) is refused. A workflow is named by its id, not a foreign key: workflows live
    in ``routing``, above the registry (``routing`` deletes a workflow's quota with it)."""

    class Subject(models.TextChoices):
        KEY = "key", "an API key or principal"
        AGENT = "agent"
        TEAM = "team"
        WORKFLOW = "workflow"

    api_key = models.ForeignKey(
        "registry.ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="quotas"
    )
    agent = models.ForeignKey(
        "registry.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="quotas"
    )
    team = models.ForeignKey(
        "registry.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="quotas"
    )
    workflow = models.SlugField(
        max_length=64, blank=True, default="", db_default="", help_text="A workflow's id."
    )
    calls_per_day = models.PositiveIntegerField(null=True, blank=True)
    cost_per_day = models.DecimalField(null=True, blank=True, **MONEY)
    cost_per_month = models.DecimalField(null=True, blank=True, **MONEY)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(api_key__isnull=False, agent__isnull=True, team__isnull=True, workflow="")
                    | Q(api_key__isnull=True, agent__isnull=False, team__isnull=True, workflow="")
                    | Q(api_key__isnull=True, agent__isnull=True, team__isnull=False, workflow="")
                    | (
                        Q(api_key__isnull=True, agent__isnull=True, team__isnull=True)
                        & ~Q(workflow="")
                    )
                ),
                name="quota_one_subject",
            ),
            models.UniqueConstraint(
                fields=["api_key"], condition=Q(api_key__isnull=False), name="quota_per_key"
            ),
            models.UniqueConstraint(
                fields=["agent"], condition=Q(agent__isnull=False), name="quota_per_agent"
            ),
            models.UniqueConstraint(
                fields=["team"], condition=Q(team__isnull=False), name="quota_per_team"
            ),
            models.UniqueConstraint(
                fields=["workflow"], condition=~Q(workflow=""), name="quota_per_workflow"
            ),
        ]

    def __str__(self) -> str:
        kind, subject = self.subject
        return f"quota of {kind} {subject}"

    @property
    def subject(self) -> tuple[str, str]:
        """(kind, id): ("key", the key's row id), ("agent", id), ("team", id) or ("workflow",
        id)."""
        if self.api_key_id is not None:
            return self.Subject.KEY.value, str(self.api_key_id)
        if self.agent_id is not None:
            return self.Subject.AGENT.value, self.agent_id
        if self.workflow:
            return self.Subject.WORKFLOW.value, self.workflow
        return self.Subject.TEAM.value, self.team_id or ""
