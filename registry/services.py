"""Writes to the registry. Each service takes keyword arguments and runs in one transaction;
network work (fetching a card) happens before the transaction opens, so a failed fetch stores
nothing and no lock is held while waiting on an agent."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.utils import timezone
from django.utils.text import slugify

from registry import secrets, semantic
from registry.auth import api_key_forget
from registry.card_store import agent_search_text, card_apply
from registry.fetching import CardFetchError, FetchedCard, fetch_card
from registry.models import (
    Agent,
    ApiKey,
    AuditEntry,
    CardSnapshot,
    PeerRelay,
    Team,
)
from relay_project import outbound
from relay_project.own_address import OwnAddresses

SYSTEM = "system"
"""The actor of writes nobody in particular asked for (management commands, jobs)."""


class RegistryError(Exception):
    """A registry write that cannot be done; ``code`` and ``status`` go to the API as they are."""

    def __init__(
        self, code: str, message: str, *, status: int = 400, missing: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.missing = missing

    @classmethod
    def from_fetch(cls, error: CardFetchError) -> RegistryError:
        return cls(error.code, error.message, status=error.status, missing=error.missing)


CredentialKind = Agent.CredentialKind


@dataclass(frozen=True)
class Credentials:
    """What the relay sends upstream for an agent (card fetch, probes, calls).

    ``kind`` bearer: ``header_value`` is the token; basic: it is ``user:password``; header
    (and "", the kind of credentials stored before kinds existed): it is sent as it is in the
    header ``header_name``. ``repr`` never shows the value."""

    header_name: str
    header_value: str = field(repr=False)
    kind: str = CredentialKind.HEADER

    def as_headers(self) -> dict[str, str]:
        return credential_headers(self.kind, self.header_name, self.header_value)


def credential_headers(kind: str, header_name: str, value: str) -> dict[str, str]:
    """The outgoing header of a credential: bearer -> ``Authorization: Bearer <value>``,
    basic -> ``Authorization: Basic base64(user:password)``, header (or "" with a header
    name) -> ``<header_name>: <value>``. Nothing when there is no value."""
    if not value:
        return {}
    if kind == CredentialKind.BEARER:
        return {"Authorization": f"Bearer {value}"}
    if kind == CredentialKind.BASIC:
        return {"Authorization": "Basic " + base64.b64encode(value.encode()).decode("ascii")}
    return {header_name: value} if header_name else {}


def agent_credentials(agent: Agent) -> Credentials | None:
    """The agent's stored credentials, decrypted; None when it has none."""
    if not agent.has_credentials:
        return None
    kind = agent.auth_kind or CredentialKind.HEADER
    return Credentials(agent.auth_header_name, secrets.decrypt(agent.auth_header_value), kind)


def upstream_auth_headers(agent: Agent) -> dict[str, str]:
    """The headers that authenticate the relay to this agent, for every request it sends the
    agent: card fetches, probes and calls. Empty when the agent has no credentials. The values
    are secrets: never log them."""
    credentials = agent_credentials(agent)
    return credentials.as_headers() if credentials else {}


def _store_credentials(agent: Agent, credentials: Credentials | None) -> None:
    agent.auth_kind = credentials.kind if credentials else CredentialKind.NONE
    agent.auth_header_name = (
        credentials.header_name if credentials and credentials.kind == CredentialKind.HEADER else ""
    )
    agent.auth_header_value = secrets.encrypt(credentials.header_value) if credentials else ""


def actor_of(*, key: ApiKey | None = None, user=None) -> str:
    """Who does a write, as the audit log names them: ``key:<prefix>`` for an API key,
    ``user:<username>`` for a person (the admin, a staff session), else ``system``."""
    if key is not None:
        return f"key:{key.prefix}"
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.get_username()}"
    return SYSTEM


