"""Writes to the registry. Each service takes keyword arguments and runs in one transaction;
network work (fetching a card) happens before the transaction opens, so a failed fetch stores
nothing and no lock is held while waiting on an agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.utils import timezone
from django.utils.text import slugify

from registry import secrets
from registry.auth import api_key_forget
from registry.cards import ParsedCard
from registry.fetching import CardFetchError, FetchedCard, fetch_card
from registry.models import Agent, ApiKey, CardSnapshot, DeclaredExtension, Skill, Team


class RegistryError(Exception):
    """A registry write that cannot be done; ``code`` and ``status`` go to the API as they are."""

    def __init__(self, code: str, message: str, *, status: int = 400,
                 missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.missing = missing

    @classmethod
    def from_fetch(cls, error: CardFetchError) -> RegistryError:
        return cls(error.code, error.message, status=error.status, missing=error.missing)


@dataclass(frozen=True)
class Credentials:
    """A header to send when fetching the agent's card (and calling the agent)."""

    header_name: str
    header_value: str

    def as_headers(self) -> dict[str, str]:
        return {self.header_name: self.header_value} if self.header_name else {}


def agent_credentials(agent: Agent) -> Credentials | None:
    if not agent.has_credentials:
        return None
    return Credentials(agent.auth_header_name, secrets.decrypt(agent.auth_header_value))


def agent_register(*, url: str, agent_id: str | None = None, invocation_url: str = "",
                   credentials: Credentials | None = None, created_by: ApiKey | None = None,
                   client: httpx.Client | None = None) -> Agent:
    """Fetches the card behind ``url`` and registers the agent.

    Raises RegistryError (and stores nothing) when the card cannot be had, is not a valid card,
    the URL is already registered, or ``agent_id`` is taken.
    """
    if agent_id is not None and Agent.objects.filter(pk=agent_id).exists():
        raise RegistryError("duplicate", f"an agent with id {agent_id!r} already exists",
                            status=409)
    headers = credentials.as_headers() if credentials else {}
    try:
        fetched = fetch_card(url, client=client, headers=headers)
    except CardFetchError as error:
        raise RegistryError.from_fetch(error) from error
    existing = Agent.objects.filter(card_url=fetched.url).values_list("pk", flat=True).first()
    if existing:
        raise RegistryError(
            "duplicate", f"the card at {fetched.url} is already registered as {existing!r}",
            status=409,
        )
    try:
        with transaction.atomic():
            agent = Agent(
                id=agent_id or _free_agent_id(fetched.card.name),
                card_url=fetched.url,
                invocation_url=invocation_url,
                created_by=created_by,
            )
            if credentials:
                agent.auth_header_name = credentials.header_name
                agent.auth_header_value = secrets.encrypt(credentials.header_value)
            _apply_card(agent, fetched, created=True)
    except IntegrityError as error:
        # Two registrations of the same id or URL raced; the loser stores nothing.
        raise RegistryError("duplicate", "that agent was registered at the same moment",
                            status=409) from error
    return agent


def agent_card_refresh(*, agent: Agent, client: httpx.Client | None = None) -> bool:
    """Fetches the agent's card again. Returns True when the card changed (a new snapshot).

    Raises RegistryError when the card cannot be had; the stored card is then left as it was.
    """
    credentials = agent_credentials(agent)
    try:
        fetched = fetch_card(agent.card_url, client=client,
                             headers=credentials.as_headers() if credentials else None)
    except CardFetchError as error:
        raise RegistryError.from_fetch(error) from error
    return agent_card_store(agent=agent, fetched=fetched)


def agent_card_store(*, agent: Agent, fetched: FetchedCard) -> bool:
    """Stores a card fetched for ``agent`` (by a refresh or a health probe): a new snapshot,
    with the agent's fields, skills and extensions, when its content changed. Returns True
    then; otherwise only notes the time of the fetch."""
    with transaction.atomic():
        current = (
            CardSnapshot.objects.filter(agent=agent).values_list("content_hash", flat=True).first()
        )
        if current == fetched.card.content_hash:
            now = timezone.now()
            Agent.objects.filter(pk=agent.pk).update(card_fetched_at=now)
            agent.card_fetched_at = now
            return False
        _apply_card(agent, fetched, created=False)
    return True


PROBE_FIELDS = ("probe_interval_seconds", "probe_timeout_seconds", "readiness_probe",
                "readiness_message", "scale_to_zero", "scale_to_zero_probes")
"""The agent's health-probe settings an operator may change."""


def agent_update(*, agent: Agent, fields: dict[str, Any]) -> Agent:
    """Changes what an operator may change: name, description, invocation URL, status,
    credentials, and how the agent is probed (``PROBE_FIELDS``; a change takes effect at the
    next sweep). Card-derived fields change only through a refresh."""
    editable = {"name", "description", "invocation_url", "status", *PROBE_FIELDS}
    unknown = set(fields) - editable - {"credentials"}
    if unknown:
        raise RegistryError("not_editable", f"cannot change {', '.join(sorted(unknown))}")
    with transaction.atomic():
        for name in editable & set(fields):
            setattr(agent, name, fields[name])
        if "credentials" in fields:
            credentials: Credentials | None = fields["credentials"]
            agent.auth_header_name = credentials.header_name if credentials else ""
            agent.auth_header_value = (
                secrets.encrypt(credentials.header_value) if credentials else ""
            )
        if set(PROBE_FIELDS) & set(fields):
            agent.next_probe_at = None
        if {"name", "description"} & set(fields):
            agent.search_text = _agent_search_text(
                agent, agent.skills.values_list("search_text", flat=True)
            )
        agent.updated_at = timezone.now()
        agent.full_clean(exclude=["current_snapshot", "created_by"])
        agent.save()
    return agent


