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


DEMO_TEAM = "demo"
DEMO_TEAM_MEMBERS = ("triage", "researcher", "writer", "echo")
DEMO_QUESTION = "please research the weather and write a report"


def demo_team_ensure() -> str:
    """Creates the demo team (default agent triage; members triage, researcher, writer, echo),
    or puts it back as it should be, and points the relay's own endpoint at it. Returns a line
    for the console. Needs the demo agents registered."""
    from registry.models import Team
    from registry.teams import team_create, team_update
    from tasks_app.relay_endpoint import default_target_set

    fields = {
        "name": "Demo team",
        "members": list(DEMO_TEAM_MEMBERS),
        "default_agent": "triage",
        "description": "Triage hands each request to the researcher or the writer.",
        "max_routing_hops": 10,
        "enabled": True,
    }
    team = Team.objects.filter(pk=DEMO_TEAM).first()
    try:
        if team is None:
            team_create(team_id=DEMO_TEAM, **fields)
        else:
            team_update(team=team, fields=fields)
    except RegistryError as error:
        return f"could not set up team {DEMO_TEAM}: {error.message}"
    default_target_set(kind="team", target_id=DEMO_TEAM)
    return (
        f"team      {DEMO_TEAM:<11} {', '.join(DEMO_TEAM_MEMBERS)} (default triage); "
        "the relay's own endpoint answers as this team"
    )


DEMO_WORKFLOW = "demo-research-report"
DEMO_WORKFLOW_YAML = """\
name: Research report
slug: demo-research-report
version: 1.0.0
description: The researcher's notes on the question, then the writer's draft of them.
steps:
  - id: research
    agent: researcher
    input: "{{.originalMessage}}"
  - id: draft
    agent: writer
    input: "{{.research}}"
    output: report
"""


def demo_workflow_ensure() -> str:
    """Imports the demo workflow (research, then draft; the writer's draft is the answer), or
    puts it back as it should be. Returns a line for the console. Needs the demo agents
    registered."""
    from routing.workflows.services import WorkflowRejected, workflow_import

    try:
        workflow_import(text=DEMO_WORKFLOW_YAML, replace=True)
    except (WorkflowRejected, RegistryError) as error:
        return f"could not set up workflow {DEMO_WORKFLOW}: {error}"
    return f"workflow  {DEMO_WORKFLOW:<11} researcher, then writer: /a2a/workflows/{DEMO_WORKFLOW}/"
