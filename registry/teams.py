"""Writes to teams: create, change, delete, and switch one member on or off.

Every write checks the whole team as it would be stored with :func:`team_validate` (the admin's
team form calls it too, with the members its inline submits) and runs in one transaction, so a
refused write stores nothing. Refusals are ``RegistryError`` with a message that says why:

- ``invalid_team`` (400): the id is not a slug, no name, hops outside 1..10, no members, a member
  listed twice, no default agent, or a default agent that is not an enabled member;
- ``unknown_agent`` (400): a member or the default agent is not registered;
- ``duplicate`` (409): the team id is taken;
- ``not_member`` (404): :func:`team_member_set_enabled` names an agent that is not a member;
- ``not_editable`` (400): :func:`team_update` is asked to change something it cannot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.validators import slug_re
from django.db import IntegrityError, transaction
from django.utils import timezone

from registry.models import Agent, AuditEntry, Team, TeamMembership
from registry.services import SYSTEM, RegistryError, audit_record

TEAM_ID_MAX_LENGTH = Team._meta.get_field("id").max_length
TEAM_NAME_MAX_LENGTH = Team._meta.get_field("name").max_length
MIN_ROUTING_HOPS = 1
MAX_ROUTING_HOPS = 10


@dataclass(frozen=True)
class MemberSpec:
    """One member as a write gives it: the agent, and whether the router may call it."""

    agent_id: str
    enabled: bool = True


def team_validate(
    *,
    team_id: str,
    name: str,
    max_routing_hops: Any,
    default_agent_id: str | None,
    members: Sequence[MemberSpec],
) -> None:
    """Raises RegistryError saying why a team with these values cannot be saved; returns None
    when it can. The one check of a team's rules, for the services and the admin alike.

    Rules, checked in this order (the first broken one is reported): the id is a slug of at
    most 64 characters; the name is not empty (at most 200 characters); ``max_routing_hops``
    is a whole number from 1 to 10; there is at least one member and none is listed twice; a
    default agent is named; every member and the default agent are registered agents; the
    default agent is a member, its membership is enabled, and the agent is not disabled in the
    registry. Does not check whether the id is taken (the services do, with status 409).
    """
    if not isinstance(team_id, str) or not team_id:
        raise _invalid("a team needs an id")
    if len(team_id) > TEAM_ID_MAX_LENGTH or not slug_re.match(team_id):
        raise _invalid(
            f"the team id must be a slug (letters, digits, '-' and '_') of at most "
            f"{TEAM_ID_MAX_LENGTH} characters, not {team_id!r}"
        )
    if not isinstance(name, str) or not name.strip():
        raise _invalid("a team needs a name")
    if len(name) > TEAM_NAME_MAX_LENGTH:
        raise _invalid(f"the team name must be at most {TEAM_NAME_MAX_LENGTH} characters")
    validate_max_routing_hops(max_routing_hops)
    if not members:
        raise _invalid("a team needs at least one member")
    seen: set[str] = set()
    for member in members:
        if member.agent_id in seen:
            raise _invalid(f"agent {member.agent_id!r} is listed twice among the members")
        seen.add(member.agent_id)
    if not default_agent_id:
        raise _invalid("a team needs a default agent, chosen among its enabled members")
    statuses = dict(
        Agent.objects.filter(pk__in=[*seen, default_agent_id]).values_list("pk", "status")
    )
    for agent_id in [*(member.agent_id for member in members), default_agent_id]:
        if agent_id not in statuses:
            raise RegistryError("unknown_agent", f"no agent with id {agent_id!r} is registered")
    default = next((m for m in members if m.agent_id == default_agent_id), None)
    if default is None:
        raise _invalid(
            f"the default agent {default_agent_id!r} is not a member of the team; add it to "
            "the members or choose one of them"
        )
    if not default.enabled:
        raise _invalid(
            f"the default agent {default_agent_id!r} is a disabled member; enable its "
            "membership or choose another default agent"
        )
    if statuses[default_agent_id] == Agent.Status.DISABLED:
        raise _invalid(
            f"the default agent {default_agent_id!r} is disabled in the registry; choose "
            "another default agent"
        )


def validate_max_routing_hops(max_routing_hops: Any) -> None:
    """The hops rule of :func:`team_validate`, on its own for a form field: a whole number
    from 1 to 10."""
    if (
        isinstance(max_routing_hops, bool)
        or not isinstance(max_routing_hops, int)
        or not MIN_ROUTING_HOPS <= max_routing_hops <= MAX_ROUTING_HOPS
    ):
        raise _invalid(
            f"max routing hops must be a whole number from {MIN_ROUTING_HOPS} to "
            f"{MAX_ROUTING_HOPS}, not {max_routing_hops!r}"
        )


def team_create(
    *,
    team_id: str,
    name: str,
    description: str = "",
    members: Sequence[str | MemberSpec],
    default_agent: str,
    max_routing_hops: int = MAX_ROUTING_HOPS,
    enabled: bool = True,
    no_recipient: str = Team.NoRecipient.DEFAULT_AGENT,
    actor: str = SYSTEM,
) -> Team:
    """Creates the team with its members in list order (an agent id alone is an enabled
    member). Raises RegistryError, storing nothing, when :func:`team_validate` refuses the
    team or its id is taken (``duplicate``, 409)."""
    specs = _member_specs(members, current={})
    try:
        with transaction.atomic():
            team_validate(
                team_id=team_id,
                name=name,
                max_routing_hops=max_routing_hops,
                default_agent_id=default_agent,
                members=specs,
            )
            if Team.objects.filter(pk=team_id).exists():
                raise _duplicate(team_id)
            now = timezone.now()
            team = Team.objects.create(
                id=team_id,
                name=name,
                description=description,
                default_agent_id=default_agent,
                max_routing_hops=max_routing_hops,
                enabled=enabled,
                no_recipient=_no_recipient(no_recipient),
                created_at=now,
                updated_at=now,
            )
            _write_memberships(team, specs, current={})
            audit_record(
                actor=actor,
                action=AuditEntry.Action.CREATE,
                object_type="team",
                object_id=team_id,
                changes={
                    "name": name,
                    "members": [spec.agent_id for spec in specs],
                    "defaultAgent": default_agent,
                    "maxRoutingHops": max_routing_hops,
                    "enabled": enabled,
                },
            )
    except IntegrityError as error:
        # Lost a race: the same id created, or an agent deleted, at the same moment.
        if Team.objects.filter(pk=team_id).exists():
            raise _duplicate(team_id) from error
        raise RegistryError(
            "conflict", "an agent of the team changed while it was saved; try again", status=409
        ) from error
    return team


_EDITABLE = {
    "name",
    "description",
    "members",
    "default_agent",
    "max_routing_hops",
    "enabled",
    "no_recipient",
}


def _no_recipient(value: Any) -> str:
    if value not in Team.NoRecipient.values:
        raise RegistryError(
            "invalid_team",
            f"noRecipient must be one of {', '.join(Team.NoRecipient.values)}, not {value!r}",
        )
    return value


def team_update(*, team: Team, fields: dict[str, Any], actor: str = SYSTEM) -> Team:
    """Changes any of name, description, members, default_agent (an agent id),
    max_routing_hops and enabled, checking the team as it would be with
    :func:`team_validate`; a refused change stores nothing and leaves ``team`` as it was.

    ``members`` replaces the list; the order becomes the list order. An agent id alone keeps
    the enabled flag of an agent that stays a member (a new member is enabled); a MemberSpec
    sets it.
    """
    unknown = set(fields) - _EDITABLE
    if unknown:
        raise RegistryError("not_editable", f"cannot change {', '.join(sorted(unknown))}")
    with transaction.atomic():
        current = {
            membership.agent_id: membership
            for membership in TeamMembership.objects.select_for_update()
            .filter(team=team)
            .order_by("order", "agent_id")
        }
        if "members" in fields:
            specs = _member_specs(fields["members"], current=current)
        else:
            specs = [MemberSpec(m.agent_id, m.enabled) for m in current.values()]
        values = {
            name: fields.get(name, getattr(team, name))
            for name in ("name", "description", "max_routing_hops", "enabled", "no_recipient")
        }
        values["no_recipient"] = _no_recipient(values["no_recipient"])
        default_agent_id = fields.get("default_agent", team.default_agent_id)
        team_validate(
            team_id=team.pk,
            name=values["name"],
            max_routing_hops=values["max_routing_hops"],
            default_agent_id=default_agent_id,
            members=specs,
        )
        # Compared with the stored row: a model form has already set the new values on
        # ``team``.
        stored = Team.objects.filter(pk=team.pk).values(*values, "default_agent_id").first()
        stored = stored or {}
        changes: dict[str, Any] = {
            _TEAM_CAMEL.get(name, name): value
            for name, value in values.items()
            if stored.get(name) != value
        }
        if default_agent_id != stored.get("default_agent_id"):
            changes["defaultAgent"] = default_agent_id
        if "members" in fields:
            members = [spec.agent_id for spec in specs]
            if members != list(current) or any(
                current[spec.agent_id].enabled != spec.enabled
                for spec in specs
                if spec.agent_id in current
            ):
                changes["members"] = members
        for name, value in values.items():
            setattr(team, name, value)
        team.default_agent_id = default_agent_id
        team.updated_at = timezone.now()
        team.save()
        if "members" in fields:
            _write_memberships(team, specs, current=current)
        if changes:
            audit_record(
                actor=actor,
                action=AuditEntry.Action.UPDATE,
                object_type="team",
                object_id=team.pk,
                changes=changes,
            )
    return team


_TEAM_CAMEL = {"max_routing_hops": "maxRoutingHops", "no_recipient": "noRecipient"}


def team_delete(*, team: Team, actor: str = SYSTEM) -> None:
    """Deletes the team with its memberships. Its tasks stay, as the record of what happened."""
    with transaction.atomic():
        team_id = team.pk
        team.delete()
        audit_record(
            actor=actor,
            action=AuditEntry.Action.DELETE,
            object_type="team",
            object_id=team_id,
            changes={"name": team.name},
        )


def team_member_set_enabled(
    *, team: Team, agent_id: str, enabled: bool, actor: str = SYSTEM
) -> TeamMembership:
    """Lets the router call the member again (``enabled``) or stops it doing so. Raises
    RegistryError ``not_member`` (404) for an agent that is not a member, and refuses (as
    :func:`team_validate` does) to disable the default agent's membership."""
    with transaction.atomic():
        memberships = list(
            TeamMembership.objects.select_for_update()
            .filter(team=team)
            .order_by("order", "agent_id")
        )
        membership = next((m for m in memberships if m.agent_id == agent_id), None)
        if membership is None:
            raise RegistryError(
                "not_member",
                f"agent {agent_id!r} is not a member of team {team.pk!r}",
                status=404,
            )
        team_validate(
            team_id=team.pk,
            name=team.name,
            max_routing_hops=team.max_routing_hops,
            default_agent_id=team.default_agent_id,
            members=[
                MemberSpec(m.agent_id, enabled if m.agent_id == agent_id else m.enabled)
                for m in memberships
            ],
        )
        if membership.enabled != enabled:
            membership.enabled = enabled
            membership.save(update_fields=["enabled"])
            now = timezone.now()
            Team.objects.filter(pk=team.pk).update(updated_at=now)
            team.updated_at = now
            audit_record(
                actor=actor,
                action=AuditEntry.Action.UPDATE,
                object_type="team",
                object_id=team.pk,
                changes={"memberEnabled": {"agent": agent_id, "enabled": enabled}},
            )
    return membership


