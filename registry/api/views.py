"""Registry endpoints. Each view parses input, calls one service or selector, and serializes."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import catalog, selectors, semantic, services, teams
from registry.api import schema, serializers
from registry.api.pagination import AgentPagination, TeamPagination
from registry.api.schema import AGENT_ID, TEAM_ID, errors, example
from registry.auth import (
    AdminWritePermission,
    RegistryPermission,
    RegistryReadPermission,
    caller_key,
)
from registry.cards import card_diff
from registry.filters import ASK_RANK, AgentFilterSet, ZonedDateTimeFilter, check_valid
from registry.models import Agent, Team
from relay_project.own_address import own_addresses


class RegistryFilterBackend(DjangoFilterBackend):
    """django-filter, with a bad value answered as the API always has: 400 invalid_query
    naming the parameter and why."""

    def filter_queryset(self, request, queryset, view):
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        check_valid(filterset)
        return filterset.qs


def agent_filters_from(params) -> selectors.AgentFilters:
    """The list filters of a query string (for the agent list page; the API's list reads them
    through its filter backend)."""
    return selectors.AgentFilters(params.items())


def _int_param(params, name: str, default: int) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError as error:
        raise selectors.InvalidQueryError(f"{name} must be a whole number") from error


def _get_agent(agent_id: str) -> Agent:
    agent = selectors.agent_get(agent_id=agent_id)
    if agent is None:
        raise NotFound(f"no agent with id {agent_id!r}")
    return agent


def _actor(request: Request) -> str:
    """Who the audit log names for this request's write."""
    return services.actor_of(key=caller_key(request), user=request.user)


def _check_may_change(request: Request, agent: Agent) -> None:
    """Staff users and admin keys may change any agent; other keys only those they registered.
    Nobody changes a mirror of a peer relay's agent here (409 ``mirrored``)."""
    if agent.origin_peer_id is not None:
        raise services.RegistryError(
            "mirrored",
            f"agent {agent.pk!r} is mirrored from the peer relay {agent.origin_peer.url} "
            f"(id {agent.origin_id!r}) and is read-only here: change it there",
            status=409,
        )
    key = caller_key(request)
    if key is None or key.is_admin or agent.created_by_id == key.pk:
        return
    raise PermissionDenied(
        "only the key that registered this agent, or an admin key, may change it"
    )


@extend_schema_view(
    get=extend_schema(
        operation_id="agents_list",
        summary="List and filter agents",
        description="Every registered agent, ordered by id, a page at a time: pass `nextCursor` "
        "as `cursor` for the next page. The filters combine; a bad value is a 400 naming it. "
        "Public unless RELAY_REGISTRY_PUBLIC is off.",
        responses={200: serializers.AgentSerializer(many=True), **errors(400, 401, 429)},
        examples=[example("A page", schema.AGENT)],
    )
)
class RegistryView(ListAPIView):
    """Reads list every agent whatever the key's agent scope: the registry is a discovery
    directory, and a key's agent list limits what it may call, not what it may find."""

    permission_classes = [RegistryPermission]
    registers_agents = True
    queryset = Agent.objects.with_card()
    serializer_class = serializers.AgentSerializer
    filter_backends = [RegistryFilterBackend]
    filterset_class = AgentFilterSet
    pagination_class = AgentPagination

    def list(self, request: Request, *args, **kwargs) -> Response:
        if not request.query_params.get("ask", "").strip():
            return super().list(request, *args, **kwargs)
        # A question's agents are ranked, best first, on one page: id cursors do not apply.
        size = self.paginator.get_page_size(request)
        ranked = self.filter_queryset(self.get_queryset()).order_by(ASK_RANK, "id")[:size]
        data = self.get_serializer(ranked, many=True).data
        return Response({"agents": data, "nextCursor": None})

    @extend_schema(
        operation_id="agents_register",
        summary="Register an agent by its URL",
        description="Fetches the agent's card from `url` (a base URL, whose well-known card "
        "paths are tried, or the card's own URL) and registers the agent; nothing is stored "
        "when the card cannot be had (422, the agent's answer in the message) or is invalid. "
        "Credentials are sent on card fetches, probes and calls, stored encrypted and never "
        "returned. Unknown fields, a URL without http(s)://, and the relay's own address "
        "are refused with 400.",
        request=serializers.AgentRegisterSerializer,
        responses={201: serializers.AgentSerializer, **errors(400, 401, 403, 409, 413, 422, 429)},
        examples=[
            example("Register with a bearer credential", schema.REGISTER, request=True),
            example("Registered", schema.AGENT, status=201),
        ],
    )
    def post(self, request: Request) -> Response:
        body = serializers.AgentRegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = services.agent_register(
            url=body.validated_data["url"],
            agent_id=body.validated_data.get("id"),
            invocation_url=body.validated_data["invocationUrl"],
            credentials=body.validated_data.get("credentials"),
            require_signature=body.validated_data["requireSignature"],
            mcp_server=body.validated_data["mcpServer"],
            created_by=caller_key(request),
            actor=_actor(request),
            own=own_addresses(request),
        )
        agent = selectors.agent_get(agent_id=agent.pk)
        return Response(serializers.AgentSerializer(agent).data, status=status.HTTP_201_CREATED)


