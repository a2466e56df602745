"""Registers the demo agents with the relay (Django side of the demo)."""

from __future__ import annotations

from collections.abc import Mapping

from registry.models import Agent
from registry.services import RegistryError, agent_card_refresh, agent_register


def demo_agents_register(urls: Mapping[str, str]) -> list[str]:
    """Registers each demo agent under its slug, or refreshes it when already registered (its
    port may have changed since the last run). Returns one line per agent for the console."""
    lines = []
    for slug, url in urls.items():
        card_url = f"{url}/.well-known/agent-card.json"
        agent = Agent.objects.filter(pk=slug).first()
        try:
            if agent is None:
                agent = agent_register(url=url, agent_id=slug)
                lines.append(f"registered {slug:<11} {card_url}")
            else:
                if agent.card_url != card_url:
                    Agent.objects.filter(pk=slug).update(card_url=card_url)
                    agent.card_url = card_url
                changed = agent_card_refresh(agent=agent)
                lines.append(f"{'updated' if changed else 'checked':<10} {slug:<11} {card_url}")
        except RegistryError as error:
            lines.append(f"could not register {slug}: {error.message}")
    return lines
