"""An agent selector that weighs each agent's success over the last 24 hours: set
``RELAY_AGENT_SELECTOR=tasks_app.usage.selection.rank_by_meaning_and_success``. It ranks as
the default selector does (``registry.selection.rank_by_meaning``), asking for more
candidates, then multiplies each score by ``0.5 + 0.5 × success rate`` (an agent without
outcomes keeps its score) and keeps the best ``limit``: between two agents that match alike,
the one that fails less is chosen."""

from __future__ import annotations

from dataclasses import replace

from registry.selection import Selected, SelectRequest, rank_by_meaning
from tasks_app.usage import reports

SUCCESS_WEIGHT = 0.5


def rank_by_meaning_and_success(*, request: SelectRequest) -> Selected:
    found = rank_by_meaning(request=replace(request, limit=min(100, request.limit * 3)))
    rates = reports.success_rates(selection.agent_id for selection in found.selections)
    weighed = [
        replace(
            selection,
            score=selection.score
            * (1 - SUCCESS_WEIGHT + SUCCESS_WEIGHT * rates.get(selection.agent_id, 1.0)),
        )
        for selection in found.selections
    ]
    weighed.sort(key=lambda selection: -selection.score)
    return Selected(weighed[: request.limit], found.search)
