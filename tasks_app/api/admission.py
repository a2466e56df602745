"""Admitting an A2A call, in one hop to the database thread: its caller's key looked up and
counted against its rate limit, its target resolved within the key's scope, and the task a
message opens or continues. Raises ``Refused``, with nothing stored, for a call it refuses."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from rest_framework import exceptions

from registry import access
from registry.auth import (
    KeyLookup,
    api_key_counted,
    api_key_lookup,
    key_may_call,
)
from relay_project import ratelimit
from relay_project.database import database_sync_to_async
from tasks_app import client_ids, gateway, skill_targets
from tasks_app.api.parsing import (
    NO_KEY,
    OPENS_TASK,
    STREAMING,
    Call,
    InvalidApiKey,
    TargetNotFound,
    task_api_target_check,
)
from tasks_app.gateway import ownership
from tasks_app.protocol.errors import (
    A2AError,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
)
from tasks_app.protocol.versions import (
    Operation,
)
from tasks_app.usage import quotas

logger = logging.getLogger(__name__)


def context_for(call: Call, caller, *, base_url: str = "") -> gateway.CallContext:
    return gateway.CallContext(
        caller=caller,
        base_url=base_url,
        version=str(call.version),
        extensions=call.extensions,
        delegation=call.delegation,
        # The early shape's client task id already names the task a repeat continues.
        idempotency_key=call.idempotency_key if call.client_task_id is None else None,
        trace=call.trace,
    )


def echoed(call: Call, target: gateway.Target) -> tuple[str, ...]:
    """The requested extensions the target supports: those are the ones applied."""
    return tuple(uri for uri in call.extensions if uri in target.declared_extensions)


def admit_caller(lookup: KeyLookup):
    """The caller's usable API key, with this call counted against the key's rate limit, from
    the cache's answer (``api_key_lookup``). Raises Unauthenticated for no key or a bad one,
    or RateLimited over the limit."""
    try:
        caller, refusal = api_key_counted(lookup)
    except exceptions.AuthenticationFailed as error:
        raise InvalidApiKey(str(error.detail)) from error
    if caller is None:
        raise Unauthenticated(NO_KEY)
    if refusal is not None:
        raise RateLimited(refusal.message, retry_after=refusal.retry_after)
    return caller


def count_target(target: gateway.Target) -> None:
    """Counts a call to an agent against RELAY_RATE_LIMIT_PER_AGENT; raises RateLimited over
    it. Teams and the relay's own endpoint have no limit of their own."""
    if target.kind != "agent":
        return
    refusal = ratelimit.hit_agent(target.id)
    if refusal is not None:
        raise RateLimited(refusal.message, retry_after=refusal.retry_after)


@dataclass(frozen=True)
class Admitted:
    caller: Any
    target: gateway.Target
    opened: gateway.Opened | None
    call: Call
    """The call to run: the one admitted, with the task it continues named."""


def callable_target(caller, kind: str, target_id: str) -> gateway.Target:
    """The target, when it exists and the caller's key may call it. Raises TargetNotFound
    otherwise, with the same words either way: a key learns nothing of agents and teams
    outside its scope. (For the relay's own endpoint the scope applies to the agent or team
    it forwards to.) Then the access rules: raises PermissionDenied naming the rule that
    refuses (the refusal is in the audit log)."""
    if kind == skill_targets.SKILL:
        target = skill_targets.skill_target(caller, target_id)
        if target is None:
            raise TargetNotFound(
                f"no healthy agent at this relay has a skill like {target_id[:80]!r}"
            )
        skill = target.extra["selection"]["skillId"]
    else:
        target = gateway.resolve_target(kind, target_id)
        if target is None or not key_may_call(caller, target.kind, target.id):
            raise TargetNotFound(f"no {kind} {target_id!r} at this relay")
        skill = ""
    verdict = access.check_call(caller, target_kind=target.kind, target_id=target.id, skill=skill)
    if not verdict.allowed:
        raise PermissionDenied(verdict.reason)
    return target


class Refused(Exception):
    """Admission refused a call with ``error``; ``call`` is the call as parsed, None when it
    could not be parsed or its caller has no valid key (answered like an unparsed call).
    ``operation``: the call's operation when it was parsed (its trace names it)."""

    def __init__(self, error: Exception, call: Call | None, operation: Operation | None) -> None:
        super().__init__(error)
        self.error = error
        self.call = call
        self.operation = operation


Parsed = tuple[str, str, Call]
"""A call as parsed: its target's kind and id, and the call."""


