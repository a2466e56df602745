"""What a team's setup means for its conversations, said before anyone finds out by calling it.

The router gives the caller's first message, and every answer nobody claims, to the default
agent. Only a member that declares the client-routing extension can name someone else; so when
the default agent does not declare it, its answer goes straight back to the caller and the
other members are never called. The team pages and the team admin warn about that.
"""

from __future__ import annotations

from registry.cards import CLIENT_ROUTING_URI
from registry.models import Team


def unreachable_members(team: Team) -> list[str]:
    """Ids of the team's enabled members, other than the default agent, that no call can
    reach because the default agent does not declare client routing (empty when it does, or
    when it has nobody else). Reads ``team.memberships.all()`` with their agents, so it costs no
    query on a team loaded with ``registry.selectors.teams_with_members``."""
    memberships = list(team.memberships.all())
    default = next((m.agent for m in memberships if m.agent_id == team.default_agent_id), None)
    if default is None or default.supports_client_routing:
        return []
    return [m.agent_id for m in memberships if m.enabled and m.agent_id != team.default_agent_id]


def routing_warning(team: Team) -> str:
    """A sentence for people when :func:`unreachable_members` finds anyone, else ""."""
    unreachable = unreachable_members(team)
    if not unreachable:
        return ""
    return (
        f"The default agent “{team.default_agent_id}” does not declare the client-routing "
        f"extension ({CLIENT_ROUTING_URI}), so it cannot hand a conversation on: "
        f"{', '.join(unreachable)} will never be called. Make a member that declares the "
        "extension the default agent, or give this one the extension."
    )
