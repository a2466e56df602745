"""Relays that follow each other: this relay mirrors the registry of a peer relay.

:func:`peer_follow` adds a peer (its base URL, and the API key this relay sends it);
:func:`peer_sync` (the ``registry.sync_peers`` job, on a beat schedule, and ``manage.py
sync_peers``) mirrors what changed there since the last sync:

1. ``GET {peer}/a2a/registry/removed?since=...``: mirrors of agents the peer deleted are
   deleted here (first, so an agent deleted and registered again comes back).
2. ``GET {peer}/a2a/registry?updatedSince=...`` page after page (``cursor``): each agent is
   registered here, or refreshed and its name, description and status copied, and marked with
   its origin (``origin_peer``, ``origin_id``). A mirror is read-only here.
3. The first sync lists everything, and deletes the mirrors the peer no longer has.

How mirrors are called is the peer's ``mode``: ``via_origin`` registers the card the peer relay
serves for the agent (calls go through the peer, with its API key, and its signature is
checked when the peer signs its cards), ``direct`` the agent's own card URL.

Loops (A follows B follows A) do not multiply agents: agents the peer itself mirrors
(``origin`` set in its registry) are never mirrored, nor are agents whose card is served by
this relay (RELAY_PUBLIC_URL). The watermark is the peer's own clock (its ``Date`` header),
less a two-second overlap, so clock skew between relays loses nothing; the overlap only
re-reads a few agents, and every step is idempotent.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.text import slugify

from registry import secrets
from registry.models import Agent, PeerRelay
from relay_project import outbound

logger = logging.getLogger(__name__)

OVERLAP = timedelta(seconds=2)
PAGE_SIZE = 100
REMOVED_PAGE = 1000
"""What the peer's removed list answers at most at once (registry.selectors.REMOVED_PAGE_SIZE)."""


class PeerError(Exception):
    """The peer's registry could not be read; the message says why."""


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "skipped": self.skipped,
            "refused": self.refused,
        }

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} removed, "
            f"{len(self.skipped)} skipped, {len(self.refused)} refused"
        )


def peer_follow(
    *, url: str, api_key: str = "", name: str = "", mode: str = PeerRelay.Mode.VIA_ORIGIN
) -> PeerRelay:
    """Adds (or changes) the peer relay at ``url``. Raises PeerError for a URL the relay may
    not fetch."""
    url = url.strip().rstrip("/")
    check_peer_url(url)
    if mode not in PeerRelay.Mode.values:
        raise PeerError(f"mode must be one of {', '.join(PeerRelay.Mode.values)}")
    name = slugify(name or urlsplit(url).netloc.replace(":", "-"))[:100] or "peer"
    if PeerRelay.objects.filter(name=name).exclude(url=url).exists():
        raise PeerError(f"another peer relay is already named {name!r}; give another --name")
    peer, _ = PeerRelay.objects.update_or_create(
        url=url,
        defaults={
            "name": name,
            "mode": mode,
            "enabled": True,
            **({"api_key": secrets.encrypt(api_key)} if api_key else {}),
        },
    )
    return peer


def check_peer_url(url: str) -> None:
    """Raises PeerError for a URL the relay may not fetch (the outbound guard's rules; a host
    name is checked again when the relay connects)."""
    try:
        outbound.check_url_shape(url)
        outbound.check_literal_address(url)
    except outbound.UnsafeURLError as error:
        raise PeerError(str(error)) from error


def peer_headers(peer: PeerRelay) -> dict[str, str]:
    key = secrets.decrypt(peer.api_key) if peer.api_key else ""
    return {"Authorization": f"Bearer {key}"} if key else {}


def peer_sync(*, peer: PeerRelay, client: httpx.Client | None = None) -> SyncReport:
    """Mirrors what changed at ``peer`` since its last sync (see the module's docstring). A
    peer that cannot be read keeps its watermark and records the error; raises PeerError."""
    peer.refresh_from_db()  # the watermark as the last sync left it
    owns = client is None
    client = client or outbound.client()
    try:
        try:
            report = _sync(peer, client)
        except PeerError as error:
            PeerRelay.objects.filter(pk=peer.pk).update(
                last_error=str(error)[:500], last_synced_at=timezone.now()
            )
            raise
    finally:
        if owns:
            client.close()
    return report


