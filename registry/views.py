"""What the registry's pages for people are made of: who may read them, card histories with
their diffs, JSON for people to read, and which card URLs may become links; and the skills
page, which needs nothing but the registry.

The agent list and the agent page themselves show each agent's health (probe sparklines,
metrics, health events), which routing records, so they live in ``routing.agent_pages``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render

from registry import semantic, skill_search
from registry.cards import card_diff
from registry.models import CardSnapshot


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff; ``kind`` is file, hunk, added, removed or context."""

    kind: str
    text: str


@dataclass(frozen=True)
class HistoryEntry:
    """A snapshot and the diff from the snapshot before it (empty for the first one)."""

    snapshot: CardSnapshot
    diff: list[DiffLine]
    is_first: bool


def pretty_json(value: Any) -> str:
    """JSON for people to read: indented, keys in the card's own order, non-ASCII kept."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def card_history(snapshots: list[CardSnapshot]) -> list[HistoryEntry]:
    """Snapshots (newest first, as ``selectors.agent_snapshots`` gives them), each with its diff
    to the previous one. Pure: runs no queries."""
    older_ones: list[CardSnapshot | None] = [*snapshots[1:], None][: len(snapshots)]
    return [
        HistoryEntry(
            snapshot=newer,
            diff=_diff_lines(older, newer) if older is not None else [],
            is_first=older is None,
        )
        for newer, older in zip(snapshots, older_ones, strict=True)
    ]


def _diff_lines(older: CardSnapshot, newer: CardSnapshot) -> list[DiffLine]:
    lines = card_diff(
        older.raw,
        newer.raw,
        old_label=f"{older.content_hash[:12]}  {older.fetched_at:%Y-%m-%d %H:%M:%S}",
        new_label=f"{newer.content_hash[:12]}  {newer.fetched_at:%Y-%m-%d %H:%M:%S}",
    )
    return [DiffLine(kind=_diff_kind(line), text=line) for line in lines]


def _diff_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "added"
    if line.startswith("-"):
        return "removed"
    return "context"


def web_url(url: str) -> str:
    """``url`` when it is an http(s) URL, else ""."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        return ""
    return url if scheme in ("http", "https") else ""


def registry_read(view):
    """Lets everyone in while RELAY_REGISTRY_PUBLIC is on; otherwise only active staff users,
    and sends everyone else to the admin login (LOGIN_URL), as the API does for reads."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        user = request.user
        if not settings.RELAY_REGISTRY_PUBLIC and not (user.is_active and user.is_staff):
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return guarded


SKILLS_SHOWN = 50


@registry_read
def skills_page(request):
    """``/skills/?q=&tag=``: which agent can do this. The best matching skills of agents that
    are not disabled, by meaning (``registry.semantic``; by words when the model is
    unavailable, and the page says so), with each agent's health; every skill when nothing is
    asked."""
    filters = skill_search.SkillFilters(
        q=request.GET.get("q", "").strip(), tag=request.GET.get("tag", "").strip()
    )
    matches, search = semantic.skill_find(
        semantic.SkillQuery(text=filters.q, tags=tuple(filter(None, [filters.tag]))),
        limit=SKILLS_SHOWN,
    )
    context = {"filters": filters, "matches": matches, "search": search, "limit": SKILLS_SHOWN}
    return render(request, "registry/skill_list.html", context)