def agent_delete(*, agent: Agent) -> None:
    """Deletes the agent with its card history, skills and team memberships.

    Raises RegistryError ``in_use`` (409), deleting nothing, while the agent is a team's default
    agent: the team would be left without one."""
    try:
        with transaction.atomic():
            agent.delete()
    except ProtectedError as error:
        teams = sorted(str(team.pk) for team in error.protected_objects if isinstance(team, Team))
        why = (
            f"it is the default agent of team {', '.join(map(repr, teams))}; choose another "
            "default agent first"
            if teams
            else "other records still refer to it"
        )
        raise RegistryError(
            "in_use", f"agent {agent.pk!r} cannot be deleted: {why}", status=409
        ) from error


def api_key_create(*, name: str, is_admin: bool = False, expires_at=None,
                   created_by=None) -> tuple[ApiKey, str]:
    """Creates a key and returns it with its secret, which is not stored and cannot be shown
    again."""
    key, prefix, key_hash = secrets.new_api_key()
    api_key = ApiKey.objects.create(
        name=name, prefix=prefix, key_hash=key_hash, is_admin=is_admin,
        expires_at=expires_at, created_by=created_by,
    )
    return api_key, key


def api_key_revoke(*, api_key: ApiKey) -> None:
    """Revokes the key; calls with it are refused from the moment this commits."""
    with transaction.atomic():
        ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        api_key_forget(api_key)


def _free_agent_id(name: str) -> str:
    base = slugify(name)[:56] or "agent"
    taken = set(
        Agent.objects.filter(id__startswith=base).values_list("id", flat=True)
    )
    if base not in taken:
        return base
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"


def _apply_card(agent: Agent, fetched: FetchedCard, *, created: bool) -> None:
    """Writes a fetched card onto the agent: a snapshot, its fields, skills and extensions.
    Runs inside the caller's transaction."""
    card = fetched.card
    now = timezone.now()
    if created or not agent.name:
        agent.name = card.name
    if created or not agent.description:
        agent.description = card.description
    agent.version = card.version
    agent.card_protocol_version = card.protocol_version
    agent.protocol_versions = list(card.protocol_versions)
    agent.bindings = list(card.bindings)
    agent.interfaces = [
        {"url": i.url, "protocolBinding": i.binding, "protocolVersion": i.protocol_version}
        for i in card.interfaces
    ]
    agent.streaming = card.streaming
    agent.push_notifications = card.push_notifications
    agent.extended_card = card.extended_card
    agent.default_input_modes = list(card.default_input_modes)
    agent.default_output_modes = list(card.default_output_modes)
    agent.provider_organization = card.provider_organization[:200]
    agent.provider_url = card.provider_url[:2048]
    agent.documentation_url = card.documentation_url[:2048]
    agent.icon_url = card.icon_url[:2048]
    agent.card_fetched_at = now
    agent.updated_at = now
    _write_facets(agent, card)
    agent.save()

    snapshot = CardSnapshot.objects.create(
        agent=agent, raw=fetched.document, normalized=card.normalized,
        content_hash=card.content_hash, protocol_version=card.protocol_version,
        source_url=fetched.url, fetched_at=now,
    )
    agent.current_snapshot = snapshot
    agent.save(update_fields=["current_snapshot"])

    if not created:
        agent.skills.all().delete()
        agent.extensions.all().delete()
    Skill.objects.bulk_create([
        Skill(
            agent=agent, skill_id=skill.id, name=skill.name, description=skill.description,
            tags=list(skill.tags), examples=list(skill.examples),
            input_modes=list(skill.input_modes), output_modes=list(skill.output_modes),
            position=position, search_text=_skill_search_text(skill),
            tag_facets=_facet(t.lower() for t in skill.tags),
            input_mode_facets=_facet(
                m.lower() for m in skill.input_modes or card.default_input_modes
            ),
            output_mode_facets=_facet(
                m.lower() for m in skill.output_modes or card.default_output_modes
            ),
        )
        for position, skill in enumerate(_unique_skills(card))
    ])
    DeclaredExtension.objects.bulk_create([
        DeclaredExtension(agent=agent, uri=extension.uri, description=extension.description,
                          required=extension.required, params=extension.params)
        for extension in {e.uri: e for e in card.extensions}.values()
    ])


def _unique_skills(card: ParsedCard):
    # A card listing the same skill id twice keeps the first; the database holds one per id.
    return list({skill.id: skill for skill in reversed(card.skills)}.values())[::-1]


def _facet(values) -> str:
    values = [v for v in dict.fromkeys(values) if v]
    return "|" + "|".join(v.replace("|", "/") for v in values) + "|" if values else ""


def _skill_search_text(skill) -> str:
    return " ".join([skill.id, skill.name, skill.description, *skill.tags]).lower()


def _agent_search_text(agent: Agent, skill_texts) -> str:
    return " ".join([agent.id, agent.name, agent.description, *skill_texts]).lower()


def _write_facets(agent: Agent, card: ParsedCard) -> None:
    skills = card.skills
    agent.search_text = _agent_search_text(agent, [_skill_search_text(s) for s in skills])
    agent.skill_facets = _facet(s.id.lower() for s in skills)
    agent.tag_facets = _facet(t.lower() for s in skills for t in s.tags)
    agent.extension_facets = _facet(e.uri for e in card.extensions)
    agent.input_mode_facets = _facet(
        m.lower() for m in [*card.default_input_modes, *(m for s in skills for m in s.input_modes)]
    )
    agent.output_mode_facets = _facet(
        m.lower()
        for m in [*card.default_output_modes, *(m for s in skills for m in s.output_modes)]
    )
