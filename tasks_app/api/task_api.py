"""The task API from our design notes: one endpoint for every target, the target named in the
body (``agentId`` or ``teamId``; neither means the relay's default target). Two shapes are
accepted, and each call is answered in the shape it was asked in:

- current: A2A 1.0 ProtoJSON (a SendMessageRequest plus the target);
- early: the early A2A task shape (``tasks_app.protocol.early``): the client's own task ``id``
  (kept per API key in ``tasks_app.client_ids``), ``type``-tagged parts.

Errors are the HTTP+JSON binding's ``google.rpc.Status`` envelope in both.

- ``POST /a2a/tasks/send``: a send -> its answer (a task, or the agent's message).
- ``POST /a2a/tasks/sendSubscribe``: the same, answered as an SSE stream (Channels consumer).
- ``GET /a2a/tasks/{taskId}``, ``POST /a2a/tasks/{taskId}/cancel``: any of the caller's tasks,
  by client task id or relay id, in the shape it was created in unless ``shape`` says.
- ``POST /a2a/tasks/sendBatch``: several sends, ``executionMode`` parallel or sequential,
  ``aggregationStrategy`` individual or merge.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from adrf.views import APIView
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from rest_framework import exceptions

from registry.auth import ApiKeyAuthentication, HasApiKey
from relay_project.database import database_sync_to_async
from tasks_app import client_ids, gateway, idempotency
from tasks_app.api import admission, calls, parsing, replies
from tasks_app.api import task_api_docs as docs
from tasks_app.protocol import early
from tasks_app.protocol.errors import (
    A2AError,
    FieldViolation,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    RateLimited,
    Unauthenticated,
)
from tasks_app.protocol.limits import body_too_large, check_params
from tasks_app.protocol.versions import Operation

logger = logging.getLogger(__name__)
MAX_BATCH = 20
EXECUTION_MODES = ("parallel", "sequential")
AGGREGATION_STRATEGIES = ("individual", "merge")
EARLY, CURRENT = "early", "current"


def http_reply(reply: replies.Reply) -> HttpResponse:
    response = HttpResponse(reply.encoded(), status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers:
        response[name] = value
    return response


async def _target(caller, kind: str, target_id: str) -> gateway.Target:
    """The target, when the caller's key may call it (TargetNotFound otherwise; InvalidParams
    when the body named none and the relay has no default target), with the call counted
    against the agent's rate limit."""

    def resolve() -> gateway.Target:
        parsing.task_api_target_check(kind)
        return admission.callable_target(caller, kind, target_id)

    target = await database_sync_to_async(resolve)()
    admission.count_target(target)
    return target


async def _send(target: gateway.Target, call: parsing.Call, caller) -> Any:
    """Opens (or continues) the message's task, then runs the send: its canonical result."""
    opened, call = await database_sync_to_async(admission.open_message_task)(target, call, caller)
    return await calls.execute(target, call, caller, opened=opened)


def _shape(request) -> str | None:
    """The ``shape`` query parameter of get and cancel: early, current, or None (the shape
    the task was created in)."""
    shape = request.GET.get("shape") or None
    if shape not in (None, EARLY, CURRENT):
        raise InvalidParams(
            field_violations=[
                FieldViolation("shape", f"must be {EARLY} or {CURRENT}, not {shape[:40]!r}")
            ]
        )
    return shape


def _task_reply(
    task: dict[str, Any], *, shape: str | None, client_id: str | None, with_history: bool
) -> HttpResponse:
    """A task in the shape asked for; without a ``shape``, early when the task was created
    with a client task id."""
    if shape == EARLY or (shape is None and client_id is not None):
        body = early.early_task(task, client_task_id=client_id, with_history=with_history)
        return http_reply(replies.Reply(200, body, "application/json"))
    return http_reply(replies.Reply(200, task, parsing.A2A_JSON))


