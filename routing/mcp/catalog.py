"""The MCP tools a caller sees: one per agent and team its key may call (and per workflow once
workflows are gateway targets), one per skill of the agents whose admin opted in
(``Agent.mcp_skill_tools``), narrowed to a ``Subset`` when the client connected to
``/mcp/agents/{id}``, ``/mcp/teams/{id}`` or ``/mcp/workflows/{id}``.

The same rules as an A2A call decide what is listed: the key's scope (``key_may_call``) and
the call rules (``registry.access``, read without recording). Database reads: run in a
database thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from registry import access
from registry.auth import key_may_call
from registry.models import Agent, Team
from routing.mcp.tools import NAME_LIMIT, ToolSpec, input_schema, tool_name
from routing.models import Workflow
from tasks_app import gateway

PATH = re.compile(r"^/mcp(?:/(?P<kind>agents|teams|workflows)/(?P<id>[-a-zA-Z0-9_]+))?/?$")
KINDS = {"agents": "agent", "teams": "team", "workflows": "workflow"}


@dataclass(frozen=True)
class Subset:
    """The tools of one target: an agent (its own and its skills'), a team (its own and its
    members'), or a workflow."""

    kind: str
    target_id: str


class UnknownPath(ValueError):
    """A path under /mcp that names no subset."""


def subset_of(path: str) -> Subset | None:
    """The subset a path under /mcp names (None: every tool). Raises UnknownPath."""
    matched = PATH.match(path)
    if matched is None:
        raise UnknownPath(path)
    if matched["kind"] is None:
        return None
    return Subset(KINDS[matched["kind"]], matched["id"])


def _allowed(caller, kind: str, target_id: str, skill: str = "") -> bool:
    return (
        key_may_call(caller, kind, target_id)
        and access.call_verdict(caller, target_kind=kind, target_id=target_id, skill=skill).allowed
    )


def _agent_tools(agent: Agent, caller) -> list[ToolSpec]:
    modes = agent.default_input_modes or []
    description = agent.description or agent.name
    tools = [
        ToolSpec(
            name=tool_name("agent", agent.id),
            kind="agent",
            target_id=agent.id,
            title=agent.name,
            description=description,
            input_schema=input_schema(modes),
        )
    ]
    if not agent.mcp_skill_tools:
        return tools
    for skill in agent.skills.all():
        if not _allowed(caller, "agent", agent.id, skill.skill_id):
            continue
        tools.append(
            ToolSpec(
                name=tool_name("skill", agent.id, skill.skill_id),
                kind="skill",
                target_id=agent.id,
                title=f"{agent.name}: {skill.name}",
                description=skill.description or skill.name,
                input_schema=input_schema(skill.input_modes or modes),
                skill=skill.skill_id,
            )
        )
    return tools


def _team_tool(team: Team, modes: list[str]) -> ToolSpec:
    return ToolSpec(
        name=tool_name("team", team.id),
        kind="team",
        target_id=team.id,
        title=team.name,
        description=team.description or f"The team {team.name}: its members answer as one.",
        input_schema=input_schema(modes),
    )


def tools_for(caller, subset: Subset | None = None) -> list[ToolSpec]:
    """The tools ``caller`` (an API key or a token's principal) may call, in the subset."""
    agents = Agent.objects.callable().prefetch_related("skills").order_by("id")
    teams = Team.objects.filter(enabled=True).select_related("default_agent").order_by("id")
    if subset is not None:
        if subset.kind == "agent":
            agents, teams = agents.filter(pk=subset.target_id), teams.none()
        elif subset.kind == "team":
            teams = teams.filter(pk=subset.target_id)
            agents = agents.filter(memberships__team_id=subset.target_id, memberships__enabled=True)
        else:
            agents, teams = agents.none(), teams.none()
    tools: list[ToolSpec] = []
    for team in teams:
        if _allowed(caller, "team", team.id):
            tools.append(_team_tool(team, team.default_agent.default_input_modes or []))
    for agent in agents:
        if _allowed(caller, "agent", agent.id):
            tools.extend(_agent_tools(agent, caller))
    if gateway.target_kind_registered("workflow") and (subset is None or subset.kind == "workflow"):
        tools.extend(_workflow_tools(caller, subset))
    return tools


def _workflow_tools(caller, subset: Subset | None) -> list[ToolSpec]:
    """A tool per enabled workflow, once workflows are gateway targets (``workflow`` kind)."""
    workflows = Workflow.objects.filter(enabled=True).order_by("id")
    if subset is not None:
        workflows = workflows.filter(pk=subset.target_id)
    return [
        ToolSpec(
            name=tool_name("workflow", workflow.id),
            kind="workflow",
            target_id=workflow.id,
            title=workflow.name,
            description=workflow.description or workflow.name,
            input_schema=input_schema(["text/plain", "application/json"]),
        )
        for workflow in workflows
        if _allowed(caller, "workflow", workflow.id)
    ]


NARROW = re.compile(r"^(?P<kind>agent|team|workflow)_(?P<id>[-a-zA-Z0-9_]+)$")


def tool_to_call(caller, subset: Subset | None, name: str) -> ToolSpec | None:
    """The tool a call names, for the call's admission to check (``admit_for``: the target
    exists and is enabled, the key's scope, the call rules, once). An agent's, team's or
    workflow's own tool in its own subset (or in /mcp) is known by its name alone, and costs
    no read; any other (a skill's, a member's in a team's subset) is looked up among the
    caller's tools (``tool_named``). None: no such tool here."""
    matched = NARROW.match(name)
    if matched is not None:
        own = Subset(matched["kind"], matched["id"])
        if (subset is None or subset == own) and tool_name(own.kind, own.target_id) == name:
            return ToolSpec(name=name, kind=own.kind, target_id=own.target_id)
    return tool_named(caller, subset, name)


def tool_named(caller, subset: Subset | None, name: str) -> ToolSpec | None:
    """The caller's tool of that name in the subset, None when it has none (the call is then
    refused as an unknown tool: a key learns nothing of targets outside its scope). An
    agent's, team's or workflow's own tool is looked up alone, not among every tool; a name
    of NAME_LIMIT characters may be a shortened one (``tool_name``), whose id is not the
    target's, so it is also looked for in the whole subset."""
    matched = NARROW.match(name)
    if matched is not None and subset in (None, Subset(matched["kind"], matched["id"])):
        own = Subset(matched["kind"], matched["id"])
        found = _named(tools_for(caller, own), name)
        if found is not None or len(name) < NAME_LIMIT:
            return found
    return _named(tools_for(caller, subset), name)


def _named(tools: list[ToolSpec], name: str) -> ToolSpec | None:
    return next((tool for tool in tools if tool.name == name), None)
