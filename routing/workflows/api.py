"""``/a2a/workflows``: list workflows and import one (``POST`` a YAML document with
``Content-Type: application/yaml``, or the same document as JSON); ``/a2a/workflows/{id}``: one
workflow (its YAML with ``Accept: application/yaml``), replace it (``PUT``), delete it.
Reads as registry reads; writes need a staff user or an admin key, as teams do."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.generics import ListAPIView
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.api.errors import error_response
from registry.api.pagination import IdCursorPagination
from registry.api.schema import ErrorSerializer, errors
from registry.auth import AdminWritePermission, caller_key
from registry.services import actor_of
from relay_project.parsers import BoundedJSONParser
from routing.models import Workflow
from routing.workflows import selectors, services
from routing.workflows.definition import dump_yaml

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")

SEED = """name: Customer Support Pipeline
version: 1.0.0
steps:
  - id: classify
    agent: intent-classifier
    input: "{{.originalMessage}}"
  - id: summarize
    agent: summary-agent
    input: "{{.classify}}"
    output: final_response
"""
JSON_EXAMPLE = {
    "name": "Weather report",
    "slug": "weather-report",
    "steps": [
        {"id": "forecast", "agent": "weather", "input": "{{.originalMessage}}"},
        {"id": "report", "agent": "writer", "input": "Write this up: {{.forecast}}"},
    ],
}
"""The JSON example: the registry examples' agents, so "try it out" works in order (create,
read, replace, delete ``weather-report``)."""
WORKFLOW = {
    "id": "customer-support-pipeline",
    "name": "Customer Support Pipeline",
    "version": "1.0.0",
    "description": "",
    "enabled": True,
    "steps": [
        {"id": "classify", "kind": "agent", "target": "intent-classifier"},
        {"id": "summarize", "kind": "agent", "target": "summary-agent"},
    ],
    "targets": {
        "agent": {"intent-classifier": "intent-classifier", "summary-agent": "summary-agent"},
        "team": {},
        "workflow": {},
    },
    "createdAt": "2026-01-05T08:00:00.000000Z",
    "updatedAt": "2026-01-05T08:00:00.000000Z",
}
INVALID = {
    "error": {
        "code": "invalid_workflow",
        "message": "steps[1] (summarize): agent: no registered agent has the id or name "
        "'summary-agent'",
        "problems": [
            "steps[1] (summarize): agent: no registered agent has the id or name 'summary-agent'"
        ],
    }
}
_INVALID_ANSWER = OpenApiResponse(
    ErrorSerializer,
    description="Not a valid workflow, or a step names an agent, team or workflow that is not "
    "there (invalid_workflow, every problem listed); or a body that is not YAML or JSON",
    examples=[
        OpenApiExample(
            "400 invalid_workflow", value=INVALID, response_only=True, status_codes=["400"]
        )
    ],
)
WORKFLOW_ID = OpenApiParameter(
    "workflow_id",
    str,
    OpenApiParameter.PATH,
    description="A workflow id (its slug).",
    examples=[OpenApiExample("weather-report", value="weather-report")],
)


class WorkflowWritePermission(AdminWritePermission):
    """Reads as registry reads; writes need a staff user or an admin key."""

    admin_writes_message = "only an admin key may change workflows"


def _parser(media: str) -> type[BaseParser]:
    class YamlParser(BaseParser):
        """The body as text: the view reads it as a workflow document."""

        media_type = media

        def parse(self, stream, media_type=None, parser_context=None):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            body = stream.read(limit + 1 if limit else -1) if stream is not None else b""
            if limit and len(body) > limit:
                raise RequestDataTooBig("the body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE")
            try:
                return body.decode("utf-8")
            except UnicodeDecodeError:
                raise ParseError("a YAML body must be UTF-8") from None

    return YamlParser


YAML_PARSERS = [_parser(media) for media in YAML_TYPES]


class YamlRenderer(BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return (data if isinstance(data, str) else dump_yaml(data)).encode("utf-8")


class StepSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField(
        help_text="agent, team, workflow, sequence, branch, parallel or loop"
    )
    target = serializers.CharField(help_text="The agent, team or workflow called (calls only).")


class WorkflowSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField()
    enabled = serializers.BooleanField()
    steps = StepSerializer(many=True, help_text="The top-level steps, in order.")
    targets = serializers.DictField(
        help_text="The registered ids the steps' agent, team and workflow names resolved to."
    )
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    def to_representation(self, instance: Workflow) -> dict:
        data = super().to_representation(instance)
        data["steps"] = [
            {"id": step.step_id, "kind": step.kind, "target": step.target}
            for step in instance.steps.all()
        ]
        return data


class WorkflowPagination(IdCursorPagination):
    items_key = "workflows"
    example_id = "customer-support-pipeline"


def _document_request(description: str) -> dict:
    return {
        "request": {"application/yaml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        "examples": [
            OpenApiExample("YAML", value=SEED, request_only=True, media_type="application/yaml"),
            OpenApiExample(
                "JSON",
                value=JSON_EXAMPLE,
                request_only=True,
                media_type="application/json",
            ),
            OpenApiExample(
                "Saved", value=WORKFLOW, response_only=True, status_codes=["200", "201"]
            ),
        ],
        "description": description,
    }


def _invalid(rejected: services.WorkflowRejected) -> Response:
    problems = [str(problem) for problem in rejected.problems]
    return error_response(
        "invalid_workflow", problems[0], status.HTTP_400_BAD_REQUEST, problems=problems
    )


def _body(request: Request) -> dict:
    """The service's arguments for the body: YAML text or JSON data."""
    if isinstance(request.data, str):
        return {"text": request.data}
    return {"document": request.data}


