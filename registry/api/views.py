"""Registry endpoints. Each view parses input, calls one service or selector, and serializes."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import selectors, services, teams
from registry.api import serializers
from registry.api.pagination import AgentPagination, TeamPagination
from registry.auth import (
    AdminWritePermission,
    RegistryPermission,
    RegistryReadPermission,
    caller_key,
)
from registry.cards import card_diff
from registry.filters import AgentFilterSet, check_valid
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
    """Staff users and admin keys may change any agent; other keys only those they registered."""
    key = caller_key(request)
    if key is None or key.is_admin or agent.created_by_id == key.pk:
        return
    raise PermissionDenied("only the key that registered this agent, or an admin key, may change it")


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

    @extend_schema(request=serializers.AgentRegisterSerializer,
                   responses={201: serializers.AgentSerializer})
    def post(self, request: Request) -> Response:
        body = serializers.AgentRegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = services.agent_register(
            url=body.validated_data["url"],
            agent_id=body.validated_data.get("id"),
            invocation_url=body.validated_data["invocationUrl"],
            credentials=body.validated_data.get("credentials"),
            created_by=caller_key(request),
            actor=_actor(request),
            own=own_addresses(request),
        )
        agent = selectors.agent_get(agent_id=agent.pk)
        return Response(serializers.AgentSerializer(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    permission_classes = [RegistryPermission]

    @extend_schema(responses=serializers.AgentSerializer)
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(serializers.AgentSerializer(_get_agent(agent_id)).data)

    @extend_schema(request=serializers.AgentUpdateSerializer,
                   responses=serializers.AgentSerializer)
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = _get_agent(agent_id)
        _check_may_change(request, agent)
        body = serializers.AgentUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        services.agent_update(agent=agent, fields=dict(body.validated_data),
                              actor=_actor(request), own=own_addresses(request))
        return Response(serializers.AgentSerializer(_get_agent(agent_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, agent_id: str) -> Response:
        agent = _get_agent(agent_id)
        _check_may_change(request, agent)
        services.agent_delete(agent=agent, actor=_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentRefreshView(APIView):
    permission_classes = [RegistryPermission]

    @extend_schema(request=None, responses=serializers.AgentSerializer)
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _get_agent(agent_id)
        _check_may_change(request, agent)
        changed = services.agent_card_refresh(agent=agent)
        data = serializers.AgentSerializer(_get_agent(agent_id)).data
        return Response({**data, "cardChanged": changed})


class AgentHistoryView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(responses=serializers.SnapshotHistorySerializer)
    def get(self, request: Request, agent_id: str) -> Response:
        snapshots = selectors.agent_snapshots(agent=_get_agent(agent_id))
        diffs = {
            newer.pk: card_diff(older.raw, newer.raw, old_label=older.content_hash[:12],
                                new_label=newer.content_hash[:12])
            for newer, older in zip(snapshots, snapshots[1:], strict=False)
        }
        data = serializers.SnapshotSerializer(
            snapshots, many=True, context={"diffs": diffs}
        ).data
        return Response({"snapshots": data})


class SkillSearchView(APIView):
    permission_classes = [RegistryReadPermission]

    @extend_schema(
        parameters=[
            OpenApiParameter(name, required=False, type=str)
            for name in ("q", "tag", "inputMode", "outputMode", "extension")
        ] + [OpenApiParameter("limit", required=False, type=int)],
        responses=serializers.SkillMatchPageSerializer,
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        matches = selectors.skill_search(
            filters=selectors.SkillFilters(
                q=params.get("q", ""), tag=params.get("tag", ""),
                input_mode=params.get("inputMode", ""), output_mode=params.get("outputMode", ""),
                extension=params.get("extension", ""),
            ),
            limit=_int_param(params, "limit", 20),
        )
        data = serializers.SkillMatchSerializer(
            [{"skill": skill, "score": score} for skill, score in matches], many=True
        ).data
        return Response({"matches": data})


# --- Teams ----------------------------------------------------------------------------------


def _get_team(team_id: str) -> Team:
    team = selectors.team_get(team_id=team_id)
    if team is None:
        raise NotFound(f"no team with id {team_id!r}")
    return team


def _team_data(request: Request, team: Team) -> dict:
    return serializers.TeamSerializer(team, context={"request": request}).data


class TeamListView(ListAPIView):
    """``/a2a/teams``. The team's own A2A endpoint is ``/a2a/teams/{id}/``, with the slash."""

    permission_classes = [AdminWritePermission]
    queryset = selectors.teams_with_members(Team.objects.all())
    serializer_class = serializers.TeamSerializer
    pagination_class = TeamPagination

    @extend_schema(request=serializers.TeamCreateSerializer,
                   responses={201: serializers.TeamSerializer})
    def post(self, request: Request) -> Response:
        body = serializers.TeamCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        values = dict(body.validated_data)
        team = teams.team_create(team_id=values.pop("id"), **values, actor=_actor(request))
        return Response(_team_data(request, _get_team(team.pk)), status=status.HTTP_201_CREATED)


class TeamDetailView(APIView):
    permission_classes = [AdminWritePermission]

    @extend_schema(responses=serializers.TeamSerializer)
    def get(self, request: Request, team_id: str) -> Response:
        return Response(_team_data(request, _get_team(team_id)))

    @extend_schema(request=serializers.TeamUpdateSerializer,
                   responses=serializers.TeamSerializer)
    def patch(self, request: Request, team_id: str) -> Response:
        team = _get_team(team_id)
        body = serializers.TeamUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        teams.team_update(team=team, fields=dict(body.validated_data), actor=_actor(request))
        return Response(_team_data(request, _get_team(team_id)))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, team_id: str) -> Response:
        teams.team_delete(team=_get_team(team_id), actor=_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