class TaskApiView(APIView):
    """API-key authentication, and errors in the HTTP+JSON binding's envelope, rendered by
    ``calls`` like every A2A answer."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasApiKey]
    parser_classes: list = []

    def handle_exception(self, exc):
        if isinstance(exc, exceptions.AuthenticationFailed):
            exc = parsing.InvalidApiKey(str(exc.detail))
        elif isinstance(exc, exceptions.NotAuthenticated):
            exc = Unauthenticated(str(exc.detail))
        elif isinstance(exc, RequestDataTooBig):
            exc = body_too_large(parsing.current_limits())
        elif isinstance(exc, exceptions.Throttled):
            exc = RateLimited(
                f"rate limit exceeded: retry in {exc.wait} s",
                retry_after=int(exc.wait) if exc.wait else None,
            )
        elif isinstance(exc, exceptions.MethodNotAllowed):
            exc = MethodNotFound(f"{self.request.method} is not an A2A call here")
        elif isinstance(exc, exceptions.APIException):
            return super().handle_exception(exc)
        elif isinstance(exc, calls.UNAVAILABLE):
            exc = calls.unavailable(exc, f"a task API call ({self.request.path})")
        elif not isinstance(exc, A2AError):
            logger.exception("task API call failed")
            exc = InternalError("the relay failed to handle this call")
        return http_reply(replies.failure_reply(parsing.REST, exc, None))

    def get_authenticate_header(self, request):
        return ApiKeyAuthentication().authenticate_header(request)


class SendView(TaskApiView):
    @docs.send
    async def post(self, request):
        return await answer_send(request, parsing.parse_task_api_body(request.body))


async def answer_send(request, payload: Any) -> HttpResponse:
    """Sends ``payload`` (a task API send body) as ``request``'s caller and answers it: what
    ``POST /a2a/tasks/send`` does with its body, and task templates with the body they
    render. An ``Idempotency-Key`` header makes a repeat answer with the stored task."""
    send = parsing.task_api_send(payload, Operation.SEND)
    key = parsing.send_key_of(Operation.SEND, request.headers)
    target = await _target(request.auth, send.kind, send.target_id)
    call = parsing.task_api_call(Operation.SEND, send, request.headers, key=key)
    result = await _send(target, call, request.auth)
    return http_reply(replies.result_reply(call, result))


class SendSubscribeView(TaskApiView):
    """Describes ``POST /a2a/tasks/sendSubscribe`` in the API docs. The relay's ASGI router
    hands that call to the A2A consumer (``calls.answer``) before Django sees it, so this
    view answers only what reaches Django: a call without a key, or another verb."""

    @docs.send_subscribe
    async def post(self, request):
        raise MethodNotFound("POST /a2a/tasks/sendSubscribe is answered by the A2A consumer")


class TaskDetailView(TaskApiView):
    @docs.get
    async def get(self, request, task_id: str):
        shape = _shape(request)
        history = request.GET.get("historyLength")
        try:
            history_length = int(history) if history not in (None, "") else None
        except ValueError as error:
            raise InvalidParams("historyLength must be a whole number") from error
        check_params({"historyLength": history_length}, parsing.current_limits())
        relay_id, client_id = await database_sync_to_async(client_ids.task_id_for)(
            caller=request.auth, task_id=task_id
        )
        ctx = gateway.CallContext(caller=request.auth)
        result = await gateway.get_task(None, ctx, relay_id, history_length=history_length)
        return _task_reply(
            result, shape=shape, client_id=client_id, with_history=history_length is not None
        )


class TaskCancelView(TaskApiView):
    @docs.cancel
    async def post(self, request, task_id: str):
        shape = _shape(request)
        relay_id, client_id = await database_sync_to_async(client_ids.task_id_for)(
            caller=request.auth, task_id=task_id
        )
        ctx = gateway.CallContext(caller=request.auth)
        result = await gateway.cancel_task(None, ctx, relay_id)
        return _task_reply(result, shape=shape, client_id=client_id, with_history=False)


class SendBatchView(TaskApiView):
    @docs.send_batch
    async def post(self, request):
        payload = parsing.parse_task_api_body(request.body)
        batch = parse_batch(payload)
        # Validate every entry before running any, so a bad batch runs nothing.
        sends = [
            parsing.task_api_send(
                item, Operation.SEND, early_only=batch.early, field_prefix=f"{batch.key}[{index}]"
            )
            for index, item in enumerate(batch.items)
        ]
        if batch.early:
            _refuse_repeated_ids(sends)
        key = parsing.send_key_of(Operation.SEND, request.headers)
        targets = [await _target(request.auth, send.kind, send.target_id) for send in sends]

        async def run(index: int, target, send: parsing.TaskApiSend) -> dict[str, Any]:
            # One Idempotency-Key covers the batch: each send is known by its place in it.
            call = parsing.task_api_call(
                Operation.SEND, send, request.headers, key=idempotency.batch_key(key, index)
            )
            try:
                return replies.result_reply(call, await _send(target, call, request.auth)).body
            except A2AError as error:
                body = replies.error_reply(parsing.REST, "1.0", error).body
                return {"id": send.client_task_id, **body} if batch.early else body

        pairs = list(enumerate(zip(targets, sends, strict=True)))
        if batch.mode == "parallel":
            results = await asyncio.gather(*(run(i, t, s) for i, (t, s) in pairs))
        else:
            results = [await run(i, t, s) for i, (t, s) in pairs]
        if batch.early:
            body: dict[str, Any] = {"tasks": results}
            if batch.strategy == "merge":
                body["merged"] = early.merge(results)
            return http_reply(replies.Reply(200, body, "application/json"))
        body = {"results": results}
        if batch.strategy == "merge":
            body["merged"] = merge_results(results)
        return http_reply(replies.Reply(200, body, parsing.A2A_JSON))


@dataclass(frozen=True)
class Batch:
    key: str
    """``tasks`` (early shape) or ``requests`` (current shape)."""
    items: list[Any]
    mode: str
    strategy: str

    @property
    def early(self) -> bool:
        return self.key == "tasks"


def parse_batch(payload: Any) -> Batch:
    """A batch body: ``{"tasks": [...]}`` (early sends) or ``{"requests": [...]}`` (1.0
    sends), with ``executionMode`` and ``aggregationStrategy``. Raises InvalidParams naming
    the field."""
    if not isinstance(payload, dict):
        raise InvalidRequest("the body must be a JSON object")
    keys = [key for key in ("tasks", "requests") if key in payload]
    if len(keys) != 1:
        raise InvalidParams(
            'the body must be {"tasks": [...]} (early task shape) or {"requests": [...]} '
            "(current shape), with one send per entry"
        )
    key = keys[0]
    violations = [
        FieldViolation(name, "is not a field of a batch")
        for name in payload
        if name not in (key, "executionMode", "aggregationStrategy")
    ]
    items = payload[key]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        violations.append(FieldViolation(key, f"must be an array of 1 to {MAX_BATCH} sends"))
    mode = payload.get("executionMode", "parallel")
    if mode not in EXECUTION_MODES:
        violations.append(FieldViolation("executionMode", "must be parallel or sequential"))
    strategy = payload.get("aggregationStrategy", "individual")
    if strategy not in AGGREGATION_STRATEGIES:
        violations.append(FieldViolation("aggregationStrategy", "must be individual or merge"))
    if violations:
        raise InvalidParams(field_violations=violations)
    return Batch(key, items, mode, strategy)


def _refuse_repeated_ids(sends: list[parsing.TaskApiSend]) -> None:
    first: dict[str, int] = {}
    for index, send in enumerate(sends):
        earlier = first.setdefault(send.client_task_id, index)
        if earlier != index:
            raise InvalidParams(
                field_violations=[
                    FieldViolation(
                        f"tasks[{index}].id",
                        f"repeats tasks[{earlier}].id: each task of a batch needs its own id",
                    )
                ]
            )


_STATE_RANK = [
    "TASK_STATE_FAILED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_AUTH_REQUIRED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_WORKING",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_COMPLETED",
]


def merge_results(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One answer from many: the least advanced state of all (an error counts as failed), every
    artifact (tagged with the task it came from), and every reply message, in batch order."""
    states, artifacts, messages, task_ids = [], [], [], []
    for result in results:
        if "error" in result:
            states.append("TASK_STATE_FAILED")
            continue
        if "message" in result:
            states.append("TASK_STATE_COMPLETED")
            messages.append(result["message"])
            continue
        task = result.get("task", {})
        task_ids.append(task.get("id"))
        status = task.get("status", {})
        states.append(status.get("state", "TASK_STATE_SUBMITTED"))
        for artifact in task.get("artifacts", []):
            artifacts.append(
                {**artifact, "metadata": {**artifact.get("metadata", {}), "taskId": task.get("id")}}
            )
        if status.get("message"):
            messages.append(status["message"])
    state = min(states, key=_STATE_RANK.index) if states else "TASK_STATE_COMPLETED"
    return {"state": state, "taskIds": task_ids, "artifacts": artifacts, "messages": messages}