def _actor(request: Request) -> str:
    return actor_of(key=caller_key(request), user=request.user)


def _get(workflow_id: str) -> Workflow:
    workflow = selectors.workflow_get(workflow_id=workflow_id)
    if workflow is None:
        raise NotFound(f"no workflow with id {workflow_id!r}")
    return workflow


@extend_schema_view(
    get=extend_schema(
        operation_id="workflows_list",
        summary="List workflows",
        description="Every workflow, ordered by id, with its top-level steps, a page at a "
        "time: pass `nextCursor` as `cursor` for the next page.",
        responses={200: WorkflowSerializer(many=True), **errors(400, 401, 429)},
        examples=[
            OpenApiExample("A page", value=WORKFLOW, response_only=True, status_codes=["200"])
        ],
    )
)
class WorkflowListView(ListAPIView):
    """``/a2a/workflows``."""

    permission_classes = [WorkflowWritePermission]
    parser_classes = [*YAML_PARSERS, BoundedJSONParser]
    serializer_class = WorkflowSerializer
    pagination_class = WorkflowPagination

    def get_queryset(self):
        return selectors.workflow_list()

    @extend_schema(
        operation_id="workflows_create",
        summary="Import a workflow",
        responses={
            201: WorkflowSerializer,
            400: _INVALID_ANSWER,
            **errors(401, 403, 409, 413, 429),
        },
        **_document_request(
            "A YAML document (`Content-Type: application/yaml`) or the same as JSON. Its "
            "id is its `slug`, else its name in lower case with dashes. Each `agent:` and "
            "`team:` is a registered id or name, each `workflow:` another workflow's id. "
            "Staff or admin keys only."
        ),
    )
    def post(self, request: Request) -> Response:
        try:
            workflow = services.workflow_import(**_body(request), actor=_actor(request))
        except services.WorkflowRejected as rejected:
            return _invalid(rejected)
        data = WorkflowSerializer(_get(workflow.pk)).data
        return Response(data, status=status.HTTP_201_CREATED)


class WorkflowDetailView(APIView):
    """``/a2a/workflows/{id}``."""

    permission_classes = [WorkflowWritePermission]
    parser_classes = [*YAML_PARSERS, BoundedJSONParser]

    def get_renderers(self):
        # Only a read may answer YAML (the export); writes and errors answer JSON.
        if self.request is not None and self.request.method == "GET":
            return [JSONRenderer(), YamlRenderer()]
        return [JSONRenderer()]

    @extend_schema(
        operation_id="workflow_get",
        summary="One workflow",
        description="The workflow as JSON, or its YAML document with `Accept: "
        "application/yaml` (what `import_workflow` and `POST /a2a/workflows` read).",
        parameters=[WORKFLOW_ID],
        responses={
            (200, "application/json"): OpenApiResponse(
                WorkflowSerializer, examples=[OpenApiExample("JSON", value=WORKFLOW)]
            ),
            (200, "application/yaml"): OpenApiResponse(
                OpenApiTypes.STR,
                examples=[OpenApiExample("YAML", value=SEED, media_type="application/yaml")],
            ),
            **errors(400, 401, 404, 429),
        },
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        workflow = _get(workflow_id)
        if request.accepted_renderer.format == YamlRenderer.format:
            return Response(workflow.source)
        return Response(WorkflowSerializer(workflow).data)

    @extend_schema(
        operation_id="workflow_replace",
        summary="Replace a workflow",
        parameters=[WORKFLOW_ID],
        responses={
            200: WorkflowSerializer,
            400: _INVALID_ANSWER,
            **errors(401, 403, 404, 413, 429),
        },
        **_document_request(
            "A new document for the workflow, YAML or JSON, checked as an import is; its "
            "`slug`, if given, must be this id. Staff or admin keys only."
        ),
    )
    def put(self, request: Request, workflow_id: str) -> Response:
        _get(workflow_id)
        try:
            services.workflow_import(
                **_body(request), workflow_id=workflow_id, replace=True, actor=_actor(request)
            )
        except services.WorkflowRejected as rejected:
            return _invalid(rejected)
        return Response(WorkflowSerializer(_get(workflow_id)).data)

    @extend_schema(
        operation_id="workflow_delete",
        summary="Delete a workflow",
        description="Deletes the workflow (the agents and teams it calls stay). Staff or "
        "admin keys only.",
        parameters=[WORKFLOW_ID],
        responses={204: OpenApiResponse(description="Deleted"), **errors(401, 403, 404, 429)},
    )
    def delete(self, request: Request, workflow_id: str) -> Response:
        services.workflow_delete(workflow=_get(workflow_id), actor=_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