async def admission(authorization: str | None, parse: Callable[[], Parsed]) -> Admitted:
    """A call, parsed (``parse``, on the event loop: pure) and admitted in a database thread:
    its caller's key looked up and counted against its rate limit, its target resolved, its
    task opened (``admit``). A caller without a valid key is refused whatever else is wrong
    with its call. Raises Refused."""
    try:
        parsed: Parsed | A2AError = parse()
    except A2AError as error:
        parsed = error
    return await _admit_parsed_in_thread(authorization, parsed)


def admit_parsed(authorization: str | None, parsed: Parsed | A2AError) -> Admitted:
    """A parsed call admitted (``admit``), or the error that refused it unparsed raised once
    its caller's key is found valid. Raises Refused."""
    call = None if isinstance(parsed, A2AError) else parsed[2]
    operation = None if call is None else call.operation
    try:
        lookup = api_key_lookup(authorization)
        if call is None:
            admit_caller(lookup)
            raise parsed
        return admit(lookup, *parsed)
    except Unauthenticated as error:
        raise Refused(error, None, operation) from None
    except Exception as error:
        raise Refused(error, call, operation) from None


_admit_parsed_in_thread = database_sync_to_async(admit_parsed)
"""``admit_parsed`` in the database thread: asgiref's wrapper made once, not per call (its
set-up inspects the function: about 50 calls, measured with cProfile per request)."""


def admit(lookup: KeyLookup, kind: str, target_id: str, call: Call) -> Admitted:
    """Who calls (the key's ``lookup``), on what, and for a message the task it opens: the
    work before a call goes upstream. Counts the call against the agent's rate limit (the
    key's was counted with its lookup), and takes a stream slot of the key for a streaming
    call (the caller gives it back); a message over a quota of the key or the target is
    refused (audited). Raises Unauthenticated, RateLimited, TargetNotFound
    (also for a target outside the key's scope), or the error that refuses the message, with
    no slot held and nothing stored. What it reads that the process's caches do not hold, it
    reads from the database; its effects beyond memory (the agent's count, the slot, a task
    stored at once) come after every read (``admission`` relies on it)."""
    return admit_for(admit_caller(lookup), kind, target_id, call)


def admit_for(caller, kind: str, target_id: str, call: Call) -> Admitted:
    """``admit`` for a caller already authenticated and counted (``admit_caller``): the
    relay's MCP server authenticates each HTTP request once, before its tool call."""
    if call.task_api:
        task_api_target_check(kind)
    target = callable_target(caller, kind, target_id)
    count_target(target)
    if call.operation in OPENS_TASK and target.kind in ("agent", "team", "workflow"):
        exceeded = quotas.call_refusal(caller=caller, target_kind=target.kind, target_id=target.id)
        if exceeded is not None:
            raise exceeded.error()
    streaming = call.operation in STREAMING
    if streaming:
        ownership.process_id()  # the slot is this process's: it must hold a lease
        refusal = ratelimit.stream_slot_take(caller)
        if refusal is not None:
            raise RateLimited(refusal.message)
    try:
        opened, call = open_message_task(target, call, caller)
    except BaseException:
        if streaming:
            ratelimit.stream_slot_give_back(caller)
        raise
    return Admitted(caller, target, opened, call)


def open_message_task(
    target: gateway.Target, call: Call, caller
) -> tuple[gateway.Opened | None, Call]:
    """The task a message call opens or continues (None for other calls), and the call to
    run: for a call in the early task shape, the task is found by the client's task id, and
    a message continuing a task names it (``message.taskId``) as a 1.0 client's would."""
    if call.operation not in OPENS_TASK:
        return None, call
    ctx, stream = context_for(call, caller), call.operation is Operation.STREAM
    if call.client_task_id is None:
        return gateway.open_task(target, ctx, call.params, stream=stream), call
    opened = client_ids.client_task_open(
        target=target, ctx=ctx, request=call.params, client_id=call.client_task_id, stream=stream
    )
    if not opened.fresh:
        message = dict(call.params["message"], taskId=opened.task.id)
        call = replace(call, params=dict(call.params, message=message))
    return opened, call


class HoldingSlot:
    """A stream's events that give the caller's stream slot back once, when the stream ends,
    fails or is closed (also when it is closed before its first event)."""

    def __init__(self, events: AsyncIterator[Any], caller) -> None:
        self._events = events
        self._caller = caller
        self._held = True

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self._events.__anext__()
        except BaseException:
            self.give_back()
            raise

    async def aclose(self) -> None:
        try:
            await self._events.aclose()
        finally:
            self.give_back()

    def give_back(self) -> None:
        if self._held:
            self._held = False
            ratelimit.stream_slot_give_back(self._caller)
