"""The relay as an A2A agent of its own: ``/a2a/relay/`` forwards to a default target, chosen
in the admin (RelayEndpoint) or by the ``RELAY_DEFAULT_TARGET`` setting ("agent:ID" or
"team:ID")."""

from __future__ import annotations

from django.conf import settings

from tasks_app import gateway
from tasks_app.models import RelayEndpoint


def default_target() -> tuple[str, str] | None:
    """(kind, id) of the target the relay's endpoint forwards to, or None when none is set."""
    row = RelayEndpoint.objects.order_by("-updated_at").first()
    if row is not None:
        return row.target_kind, row.target_id
    kind, _, target_id = settings.RELAY_DEFAULT_TARGET.partition(":")
    if kind in RelayEndpoint.Kind.values and target_id:
        return kind, target_id
    return None


def relay_target(_: str) -> gateway.Target | None:
    chosen = default_target()
    return gateway.resolve_target(*chosen) if chosen else None


def default_target_set(*, kind: str, target_id: str) -> RelayEndpoint:
    """Points the relay's endpoint at an agent or team (replacing any earlier choice)."""
    RelayEndpoint.objects.all().delete()
    return RelayEndpoint.objects.create(target_kind=kind, target_id=target_id)


gateway.register_target_kind("relay", relay_target)