def audit_record(
    *,
    actor: str,
    action: str,
    object_type: str,
    object_id: str,
    changes: dict[str, Any] | None = None,
) -> AuditEntry:
    """Writes one audit entry, in the caller's transaction (so a write that fails records
    nothing). ``changes`` must hold no secrets: credentials appear as their kind only."""
    return AuditEntry.objects.create(
        actor=actor[:200],
        action=action,
        object_type=object_type,
        object_id=str(object_id)[:64],
        changes=changes or {},
    )


def _credentials_note(credentials: Credentials | None) -> str:
    return f"set ({credentials.kind})" if credentials else "removed"


def refuse_own_address(url: str, own: OwnAddresses | None, *, field: str = "url") -> None:
    """Raises RegistryError ``relay_itself`` (400) when ``url`` reaches the relay itself (one of
    ``own``): registering the relay as its own agent would loop every call back into it."""
    if own is None or not url:
        return
    try:
        outbound.check_literal_address(url)
    except outbound.UnsafeURLError:
        return  # the fetch refuses it as unsafe_url, as it refuses every private address
    where = own.match(url)
    if where:
        raise RegistryError(
            "relay_itself",
            f"{field} {url} is this relay itself ({where}), not an agent: give the agent's own "
            "URL (the relay's agents are reached at /a2a/agents/{id}/ once registered)",
        )


def agent_register(
    *,
    url: str,
    agent_id: str | None = None,
    invocation_url: str = "",
    credentials: Credentials | None = None,
    created_by: ApiKey | None = None,
    client: httpx.Client | None = None,
    actor: str | None = None,
    own: OwnAddresses | None = None,
    require_signature: bool = False,
    origin_peer: PeerRelay | None = None,
    origin_id: str = "",
    mcp_server: bool = False,
) -> Agent:
    """Fetches the card behind ``url`` and registers the agent (with ``mcp_server``: connects
    to the MCP server at ``url`` and registers it with the card the relay writes for it). ``actor`` (for the audit log)
    defaults to ``created_by``'s name, else system.

    Raises RegistryError (and stores nothing) when the card cannot be had, is not a valid card,
    the URL is already registered, ``agent_id`` is taken, or ``url``, the card's final URL or
    ``invocation_url`` is the relay itself (one of ``own``). The card's signatures are checked
    (``signature_required``, 422, when ``require_signature`` and none verifies). ``origin_peer``
    and ``origin_id`` mark an agent mirrored from a peer relay.
    """
    refuse_own_address(url, own)
    refuse_own_address(invocation_url, own, field="invocationUrl")
    if agent_id is not None and Agent.objects.filter(pk=agent_id).exists():
        raise RegistryError(
            "duplicate", f"an agent with id {agent_id!r} already exists", status=409
        )
    headers = credentials.as_headers() if credentials else {}
    try:
        fetched = _fetched(url, mcp_server=mcp_server, client=client, headers=headers)
    except CardFetchError as error:
        raise RegistryError.from_fetch(error) from error
    refuse_own_address(fetched.url, own, field="the card's address")
    signature = card_signature_check(fetched, client=client)
    if require_signature and not signature.verified:
        raise RegistryError(
            "signature_required",
            f"the card at {fetched.url} has no valid signature ({signature.detail}) and a "
            "valid signature was required",
            status=422,
        )
    existing = Agent.objects.filter(card_url=fetched.url).values_list("pk", flat=True).first()
    if existing:
        raise RegistryError(
            "duplicate",
            f"the card at {fetched.url} is already registered as {existing!r}",
            status=409,
        )
    semantic.model_warm()  # loads the model, if it is not yet, before the transaction
    try:
        with transaction.atomic():
            agent = Agent(
                id=agent_id or _free_agent_id(fetched.card.name),
                card_url=fetched.url,
                invocation_url=invocation_url,
                created_by=created_by,
                require_signature=require_signature,
                origin_peer=origin_peer,
                origin_id=origin_id,
                mcp_server=mcp_server,
            )
            _store_signature(agent, signature)
            if credentials:
                _store_credentials(agent, credentials)
            card_apply(agent, fetched, created=True)
            changes = {"cardUrl": fetched.url, "name": agent.name}
            if mcp_server:
                changes["mcpServer"] = True
            if invocation_url:
                changes["invocationUrl"] = invocation_url
            if credentials:
                changes["credentials"] = _credentials_note(credentials)
            audit_record(
                actor=actor or actor_of(key=created_by),
                action=AuditEntry.Action.CREATE,
                object_type="agent",
                object_id=agent.pk,
                changes=changes,
            )
    except IntegrityError as error:
        # Two registrations of the same id or URL raced; the loser stores nothing.
        raise RegistryError(
            "duplicate", "that agent was registered at the same moment", status=409
        ) from error
    return agent