def _sync(peer: PeerRelay, client: httpx.Client) -> SyncReport:
    report = SyncReport()
    headers = {"Accept": "application/json", **peer_headers(peer)}
    since = peer.synced_until - OVERLAP if peer.synced_until else None
    started: datetime | None = None
    if since is not None:
        started = _mirror_removals(peer, client, headers, since, report)
    seen: set[str] = set()
    cursor = None
    limit = settings.RELAY_CATALOG_MAX_ENTRIES
    while True:
        params = {"limit": str(PAGE_SIZE)}
        if since is not None:
            params["updatedSince"] = _iso(since)
        if cursor:
            params["cursor"] = cursor
        page, answered_at = _get(client, f"{peer.url}/a2a/registry", headers, params)
        started = started or answered_at
        agents = page.get("agents")
        if not isinstance(agents, list):
            raise PeerError(f"{peer.url}/a2a/registry did not answer a registry page")
        for remote in agents:
            if not isinstance(remote, dict) or not isinstance(remote.get("id"), str):
                continue
            if len(seen) >= limit:
                report.refused.append(
                    {"id": remote["id"], "reason": f"more than {limit} agents in one sync"}
                )
                continue
            seen.add(remote["id"])
            _mirror(peer, remote, client, report)
        cursor = page.get("nextCursor")
        if not cursor:
            break
    if since is None:
        # A first (full) sync: mirrors the peer no longer lists are gone there.
        for agent in Agent.objects.filter(origin_peer=peer).exclude(origin_id__in=seen):
            _remove(agent, report)
    PeerRelay.objects.filter(pk=peer.pk).update(
        synced_until=started or timezone.now(),
        last_synced_at=timezone.now(),
        last_error="",
        last_report=report.as_dict(),
    )
    return report


def _mirror_removals(
    peer: PeerRelay, client: httpx.Client, headers: dict[str, str], since: datetime, report
) -> datetime | None:
    """Deletes the mirrors of agents the peer deleted at or after ``since``, page after page
    (the peer answers at most a thousand at a time); returns the time of the peer's first
    answer."""
    started = None
    while True:
        answer, answered_at = _get(
            client, f"{peer.url}/a2a/registry/removed", headers, {"since": _iso(since)}
        )
        started = started or answered_at
        rows = [row for row in answer.get("removed") or [] if isinstance(row, dict)]
        gone = [str(row.get("id")) for row in rows]
        for agent in Agent.objects.filter(origin_peer=peer, origin_id__in=gone):
            _remove(agent, report)
        last = parse_datetime(str(rows[-1].get("at"))) if rows else None
        if len(rows) < REMOVED_PAGE or last is None or last <= since:
            return started
        since = last


def _get(
    client: httpx.Client, url: str, headers: dict[str, str], params: dict[str, str]
) -> tuple[dict[str, Any], datetime | None]:
    try:
        with client.stream("GET", url, headers=headers, params=params) as response:
            if response.status_code >= 400:
                raise PeerError(f"{url} answered HTTP {response.status_code}")
            body = outbound.read_limited(response, settings.RELAY_CATALOG_MAX_BYTES)
            date = response.headers.get("Date")
    except outbound.UnsafeURLError as error:
        raise PeerError(f"{url} is refused: {error}") from error
    except outbound.ResponseTooLargeError as error:
        raise PeerError(f"{url} answered more than {error.limit} bytes") from error
    except httpx.HTTPError as error:
        raise PeerError(f"cannot reach {url}: {error or type(error).__name__}") from error
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise PeerError(f"{url} did not answer JSON") from error
    if not isinstance(document, dict):
        raise PeerError(f"{url} did not answer a JSON object")
    try:
        answered_at = parsedate_to_datetime(date) if date else None
    except (TypeError, ValueError):
        answered_at = None
    return document, answered_at


