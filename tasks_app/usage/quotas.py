"""Quotas and budgets, checked before each call (admission), before each team hop and before
each workflow step.

Every quota of the relay is kept per process for RELAY_TARGET_CACHE_SECONDS (one query per
period, dropped at once when a quota changes in this process): a call that no quota applies
to costs a dictionary lookup. Calls per day count in the cache the rate limits use (Redis in
the production profile, shared by every process; per process in the embedded one), and only
while a calls quota applies. Costs are summed from the usage records with an indexed query
(``usage_caller_at``, ``usage_agent_at``, ``usage_team_at``, ``usage_workflow_at``), only
where a cost quota applies. A call is refused once the cost so far reaches the limit: a team
hop or a workflow step that starts under it may end above it, by at most its price.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from registry import services as registry_services
from registry.usage_models import Quota
from relay_project import ratelimit
from relay_project.database import database_sync_to_async
from tasks_app.models import UsageRecord
from tasks_app.protocol.errors import RateLimited
from tasks_app.snapshots import iso
from tasks_app.usage.records import money_text

_quotas: tuple[float, dict[tuple[str, str], Quota]] | None = None


def quotas() -> dict[tuple[str, str], Quota]:
    """Every quota by subject ((kind, id), as ``Quota.subject``); one query per period."""
    global _quotas
    now = time.monotonic()
    if _quotas is None or now - _quotas[0] >= settings.RELAY_TARGET_CACHE_SECONDS:
        rows = Quota.objects.select_related("api_key")
        _quotas = (now, {quota.subject: quota for quota in rows})
    return _quotas[1]


def forget_quotas(*args, **kwargs) -> None:
    """Drops the cached quotas (a signal receiver: a quota was saved or deleted)."""
    global _quotas
    _quotas = None


def none_apply_cached(subjects: list[tuple[str, str]]) -> bool:
    """True when the quotas held are fresh and none of ``subjects`` has one (no database:
    for the event loop); False when they must be read or one applies."""
    held = _quotas
    if held is None or time.monotonic() - held[0] >= settings.RELAY_TARGET_CACHE_SECONDS:
        return False
    return not any(subject in held[1] for subject in subjects)


@dataclass(frozen=True)
class Exceeded:
    """A quota a call would go over: whose, which limit, and when it resets."""

    kind: str
    subject: str
    limit: str
    allowed: str
    used: str
    resets_at: datetime
    now: datetime

    @property
    def retry_after(self) -> int:
        return max(1, math.ceil((self.resets_at - self.now).total_seconds()))

    @property
    def message(self) -> str:
        what, period = self.limit.split("_per_")
        plural = "" if self.allowed == "1" else "s"
        amount = f"{self.allowed} call{plural}" if what == "calls" else f"a cost of {self.allowed}"
        spent = f"{self.used} made" if what == "calls" else f"{self.used} spent"
        return (
            f"quota exceeded: {self.kind} {self.subject!r} allows {amount} per {period} "
            f"({spent}); it resets at {iso(self.resets_at)}, in {self.retry_after} s"
        )

    def error(self) -> RateLimited:
        return RateLimited(
            self.message,
            retry_after=self.retry_after,
            metadata={
                "quota": f"{self.kind}:{self.subject}",
                "limit": self.limit,
                "resetsAt": iso(self.resets_at),
            },
        )


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    return day_start(now).replace(day=1)


def _next_month(start: datetime) -> datetime:
    return (start + timedelta(days=32)).replace(day=1)


def call_refusal(*, caller, target_kind: str, target_id: str, now=None) -> Exceeded | None:
    """Before a call of ``caller`` (an ApiKey) to an agent, a team or a workflow: the first
    quota of the caller's or of the target it would go over, audited, or None (the call is
    counted against every calls-per-day quota that applies). No query when no quota
    applies."""
    subjects = [("key", str(caller.pk)), (target_kind, target_id)]
    return _refusal(caller, subjects, count_calls=subjects, now=now)


def hop_refusal(*, caller, team_id: str, agent_id: str, now=None) -> Exceeded | None:
    """Before a team hop to ``agent_id``: the team's budget, the member's quota (its calls
    too), the caller's costs; audited. No query when no quota applies."""
    subjects = [("team", team_id), ("agent", agent_id), ("key", str(caller.pk))]
    return _refusal(caller, subjects, count_calls=[("agent", agent_id)], now=now)


