"""Task templates in the API:

- ``GET /a2a/templates``: every template with its target and typed variables (a registry
  read).
- ``POST /a2a/tasks/template/sendSubscribe``: the same rendered send, streamed as
  ``POST /a2a/tasks/sendSubscribe`` streams (the A2A consumer answers it).
- ``POST /a2a/tasks/template`` ``{"templateId", "variables"}``: renders the template's message
  and sends it to its agent, team or workflow through the task API's own send (``answer_send``): the
  same answer, errors and ownership as ``POST /a2a/tasks/send``. A missing, unknown or
  mistyped variable is InvalidParams naming it (400 here; -32602 in JSON-RPC terms); an
  unknown ``templateId`` is a 404 saying so.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView

from registry.api.pagination import IdCursorPagination
from registry.api.schema import errors, task_errors
from registry.auth import RegistryReadPermission
from relay_project.database import database_sync_to_async
from routing import task_templates
from routing.models import TaskTemplate
from tasks_app.api import parsing
from tasks_app.api.task_api import TaskApiView, answer_send
from tasks_app.api.task_api_docs import CURRENT_TASK
from tasks_app.protocol import events as a2a_events
from tasks_app.protocol.errors import (
    FieldViolation,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
)

TEMPLATE = {
    "id": "weekly-report",
    "name": "Weekly report",
    "description": "A short report on one team's week.",
    "text": "Write a {{length}}-line report on the week of {{team}}.",
    "variables": [
        {"name": "team", "type": "string", "description": "Whose week"},
        {"name": "length", "type": "integer", "default": 5},
    ],
    "target": {"kind": "agent", "id": "writer"},
    "configuration": {"acceptedOutputModes": ["text/plain"]},
}
SEND = {"templateId": "weekly-report", "variables": {"team": "billing", "length": 3}}
# What the stream answers: A2A 1.0 StreamResponse frames, as POST /a2a/tasks/sendSubscribe's.
STREAM_EXAMPLE = (
    'data: {"task":{"id":"0b7c...","status":{"state":"TASK_STATE_SUBMITTED"}}}\n\n'
    'data: {"artifactUpdate":{"taskId":"0b7c...","artifact":{"artifactId":"a-1",'
    '"name":"report","parts":[{"text":"Billing, week 1: ..."}]}}}\n\n'
    'data: {"statusUpdate":{"taskId":"0b7c...","status":{"state":'
    '"TASK_STATE_COMPLETED"}}}\n\n'
)


class TemplateSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    text = serializers.CharField(help_text="The message, with {{name}} where a variable goes.")
    variables = serializers.ListField(
        child=serializers.DictField(),
        help_text="Each {name, type, default?, description?}; no default: the caller gives it.",
    )
    target = serializers.DictField(help_text='{"kind": "agent", "team" or "workflow", "id": ...}')
    configuration = serializers.DictField(help_text="Sent with every call.")

    def to_representation(self, instance: TaskTemplate) -> dict[str, Any]:
        kind, target_id = instance.target
        return {
            "id": instance.id,
            "name": instance.name,
            "description": instance.description,
            "text": instance.text,
            "variables": [
                variable.as_json() for variable in task_templates.variables(instance.variables)
            ],
            "target": {"kind": kind, "id": target_id},
            "configuration": instance.configuration,
        }


class TemplatePagination(IdCursorPagination):
    items_key = "templates"
    example_id = "weekly-report"


@extend_schema_view(
    get=extend_schema(
        operation_id="templates_list",
        summary="List task templates",
        description="Every task template, ordered by id, with its target and typed "
        "variables, a page at a time. Send one with POST /a2a/tasks/template.",
        responses={200: TemplateSerializer(many=True), **errors(400, 401, 429)},
        examples=[
            OpenApiExample("A page", value=TEMPLATE, response_only=True, status_codes=["200"])
        ],
    )
)
class TemplateListView(ListAPIView):
    """``/a2a/templates``."""

    permission_classes = [RegistryReadPermission]
    serializer_class = TemplateSerializer
    pagination_class = TemplatePagination

    def get_queryset(self):
        return TaskTemplate.objects.order_by("id")


def template_payload(template: TaskTemplate, values: Any) -> dict[str, Any]:
    """The task API send body a template makes with the caller's ``values``."""
    try:
        text = task_templates.render(template.text, template.variables, values)
    except task_templates.VariableError as error:
        field = error.name if error.name == "variables" else f"variables.{error.name}"
        raise InvalidParams(field_violations=[FieldViolation(field, error.message)]) from None
    kind, target_id = template.target
    payload: dict[str, Any] = {
        f"{kind}Id": target_id,
        "message": a2a_events.message(
            message_id=str(uuid.uuid4()),
            role=a2a_events.ROLE_USER,
            parts=a2a_events.text_parts(text),
        ),
    }
    if template.configuration:
        payload["configuration"] = template.configuration
    return payload


