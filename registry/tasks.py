"""Celery jobs of the registry: load by id, call a service."""

from __future__ import annotations

import logging

from celery import shared_task

from registry import embeddings, semantic
from registry.models import Agent
from registry.services import RegistryError, agent_card_refresh

logger = logging.getLogger(__name__)


@shared_task(name="registry.refresh_card", ignore_result=True)
def refresh_card(agent_id: str) -> str:
    """Re-fetches one agent's card. Returns "changed", "unchanged", "failed" or "missing"."""
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return "missing"
    try:
        changed = agent_card_refresh(agent=agent)
    except RegistryError as error:
        logger.warning("card refresh of %s failed: %s: %s", agent_id, error.code, error.message)
        return "failed"
    return "changed" if changed else "unchanged"


@shared_task(name="registry.refresh_all_cards", ignore_result=True)
def refresh_all_cards() -> int:
    """Queues a card refresh for every agent that is not disabled; returns how many."""
    agent_ids = list(Agent.objects.callable().values_list("pk", flat=True))
    for agent_id in agent_ids:
        refresh_card.delay(agent_id)
    return len(agent_ids)


@shared_task(name="registry.sync_peers", ignore_result=True)
def sync_peers() -> dict[str, str]:
    """Mirrors the registry of every enabled peer relay (registry.peers)."""
    from registry.peers import peers_sync_all

    return peers_sync_all()


@shared_task(name="registry.reindex_skill_embeddings", ignore_result=True)
def reindex_skill_embeddings(everything: bool = False) -> int:
    """Computes the skill embeddings that are missing or were made by another model (all of
    them with ``everything``). Returns how many were written; -1 when the model is
    unavailable (logged)."""
    try:
        return semantic.skill_embeddings_refresh(everything=everything)
    except embeddings.EmbeddingsUnavailable as error:
        logger.warning("skill embeddings not computed: %s", error)
        return -1
