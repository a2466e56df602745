"""The AI Catalog (Linux Foundation AI Catalog, the ``ai-catalog.json`` of Agentic Resource
Discovery): the relay publishes one listing every agent and team it serves, and imports other
hosts' catalogs, registering every A2A agent in them.

Publishing: ``/.well-known/ai-catalog.json`` is ``{"specVersion": "0.9", "host": {...},
"entries": [...]}`` (0.9: the newest published draft, v0.9.0); each entry has a
domain-anchored identifier ``urn:air:<publisher>:agent:<id>`` (``team`` for teams),
``displayName``, ``type`` and ``mediaType`` (both ``application/a2a-agent-card+json``: the
drafts moved from ``mediaType`` to ``type``, ADR 0014, and readers of either exist), ``url`` (the card the relay serves for it; never ``data``),
``description``, ``tags``, ``capabilities`` (skill ids), ``representativeQueries`` (the skills'
examples, at most five), ``version`` and ``updatedAt``. ``<publisher>`` is
RELAY_CATALOG_PUBLISHER, else the relay's host name. Disabled agents and teams are left out, and
so are agents mirrored from a peer relay: their origin's catalog lists them, and leaving them
out keeps relays that import each other's catalogs from listing one agent twice.

Importing: :func:`catalog_import` reads a catalog (SSRF-checked, at most RELAY_CATALOG_MAX_BYTES
and RELAY_CATALOG_MAX_ENTRIES entries) and registers each A2A entry's card URL; one already
registered is refreshed. It reports every entry as added, updated, unchanged or refused (with
why), so running it again changes nothing but what changed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.http import HttpRequest
from django.utils.text import slugify

from registry.fetching import candidate_urls
from registry.models import Agent, Team
from relay_project import outbound
from relay_project.own_address import OwnAddresses

SPEC_VERSION = "0.9"
MEDIA_TYPE = "application/ai-catalog+json"
A2A_CARD_TYPE = "application/a2a-agent-card+json"
CACHE_CONTROL = "public, max-age=300"
MAX_QUERIES = 5
EXTENSION = "brassRelay"
URN = re.compile(
    r"^urn:air:(?P<publisher>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r"(?::[A-Za-z0-9._~%!$&'()*+,;=@-]+)+$"
)
"""``urn:air:<publisher>:<namespace...>:<name>``: a domain, then at least two segments."""


def publisher_for(request: HttpRequest | None = None) -> str:
    """The domain of this relay's identifiers: RELAY_CATALOG_PUBLISHER, else the host of
    RELAY_PUBLIC_URL, else of the request."""
    if settings.RELAY_CATALOG_PUBLISHER:
        return settings.RELAY_CATALOG_PUBLISHER.lower()
    if settings.RELAY_PUBLIC_URL:
        return (urlsplit(settings.RELAY_PUBLIC_URL).hostname or "localhost").lower()
    if request is not None:
        return request.get_host().rsplit(":", 1)[0].strip("[]").lower() or "localhost"
    return "localhost"


def identifier(publisher: str, kind: str, object_id: str) -> str:
    return f"urn:air:{publisher}:{kind}:{object_id}"


def relay_catalog(*, base_url: str, publisher: str) -> dict[str, Any]:
    """The relay's catalog: every agent that is not disabled and not a mirror, then every
    enabled team. Three queries whatever the count."""
    base = base_url.rstrip("/")
    agents = (
        Agent.objects.callable()
        .filter(origin_peer__isnull=True, current_snapshot__isnull=False)
        .with_card()
        .order_by("id")
    )
    entries = [_agent_entry(agent, base=base, publisher=publisher) for agent in agents]
    teams = Team.objects.filter(enabled=True).order_by("id")
    entries += [_team_entry(team, base=base, publisher=publisher) for team in teams]
    return {
        "specVersion": SPEC_VERSION,
        "host": {
            "displayName": "Brass Relay",
            "identifier": publisher,
            "documentationUrl": f"{base}/api/docs",
        },
        "entries": entries,
    }


def _agent_entry(agent: Agent, *, base: str, publisher: str) -> dict[str, Any]:
    skills = list(agent.skills.all())
    tags = list(dict.fromkeys(tag for skill in skills for tag in skill.tags if tag))
    queries = list(dict.fromkeys(q for skill in skills for q in skill.examples if q))
    entry = {
        "identifier": identifier(publisher, "agent", agent.pk),
        "displayName": agent.name,
        "type": A2A_CARD_TYPE,
        "mediaType": A2A_CARD_TYPE,
        "url": f"{base}/a2a/agents/{agent.pk}/.well-known/agent-card.json",
        "description": agent.description,
        "tags": tags,
        "capabilities": [skill.skill_id for skill in skills],
        "representativeQueries": queries[:MAX_QUERIES],
        "version": agent.version,
        "updatedAt": _iso(agent.updated_at),
        "extensions": {
            EXTENSION: {
                "kind": "agent",
                "id": agent.pk,
                "signature": agent.signature_status,
            }
        },
    }
    return _without_empty(entry)


def _team_entry(team: Team, *, base: str, publisher: str) -> dict[str, Any]:
    entry = {
        "identifier": identifier(publisher, "team", team.pk),
        "displayName": team.name,
        "type": A2A_CARD_TYPE,
        "mediaType": A2A_CARD_TYPE,
        "url": f"{base}/a2a/teams/{team.pk}/.well-known/agent-card.json",
        "description": team.description or f"The team '{team.name}' on Brass Relay.",
        "tags": ["team"],
        "updatedAt": _iso(team.updated_at),
        "extensions": {EXTENSION: {"kind": "team", "id": team.pk}},
    }
    return _without_empty(entry)


def _iso(moment) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _without_empty(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if value not in ("", [], None)}


# --- Entry rules ------------------------------------------------------------------------------


def entry_problems(entry: Any) -> list[str]:
    """What makes ``entry`` not a valid catalog entry (empty when it is one): the required
    ``identifier`` and ``type`` strings (``mediaType`` in drafts before ADR 0014), exactly one of ``url`` and ``data``, a ``urn:air``
    identifier well formed when it is one, and the optional members of their types."""
    if not isinstance(entry, dict):
        return ["an entry must be a JSON object"]
    problems = []
    for name in ("identifier", "type"):
        if not isinstance(entry_value(entry, name), str) or not entry_value(entry, name).strip():
            problems.append(f"{name} is required (a string)")
    ident = entry.get("identifier")
    if isinstance(ident, str) and ident.startswith("urn:air:") and not URN.match(ident):
        problems.append(f"identifier {ident[:200]!r} is not urn:air:<publisher>:<namespace>:<name>")
    has_url, has_data = "url" in entry, "data" in entry
    if has_url == has_data:
        problems.append("an entry has exactly one of url and data")
    if has_url and not isinstance(entry["url"], str):
        problems.append("url must be a string")
    for name in ("displayName", "description", "version", "updatedAt"):
        if name in entry and not isinstance(entry[name], str):
            problems.append(f"{name} must be a string")
    for name in ("tags", "capabilities", "representativeQueries"):
        if name in entry and not (
            isinstance(entry[name], list) and all(isinstance(v, str) for v in entry[name])
        ):
            problems.append(f"{name} must be a list of strings")
    return problems


def entry_value(entry: dict, name: str) -> Any:
    """An entry's member, ``type`` read from ``mediaType`` when only that is given."""
    if name == "type" and "type" not in entry:
        return entry.get("mediaType")
    return entry.get(name)


