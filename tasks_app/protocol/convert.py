"""0.3 <-> 1.0 conversion of A2A wire dicts, per operation.

The canonical form inside the gateway is the 1.0 ProtoJSON dict (camelCase, enums by name,
defaults omitted), as ``MessageToDict`` of the ``a2a.types`` protos would give, except that
JSON-valued fields (``metadata``, data parts, extension ``params``) are exactly what the
peer sent: ints stay ints and key order is kept. There are three wire dialects
(:class:`~tasks_app.protocol.versions.Dialect`): 1.0 ProtoJSON, 0.3 JSON-RPC (the JSON
schema, with ``kind``) and 0.3 REST (the 0.3 *proto* JSON: ``content``, ``ROLE_USER``,
``TASK_STATE_CANCELLED``, ``fileWithUri``...).

Validation (:mod:`tasks_app.protocol.validation`) and conversion are separate steps, so a
gateway whose client and upstream speak the same version can pass dicts through untouched.
``request_*`` / ``result_*`` / ``stream_response_*`` convert per operation, in both
directions, for every dialect (``*_v1`` with ``Dialect.V1`` is the identity). A malformed
request raises :class:`InvalidParams`; a malformed result or event raises
:class:`InvalidAgentResponse`. Outputs share JSON-valued subtrees with their inputs: treat
both as read-only. The objects themselves are mapped in :mod:`tasks_app.protocol.objects`,
cards in :mod:`tasks_app.protocol.card_conversion`.

Deliberate behaviour where 0.3 and 1.0 do not map one to one:

- 0.3 ``blocking`` vs 1.0 ``returnImmediately`` (default: blocking): 1.0 -> 0.3 always
  states ``blocking`` explicitly, since 0.3 left its default open (and in 0.3 proto JSON an
  absent ``blocking`` is ``false``, i.e. non-blocking).
- ``historyLength: 0`` means "no history" in 1.0 but "unlimited" in 0.3, so 0.3's 0 becomes
  absent in 1.0, and 1.0's 0 cannot be said in 0.3 (the gateway trims history itself).
- 0.3 ``status-update.final`` is dropped in 1.0 and recomputed: true when the state is
  terminal or interrupted (the stream closes there).
- 0.3 ``authentication.schemes`` is a list, 1.0 ``scheme`` is one: the first is kept.
- 0.3 ``metadata`` on tasks/get, tasks/resubscribe and push-config requests has no 1.0
  field and is dropped; 1.0 ``tenant`` has no 0.3 field and is dropped.
- A 0.3 ``unknown`` state reads as ``TASK_STATE_UNSPECIFIED`` and back.
- 0.3 proto JSON has no ``referenceTaskIds``; we still emit it on REST 0.3 messages (proto
  parsers ignore unknown fields) so ids survive a round trip through a REST 0.3 peer.
- A 0.3 REST ``fileWithBytes`` holds the file base64-encoded twice, as a2a-sdk 0.3.x (the
  0.3 REST implementation in use) and a2a-sdk 1.x's compat layer write and read it: they put
  the base64 text into the proto ``bytes`` field. The relay does the same both ways, so
  0.3 REST clients and agents get the bytes they would get SDK to SDK; a value encoded only
  once, as the proto alone suggests, is still read (see ``objects._rest_bytes_to_raw``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tasks_app.protocol.card_conversion import agent_card_to_v03, agent_card_to_v1
from tasks_app.protocol.errors import InvalidAgentResponse, InvalidParams, UnsupportedOperation
from tasks_app.protocol.objects import (
    Malformed,
    converting,
    copy_fields,
    normalize_v03_rest,
    payload_from_v1,
    payload_to_v1,
    push_to_v1,
    resource_ids,
    send_request_from_v1,
    send_request_to_v1,
    state_from_v1,
    state_to_v1,
    task_from_v1,
    task_push_config_from_v1,
    task_push_config_to_v1,
    task_to_v1,
)
from tasks_app.protocol.protojson import JsonDict
from tasks_app.protocol.versions import Dialect, Operation


def request_to_v1(operation: Operation, params: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """Convert the params of ``operation`` from ``dialect`` to 1.0 (not validated).

    0.3 JSON-RPC params are the method's params object. 0.3 REST params are the 0.3 proto
    request message in proto JSON (``{"name": "tasks/abc", "historyLength": 5}``...), which
    :mod:`tasks_app.protocol.rest` assembles from path, query and body. Raises
    :class:`InvalidParams` when they cannot be converted.
    """
    if dialect is Dialect.V1:
        return dict(params)
    with converting(InvalidParams, f"{operation.value} params"):
        if dialect is Dialect.V03_REST:
            return _rest_request_to_v1(operation, params)
        return _jsonrpc_request_to_v1(operation, params)


def _jsonrpc_request_to_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation in (Operation.SEND, Operation.STREAM):
        return send_request_to_v1(params, rest=False)
    if operation is Operation.GET_TASK:
        out: JsonDict = {"id": params["id"]}
        if params.get("historyLength"):
            out["historyLength"] = params["historyLength"]
        return out
    if operation is Operation.CANCEL:
        out = {"id": params["id"]}
        copy_fields(params, out, "metadata")
        return out
    if operation is Operation.SUBSCRIBE:
        return {"id": params["id"]}
    if operation is Operation.PUSH_CREATE:
        return task_push_config_to_v1(params, Dialect.V03_JSONRPC)
    if operation is Operation.PUSH_GET:
        # Without a config id, 0.3 meant the task's one config, stored under the task id.
        return {
            "taskId": params["id"],
            "id": params.get("pushNotificationConfigId") or params["id"],
        }
    if operation is Operation.PUSH_LIST:
        return {"taskId": params["id"]}
    if operation is Operation.PUSH_DELETE:
        return {"taskId": params["id"], "id": params["pushNotificationConfigId"]}
    if operation is Operation.EXTENDED_CARD:
        return {}
    raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")


_REST_REQUEST_TYPES_V03: Mapping[Operation, str] = {
    Operation.SEND: "SendMessageRequest",
    Operation.STREAM: "SendMessageRequest",
    Operation.GET_TASK: "GetTaskRequest",
    Operation.CANCEL: "CancelTaskRequest",
    Operation.SUBSCRIBE: "TaskSubscriptionRequest",
    Operation.PUSH_GET: "GetTaskPushNotificationConfigRequest",
    Operation.PUSH_LIST: "ListTaskPushNotificationConfigRequest",
    Operation.PUSH_DELETE: "DeleteTaskPushNotificationConfigRequest",
    Operation.EXTENDED_CARD: "GetAgentCardRequest",
}


def _rest_request_to_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation is Operation.PUSH_CREATE:
        return _rest_push_create_to_v1(params)
    if operation is Operation.LIST_TASKS:
        # 0.3 proto has no ListTasks; the /v1/tasks query uses the 1.0 fields.
        out = dict(params)
        if out.get("status"):
            out["status"] = state_to_v1(out["status"])
        return out
    message = normalize_v03_rest(params, _REST_REQUEST_TYPES_V03[operation])
    if operation in (Operation.SEND, Operation.STREAM):
        return send_request_to_v1(message, rest=True)
    if operation is Operation.EXTENDED_CARD:
        return {}
    task_id, config_id = resource_ids(message.get("name") or message.get("parent"))
    if operation in (Operation.GET_TASK, Operation.CANCEL, Operation.SUBSCRIBE):
        out = {"id": task_id}
        if operation is Operation.GET_TASK and message.get("historyLength"):
            out["historyLength"] = message["historyLength"]
        return out
    if operation is Operation.PUSH_LIST:
        out = {"taskId": task_id}
        copy_fields(message, out, "pageSize", "pageToken")
        return out
    if config_id is None:
        raise Malformed("the resource name has no push config id")
    return {"taskId": task_id, "id": config_id}


def _rest_push_create_to_v1(params: Mapping[str, Any]) -> JsonDict:
    """Accept the CreateTaskPushNotificationConfigRequest the SDK sends, its ``config``
    alone (what the proto's ``body: "config"`` says), or a bare PushNotificationConfig."""
    holder = params.get("config", params)
    if not isinstance(holder, Mapping):
        raise Malformed("config must be an object")
    inner = holder.get("pushNotificationConfig", holder.get("push_notification_config"))
    inner = normalize_v03_rest(holder if inner is None else inner, "PushNotificationConfig")
    out = push_to_v1(inner)
    parent = params.get("parent") or holder.get("name")
    if parent:
        out["taskId"] = resource_ids(parent)[0]
    config_id = params.get("configId", params.get("config_id"))
    if config_id and "id" not in out:
        out["id"] = config_id
    return out


def request_from_v1(operation: Operation, params: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """Convert canonical 1.0 params of ``operation`` to ``dialect`` (for calling a peer).

    For 0.3 REST the result is the 0.3 proto request message (``name``, ``parent``...);
    :mod:`tasks_app.protocol.rest` spreads it over path, query and body. Raises
    :class:`UnsupportedOperation` for ListTasks over 0.3 JSON-RPC.
    """
    if dialect is Dialect.V1:
        return dict(params)
    with converting(InvalidParams, f"{operation.value} params"):
        rest = dialect is Dialect.V03_REST
        if operation in (Operation.SEND, Operation.STREAM):
            return send_request_from_v1(params, rest)
        if operation is Operation.PUSH_CREATE:
            if not rest:
                return task_push_config_from_v1(params, dialect)
            config = task_push_config_from_v1(params, dialect)
            return {
                "parent": f"tasks/{params['taskId']}",
                "configId": params.get("id", ""),
                "config": config,
            }
        if operation is Operation.EXTENDED_CARD:
            return {}
        if rest:
            return _rest_request_from_v1(operation, params)
        return _jsonrpc_request_from_v1(operation, params)


def _jsonrpc_request_from_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation is Operation.GET_TASK:
        out: JsonDict = {"id": params["id"]}
        if params.get("historyLength"):
            out["historyLength"] = params["historyLength"]
        return out
    if operation is Operation.CANCEL:
        out = {"id": params["id"]}
        copy_fields(params, out, "metadata")
        return out
    if operation is Operation.SUBSCRIBE:
        return {"id": params["id"]}
    if operation in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        return {"id": params["taskId"], "pushNotificationConfigId": params["id"]}
    if operation is Operation.PUSH_LIST:
        return {"id": params["taskId"]}
    raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")


def _rest_request_from_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation is Operation.LIST_TASKS:
        out = {k: v for k, v in params.items() if k != "tenant"}
        if out.get("status"):
            out["status"] = state_from_v1(out["status"], rest=True)
        return out
    if operation in (Operation.GET_TASK, Operation.CANCEL, Operation.SUBSCRIBE):
        out = {"name": f"tasks/{params['id']}"}
        if operation is Operation.GET_TASK and params.get("historyLength"):
            out["historyLength"] = params["historyLength"]
        return out
    if operation is Operation.PUSH_LIST:
        out = {"parent": f"tasks/{params['taskId']}"}
        copy_fields(params, out, "pageSize", "pageToken")
        return out
    return {"name": f"tasks/{params['taskId']}/pushNotificationConfigs/{params['id']}"}


def result_to_v1(operation: Operation, result: Any, dialect: Dialect) -> Any:
    """Convert a peer's result of ``operation`` from ``dialect`` to canonical 1.0.

    Streaming operations take one stream event (as :func:`stream_response_to_v1`). Raises
    :class:`InvalidAgentResponse` when the result cannot be converted.
    """
    if dialect is Dialect.V1:
        return result
    if operation.streaming:
        return stream_response_to_v1(result, dialect)
    with converting(InvalidAgentResponse, f"{operation.value} result"):
        rest = dialect is Dialect.V03_REST
        if operation is Operation.SEND:
            response = payload_to_v1(result, dialect, "SendMessageResponse")
            if "task" not in response and "message" not in response:
                raise Malformed("a send result must be a task or a message")
            return response
        if operation in (Operation.GET_TASK, Operation.CANCEL):
            task = normalize_v03_rest(result, "Task") if rest else result
            return task_to_v1(task, rest)
        if operation is Operation.LIST_TASKS:
            tasks = [
                task_to_v1(normalize_v03_rest(t, "Task") if rest else t, rest)
                for t in result.get("tasks") or []
            ]
            return {**result, "tasks": tasks}
        if operation in (Operation.PUSH_CREATE, Operation.PUSH_GET):
            return task_push_config_to_v1(result, dialect)
        if operation is Operation.PUSH_LIST:
            configs = (result.get("configs") or []) if rest else result
            out: JsonDict = {"configs": [task_push_config_to_v1(c, dialect) for c in configs]}
            if rest:
                copy_fields(result, out, "nextPageToken")
            return out
        if operation is Operation.PUSH_DELETE:
            return None
        return agent_card_to_v1(result)


def result_from_v1(operation: Operation, result: Any, dialect: Dialect) -> Any:
    """Convert a canonical 1.0 result of ``operation`` to ``dialect`` (for a client).

    The shapes are those of the binding's body: a 0.3 JSON-RPC SendMessage result is the
    bare Task or Message with ``kind``, a 0.3 JSON-RPC push-config list is a bare array,
    DeleteTaskPushNotificationConfig is ``None``. Streaming operations take one event.
    """
    if dialect is Dialect.V1:
        return result
    if operation.streaming:
        return stream_response_from_v1(result, dialect)
    with converting(InvalidAgentResponse, f"{operation.value} result"):
        rest = dialect is Dialect.V03_REST
        if operation is Operation.SEND:
            return payload_from_v1(result, dialect)
        if operation in (Operation.GET_TASK, Operation.CANCEL):
            return task_from_v1(result, rest)
        if operation is Operation.LIST_TASKS:
            return {**result, "tasks": [task_from_v1(t, rest) for t in result.get("tasks", [])]}
        if operation in (Operation.PUSH_CREATE, Operation.PUSH_GET):
            return task_push_config_from_v1(result, dialect)
        if operation is Operation.PUSH_LIST:
            configs = [task_push_config_from_v1(c, dialect) for c in result.get("configs", [])]
            if not rest:
                return configs
            out: JsonDict = {"configs": configs}
            copy_fields(result, out, "nextPageToken")
            return out
        if operation is Operation.PUSH_DELETE:
            return None
        return agent_card_to_v03(result)


def stream_response_to_v1(event: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """One stream event (or push payload) from ``dialect`` to a 1.0 StreamResponse.

    0.3 JSON-RPC events are the bare objects with ``kind``; 0.3 REST events are the 0.3
    proto StreamResponse. Raises :class:`InvalidAgentResponse` when malformed.
    """
    if dialect is Dialect.V1:
        return dict(event)
    with converting(InvalidAgentResponse, "stream event"):
        return payload_to_v1(event, dialect, "StreamResponse")


def stream_response_from_v1(event: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """A 1.0 StreamResponse to ``dialect``; in 0.3 JSON-RPC, the bare object with ``kind``
    (which is also the 0.3 push-notification payload for a task)."""
    if dialect is Dialect.V1:
        return dict(event)
    with converting(InvalidAgentResponse, "stream event"):
        return payload_from_v1(event, dialect)