def agent_card_refresh(*, agent: Agent, client: httpx.Client | None = None) -> bool:
    """Fetches the agent's card again. Returns True when the card changed (a new snapshot).

    Raises RegistryError when the card cannot be had; the stored card is then left as it was.
    """
    try:
        fetched = _fetched(
            agent.card_url,
            mcp_server=agent.mcp_server,
            client=client,
            headers=upstream_auth_headers(agent),
        )
    except CardFetchError as error:
        raise RegistryError.from_fetch(error) from error
    signature = card_signature_check(fetched, client=client)
    if _refuse_unsigned(agent, signature):
        raise RegistryError(
            "signature_required",
            f"the card of {agent.pk!r} was refused and the stored card kept: "
            f"{agent.card_refused_reason}",
            status=422,
        )
    return agent_card_store(agent=agent, fetched=fetched, signature=signature)


def _fetched(
    url: str, *, mcp_server: bool, client: httpx.Client | None, headers: dict[str, str]
) -> FetchedCard:
    """The card of the agent at ``url``: fetched, or written from the MCP server's tools."""
    if mcp_server:
        from registry.mcp_servers import fetch_mcp_card

        return fetch_mcp_card(url, headers=headers)
    return fetch_card(url, client=client, headers=headers)


def card_signature_check(fetched: FetchedCard, *, client: httpx.Client | None = None):
    """The signature check of a fetched card (registry.jwks; fetches key sets, so it runs
    outside any transaction)."""
    from registry.jwks import check_card_signature

    return check_card_signature(fetched, client=client)


def agent_card_store(*, agent: Agent, fetched: FetchedCard, signature=None) -> bool:
    """Stores a card fetched for ``agent`` (by a refresh or a health probe): a new snapshot,
    with the agent's fields, skills and extensions, when its content changed. Returns True
    then; otherwise only notes the time of the fetch (and the signature check). An agent that
    requires a signature keeps its stored card when this one's does not verify, and records
    why; False then."""
    if signature is None:
        signature = card_signature_check(fetched)
    if _refuse_unsigned(agent, signature):
        return False
    semantic.model_warm()  # loads the model, if it is not yet, before the transaction
    with transaction.atomic():
        current = (
            CardSnapshot.objects.filter(agent=agent).values_list("content_hash", flat=True).first()
        )
        _store_signature(agent, signature)
        agent.card_refused_at, agent.card_refused_reason = None, ""
        if current == fetched.card.content_hash:
            now = timezone.now()
            agent.card_fetched_at = now
            agent.save(update_fields=["card_fetched_at", *_SIGNATURE_FIELDS])
            return False
        card_apply(agent, fetched, created=False)
    return True


_SIGNATURE_FIELDS = (
    "signature_status",
    "signature_kid",
    "signature_jku",
    "signature_detail",
    "signature_checked_at",
    "card_refused_at",
    "card_refused_reason",
)


def _store_signature(agent: Agent, signature) -> None:
    agent.signature_status = signature.status
    agent.signature_kid = signature.kid[:200]
    agent.signature_jku = signature.jku[:2048]
    agent.signature_detail = signature.detail[:500]
    agent.signature_checked_at = timezone.now()