def catalog_problems(document: Any) -> list[str]:
    """What makes ``document`` not an AI Catalog: ``specVersion`` (Major.Minor) and an
    ``entries`` list are required; ``host`` needs a ``displayName``."""
    if not isinstance(document, dict):
        return ["the catalog must be a JSON object"]
    problems = []
    version = document.get("specVersion")
    if not isinstance(version, str) or not re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
        problems.append("specVersion is required (Major.Minor, e.g. '1.0')")
    if not isinstance(document.get("entries"), list):
        problems.append("entries is required (a list)")
    host = document.get("host")
    if host is not None and not (
        isinstance(host, dict) and isinstance(host.get("displayName"), str)
    ):
        problems.append("host must be an object with a displayName")
    return problems


# --- Import -----------------------------------------------------------------------------------


class CatalogError(Exception):
    """The catalog itself could not be had or read; ``code`` as the registry API's errors."""

    def __init__(self, code: str, message: str, *, status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass
class ImportReport:
    """What an import did with each entry: ``added``, ``updated`` and ``unchanged`` list
    ``{identifier, agentId}``, ``refused`` lists ``{identifier, code, reason}``."""

    catalog_url: str
    added: list[dict[str, str]] = field(default_factory=list)
    updated: list[dict[str, str]] = field(default_factory=list)
    unchanged: list[dict[str, str]] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "catalogUrl": self.catalog_url,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "refused": self.refused,
        }

    def refuse(self, entry: Any, code: str, reason: str) -> None:
        ident = entry.get("identifier") if isinstance(entry, dict) else None
        self.refused.append(
            {"identifier": str(ident or "")[:300], "code": code, "reason": reason[:500]}
        )


WELL_KNOWN_PATHS = ("/.well-known/ard.json", "/.well-known/ai-catalog.json")
"""Where a host publishes its catalog: ARD's path first, then the AI Catalog's (which ARD
consumers may also read)."""


def catalog_urls_for(url: str) -> list[str]:
    """Where to look for a host's catalog: ``url`` itself when it names a .json document, else
    the host's well-known paths (under the given path)."""
    parts = urlsplit(url.strip())
    if parts.path.endswith(".json"):
        return [url.strip()]
    base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    return [base + path for path in WELL_KNOWN_PATHS]