def _template(template_id: Any) -> TaskTemplate:
    if not isinstance(template_id, str) or not template_id:
        raise InvalidParams(field_violations=[FieldViolation("templateId", "is required")])
    template = TaskTemplate.objects.filter(pk=template_id).first()
    if template is None:
        raise TemplateNotFound(
            f"no template {template_id[:64]!r} at this relay (GET /a2a/templates lists them)"
        )
    return template


class TemplateNotFound(parsing.TargetNotFound):
    """``templateId`` names no template: 404, as an unknown agent or team is."""


class TemplateSendView(TaskApiView):
    @extend_schema(
        operation_id="tasks_send_template",
        summary="Send a task template's message with its variables filled in",
        description="Renders the template's message with `variables` (defaults fill the "
        "rest) and sends it to the template's agent, team or workflow with its configuration, as "
        "POST /a2a/tasks/send would: the same answer (a task, or the agent's message). A "
        "missing, unknown or mistyped variable is a 400 naming it; an unknown templateId "
        "is a 404.",
        request={"application/json": OpenApiTypes.OBJECT},
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT),
            **task_errors(400, 401, 404, 413, 429),
        },
        examples=[
            OpenApiExample("Variables", value=SEND, request_only=True),
            OpenApiExample("Answer", value={"task": CURRENT_TASK}, response_only=True),
        ],
    )
    async def post(self, request):
        payload = await database_sync_to_async(send_body)(request.body)
        return await answer_send(request, payload)


class TemplateSendSubscribeView(TaskApiView):
    """Describes ``POST /a2a/tasks/template/sendSubscribe`` in the API docs. The relay's ASGI
    router hands that call to the A2A consumer, which makes its body a sendSubscribe body with
    ``stream_body`` and streams it as ``POST /a2a/tasks/sendSubscribe`` does; this view
    answers only what reaches Django: a call without a key, or another verb."""

    @extend_schema(
        operation_id="tasks_send_template_subscribe",
        summary="Send a task template's message and stream the task's updates (SSE)",
        description="The template rendered as POST /a2a/tasks/template renders it, sent "
        "and streamed as POST /a2a/tasks/sendSubscribe streams: `data:` frames of A2A 1.0 "
        "StreamResponse. A missing, unknown or mistyped variable is a 400 naming it, before "
        "any event; an unknown templateId is a 404.",
        request={"application/json": OpenApiTypes.OBJECT},
        responses={
            200: OpenApiResponse(OpenApiTypes.STR, description="text/event-stream"),
            **task_errors(400, 401, 404, 413, 429),
        },
        examples=[
            OpenApiExample("Variables", value=SEND, request_only=True),
            OpenApiExample("Events", value=STREAM_EXAMPLE, response_only=True),
        ],
    )
    async def post(self, request):
        raise MethodNotFound(
            "POST /a2a/tasks/template/sendSubscribe is answered by the A2A consumer"
        )


def send_body(raw: bytes) -> dict[str, Any]:
    """The task API send body of a ``{templateId, variables}`` request body (database
    thread). Raises InvalidRequest, InvalidParams naming the field, or TemplateNotFound."""
    body = parsing.parse_task_api_body(raw)
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object {templateId, variables}")
    unknown = sorted(set(body) - {"templateId", "variables"})
    if unknown:
        raise InvalidParams(
            field_violations=[
                FieldViolation(unknown[0], "unknown field: send templateId and variables")
            ]
        )
    return template_payload(_template(body.get("templateId")), body.get("variables"))


def stream_body(raw: bytes) -> bytes:
    """``send_body`` encoded: the body the consumer streams as a sendSubscribe."""
    return json.dumps(send_body(raw)).encode()