def _refuse_unsigned(agent: Agent, signature) -> bool:
    """Records the refusal of a card whose signature does not verify, for an agent that
    requires one; returns whether it was refused. The stored card and its status stay."""
    if not agent.require_signature or signature.verified:
        return False
    now = timezone.now()
    reason = f"{signature.status}: {signature.detail}"[:500]
    Agent.objects.filter(pk=agent.pk).update(card_refused_at=now, card_refused_reason=reason)
    agent.card_refused_at, agent.card_refused_reason = now, reason
    return True


PROBE_FIELDS = (
    "probe_interval_seconds",
    "probe_timeout_seconds",
    "readiness_probe",
    "readiness_message",
    "scale_to_zero",
    "scale_to_zero_probes",
)
"""The agent's health-probe settings an operator may change."""

STREAM_FIELDS = ("stream_idle_seconds",)
"""How long the relay waits on the agent's streams (RELAY_STREAM_IDLE_SECONDS otherwise)."""

RETRY_FIELDS = ("retry_attempts", "retry_base_delay_ms", "retry_deadline_seconds", "idempotent")
"""How the relay retries a send to the agent that failed (``tasks_app.gateway.retries``)."""

DELEGATION_FIELDS = (
    "delegation_mode",
    "delegation_audience",
    "delegation_token_url",
    "delegation_scopes",
    "delegation_narrow",
)
"""Which token the agent gets on a caller's behalf (``tasks_app.hop_tokens``)."""

FAILOVER_FIELDS = ("failover_same_skill",)
"""Where a send goes when the agent is down, beside its ordered alternates (set apart, in the
admin's inline): ``tasks_app.gateway.failover``."""
MCP_FIELDS = ("mcp_skill_tools",)
"""What the relay's MCP server offers of the agent (``routing.mcp``)."""


def agent_update(
    *, agent: Agent, fields: dict[str, Any], actor: str = SYSTEM, own: OwnAddresses | None = None
) -> Agent:
    """Changes what an operator may change: name, description, invocation URL, status,
    credentials, how the agent is probed (``PROBE_FIELDS``; a change takes effect at the
    next sweep), how long its streams may stay silent (``STREAM_FIELDS``), how its sends
    are retried (``RETRY_FIELDS``) and failed over (``FAILOVER_FIELDS``). Card-derived
    fields change only through a refresh. The audit log gets one entry naming the fields that
    changed (credentials by their kind only). An invocation URL that is the relay itself (one
    of ``own``) is refused."""
    refuse_own_address(fields.get("invocation_url", ""), own, field="invocationUrl")
    editable = {
        "name",
        "description",
        "invocation_url",
        "status",
        "require_signature",
        *PROBE_FIELDS,
        *STREAM_FIELDS,
        *RETRY_FIELDS,
        *FAILOVER_FIELDS,
        *DELEGATION_FIELDS,
        *MCP_FIELDS,
    }
    unknown = set(fields) - editable - {"credentials"}
    if unknown:
        raise RegistryError("not_editable", f"cannot change {', '.join(sorted(unknown))}")
    with transaction.atomic():
        # Compared with the stored row: a model form has already set the new values on
        # ``agent``.
        stored = Agent.objects.filter(pk=agent.pk).values(*editable).first() or {}
        changes: dict[str, Any] = {}
        for name in sorted(editable & set(fields)):
            if stored.get(name) != fields[name]:
                changes[_CAMEL.get(name, name)] = fields[name]
            setattr(agent, name, fields[name])
        if "credentials" in fields:
            _store_credentials(agent, fields["credentials"])
            changes["credentials"] = _credentials_note(fields["credentials"])
        if set(PROBE_FIELDS) & set(fields):
            agent.next_probe_at = None
        if {"name", "description"} & set(fields):
            agent.search_text = agent_search_text(
                agent, agent.skills.values_list("search_text", flat=True)
            )
        agent.updated_at = timezone.now()
        agent.full_clean(exclude=["current_snapshot", "created_by"])
        agent.save()
        if changes:
            audit_record(
                actor=actor,
                action=AuditEntry.Action.UPDATE,
                object_type="agent",
                object_id=agent.pk,
                changes=changes,
            )
    return agent


