"""``GET /a2a/tasks/{taskId}/trace``: a task's routing trace, scoped to its caller like every
task read (another key gets 404 TaskNotFound in the HTTP+JSON error envelope)."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from routing import selectors, services
from tasks_app.api import calls
from tasks_app.api.task_api import TaskApiView, http_reply
from tasks_app.protocol.errors import TaskNotFound
from tasks_app.snapshots import V1_STATE


class TaskTraceView(TaskApiView):
    async def get(self, request, task_id: str):
        found = await sync_to_async(selectors.trace_for_caller)(
            caller=request.auth, task_id=task_id
        )
        if found is None:
            raise TaskNotFound(f"no task {task_id!r}", metadata={"taskId": str(task_id)})
        task, hops = found
        body = {
            "taskId": task.id,
            "contextId": task.context_id,
            "target": {"kind": task.target_kind, "id": task.target_id},
            "state": V1_STATE[task.state],
            "hops": [services.hop_as_json(hop) for hop in hops],
        }
        return http_reply(calls.Reply(200, body, "application/json"))