class CatalogImportView(APIView):
    permission_classes = [RegistryPermission]
    registers_agents = True

    @extend_schema(
        operation_id="registry_import",
        summary="Import another host's AI Catalog",
        description="Reads the AI Catalog at `url` (or the host's "
        "/.well-known/ai-catalog.json; SSRF-checked, at most RELAY_CATALOG_MAX_BYTES and "
        "RELAY_CATALOG_MAX_ENTRIES entries) and registers every A2A agent in it by its card "
        "URL; an agent already registered from that URL is refreshed. Running it again "
        "changes nothing but what changed. The answer lists each entry as added, updated, "
        "unchanged or refused, with why. A catalog that cannot be had is a 422 (400 for an "
        "unsafe URL).",
        request=serializers.CatalogImportSerializer,
        responses={
            200: serializers.CatalogImportReportSerializer,
            **errors(400, 401, 403, 422, 429),
        },
        examples=[
            example("A host", schema.CATALOG_IMPORT, request=True),
            example("Imported", schema.CATALOG_IMPORT_REPORT),
        ],
    )
    def post(self, request: Request) -> Response:
        body = serializers.CatalogImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            report = catalog.catalog_import(
                url=body.validated_data["url"],
                credentials=body.validated_data.get("credentials"),
                actor=_actor(request),
                created_by=caller_key(request),
                own=own_addresses(request),
            )
        except catalog.CatalogError as error:
            raise services.RegistryError(error.code, error.message, status=error.status) from error
        return Response(report.as_dict())


class RemovedAgentsView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="registry_removed",
        summary="Agents removed since a time",
        description="The ids of agents deleted at or after `since`, oldest first, at most "
        f"{selectors.REMOVED_PAGE_SIZE}: with `updatedSince` on the agent list, what a relay "
        "that mirrors this registry needs to follow it incrementally.",
        parameters=[
            OpenApiParameter(
                "since",
                description="ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z",
                required=True,
                examples=[OpenApiExample("Since New Year", value="2026-01-01T00:00:00Z")],
            )
        ],
        responses={200: serializers.RemovedAgentsSerializer, **errors(400, 401, 429)},
        examples=[example("One removed", schema.REMOVED)],
    )
    def get(self, request: Request) -> Response:
        raw = request.query_params.get("since", "")
        try:
            since = ZonedDateTimeFilter.field_class().to_python(raw)
        except ValidationError as error:
            raise selectors.InvalidQueryError(f"since {error.messages[0]}") from error
        if since is None:
            raise selectors.InvalidQueryError("since is required (an ISO 8601 time with a zone)")
        removed = selectors.agents_removed(since=since)
        return Response({"removed": serializers.RemovedAgentSerializer(removed, many=True).data})


