"""The usage extension: the tokens an agent reports for a call, read from its final status
update (pure; no Django). An agent puts them under ``metadata[USAGE_URI]`` of the status
update (or of the task, or of the status message) that ends the task:

    {"inputTokens": 812, "outputTokens": 96, "totalTokens": 908, "model": "gpt-4o-mini"}

kagent's ADK agents put the same counts on their final status update as
``metadata["kagent_usage_metadata"]`` (``adk_usage_metadata`` from plain ADK), in the names
of Gemini's usage metadata (``promptTokenCount``, ``candidatesTokenCount``,
``totalTokenCount``); those are read too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

USAGE_URI = "https://ranch.woi.dev/extensions/usage/v1"

_KAGENT_KEYS = ("kagent_usage_metadata", "adk_usage_metadata")
_INPUT = ("inputTokens", "input_tokens", "promptTokenCount", "prompt_token_count")
_OUTPUT = (
    "outputTokens",
    "output_tokens",
    "candidatesTokenCount",
    "candidates_token_count",
)
_MOST = 10**15
"""More tokens than any call reports: a larger count is refused as nonsense."""


@dataclass(frozen=True)
class Tokens:
    input: int
    output: int
    model: str = ""


def tokens_of(events: Iterable[Mapping[str, Any]]) -> Tokens | None:
    """The tokens the last of ``events`` (canonical StreamResponse dicts) that reports any
    says, or None when none does. Counts that are not whole numbers from 0 are ignored."""
    found = None
    for event in events:
        for metadata in _metadata_of(event):
            tokens = _read(metadata)
            if tokens is not None:
                found = tokens
    return found


def _metadata_of(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    body = event.get("statusUpdate") or event.get("task") or {}
    if not isinstance(body, Mapping):
        return []
    status = body.get("status") if isinstance(body.get("status"), Mapping) else {}
    message = status.get("message") if isinstance(status.get("message"), Mapping) else {}
    places = (message.get("metadata"), body.get("metadata"))
    return [place for place in places if isinstance(place, Mapping)]


def _read(metadata: Mapping[str, Any]) -> Tokens | None:
    entry = metadata.get(USAGE_URI)
    if not isinstance(entry, Mapping):
        entry = next(
            (metadata[key] for key in _KAGENT_KEYS if isinstance(metadata.get(key), Mapping)), None
        )
    if entry is None:
        return None
    counts = [_count(entry, names) for names in (_INPUT, _OUTPUT)]
    if counts == [None, None]:
        return None
    model = entry.get("model") or entry.get("modelVersion") or ""
    return Tokens(counts[0] or 0, counts[1] or 0, str(model)[:200])


def _count(entry: Mapping[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = entry.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # protobuf's Struct turns integers into floats
        if isinstance(value, int) and 0 <= value < _MOST:
            return value
    return None
