"""``POST /a2a/select``: which agents should answer this message, best first, and why."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry import selection
from registry.api.schema import errors, example
from registry.auth import HasApiKey, caller_key
from registry.filters import InvalidQueryError

MAX_LIMIT = 50


class SelectFiltersSerializer(serializers.Serializer):
    team = serializers.SlugField(required=False, help_text="Only the enabled members of this team")
    tags = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=20,
        help_text="The skill carries every one of these tags",
    )
    inputModes = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=20,
        help_text="The skill accepts every one of these media types",
    )
    outputModes = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=20,
        help_text="The skill produces every one of these media types",
    )
    healthyOnly = serializers.BooleanField(
        required=False, default=False, help_text="Leave out agents whose health is unhealthy"
    )


class SelectRequestSerializer(serializers.Serializer):
    message = serializers.JSONField(
        help_text="An A2A message (1.0: parts with text; 0.3: parts of kind text). Its text is "
        "what the agents are chosen for."
    )
    filters = SelectFiltersSerializer(required=False)
    limit = serializers.IntegerField(
        required=False, default=5, min_value=1, max_value=MAX_LIMIT, help_text="How many agents"
    )

    def validate_message(self, value):
        try:
            self.context["text"] = selection.message_text(value)
        except InvalidQueryError as error:
            raise serializers.ValidationError(str(error)) from error
        return value


class SelectedSkillSerializer(serializers.Serializer):
    id = serializers.CharField(source="skill_id")
    name = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.JSONField()


class CandidateSerializer(serializers.Serializer):
    agentId = serializers.CharField(source="agent_id")
    agentName = serializers.CharField(source="skill.agent.name")
    score = serializers.FloatField(help_text="0 to 1; higher is a better choice")
    health = serializers.CharField(source="skill.agent.health")
    latencyMs = serializers.FloatField(source="skill.agent.health_latency_ms", allow_null=True)
    skill = SelectedSkillSerializer()
    example = serializers.CharField(help_text="The skill's example closest to the message")
    meaning = serializers.FloatField(help_text="Similarity in meaning of message and skill")
    words = serializers.FloatField(help_text="Share of the message's words the skill contains")
    why = serializers.CharField(help_text="The reason, in words")


class SearchSerializer(serializers.Serializer):
    mode = serializers.CharField(help_text="semantic, lexical (with a reason) or custom")
    reason = serializers.CharField(required=False)


class SelectResponseSerializer(serializers.Serializer):
    candidates = CandidateSerializer(many=True)
    search = SearchSerializer()
    selector = serializers.CharField(help_text="The RELAY_AGENT_SELECTOR that chose")


SELECT_REQUEST = {
    "message": {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "will I need an umbrella in Lyon tomorrow?"}],
    },
    "filters": {"inputModes": ["text/plain"]},
    "limit": 3,
}
SELECT_RESPONSE = {
    "candidates": [
        {
            "agentId": "weather",
            "agentName": "Weather Agent",
            "score": 0.71,
            "health": "healthy",
            "latencyMs": 42.0,
            "skill": {
                "id": "forecast",
                "name": "Forecast",
                "description": "Forecasts temperature, rain and wind for any city.",
                "tags": ["weather", "forecast"],
            },
            "example": "Will it rain in Paris this weekend?",
            "meaning": 0.58,
            "words": 0.0,
            "why": "skill 'Forecast' means much the same (similarity 0.58); for example "
            "'Will it rain in Paris this weekend?'",
        }
    ],
    "search": {"mode": "semantic"},
    "selector": "registry.selection.rank_by_meaning",
}


class SelectView(APIView):
    permission_classes = [HasApiKey]

    @extend_schema(
        operation_id="agents_select",
        summary="Choose agents for a message",
        description="The agents best fit to answer an A2A message, best first: each with its "
        "best matching skill, a score, its health and measured latency, and why (the skill, "
        "how close in meaning, the shared words and the skill's closest example). Agents are "
        "ranked by the selector the `RELAY_AGENT_SELECTOR` setting names (by default meaning, "
        "words, health and latency); `search.mode` says `lexical`, with the reason, when the "
        "embedding model is unavailable. Only agents the API key may call are considered; "
        "disabled agents never are.",
        request=SelectRequestSerializer,
        responses={200: SelectResponseSerializer, **errors(400, 401, 429)},
        examples=[
            example("A question", SELECT_REQUEST, request=True),
            example("Candidates", SELECT_RESPONSE),
            OpenApiExample(
                "An A2A 0.3 message",
                value={
                    "message": {
                        "kind": "message",
                        "role": "user",
                        "parts": [{"kind": "text", "text": "translate this into Spanish"}],
                    }
                },
                request_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        body = SelectRequestSerializer(data=request.data, context={})
        body.is_valid(raise_exception=True)
        filters = body.validated_data.get("filters") or {}
        chosen = selection.select(
            request=selection.SelectRequest(
                text=body.context["text"],
                team_id=filters.get("team", ""),
                tags=tuple(filters.get("tags", ())),
                input_modes=tuple(filters.get("inputModes", ())),
                output_modes=tuple(filters.get("outputModes", ())),
                healthy_only=filters.get("healthyOnly", False),
                limit=body.validated_data["limit"],
                agent_ids=selection.callable_agent_ids(caller_key(request)),
            )
        )
        candidates = CandidateSerializer(chosen.selections, many=True).data
        return Response(
            {
                "candidates": candidates,
                "search": chosen.search.as_dict(),
                "selector": selection.selector_name(),
            }
        )