async def hop_refused(caller, *, team_id: str, agent_id: str) -> str | None:
    """``hop_refusal`` from the event loop: why the quotas refuse the hop, or None. Free
    when the quotas held are fresh and none applies (``none_apply_cached``)."""
    if caller is None:
        return None
    subjects = [("team", team_id), ("agent", agent_id), ("key", str(caller.pk))]
    if none_apply_cached(subjects):
        return None
    exceeded = await database_sync_to_async(hop_refusal)(
        caller=caller, team_id=team_id, agent_id=agent_id
    )
    return None if exceeded is None else exceeded.message


def step_refusal(*, caller, workflow_id: str, target_kind: str, target_id: str, now=None):
    """Before a workflow step calls ``target_kind`` ``target_id``: the workflow's budget, the
    target's quota (its calls too), the caller's costs; audited. No query when no quota
    applies."""
    if caller is None:
        return None
    target = (target_kind, target_id)
    subjects = [("workflow", workflow_id), target, ("key", str(caller.pk))]
    return _refusal(caller, subjects, count_calls=[target], now=now)


def _refusal(caller, subjects, *, count_calls, now) -> Exceeded | None:
    found = quotas()
    applying = [(subject, found[subject]) for subject in subjects if subject in found]
    if not applying:
        return None
    now = now or timezone.now()
    exceeded = _over_cost(applying, now) or _over_calls(
        [(s, q) for s, q in applying if s in count_calls], now
    )
    if exceeded is not None:
        _audit(caller, exceeded)
    return exceeded


def _label(subject: tuple[str, str], quota: Quota) -> str:
    return quota.api_key.prefix if subject[0] == "key" else subject[1]


def _over_cost(applying, now: datetime) -> Exceeded | None:
    for subject, quota in applying:
        for limit, start, resets in (
            ("cost_per_day", day_start(now), day_start(now) + timedelta(days=1)),
            ("cost_per_month", month_start(now), _next_month(month_start(now))),
        ):
            allowed = getattr(quota, limit)
            if allowed is None:
                continue
            used = cost_since(subject, start)
            if used >= allowed:
                return Exceeded(
                    subject[0],
                    _label(subject, quota),
                    limit,
                    money_text(allowed),
                    money_text(used),
                    resets,
                    now,
                )
    return None


_COLUMNS = {"key": "caller_id", "agent": "agent_id", "team": "team_id", "workflow": "workflow_id"}


def cost_since(subject: tuple[str, str], start: datetime) -> Decimal:
    """What ``subject`` ((kind, id)) has spent since ``start``: one indexed SUM."""
    kind, subject_id = subject
    records = UsageRecord.objects.filter(**{_COLUMNS[kind]: subject_id, "at__gte": start})
    return records.aggregate(total=Sum("cost"))["total"] or Decimal(0)


def _over_calls(applying, now: datetime) -> Exceeded | None:
    """Counts the call against each calls-per-day quota; over one, takes the counts back."""
    counted: list[str] = []
    resets = day_start(now) + timedelta(days=1)
    lifetime = (resets - now).total_seconds() + 60
    for subject, quota in applying:
        if quota.calls_per_day is None:
            continue
        name = f"quota:{subject[0]}:{subject[1]}:{day_start(now):%Y%m%d}"
        count = ratelimit.counter_add(name, lifetime)
        counted.append(name)
        if count > quota.calls_per_day:
            for each in counted:
                ratelimit.counter_take_back(each)
            return Exceeded(
                subject[0],
                _label(subject, quota),
                "calls_per_day",
                str(quota.calls_per_day),
                str(count - 1),
                resets,
                now,
            )
    return None


def _audit(caller, exceeded: Exceeded) -> None:
    registry_services.audit_record(
        actor=registry_services.actor_of(key=caller),
        action="deny",
        object_type="quota",
        object_id=f"{exceeded.kind}:{exceeded.subject}",
        changes={
            "limit": exceeded.limit,
            "allowed": exceeded.allowed,
            "used": exceeded.used,
            "resetsAt": iso(exceeded.resets_at),
            "reason": exceeded.message,
        },
    )
