"""Finding and fetching an agent's card over HTTP, with the relay's outbound guard and limits.

``fetch_card(url)`` takes what a person would paste, an agent's base URL or its card URL, and
tries the places agents publish cards, relative to the given path first and then to the origin:
``/.well-known/agent-card.json`` (1.0 and 0.3) and ``/.well-known/agent.json`` (0.2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from registry.cards import InvalidCardError, ParsedCard, parse_card
from relay_project import outbound

WELL_KNOWN_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
LEGACY_PATH = "/.well-known/agent.json"


class CardFetchError(Exception):
    """Why no card could be had. ``code`` is stable for API clients; ``status`` the HTTP answer."""

    def __init__(
        self, code: str, message: str, *, status: int = 400, missing: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.missing = missing


@dataclass(frozen=True)
class FetchedCard:
    url: str
    document: dict[str, Any]
    card: ParsedCard


def candidate_urls(url: str) -> list[str]:
    """Where to look for the card of ``url``, most specific first, without repeats."""
    outbound.check_url_shape(url)
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if path.endswith(".json"):
        return [urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))]
    candidates = [
        urlunsplit((parts.scheme, parts.netloc, path + well_known, "", ""))
        for well_known in WELL_KNOWN_PATHS
    ]
    if path:
        candidates += [
            urlunsplit((parts.scheme, parts.netloc, well_known, "", ""))
            for well_known in WELL_KNOWN_PATHS
        ]
    return list(dict.fromkeys(candidates))


def fetch_card(
    url: str,
    *,
    client: httpx.Client | None = None,
    headers: dict[str, str] | None = None,
    max_bytes: int | None = None,
) -> FetchedCard:
    """Finds, downloads and parses the card for ``url``. Raises CardFetchError saying why not.

    Network failures and unsafe addresses stop the search at once (every candidate is on the same
    host); a 404, or a page that is not a card, moves on to the next candidate. When no candidate
    holds a card, the most telling failure is reported.
    """
    from django.conf import settings

    limit = max_bytes or settings.RELAY_CARD_MAX_BYTES
    try:
        candidates = candidate_urls(url)
    except outbound.UnsafeURLError as error:
        raise CardFetchError("unsafe_url", str(error)) from error
    owns_client = client is None
    client = client or outbound.client()
    failures: list[CardFetchError] = []
    try:
        for candidate in candidates:
            try:
                return _fetch_one(client, candidate, headers or {}, limit)
            except CardFetchError as failure:
                if failure.code in ("unsafe_url", "unreachable", "timeout", "too_large"):
                    raise
                failures.append(failure)
    finally:
        if owns_client:
            client.close()
    telling = [f for f in failures if f.code != "card_not_found"]
    if telling:
        raise telling[0]
    raise CardFetchError(
        "card_not_found",
        "no agent card found at " + ", ".join(candidates),
        status=422,
    )


def _fetch_one(client: httpx.Client, url: str, headers: dict[str, str], limit: int) -> FetchedCard:
    try:
        with client.stream("GET", url, headers={"Accept": "application/json", **headers}) as r:
            if r.status_code == 404:
                raise CardFetchError("card_not_found", f"{url} answered 404", status=422)
            if r.status_code in (401, 403):
                # The agent's refusal, not the caller's: never answered as our own 401.
                raise CardFetchError(
                    "upstream_error",
                    f"the agent at {url} answered HTTP {r.status_code}: it refused the relay; "
                    "give the agent's credentials (credentials: {kind, value}) so the relay "
                    "can send them",
                    status=422,
                )
            if r.status_code >= 400:
                raise CardFetchError(
                    "upstream_error", f"{url} answered HTTP {r.status_code}", status=422
                )
            body = outbound.read_limited(r, limit)
            final_url = str(r.url)
    except outbound.UnsafeURLError as error:
        raise CardFetchError("unsafe_url", str(error)) from error
    except outbound.ResponseTooLargeError as error:
        raise CardFetchError(
            "too_large",
            f"the agent card at {url} is larger than {error.limit} bytes",
            status=422,
        ) from error
    except httpx.TimeoutException as error:
        raise CardFetchError("timeout", f"{url} did not answer in time", status=422) from error
    except httpx.TooManyRedirects as error:
        raise CardFetchError(
            "too_many_redirects", f"{url} redirects too often", status=422
        ) from error
    except httpx.HTTPError as error:
        raise CardFetchError(
            "unreachable", f"cannot reach {url}: {error or type(error).__name__}", status=422
        ) from error
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise CardFetchError("not_json", f"{url} did not return JSON", status=422) from error
    try:
        card = parse_card(document, legacy_path=urlsplit(final_url).path.endswith(LEGACY_PATH))
    except InvalidCardError as error:
        raise CardFetchError(
            "invalid_card", str(error), status=422, missing=error.missing
        ) from error
    return FetchedCard(url=final_url, document=document, card=card)
