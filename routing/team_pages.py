"""The team pages for people: the list of teams and one team's page, with each member's health
and routing support, the default agent, the team's card, how to call the team, and (for staff)
its latest conversations. The same read guard as the agent pages (``registry_read``).

Views parse, call selectors and render; each page runs a fixed number of queries, whatever the
number of teams, members or conversations.
"""

from __future__ import annotations

from django.shortcuts import render

from registry import selectors
from registry.views import pretty_json, registry_read
from relay_project.public_url import relay_base_url
from routing import selectors as routing_selectors
from routing.agent_pages import next_page_query
from routing.call_snippets import call_snippets
from routing.mcp.tools import tool_name
from routing.team_checks import routing_warning
from tasks_app.api.cards import team_relay_card

RECENT_CONVERSATIONS = 10


@registry_read
def team_list_page(request):
    """``/teams/``: every team with its members at a glance (two queries). A bad cursor shows
    the message with status 400."""
    cursor = request.GET.get("cursor") or None
    error = ""
    try:
        page = selectors.team_list(cursor=cursor)
    except selectors.InvalidQueryError as invalid:
        error = str(invalid)
        page = selectors.Page(items=[], next_cursor=None)
    for team in page.items:
        team.routing_warning = routing_warning(team)
    context = {
        "teams": page.items,
        "next_query": next_page_query(request.GET, page.next_cursor) if page.next_cursor else "",
        "first_query": next_page_query(request.GET, None) if cursor else None,
        "error": error,
    }
    return render(request, "routing/team_list.html", context, status=400 if error else 200)


@registry_read
def team_page(request, team_id: str):
    """``/teams/{id}/``: one team. Staff also see its latest conversations and their hops."""
    team = selectors.team_get(team_id=team_id)
    if team is None:
        return render(request, "routing/team_not_found.html", {"team_id": team_id}, status=404)
    user = request.user
    staff = user.is_active and user.is_staff
    card = team_relay_card(team, request) if team.enabled else None
    context = {
        "team": team,
        "memberships": team.memberships.all(),
        "routing_warning": routing_warning(team),
        "card_json": pretty_json(card) if card else "",
        "call": call_snippets(
            relay_base_url(request, f"/a2a/teams/{team.pk}/"),
            agui_url=relay_base_url(request, f"/agui/teams/{team.pk}"),
            mcp_url=relay_base_url(request, f"/mcp/teams/{team.pk}"),
            mcp_tool=tool_name("team", team.pk),
        ),
        "show_conversations": staff,
        "task_templates": routing_selectors.task_templates_for(kind="team", target_id=team.pk),
        "conversations": (
            routing_selectors.team_conversations(team_id=team.pk, limit=RECENT_CONVERSATIONS)
            if staff
            else []
        ),
    }
    return render(request, "routing/team_detail.html", context)
