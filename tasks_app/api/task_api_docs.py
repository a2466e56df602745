"""The task API's OpenAPI description: both shapes side by side, with a request and a response
example of each, for ``send``, ``sendSubscribe``, ``get``, ``cancel`` and ``sendBatch``.

Kept apart from the views so they stay short; the examples are the ones the README shows.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema

from registry.api.schema import task_errors

SHAPES = (
    "Two shapes are accepted and each call is answered in the shape it was asked in. "
    "**Current**: an A2A 1.0 SendMessageRequest (ProtoJSON) plus the target. **Early**: the "
    "early A2A task shape of our design notes: `id` is the client's own task id, parts are "
    "tagged with `type` (`text`; `file` with `file: {bytes|uri, mimeType, name}`; `data` "
    "with `data`). A body is early when it has a top-level `id`, a message role spelled "
    "`user`, or a part with `type`. The target is `agentId`, `teamId` or `workflowId`, or "
    "`skill` (a skill id or words saying what is wanted: the relay sends to the best "
    "healthy match the agent selector finds, skipping unhealthy agents and open circuit "
    "breakers, and the task's `metadata.relaySelection` says which agent it chose and "
    "why); with none, the relay's default target. Errors are the HTTP+JSON binding's "
    "`google.rpc.Status` envelope in both shapes; a bad field is a 400 naming it, and "
    "nothing is stored."
)

EARLY_SEND = {
    "agentId": "writer",
    "id": "note-1",
    "sessionId": "weather-notes",
    "message": {
        "role": "user",
        "parts": [
            {"type": "text", "text": "draft a note about the weather"},
            {
                "type": "file",
                "file": {
                    "uri": "https://example.com/chart.png",
                    "mimeType": "image/png",
                    "name": "chart.png",
                },
            },
            {"type": "data", "data": {"city": "Lisbon"}},
        ],
    },
    "metadata": {"source": "design-notes"},
}
EARLY_TASK = {
    "id": "note-1",
    "sessionId": "weather-notes",
    "status": "completed",
    "statusMessage": {"role": "agent", "parts": [{"type": "text", "text": "Draft ready."}]},
    "timestamp": "2026-01-05T10:00:00.000Z",
    "artifacts": [{"type": "text", "text": "Draft: the weather ...", "index": 0, "name": "draft"}],
    "metadata": {},
}
CURRENT_SEND = {
    "agentId": "writer",
    "message": {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "draft a note about the weather"}],
    },
}
CURRENT_TASK = {
    "id": "0b7c6d1e-...",
    "contextId": "4f1a...",
    "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-05T10:00:00.000Z"},
    "artifacts": [
        {"artifactId": "a-1", "name": "draft", "parts": [{"text": "Draft: the weather ..."}]}
    ],
}

BODY = {"application/json": OpenApiTypes.OBJECT}


def _examples(early_request, early_answer, current_request, current_answer):
    examples = []
    if early_request is not None:
        examples += [
            OpenApiExample("Early shape", value=early_request, request_only=True),
            OpenApiExample("Current shape", value=current_request, request_only=True),
        ]
    examples += [
        OpenApiExample("Early shape", value=early_answer, response_only=True),
        OpenApiExample("Current shape", value=current_answer, response_only=True),
    ]
    return examples


send = extend_schema(
    operation_id="tasks_send",
    summary="Send a message to an agent or team and wait for the answer",
    description=SHAPES + " A second early send with the same `id` continues that task "
    "(ids are the caller's own: another API key's `id` never reaches it).",
    request=BODY,
    responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **task_errors(400, 401, 404, 413, 429)},
    examples=_examples(EARLY_SEND, EARLY_TASK, CURRENT_SEND, {"task": CURRENT_TASK}),
)

send_subscribe = extend_schema(
    operation_id="tasks_send_subscribe",
    summary="Send a message and stream the task's updates (server-sent events)",
    description=SHAPES + " Early: `event: task_status` frames (`{id, status, statusMessage?, "
    "timestamp?, final, metadata}`) and `event: task_artifact` frames (`{id, artifact: "
    "{index, name?, parts, append, lastChunk}, metadata}`); the frame with `final: true` "
    "is the last. Current: `data:` frames of A2A 1.0 StreamResponse.",
    request=BODY,
    responses={
        200: OpenApiResponse(OpenApiTypes.STR, description="text/event-stream"),
        **task_errors(400, 401, 404, 413, 429),
    },
    examples=[
        OpenApiExample("Early shape", value=EARLY_SEND, request_only=True),
        OpenApiExample("Current shape", value=CURRENT_SEND, request_only=True),
        OpenApiExample(
            "Early shape",
            response_only=True,
            value=(
                'event: task_status\ndata: {"id":"note-1","status":"submitted","final":false,'
                '"metadata":{}}\n\nevent: task_artifact\ndata: {"id":"note-1","artifact":'
                '{"index":0,"name":"draft","parts":[{"type":"text","text":"Draft: ..."}],'
                '"append":false,"lastChunk":true},"metadata":{}}\n\nevent: task_status\ndata: '
                '{"id":"note-1","status":"completed","final":true,"metadata":{}}\n\n'
            ),
        ),
        OpenApiExample(
            "Current shape",
            response_only=True,
            value=(
                'data: {"task":{"id":"0b7c...","status":{"state":"TASK_STATE_SUBMITTED"}}}\n\n'
                'data: {"statusUpdate":{"taskId":"0b7c...","status":{"state":'
                '"TASK_STATE_COMPLETED"}}}\n\n'
            ),
        ),
    ],
)

SHAPE_PARAMETER = OpenApiParameter(
    "shape",
    enum=["early", "current"],
    required=False,
    description="The shape of the answer; by default the shape the task was created in "
    "(early for a task sent with a client task id).",
)
TASK_ID = OpenApiParameter(
    "task_id",
    str,
    OpenApiParameter.PATH,
    description="The caller's own client task id (early shape) or the relay's task id.",
    examples=[OpenApiExample("note-1", value="note-1")],
)
TASK_ID_DESCRIPTION = (
    " `{taskId}` is the caller's own client task id (early shape) or the relay's task id."
)

get = extend_schema(
    operation_id="tasks_get",
    summary="A task of the caller",
    description=SHAPES + TASK_ID_DESCRIPTION + " With `historyLength`, the early answer "
    "carries `history` too.",
    parameters=[
        TASK_ID,
        SHAPE_PARAMETER,
        OpenApiParameter(
            "historyLength",
            int,
            required=False,
            description="The most recent messages of the history to include.",
        ),
    ],
    responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **task_errors(400, 401, 404, 429)},
    examples=_examples(None, EARLY_TASK, None, CURRENT_TASK),
)

cancel = extend_schema(
    operation_id="tasks_cancel",
    summary="Cancel a task of the caller",
    description=SHAPES + TASK_ID_DESCRIPTION + " A finished task is `TASK_NOT_CANCELABLE` (400).",
    parameters=[TASK_ID, SHAPE_PARAMETER],
    request=None,
    responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **task_errors(400, 401, 404, 429)},
    examples=_examples(
        None,
        {
            "id": "note-1",
            "sessionId": "weather-notes",
            "status": "canceled",
            "timestamp": "2026-01-05T10:00:00.000Z",
            "artifacts": [],
            "metadata": {},
        },
        None,
        {**CURRENT_TASK, "status": {"state": "TASK_STATE_CANCELED"}},
    ),
)

send_batch = extend_schema(
    operation_id="tasks_send_batch",
    summary="Several sends in one call",
    description=SHAPES + ' Early: `{"tasks": [early sends]}`, answered `{"tasks": [early '
    'tasks]}`; current: `{"requests": [sends]}`, answered `{"results": [answers]}`; 1 '
    "to 20 entries, every entry validated before any runs, each early `id` once per batch. "
    "`executionMode`: `parallel` (default; all at once) or `sequential` (each starts when "
    "the one before has answered). `aggregationStrategy`: `individual` (default; the "
    "answers in batch order, a failed entry as its error envelope, with its `id` when "
    "early) or `merge` (also `merged`: the least advanced status of all, an error counting "
    "as failed; the task ids; every artifact tagged with its task's id).",
    request=BODY,
    responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **task_errors(400, 401, 404, 413, 429)},
    examples=_examples(
        {
            "executionMode": "sequential",
            "aggregationStrategy": "merge",
            "tasks": [EARLY_SEND, {**EARLY_SEND, "id": "note-2"}],
        },
        {
            "tasks": [EARLY_TASK, {**EARLY_TASK, "id": "note-2"}],
            "merged": {
                "status": "completed",
                "taskIds": ["note-1", "note-2"],
                "artifacts": [
                    {
                        "type": "text",
                        "text": "Draft: ...",
                        "index": 0,
                        "name": "draft",
                        "taskId": "note-1",
                    },
                    {
                        "type": "text",
                        "text": "Draft: ...",
                        "index": 0,
                        "name": "draft",
                        "taskId": "note-2",
                    },
                ],
            },
        },
        {"executionMode": "parallel", "requests": [CURRENT_SEND, CURRENT_SEND]},
        {"results": [{"task": CURRENT_TASK}, {"task": CURRENT_TASK}]},
    ),
)

trace = extend_schema(
    operation_id="tasks_trace",
    summary="A task's routing trace",
    description="The hops of a team task: which member was asked, in what order, and what "
    "the router decided; a task of another key is 404." + TASK_ID_DESCRIPTION,
    parameters=[TASK_ID],
    responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **task_errors(401, 404, 429)},
    examples=[
        OpenApiExample(
            "A one-hop team task",
            response_only=True,
            value={
                "taskId": "0b7c6d1e-...",
                "contextId": "4f1a...",
                "target": {"kind": "team", "id": "crew"},
                "state": "TASK_STATE_COMPLETED",
                "hops": [
                    {
                        "order": 0,
                        "from": "user",
                        "to": "writer",
                        "reason": "",
                        "routingError": "",
                        "peersOffered": ["weather"],
                        "text": "draft a note about the weather",
                        "latencyMs": 812.4,
                        "outcome": "replied",
                        "next": "user",
                        "upstreamTaskId": "t-77",
                        "upstreamContextId": "c-12",
                        "at": "2026-01-05T10:00:00.812000+00:00",
                    }
                ],
            },
        )
    ],
)
