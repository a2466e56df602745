"""A registered agent as the gateway's target, cached per process: an MCP server's
(``McpTarget``) or an A2A agent's (``AgentTarget``). Registered as the target kind ``agent``,
which is how failover and the views find an agent's target (``targets.resolve_target``).
"""

from __future__ import annotations

from registry.models import Agent
from registry.services import upstream_auth_headers
from tasks_app.gateway.agent_targets import AgentTarget
from tasks_app.gateway.mcp_targets import McpTarget
from tasks_app.gateway.targets import (
    Target,
    TargetCache,
    register_target_kind,
    target_cache_seconds,
)


def target_for_agent(agent) -> Target:
    """The target of a registered agent: an MCP server's (``McpTarget``), else an A2A one."""
    if agent.mcp_server:
        return McpTarget(agent, upstream_auth_headers(agent))
    return AgentTarget(agent)


def _load_agent_target(agent_id: str) -> Target | None:
    try:
        agent = Agent.objects.callable().get(pk=agent_id)
    except Agent.DoesNotExist:
        return None
    return target_for_agent(agent)


_agent_targets = TargetCache(_load_agent_target, target_cache_seconds)
"""Agent targets (three queries each to load: the agent, its extensions, its alternates).
Saving or deleting the Agent row (card refresh, update, disable, delete) or one of its
alternates drops its entry, through the signals TasksAppConfig.ready connects."""


def agent_target(agent_id: str) -> Target | None:
    """The agent as a target, or None when it is unknown or disabled."""
    return _agent_targets.get(agent_id)


def agent_changed(sender, instance, **kwargs) -> None:
    """post_save and post_delete receiver for registry.Agent."""
    forget_agent_targets(instance.pk)


def forget_agent_targets(agent_id: str | None = None) -> None:
    """Drops the cached target of one agent (of all without ``agent_id``)."""
    _agent_targets.forget(agent_id)


register_target_kind("agent", agent_target)