def fetch_catalog(
    url: str, *, client: httpx.Client | None = None, headers: dict[str, str] | None = None
) -> tuple[str, dict[str, Any]]:
    """Downloads and checks the catalog at ``url`` (or the host's well-known one: a 404 at
    ARD's path tries the AI Catalog's). Returns (the URL it was read from, the document).
    Raises CatalogError saying why not."""
    try:
        outbound.check_url_shape(url)
    except outbound.UnsafeURLError as error:
        raise CatalogError("unsafe_url", str(error), status=400) from error
    owns = client is None
    client = client or outbound.client()
    try:
        candidates = catalog_urls_for(url)
        for index, target in enumerate(candidates):
            try:
                return _fetch_one(client, target, headers or {})
            except _NotFound as missing:
                if index == len(candidates) - 1:
                    raise CatalogError(
                        "upstream_error",
                        " and ".join(candidates) + f" answered HTTP {missing.status}",
                    ) from None
        raise AssertionError("unreachable")
    finally:
        if owns:
            client.close()


class _NotFound(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


def _fetch_one(
    client: httpx.Client, target: str, headers: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    try:
        with client.stream(
            "GET", target, headers={"Accept": f"{MEDIA_TYPE}, application/json", **headers}
        ) as response:
            if response.status_code in (404, 410):
                raise _NotFound(response.status_code)
            if response.status_code >= 400:
                raise CatalogError(
                    "upstream_error", f"{target} answered HTTP {response.status_code}"
                )
            body = outbound.read_limited(response, settings.RELAY_CATALOG_MAX_BYTES)
            final_url = str(response.url)
    except outbound.UnsafeURLError as error:
        raise CatalogError("unsafe_url", str(error), status=400) from error
    except outbound.ResponseTooLargeError as error:
        raise CatalogError(
            "too_large", f"the catalog at {target} is larger than {error.limit} bytes"
        ) from error
    except httpx.HTTPError as error:
        raise CatalogError(
            "unreachable", f"cannot reach {target}: {error or type(error).__name__}"
        ) from error
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise CatalogError("not_json", f"{target} did not return JSON") from error
    problems = catalog_problems(document)
    if problems:
        raise CatalogError("invalid_catalog", f"{target} is not an AI Catalog: {problems[0]}")
    return final_url, document


def catalog_import(
    *,
    url: str,
    actor: str,
    client: httpx.Client | None = None,
    credentials=None,
    created_by=None,
    own: OwnAddresses | None = None,
) -> ImportReport:
    """Registers every A2A agent of the catalog at ``url``; see the module's docstring.
    ``credentials`` (registry.services.Credentials) are sent for the catalog and stored for the
    agents it adds. Raises CatalogError when the catalog itself cannot be used."""
    from registry import services

    headers = credentials.as_headers() if credentials else {}
    source, document = fetch_catalog(url, client=client, headers=headers)
    report = ImportReport(catalog_url=source)
    entries = document["entries"]
    limit = settings.RELAY_CATALOG_MAX_ENTRIES
    own_publisher = publisher_for()
    for index, entry in enumerate(entries):
        if index >= limit:
            report.refuse(entry, "too_many", f"the catalog has more than {limit} entries")
            continue
        problems = entry_problems(entry)
        if problems:
            report.refuse(entry, "invalid_entry", "; ".join(problems))
            continue
        kind = entry_value(entry, "type")
        if kind != A2A_CARD_TYPE:
            report.refuse(entry, "not_a2a", f"type {kind[:100]} is not an A2A agent card")
            continue
        if "url" not in entry:
            report.refuse(entry, "inline_card", "inline cards (data) are not imported")
            continue
        match = URN.match(entry["identifier"])
        if match and match.group("publisher").lower() == own_publisher:
            report.refuse(entry, "own_entry", "the entry is this relay's own")
            continue
        extension = (entry.get("extensions") or {}).get(EXTENSION) or {}
        if isinstance(extension, dict) and extension.get("origin"):
            report.refuse(entry, "mirror", "the entry is a mirror; import it from its origin")
            continue
        _import_one(
            entry,
            report,
            client=client,
            credentials=credentials,
            actor=actor,
            created_by=created_by,
            own=own,
            services=services,
        )
    return report


def _import_one(entry, report, *, client, credentials, actor, created_by, own, services) -> None:
    card_url = entry["url"]
    ident = entry["identifier"]
    try:
        # An entry may name the agent's base URL: its card was stored at a well-known path.
        existing = Agent.objects.filter(card_url__in=candidate_urls(card_url)).first()
    except outbound.UnsafeURLError:
        existing = None  # refused with the reason by the registration below
    try:
        if existing is not None:
            changed = services.agent_card_refresh(agent=existing, client=client)
            target = report.updated if changed else report.unchanged
            target.append({"identifier": ident, "agentId": existing.pk})
            return
        agent = services.agent_register(
            url=card_url,
            agent_id=_free_id_from(ident),
            credentials=credentials,
            client=client,
            actor=actor,
            created_by=created_by,
            own=own,
        )
    except services.RegistryError as error:
        report.refuse(entry, error.code, error.message)
        return
    report.added.append({"identifier": ident, "agentId": agent.pk})


def _free_id_from(ident: str) -> str | None:
    """The identifier's last segment as an agent id when it is free; None lets the registry
    choose one from the card's name."""
    candidate = slugify(ident.rsplit(":", 1)[-1])[:64]
    if candidate and not Agent.objects.filter(pk=candidate).exists():
        return candidate
    return None
