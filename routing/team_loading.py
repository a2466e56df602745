"""Loading a team as a gateway target: its enabled members as the router sees them (its
agents, then its workflows), kept per process (``team_target``) and dropped when a team,
membership, workflow membership or agent changes. A workflow member is resolved at each call
(the workflows' own cache), so a workflow saved since is called as saved."""

from __future__ import annotations

import contextlib

from registry.extensions import CLIENT_ROUTING_URI
from routing import selectors
from routing.execution import LoadedTeam, TeamTarget
from routing.router import Member
from tasks_app import gateway, upstream


def _load_team(team_id: str) -> LoadedTeam | None:
    loaded = selectors.team_with_members(team_id)
    if loaded is None:
        return None
    team, agents = loaded
    targets: dict[str, gateway.Target] = {}
    for agent in agents:
        with contextlib.suppress(upstream.NoUsableInterfaceError):
            targets[agent.pk] = gateway.target_for_agent(agent)
    agent_ids = {agent.pk for agent in agents}
    workflows = [
        Member(id=workflow_id, name=name, description=description, capabilities=("workflow",))
        for workflow_id, name, description in selectors.team_workflow_members(team.pk)
        if workflow_id not in agent_ids
    ]
    return LoadedTeam(
        id=team.pk,
        name=team.name,
        default_agent=team.default_agent_id,
        max_hops=team.max_routing_hops,
        agents=targets,
        members=(
            *(_member(agent, targets.get(agent.pk)) for agent in agents),
            *workflows,
        ),
        no_recipient=team.no_recipient,
        workflows=tuple(member.id for member in workflows),
    )


def _member(agent, target: gateway.Target | None) -> Member:
    """The router's view of an agent: skill tags (or ids) as capabilities. Whether it is
    healthy is decided at each call (``TeamTarget``); one that cannot be called never is."""
    skills = list(agent.skills.all())
    tags = list(dict.fromkeys(tag for skill in skills for tag in skill.tags or []))
    return Member(
        id=agent.pk,
        name=agent.name,
        description=agent.description,
        capabilities=tuple(tags or [skill.skill_id for skill in skills]),
        supports_routing=any(e.uri == CLIENT_ROUTING_URI for e in agent.extensions.all()),
        # An MCP server (``McpTarget``) answers as a 1.0 agent, the relay writing its events.
        protocol_version=target.endpoint.version
        if isinstance(target, gateway.AgentTarget)
        else "1.0",
    )


_teams = gateway.TargetCache(_load_team, gateway.target_cache_seconds)
"""Loaded teams (four queries each). A saved or deleted team, membership or agent (a new card
saves its agent) drops them all, through the signals RoutingConfig.ready connects."""


def team_target(team_id: str) -> TeamTarget | None:
    """The team as a gateway target, or None when there is no enabled team with this id. Its
    members' health and breakers are read at each call (one query), so the health jobs'
    verdicts count at once, from any process."""
    team = _teams.get(team_id)
    if team is None:
        return None
    workflows = {
        workflow_id: gateway.resolve_target("workflow", workflow_id)
        for workflow_id in team.workflows
    }
    return TeamTarget(
        team,
        selectors.member_states([member.id for member in team.members]),
        workflows={key: value for key, value in workflows.items() if value is not None},
    )


def team_changed(sender, **kwargs) -> None:
    """post_save and post_delete receiver for what a loaded team is made of."""
    forget_team_targets()


def forget_team_targets() -> None:
    """Drops every loaded team in this process."""
    _teams.forget()