def _invalid(message: str) -> RegistryError:
    return RegistryError("invalid_team", message)


def _duplicate(team_id: str) -> RegistryError:
    return RegistryError("duplicate", f"a team with id {team_id!r} already exists", status=409)


def _member_specs(
    members: Iterable[str | MemberSpec], *, current: dict[str, TeamMembership]
) -> list[MemberSpec]:
    if isinstance(members, str):
        raise _invalid("members must be a list of agent ids")
    specs = []
    for member in members:
        if isinstance(member, MemberSpec):
            specs.append(member)
        elif isinstance(member, str):
            kept = current.get(member)
            specs.append(MemberSpec(member, kept.enabled if kept else True))
        else:
            raise _invalid(f"a member must be an agent id, not {member!r}")
    return specs


def _write_memberships(
    team: Team, specs: list[MemberSpec], *, current: dict[str, TeamMembership]
) -> None:
    """Makes the stored memberships exactly ``specs``, with ``order`` the list position."""
    wanted = {spec.agent_id for spec in specs}
    gone = [membership.pk for agent_id, membership in current.items() if agent_id not in wanted]
    if gone:
        TeamMembership.objects.filter(pk__in=gone).delete()
    changed, added = [], []
    for order, spec in enumerate(specs):
        membership = current.get(spec.agent_id)
        if membership is None:
            added.append(
                TeamMembership(team=team, agent_id=spec.agent_id, order=order, enabled=spec.enabled)
            )
        elif (membership.order, membership.enabled) != (order, spec.enabled):
            membership.order, membership.enabled = order, spec.enabled
            changed.append(membership)
    if changed:
        TeamMembership.objects.bulk_update(changed, ["order", "enabled"])
    if added:
        TeamMembership.objects.bulk_create(added)