_CAMEL = {"invocation_url": "invocationUrl", "require_signature": "requireSignature"}


def agent_delete(*, agent: Agent, actor: str = SYSTEM) -> None:
    """Deletes the agent with its card history, skills and team memberships.

    Raises RegistryError ``in_use`` (409), deleting nothing, while the agent is a team's default
    agent: the team would be left without one."""
    try:
        with transaction.atomic():
            agent_id = agent.pk
            agent.delete()
            audit_record(
                actor=actor,
                action=AuditEntry.Action.DELETE,
                object_type="agent",
                object_id=agent_id,
                changes={"name": agent.name},
            )
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


def api_key_create(
    *,
    name: str,
    is_admin: bool = False,
    expires_at=None,
    created_by=None,
    can_read_registry: bool = True,
    can_register: bool = True,
    can_call: bool = True,
    agents: Iterable[str] = (),
    teams: Iterable[str] = (),
    actor: str | None = None,
) -> tuple[ApiKey, str]:
    """Creates a key and returns it with its secret, which is not stored and cannot be shown
    again. ``agents`` and ``teams`` (ids) are the only ones it may call; with neither, it may
    call every agent and team.
    Raises RegistryError ``unknown_agent`` / ``unknown_team`` (storing nothing) for an id
    that is not registered."""
    agent_ids, team_ids = sorted(set(agents)), sorted(set(teams))
    with transaction.atomic():
        found_agents = set(Agent.objects.filter(pk__in=agent_ids).values_list("pk", flat=True))
        found_teams = set(Team.objects.filter(pk__in=team_ids).values_list("pk", flat=True))
        if missing := [a for a in agent_ids if a not in found_agents]:
            raise RegistryError("unknown_agent", f"no agent {missing[0]!r} is registered")
        if missing := [t for t in team_ids if t not in found_teams]:
            raise RegistryError("unknown_team", f"no team {missing[0]!r} exists")
        key, prefix, key_hash = secrets.new_api_key()
        api_key = ApiKey.objects.create(
            name=name,
            prefix=prefix,
            key_hash=key_hash,
            is_admin=is_admin,
            expires_at=expires_at,
            created_by=created_by,
            can_read_registry=can_read_registry,
            can_register=can_register,
            can_call=can_call,
        )
        api_key.agents.set(agent_ids)
        api_key.teams.set(team_ids)
        audit_record(
            actor=actor or actor_of(user=created_by),
            action=AuditEntry.Action.CREATE,
            object_type="apikey",
            object_id=prefix,
            changes={
                "name": name,
                "isAdmin": is_admin,
                "canReadRegistry": can_read_registry,
                "canRegister": can_register,
                "canCall": can_call,
                "agents": agent_ids,
                "teams": team_ids,
                "expiresAt": expires_at.isoformat() if expires_at else None,
            },
        )
    return api_key, key


def api_key_revoke(*, api_key: ApiKey, actor: str = SYSTEM) -> None:
    """Revokes the key; calls with it are refused from the moment this commits."""
    with transaction.atomic():
        revoked = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        api_key_forget(api_key)
        if revoked:
            audit_record(
                actor=actor,
                action=AuditEntry.Action.REVOKE,
                object_type="apikey",
                object_id=api_key.prefix,
                changes={"name": api_key.name},
            )


def _free_agent_id(name: str) -> str:
    base = slugify(name)[:56] or "agent"
    taken = set(Agent.objects.filter(id__startswith=base).values_list("id", flat=True))
    if base not in taken:
        return base
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"
