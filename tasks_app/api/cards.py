"""The cards the relay publishes for each agent it fronts, with ETag and Cache-Control, and the
registry API's view of an agent's card (as published, or as the relay serves it)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.views.decorators.http import require_safe
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import principals, selectors
from registry.api.schema import AGENT_ID, CARD, errors
from registry.auth import RegistryReadPermission
from registry.jwks import sign_served_card
from registry.models import Agent, Team, TeamMembership
from relay_project.public_url import relay_base_url
from tasks_app import cards
from tasks_app.protocol.errors import VersionNotSupported
from tasks_app.protocol.versions import VERSION_HEADER, ProtocolVersion, negotiate_version


def reader_version(request: HttpRequest) -> ProtocolVersion:
    """The protocol version the card's reader asks for with ``A2A-Version`` (none means 0.3).
    A version the relay does not speak gets the 0.3 card, which every client can read, rather
    than an error: the card is how a client finds out what is spoken."""
    try:
        return negotiate_version(request.headers, request.GET)
    except VersionNotSupported:
        return ProtocolVersion.V0_3


def card_response(request: HttpRequest, card: dict) -> HttpResponse:
    """The card as JSON, or 304 when the client's ETag still matches. The card depends on
    ``A2A-Version`` (see ``cards.card_for_reader``), so caches are told to vary on it. With
    RELAY_CARD_SIGNING_KEY set, the card is signed (registry.jwks), its key at
    ``/.well-known/jwks.json``."""
    card = sign_served_card(card, jku=relay_base_url(request, "/.well-known/jwks.json"))
    etag = cards.card_etag(card)
    if etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        response = HttpResponseNotModified()
    else:
        response = JsonResponse(card, json_dumps_params={"ensure_ascii": False})
    response["ETag"] = etag
    response["Cache-Control"] = cards.CARD_CACHE_CONTROL
    response["Vary"] = VERSION_HEADER
    return response


def agent_relay_card(agent: Agent, request: HttpRequest) -> dict:
    """The agent's card as the relay serves it to this reader: interfaces at the relay, relay
    security, and the 0.3 fields beside the 1.0 ones unless the reader asked for 1.0."""
    base = relay_base_url(request, f"/a2a/agents/{agent.pk}/")
    return cards.card_for_reader(
        cards.agent_card_for_relay(
            agent.current_snapshot.normalized,
            base_url=base,
            security=principals.card_security_schemes(),
        ),
        version=reader_version(request),
    )


@require_safe
def agent_card(request: HttpRequest, target_id: str) -> HttpResponse:
    """``GET /a2a/agents/{id}/.well-known/agent-card.json``. Public, like every agent card."""
    agent = Agent.objects.callable().select_related("current_snapshot").filter(pk=target_id).first()
    if agent is None or agent.current_snapshot is None:
        return JsonResponse(
            {
                "error": {
                    "code": 404,
                    "status": "NOT_FOUND",
                    "message": f"no agent {target_id!r} at this relay",
                }
            },
            status=404,
        )
    return card_response(request, agent_relay_card(agent, request))


# ``GET /a2a/registry/{id}/card``: the card as the agent published it, or with ``?view=relay``
# as the relay serves it. Part of the registry's API, but it lives here because the relay's
# version of a card is this layer's to build. (A comment, not a docstring: a docstring would
# become the operation's description in the API docs.)
class AgentCardView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="agent_card",
        summary="An agent's card",
        description="The agent's current card as the agent published it, or with "
        "`view=relay` as the relay serves it (its interfaces at the relay).",
        parameters=[
            AGENT_ID,
            OpenApiParameter(
                "view",
                description="published (default) or relay: the card rewritten to the "
                "relay's own endpoint for this agent",
                enum=["published", "relay"],
            ),
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **errors(400, 401, 404, 429)},
        examples=[OpenApiExample("As published", response_only=True, value=CARD)],
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get(agent_id=agent_id)
        if agent is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        if agent.current_snapshot is None:
            raise NotFound(f"agent {agent_id!r} has no card yet")
        view = request.query_params.get("view", "published")
        if view == "relay":
            return Response(agent_relay_card(agent, request))
        if view != "published":
            raise selectors.InvalidQueryError("view must be 'published' or 'relay'")
        return Response(agent.current_snapshot.raw)


def team_relay_card(team: Team, request: HttpRequest) -> dict:
    """The team's synthesized card at ``/a2a/teams/{id}/``: the skills of its enabled members
    (agents not disabled in the registry), in team order, each saying which member provides
    it; streaming and the client-routing extension (not required); the 0.3 fields beside the
    1.0 ones unless the reader asked for 1.0. Runs one query for the members, their agents
    and their cards."""
    memberships = (
        TeamMembership.objects.filter(team=team, enabled=True)
        .exclude(agent__status=Agent.Status.DISABLED)
        .select_related("agent__current_snapshot")
        .order_by("order", "agent_id")
    )
    members = []
    for membership in memberships:
        agent = membership.agent
        snapshot = agent.current_snapshot
        members.append(
            {
                "id": agent.pk,
                "name": agent.name,
                "skills": (snapshot.normalized.get("skills") or []) if snapshot else [],
                "streaming": agent.streaming,
                "defaultInputModes": agent.default_input_modes,
                "defaultOutputModes": agent.default_output_modes,
            }
        )
    return cards.card_for_reader(
        cards.team_card(
            team_id=team.pk,
            name=team.name,
            description=team.description,
            base_url=relay_base_url(request, f"/a2a/teams/{team.pk}/"),
            members=members,
            security=principals.card_security_schemes(),
        ),
        version=reader_version(request),
    )


@require_safe
def team_agent_card(request: HttpRequest, team_id: str) -> HttpResponse:
    """``GET /a2a/teams/{id}/.well-known/agent-card.json``. Public, like every agent card; 404
    for an unknown or disabled team."""
    team = Team.objects.filter(pk=team_id, enabled=True).first()
    if team is None:
        return JsonResponse(
            {
                "error": {
                    "code": 404,
                    "status": "NOT_FOUND",
                    "message": f"no team {team_id!r} at this relay",
                }
            },
            status=404,
        )
    return card_response(request, team_relay_card(team, request))


def relay_card_v1(request: HttpRequest) -> dict:
    """The relay's own 1.0 card: its endpoint at /a2a/relay/, the client-routing extension,
    and the skills of the target it forwards to."""
    from tasks_app.relay_endpoint import default_target

    chosen = default_target()
    skills: list[dict] = []
    if chosen and chosen[0] == "agent":
        agent = Agent.objects.select_related("current_snapshot").filter(pk=chosen[1]).first()
        if agent is not None and agent.current_snapshot is not None:
            skills = agent.current_snapshot.normalized.get("skills", [])
    return cards.relay_self_card(
        base_url=relay_base_url(request, "/a2a/relay/"),
        version="0.1.0",
        skills=skills,
        default_target=":".join(chosen) if chosen else None,
        security=principals.card_security_schemes(),
    )


def relay_card(request: HttpRequest) -> dict:
    """The relay's own card as this reader gets it (see ``cards.card_for_reader``)."""
    return cards.card_for_reader(relay_card_v1(request), version=reader_version(request))


@require_safe
def relay_agent_card(request: HttpRequest) -> HttpResponse:
    """``GET /.well-known/agent-card.json`` (and under /a2a/relay/): the relay's own card."""
    return card_response(request, relay_card(request))


@require_safe
def relay_legacy_card(request: HttpRequest) -> HttpResponse:
    """``GET /.well-known/agent.json``: the relay's card for A2A 0.2 clients."""
    return card_response(request, cards.legacy_0_2_card(relay_card_v1(request)))
