"""The gateway: A2A operations on a target (a registered agent; teams and the relay itself
plug in as targets too), with every task persisted, every event fanned out, and every
exchange with an agent owned by one relay process that any other can take over.

One file a job, imports going down:

- ``targets``: what a message is sent to (``Target``, ``CallContext``, ``Step``), the
  registry of target kinds and the target cache;
- ``agent_targets`` and ``mcp_targets``: a registered A2A agent and a registered MCP server as
  targets, behind the policy of ``guarding``, ``retries`` and ``failover``; ``agent_cache``
  loads either per process as the target kind ``agent``;
- ``ownership``: relay processes, their leases, claiming the tasks of dead ones (database);
- ``driving``: the jobs that run a message or resume an exchange, recording every event;
- ``supervisor``: the heartbeat and the takeover scan of a process;
- ``operations``: the A2A operations views and consumers call;
- ``expiry``: ending tasks past their expiry.
"""

from tasks_app.gateway import supervisor  # noqa: F401  (plugs into driving)
from tasks_app.gateway.agent_cache import (
    agent_changed,
    agent_target,
    forget_agent_targets,
    target_for_agent,
)
from tasks_app.gateway.agent_targets import AgentTarget
from tasks_app.gateway.driving import (
    FINAL_STATES,
    FINAL_V1_STATES,
    Exchange,
    Outcome,
    _running,
    ending,
)
from tasks_app.gateway.driving import _as_recorded_end as recorded_end
from tasks_app.gateway.driving import _record as record
from tasks_app.gateway.expiry import expire_overdue
from tasks_app.gateway.guarding import CallGuard, register_call_guard
from tasks_app.gateway.mcp_targets import McpTarget
from tasks_app.gateway.opening import Opened, open_task
from tasks_app.gateway.operations import (
    KEEPALIVE_SECONDS,
    cancel_task,
    extended_card,
    following,
    get_task,
    list_tasks,
    push_config_create,
    push_config_delete,
    push_config_get,
    push_config_list,
    send_message,
    stream_message,
    subscribe,
    target_of,
)
from tasks_app.gateway.targets import (
    CallContext,
    Published,
    Step,
    Target,
    TargetCache,
    register_target_kind,
    resolve_target,
    target_cache_seconds,
    target_kind_registered,
)

__all__ = [
    "McpTarget",
    "target_for_agent",
    "FINAL_STATES",
    "FINAL_V1_STATES",
    "KEEPALIVE_SECONDS",
    "AgentTarget",
    "CallContext",
    "CallGuard",
    "Exchange",
    "Opened",
    "Outcome",
    "Published",
    "Step",
    "Target",
    "TargetCache",
    "_running",
    "ending",
    "record",
    "recorded_end",
    "agent_changed",
    "agent_target",
    "cancel_task",
    "expire_overdue",
    "extended_card",
    "following",
    "forget_agent_targets",
    "get_task",
    "list_tasks",
    "open_task",
    "push_config_create",
    "push_config_delete",
    "push_config_get",
    "push_config_list",
    "register_call_guard",
    "register_target_kind",
    "resolve_target",
    "send_message",
    "stream_message",
    "subscribe",
    "target_cache_seconds",
    "target_kind_registered",
    "target_of",
]
