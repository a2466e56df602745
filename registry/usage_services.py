"""Writes of quotas (``registry.usage_models``), each audited in its transaction. Refusals are
``RegistryError``s: a quota names exactly one key, agent or team that exists, and a subject
has at most one quota (409)."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from registry.models import Agent, ApiKey, Team
from registry.services import RegistryError, audit_record
from registry.usage_models import Quota

_LIMITS = ("calls_per_day", "cost_per_day", "cost_per_month")


def _changes(quota: Quota) -> dict[str, str | int | None]:
    return {
        name: str(value) if isinstance(value, Decimal) else value
        for name in _LIMITS
        for value in (getattr(quota, name),)
    }


def quota_create(
    *,
    actor: str,
    key: str | None = None,
    agent: str | None = None,
    team: str | None = None,
    workflow: str | None = None,
    calls_per_day: int | None = None,
    cost_per_day: Decimal | None = None,
    cost_per_month: Decimal | None = None,
) -> Quota:
    """A quota on the key with prefix ``key``, agent ``agent``, team ``team`` or workflow
    ``workflow`` (one of them). A workflow is not looked up here (workflows live in
    ``routing``, above the registry): the caller checks that it exists."""
    named = [
        (kind, value)
        for kind, value in (("key", key), ("agent", agent), ("team", team), ("workflow", workflow))
        if value
    ]
    if len(named) != 1:
        raise RegistryError(
            "invalid_quota", "a quota names exactly one of key, agent, team or workflow"
        )
    kind, value = named[0]
    if kind == "workflow":
        subject = value
    else:
        model = {"key": ApiKey, "agent": Agent, "team": Team}[kind]
        subject = model.objects.filter(
            **({"prefix": value} if kind == "key" else {"pk": value})
        ).first()
    if subject is None:
        raise RegistryError("not_found", f"no {kind} {value!r}", status=404)
    field = "api_key" if kind == "key" else kind
    with transaction.atomic():
        if Quota.objects.filter(**{field: subject}).exists():
            raise RegistryError("conflict", f"the {kind} {value!r} already has a quota", status=409)
        quota = Quota.objects.create(
            **{field: subject},
            calls_per_day=calls_per_day,
            cost_per_day=cost_per_day,
            cost_per_month=cost_per_month,
        )
        audit_record(
            actor=actor,
            action="create",
            object_type="quota",
            object_id=f"{kind}:{value}",
            changes=_changes(quota),
        )
    return quota


def quota_update(*, actor: str, quota: Quota, **limits) -> Quota:
    """Changes the limits given (None removes one)."""
    with transaction.atomic():
        for name, value in limits.items():
            if name not in _LIMITS:
                raise RegistryError("invalid_quota", f"a quota has no limit {name!r}")
            setattr(quota, name, value)
        quota.save(update_fields=list(limits) or None)
        kind, subject = quota.subject
        audit_record(
            actor=actor,
            action="update",
            object_type="quota",
            object_id=f"{kind}:{subject}",
            changes=_changes(quota),
        )
    return quota


def quota_delete(*, actor: str, quota: Quota) -> None:
    with transaction.atomic():
        kind, subject = quota.subject
        quota.delete()
        audit_record(
            actor=actor, action="delete", object_type="quota", object_id=f"{kind}:{subject}"
        )
