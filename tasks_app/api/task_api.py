"""The task API from our design notes: one endpoint for every target, the target named in the
body (``agentId`` or ``teamId``). JSON is A2A 1.0 ProtoJSON; errors are the HTTP+JSON binding's
``google.rpc.Status`` envelope.

- ``POST /a2a/tasks/send``: a SendMessageRequest plus the target -> SendMessageResponse.
- ``POST /a2a/tasks/sendSubscribe``: the same, answered as an SSE stream (Channels consumer).
- ``GET /a2a/tasks/{taskId}``, ``POST /a2a/tasks/{taskId}/cancel``: any of the caller's tasks.
- ``POST /a2a/tasks/sendBatch``: several sends, ``executionMode`` parallel or sequential,
  ``aggregationStrategy`` individual or merge.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from adrf.views import APIView
from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from rest_framework import exceptions

from registry.auth import ApiKeyAuthentication, HasApiKey
from relay_project.redis_clients import UNREACHABLE
from tasks_app import gateway
from tasks_app.api import calls
from tasks_app.protocol.errors import (
    A2AError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    RateLimited,
    Unauthenticated,
)
from tasks_app.protocol.limits import body_too_large, check_params
from tasks_app.protocol.versions import Operation

logger = logging.getLogger(__name__)
MAX_BATCH = 20


def http_reply(reply: calls.Reply) -> HttpResponse:
    response = HttpResponse(reply.encoded(), status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers:
        response[name] = value
    return response


async def _target(caller, kind: str, target_id: str) -> gateway.Target:
    """The target, when the caller's key may call it (TargetNotFound otherwise), with the call
    counted against the agent's rate limit."""
    target = await sync_to_async(calls.callable_target)(caller, kind, target_id)
    calls.count_target(target)
    return target


class TaskApiView(APIView):
    """API-key authentication, and errors in the HTTP+JSON binding's envelope, rendered by
    ``calls`` like every A2A answer."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasApiKey]
    parser_classes: list = []

    def handle_exception(self, exc):
        if isinstance(exc, exceptions.AuthenticationFailed):
            exc = calls.InvalidApiKey(str(exc.detail))
        elif isinstance(exc, exceptions.NotAuthenticated):
            exc = Unauthenticated(str(exc.detail))
        elif isinstance(exc, RequestDataTooBig):
            exc = body_too_large(calls.current_limits())
        elif isinstance(exc, exceptions.Throttled):
            exc = RateLimited(f"rate limit exceeded: retry in {exc.wait} s",
                              retry_after=int(exc.wait) if exc.wait else None)
        elif isinstance(exc, exceptions.MethodNotAllowed):
            exc = MethodNotFound(f"{self.request.method} is not an A2A call here")
        elif isinstance(exc, exceptions.APIException):
            return super().handle_exception(exc)
        elif isinstance(exc, UNREACHABLE):
            exc = calls.redis_unreachable(exc, f"a task API call ({self.request.path})")
        elif not isinstance(exc, A2AError):
            logger.exception("task API call failed")
            exc = InternalError("the relay failed to handle this call")
        return http_reply(calls.failure_reply(calls.REST, exc, None))

    def get_authenticate_header(self, request):
        return ApiKeyAuthentication().authenticate_header(request)


class SendView(TaskApiView):
    async def post(self, request):
        kind, target_id, params = calls.task_api_target(calls.parse_task_api_body(request.body),
                                                        Operation.SEND)
        call = calls.task_api_call(Operation.SEND, params, request.headers)
        result = await calls.execute(await _target(request.auth, kind, target_id), call,
                                     request.auth)
        return http_reply(calls.result_reply(call, result))


class TaskDetailView(TaskApiView):
    async def get(self, request, task_id: str):
        history = request.GET.get("historyLength")
        try:
            history_length = int(history) if history not in (None, "") else None
        except ValueError as error:
            raise InvalidParams("historyLength must be a whole number") from error
        check_params({"historyLength": history_length}, calls.current_limits())
        ctx = gateway.CallContext(caller=request.auth)
        result = await gateway.get_task(None, ctx, task_id, history_length=history_length)
        return http_reply(calls.Reply(200, result, calls.A2A_JSON))


class TaskCancelView(TaskApiView):
    async def post(self, request, task_id: str):
        ctx = gateway.CallContext(caller=request.auth)
        result = await gateway.cancel_task(None, ctx, task_id)
        return http_reply(calls.Reply(200, result, calls.A2A_JSON))


class SendBatchView(TaskApiView):
    async def post(self, request):
        payload = calls.parse_task_api_body(request.body)
        if not isinstance(payload, dict) or not isinstance(payload.get("requests"), list):
            raise InvalidParams("the body must be {\"requests\": [...]} with one send per entry")
        items = payload["requests"]
        if not 1 <= len(items) <= MAX_BATCH:
            raise InvalidParams(f"a batch holds 1 to {MAX_BATCH} sends")
        mode = payload.get("executionMode", "parallel")
        strategy = payload.get("aggregationStrategy", "individual")
        if mode not in ("parallel", "sequential"):
            raise InvalidParams("executionMode must be parallel or sequential")
        if strategy not in ("individual", "merge"):
            raise InvalidParams("aggregationStrategy must be individual or merge")
        # Validate every entry before running any, so a bad batch runs nothing.
        planned = [calls.task_api_target(item, Operation.SEND) for item in items]
        targets = [await _target(request.auth, kind, target_id)
                   for kind, target_id, _ in planned]

        async def run(target, params) -> dict[str, Any]:
            try:
                call = calls.task_api_call(Operation.SEND, params, request.headers)
                return await calls.execute(target, call, request.auth)
            except A2AError as error:
                return calls.error_reply(calls.REST, "1.0", error).body

        pairs = list(zip(targets, (params for _, _, params in planned), strict=True))
        if mode == "parallel":
            results = await asyncio.gather(*(run(t, p) for t, p in pairs))
        else:
            results = [await run(t, p) for t, p in pairs]
        body: dict[str, Any] = {"results": results}
        if strategy == "merge":
            body["merged"] = merge_results(results)
        return http_reply(calls.Reply(200, body, calls.A2A_JSON))


_STATE_RANK = ["TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED",
               "TASK_STATE_AUTH_REQUIRED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING",
               "TASK_STATE_SUBMITTED", "TASK_STATE_COMPLETED"]


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
            artifacts.append({**artifact, "metadata": {**artifact.get("metadata", {}),
                                                       "taskId": task.get("id")}})
        if status.get("message"):
            messages.append(status["message"])
    state = min(states, key=_STATE_RANK.index) if states else "TASK_STATE_COMPLETED"
    return {"state": state, "taskIds": task_ids, "artifacts": artifacts, "messages": messages}
