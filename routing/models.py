"""What the team router records: every hop of a conversation, and each member's own upstream
context, so multi-turn conversations continue with every member."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class MemberContext(models.Model):
    """One member's upstream ids within one team conversation (a relay context)."""

    team = models.ForeignKey("registry.Team", on_delete=models.CASCADE, related_name="+")
    context_id = models.CharField(max_length=200, help_text="The team conversation's context.")
    agent = models.ForeignKey("registry.Agent", on_delete=models.CASCADE, related_name="+")
    upstream_context_id = models.CharField(max_length=200, blank=True)
    upstream_task_id = models.CharField(
        max_length=200, blank=True,
        help_text="The member's open task (in flight or waiting for input), if any.")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "context_id", "agent"],
                                    name="member_context_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.context_id}/{self.agent_id}"


class RoutingHop(models.Model):
    """One call to one member during a team task, in order."""

    class Outcome(models.TextChoices):
        ROUTED = "routed", "passed on to another member"
        REPLIED = "replied", "answered the caller"
        PARKED = "parked", "waits for the caller's input"
        FAILED = "failed", "the call failed"
        CAPPED = "capped", "stopped at the hop limit"
        CANCELED = "canceled", "canceled"

    task = models.ForeignKey("tasks_app.Task", on_delete=models.CASCADE, related_name="hops")
    order = models.PositiveIntegerField()
    from_id = models.CharField(max_length=64, help_text='"user" or the sending agent')
    to_id = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    routing_error = models.TextField(blank=True)
    peers_offered = models.JSONField(default=list, blank=True)
    text = models.TextField(blank=True, help_text="The start of the message passed on.")
    latency_ms = models.FloatField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    next_id = models.CharField(max_length=64, blank=True,
                               help_text="Who the answer went to next.")
    upstream_task_id = models.CharField(max_length=200, blank=True)
    upstream_context_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task", "order"]
        constraints = [
            models.UniqueConstraint(fields=["task", "order"], name="hop_order_per_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.order} {self.from_id}->{self.to_id}"