def _mirror(peer: PeerRelay, remote: dict[str, Any], client, report: SyncReport) -> None:
    from registry import services

    remote_id = remote["id"]
    if remote.get("origin"):
        report.skipped.append({"id": remote_id, "reason": "a mirror at the peer"})
        return
    own = settings.RELAY_PUBLIC_URL.rstrip("/")
    if own and str(remote.get("cardUrl", "")).startswith(own + "/"):
        report.skipped.append({"id": remote_id, "reason": "served by this relay"})
        return
    card_url = mirror_card_url(peer, remote)
    credentials = _credentials(peer)
    local = Agent.objects.filter(origin_peer=peer, origin_id=remote_id).first()
    if local is None:
        # An agent imported from the peer's catalog before it was followed becomes its mirror.
        local = Agent.objects.filter(card_url=card_url, origin_peer__isnull=True).first()
        if local is not None:
            Agent.objects.filter(pk=local.pk).update(origin_peer=peer, origin_id=remote_id)
            local.origin_peer, local.origin_id = peer, remote_id
    actor = f"peer:{peer.name}"
    try:
        if local is None:
            local = services.agent_register(
                url=card_url,
                agent_id=_free_id(remote_id, peer),
                credentials=credentials,
                client=client,
                actor=actor,
                origin_peer=peer,
                origin_id=remote_id,
            )
            _follow_fields(local, remote)
            _follow_invalid_signature(local, remote, peer)
            report.added.append(local.pk)
            return
        changed = _follow_fields(local, remote)
        if local.status != Agent.Status.DISABLED:
            changed = services.agent_card_refresh(agent=local, client=client) or changed
        changed = _follow_invalid_signature(local, remote, peer) or changed
        (report.updated if changed else report.unchanged).append(local.pk)
    except services.RegistryError as error:
        report.refused.append({"id": remote_id, "reason": f"{error.code}: {error.message}"})


def mirror_card_url(peer: PeerRelay, remote: dict[str, Any]) -> str:
    """Where the mirror's card is fetched: at the peer relay (via_origin) or the agent's own
    card URL (direct)."""
    if peer.mode == PeerRelay.Mode.DIRECT and remote.get("cardUrl"):
        return str(remote["cardUrl"])
    return f"{peer.url}/a2a/agents/{remote['id']}/.well-known/agent-card.json"


def _credentials(peer: PeerRelay):
    from registry.services import Credentials

    if peer.mode != PeerRelay.Mode.VIA_ORIGIN or not peer.api_key:
        return None
    return Credentials("", secrets.decrypt(peer.api_key), "bearer")


def _follow_fields(agent: Agent, remote: dict[str, Any]) -> bool:
    """Copies what an operator changes at the origin (name, description, status); True when
    something changed."""
    wanted = {
        "name": str(remote.get("name") or agent.name)[:200],
        "description": str(remote.get("description") or ""),
        "status": remote.get("status") if remote.get("status") in Agent.Status.values else None,
    }
    changes = {k: v for k, v in wanted.items() if v is not None and getattr(agent, k) != v}
    if not changes:
        return False
    with transaction.atomic():
        for name, value in changes.items():
            setattr(agent, name, value)
        agent.updated_at = timezone.now()
        agent.save(update_fields=[*changes, "updated_at"])
    return True


def _follow_invalid_signature(agent: Agent, remote: dict[str, Any], peer: PeerRelay) -> bool:
    """Marks the mirror ``invalid`` when the origin found its card's signature invalid and
    this relay saw no signature at all (the peer serves the card again, unsigned by the
    agent): a bad signature must not pass as a plain unsigned card. True when it marked."""
    origin = remote.get("signature")
    if not isinstance(origin, dict) or origin.get("status") != Agent.SignatureStatus.INVALID:
        return False
    if agent.signature_status != Agent.SignatureStatus.UNSIGNED:
        return False
    detail = f"invalid at the origin relay {peer.name}: {origin.get('detail') or ''}"
    agent.signature_status = Agent.SignatureStatus.INVALID
    agent.signature_detail = detail.strip().rstrip(":")[:500]
    agent.save(update_fields=["signature_status", "signature_detail"])
    return True


def _remove(agent: Agent, report: SyncReport) -> None:
    from registry import services

    agent_id = agent.pk
    try:
        services.agent_delete(agent=agent, actor=f"peer:{agent.origin_peer.name}")
    except services.RegistryError as error:
        report.refused.append({"id": agent_id, "reason": f"{error.code}: {error.message}"})
        return
    report.removed.append(agent_id)


def _free_id(remote_id: str, peer: PeerRelay) -> str | None:
    if not Agent.objects.filter(pk=remote_id).exists():
        return remote_id
    candidate = slugify(f"{remote_id}-{peer.name}")[:64]
    if not Agent.objects.filter(pk=candidate).exists():
        return candidate
    return None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def peers_sync_all() -> dict[str, str]:
    """Syncs every enabled peer; returns each one's summary (or error)."""
    results = {}
    for peer in PeerRelay.objects.filter(enabled=True):
        try:
            results[peer.name] = peer_sync(peer=peer).summary()
        except PeerError as error:
            logger.warning("sync of peer relay %s failed: %s", peer.name, error)
            results[peer.name] = f"failed: {error}"
    return results