class AgentDetailView(APIView):
    permission_classes = [RegistryPermission]

    @extend_schema(
        operation_id="agent_get",
        summary="One agent",
        description="The agent as the registry shows it: its card's fields, skills, health "
        "and circuit breaker. Credentials appear only as `hasCredentials` and their kind.",
        parameters=[AGENT_ID],
        responses={200: serializers.AgentSerializer, **errors(401, 404, 429)},
        examples=[example("An agent", schema.AGENT)],
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(serializers.AgentSerializer(_get_agent(agent_id)).data)

    @extend_schema(
        operation_id="agent_update",
        summary="Change an agent's name, description, invocation URL, status or credentials",
        description="Only the fields given change; an unknown field is a 400 naming it and "
        "changes nothing. Card fields change only by a refresh. Only the key that registered "
        "the agent, or an admin key, may change it. `credentials: null` removes them.",
        parameters=[AGENT_ID],
        request=serializers.AgentUpdateSerializer,
        responses={200: serializers.AgentSerializer, **errors(400, 401, 403, 404, 429)},
        examples=[
            example("Deprecate", schema.UPDATE, request=True),
            example("Changed", {**schema.AGENT, **schema.UPDATE}),
        ],
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = _get_agent(agent_id)
        _check_may_change(request, agent)
        body = serializers.AgentUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        services.agent_update(
            agent=agent,
            fields=dict(body.validated_data),
            actor=_actor(request),
            own=own_addresses(request),
        )
        return Response(serializers.AgentSerializer(_get_agent(agent_id)).data)

    @extend_schema(
        operation_id="agent_delete",
        summary="Delete an agent",
        description="Deletes the agent with its card history, skills and team memberships; "
        "409 while it is a team's default agent. Only the key that registered it, or an "
        "admin key, may delete it.",
        parameters=[AGENT_ID],
        responses={204: OpenApiResponse(description="Deleted"), **errors(401, 403, 404, 409, 429)},
    )
    def delete(self, request: Request, agent_id: str) -> Response:
        agent = _get_agent(agent_id)
        _check_may_change(request, agent)
        services.agent_delete(agent=agent, actor=_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentRefreshView(APIView):
    permission_classes = [RegistryPermission]

    @extend_schema(
        operation_id="agent_refresh",
        summary="Fetch an agent's card again",
        description="Fetches the card from the agent's card URL with its credentials. A "
        "changed card becomes a new snapshot (`cardChanged: true`); when the card cannot be "
        "had (422, the agent's answer in the message) the stored card is kept.",
        parameters=[AGENT_ID],
        request=None,
        responses={200: serializers.AgentRefreshSerializer, **errors(401, 403, 404, 422, 429)},
        examples=[example("Refreshed", {**schema.AGENT, "cardChanged": False})],
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _get_agent(agent_id)
        _check_may_change(request, agent)
        changed = services.agent_card_refresh(agent=agent)
        data = serializers.AgentSerializer(_get_agent(agent_id)).data
        return Response({**data, "cardChanged": changed})


class AgentHistoryView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="agent_history",
        summary="An agent's card history",
        description="Every stored version of the card, newest first, each with a unified "
        "diff from the version before it.",
        parameters=[AGENT_ID],
        responses={200: serializers.SnapshotHistorySerializer, **errors(401, 404, 429)},
        examples=[example("Two versions", schema.HISTORY)],
    )
    def get(self, request: Request, agent_id: str) -> Response:
        snapshots = selectors.agent_snapshots(agent=_get_agent(agent_id))
        diffs = {
            newer.pk: card_diff(
                older.raw,
                newer.raw,
                old_label=older.content_hash[:12],
                new_label=newer.content_hash[:12],
            )
            for newer, older in zip(snapshots, snapshots[1:], strict=False)
        }
        data = serializers.SnapshotSerializer(snapshots, many=True, context={"diffs": diffs}).data
        return Response({"snapshots": data})


class SkillSearchView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(
        operation_id="skills_search",
        summary="Find skills",
        description="Skills of agents that are not disabled, best match first, with a score "
        "in (0, 1]. `q` is a question in plain words: skills are ranked by what they mean "
        "(a sentence-embedding model run by the relay), the words they share with it, and "
        "their agent's health and measured latency; `search.mode` is `semantic`. When the "
        "model is unavailable, `search.mode` is `lexical` with the reason, and skills are "
        "ranked by the words they and their agent share with `q` (BM25: rarer words weigh "
        "more; a skill need not have every word).",
        parameters=[
            OpenApiParameter(
                "q",
                description="What the skill should do, in plain words",
                examples=[
                    OpenApiExample("forecast", value="forecast"),
                    OpenApiExample("a question", value="will I need an umbrella tomorrow"),
                ],
            ),
            OpenApiParameter("tag", description="A skill tag"),
            OpenApiParameter("inputMode", description="A media type the skill accepts"),
            OpenApiParameter("outputMode", description="A media type the skill produces"),
            OpenApiParameter("extension", description="An extension URI the agent declares"),
            OpenApiParameter("limit", int, description="How many, 1 to 100 (default 20)"),
        ],
        responses={200: serializers.SkillMatchPageSerializer, **errors(400, 401, 429)},
        examples=[example("Matches", schema.SKILL_MATCHES)],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        limit = _int_param(params, "limit", 20)
        if not 1 <= limit <= selectors.MAX_PAGE_SIZE:
            raise selectors.InvalidQueryError(
                f"limit must be between 1 and {selectors.MAX_PAGE_SIZE}"
            )
        matches, mode = semantic.skill_find(
            semantic.SkillQuery(
                text=params.get("q", ""),
                tags=tuple(filter(None, [params.get("tag", "")])),
                input_modes=tuple(filter(None, [params.get("inputMode", "")])),
                output_modes=tuple(filter(None, [params.get("outputMode", "")])),
                extension=params.get("extension", ""),
            ),
            limit=limit,
        )
        data = serializers.SkillMatchSerializer(matches, many=True).data
        return Response({"matches": data, "search": mode.as_dict()})


# --- Teams ----------------------------------------------------------------------------------


def _get_team(team_id: str) -> Team:
    team = selectors.team_get(team_id=team_id)
    if team is None:
        raise NotFound(f"no team with id {team_id!r}")
    return team


def _team_data(request: Request, team: Team) -> dict:
    return serializers.TeamSerializer(team, context={"request": request}).data


@extend_schema_view(
    get=extend_schema(
        operation_id="teams_list",
        summary="List teams",
        description="Every team, ordered by id, with its members in order, a page at a time: "
        "pass `nextCursor` as `cursor` for the next page. `a2aUrl` is the team's A2A endpoint.",
        responses={200: serializers.TeamSerializer(many=True), **errors(400, 401, 429)},
        examples=[example("A page", schema.TEAM)],
    )
)
class TeamListView(ListAPIView):
    """``/a2a/teams``. The team's own A2A endpoint is ``/a2a/teams/{id}/``, with the slash."""

    permission_classes = [AdminWritePermission]
    queryset = selectors.teams_with_members(Team.objects.all())
    serializer_class = serializers.TeamSerializer
    pagination_class = TeamPagination

    @extend_schema(
        operation_id="teams_create",
        summary="Create a team",
        description="A team answers A2A calls at `/a2a/teams/{id}/` through its default "
        "agent, which routes to the other members when it supports the client-routing "
        "extension. Members are registered agent ids, in order; the default agent must be "
        "an enabled member. Admin keys only.",
        request=serializers.TeamCreateSerializer,
        responses={201: serializers.TeamSerializer, **errors(400, 401, 403, 409, 429)},
        examples=[
            example("A team of two", schema.TEAM_CREATE, request=True),
            example("Created", schema.TEAM, status=201),
        ],
    )
    def post(self, request: Request) -> Response:
        body = serializers.TeamCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        values = dict(body.validated_data)
        team = teams.team_create(team_id=values.pop("id"), **values, actor=_actor(request))
        return Response(_team_data(request, _get_team(team.pk)), status=status.HTTP_201_CREATED)


class TeamDetailView(APIView):
    permission_classes = [AdminWritePermission]

    @extend_schema(
        operation_id="team_get",
        summary="One team",
        description="The team with its members (health and routing support of each), its "
        "default agent, and the URLs of its A2A endpoint and card.",
        parameters=[TEAM_ID],
        responses={200: serializers.TeamSerializer, **errors(401, 404, 429)},
        examples=[example("A team", schema.TEAM)],
    )
    def get(self, request: Request, team_id: str) -> Response:
        return Response(_team_data(request, _get_team(team_id)))

    @extend_schema(
        operation_id="team_update",
        summary="Change a team",
        description="Only the fields given change; `members` replaces the members. An "
        "unknown field is a 400 naming it and changes nothing. Admin keys only.",
        parameters=[TEAM_ID],
        request=serializers.TeamUpdateSerializer,
        responses={200: serializers.TeamSerializer, **errors(400, 401, 403, 404, 429)},
        examples=[
            example("Fewer hops, disabled", schema.TEAM_UPDATE, request=True),
            example("Changed", {**schema.TEAM, **schema.TEAM_UPDATE}),
        ],
    )
    def patch(self, request: Request, team_id: str) -> Response:
        team = _get_team(team_id)
        body = serializers.TeamUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        teams.team_update(team=team, fields=dict(body.validated_data), actor=_actor(request))
        return Response(_team_data(request, _get_team(team_id)))

    @extend_schema(
        operation_id="team_delete",
        summary="Delete a team",
        description="Deletes the team (its agents stay registered). Admin keys only.",
        parameters=[TEAM_ID],
        responses={204: OpenApiResponse(description="Deleted"), **errors(401, 403, 404, 429)},
    )
    def delete(self, request: Request, team_id: str) -> Response:
        teams.team_delete(team=_get_team(team_id), actor=_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
