"""Who drives a task, and what happens when the driver is gone or the agent falls silent.

Every exchange with an agent is owned by one relay process with a lease; another process
claims the tasks of a process whose lease ran out and resumes them (SubscribeToTask where
the agent streams, GetTask polls otherwise). A task ended by another process (a cancel, an
expiry) stops the exchange of the process driving it. An agent stream that sends nothing
after its headers, or nothing for the idle limit, or ends without a final state, never
holds a task or a client's stream open for ever.
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from registry.models import Agent
from tasks_app import gateway, services, streams
from tasks_app.gateway import driving, ownership, supervisor
from tasks_app.lifecycle import TaskState
from tasks_app.models import RelayProcess, Task
from tests.agents import ASKS_FOR_INPUT, input_required_agent
from tests.factories import make_task
from tests.live import gated_agent, new_gate
from tests.servers import running
from tests.tasks_app.a2a_http import register

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

UPSTREAM_TASK = "upstream-task-1"
UPSTREAM_CONTEXT = "upstream-context-1"


def request(text: str = "go") -> dict:
    return {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}}


def context() -> gateway.CallContext:
    return gateway.CallContext(caller=None)


async def until(check, what: str, seconds: float = 10.0):
    """Polls ``check`` (sync, run in the database thread) until it is truthy."""
    async with asyncio.timeout(seconds):
        while not (found := await sync_to_async(check)()):
            await asyncio.sleep(0.05)
    assert found, what
    return found


def dead_process() -> str:
    """A relay process whose lease ran out a minute ago."""
    dead = RelayProcess.objects.create(
        id="elsewhere:4242:dead",
        host="elsewhere",
        pid=4242,
        lease_expires_at=timezone.now() - timedelta(minutes=1),
    )
    return dead.pk


# --- a raw A2A 1.0 JSON-RPC agent whose streams misbehave as a test asks ------------------


class Misbehaving:
    """A hand-written agent: ``mode`` says what its streams do (``silent``: headers and then
    nothing; ``no-final``: the task working and one artifact, then the end of the stream;
    ``breaks``: the task working, then the connection breaks).
    GetTask answers the task ``working`` until ``done`` is set, then ``completed``. It notes
    the methods called and whether a stream's client went away."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls: list[str] = []
        self.done = threading.Event()
        self.stream_closed = threading.Event()

    def task(self) -> dict:
        state = "TASK_STATE_COMPLETED" if self.done.is_set() else "TASK_STATE_WORKING"
        return {
            "id": UPSTREAM_TASK,
            "contextId": UPSTREAM_CONTEXT,
            "status": {"state": state},
            "artifacts": [{"artifactId": "a1", "parts": [{"text": "partial"}]}],
        }

    def app(self, base_url: str) -> Starlette:
        async def rpc(http_request: Request):
            body = await http_request.json()
            self.calls.append(body["method"])
            if body["method"] == "SendStreamingMessage":
                return StreamingResponse(self._stream(body["id"]), media_type="text/event-stream")
            if body["method"] == "GetTask":
                return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": self.task()})
            if body["method"] == "CancelTask":
                return JSONResponse(
                    {
                        "jsonrpc": "2.0",
                        "id": body["id"],
                        "result": dict(self.task(), status={"state": "TASK_STATE_CANCELED"}),
                    }
                )
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": body["id"],
                    "error": {"code": -32601, "message": "not here"},
                }
            )

        return Starlette(routes=[Route("/", rpc, methods=["POST"])])

    async def _stream(self, request_id):
        def frame(result: dict) -> str:
            return f"data: {json.dumps({'jsonrpc': '2.0', 'id': request_id, 'result': result})}\n\n"

        try:
            if self.mode == "breaks":
                yield frame(
                    {
                        "statusUpdate": {
                            "taskId": UPSTREAM_TASK,
                            "contextId": UPSTREAM_CONTEXT,
                            "status": {"state": "TASK_STATE_WORKING"},
                        }
                    }
                )
                raise ConnectionResetError("the agent's process died mid-way")
            if self.mode == "no-final":
                yield frame(
                    {
                        "statusUpdate": {
                            "taskId": UPSTREAM_TASK,
                            "contextId": UPSTREAM_CONTEXT,
                            "status": {"state": "TASK_STATE_WORKING"},
                        }
                    }
                )
                yield frame(
                    {
                        "artifactUpdate": {
                            "taskId": UPSTREAM_TASK,
                            "contextId": UPSTREAM_CONTEXT,
                            "artifact": {"artifactId": "a1", "parts": [{"text": "partial"}]},
                        }
                    }
                )
                return
            await asyncio.sleep(60)
            yield ""
        finally:
            self.stream_closed.set()


def register_misbehaving(url: str):
    agent = register(url)
    # The card names both bindings and versions; this agent speaks 1.0 JSON-RPC at its root.
    agent.interfaces = [{"url": url + "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    agent.save(update_fields=["interfaces"])
    return agent


def state_and_text(event: dict) -> tuple[str, str]:
    """The state an event leaves the task in, and its status message's text."""
    body = event.get("statusUpdate") or event["task"]
    message = body["status"].get("message") or {"parts": [{"text": ""}]}
    return body["status"]["state"], message["parts"][0]["text"]


async def misbehaving_target(url: str) -> gateway.Target:
    """The misbehaving agent at ``url``, registered, as the gateway's target."""
    agent = await sync_to_async(register_misbehaving)(url)
    return await sync_to_async(gateway.agent_target)(agent.pk)


async def collect(events, seconds: float) -> list:
    received = []
    async with asyncio.timeout(seconds):
        async for item in events:
            if item is not streams.KEEPALIVE:
                received.append(item)
    return received


# --- ownership in the database --------------------------------------------------------------


async def test_a_task_is_owned_by_this_process_while_it_works_and_by_nobody_once_it_ended(echo_url):
    agent = await sync_to_async(register)(echo_url)
    target = await sync_to_async(gateway.agent_target)(agent.pk)
    me = await sync_to_async(ownership.process_id)()
    opened = await sync_to_async(gateway.open_task)(target, context(), request("hello"))
    assert opened.task.owner == me
    assert await sync_to_async(
        RelayProcess.objects.filter(pk=me, lease_expires_at__gt=timezone.now()).exists
    )()
    answer = await gateway.send_message(target, context(), request("hello"), opened=opened)
    assert "message" in answer  # the echo agent answers with a message: the task completed
    task = await sync_to_async(Task.objects.get)(pk=opened.task.pk)
    assert (task.state, task.owner) == ("completed", "")


def test_orphans_are_the_open_tasks_of_dead_processes_and_are_claimed_once(echo):
    agent = Agent.objects.get(pk=echo)
    dead = dead_process()
    live = RelayProcess.objects.create(
        id="alive:1:x", host="alive", pid=1, lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    orphan = make_task(agent, state="working")
    Task.objects.filter(pk=orphan.pk).update(owner=dead)
    waiting = make_task(agent, state="input-required")  # waits on the client: no owner
    answered = make_task(agent, state="input-required")
    # The client's answer was on its way to the agent when the owner died: driven.
    Task.objects.filter(pk=answered.pk).update(owner=dead)
    ended = make_task(agent, state="completed")
    Task.objects.filter(pk=ended.pk).update(owner=dead)
    kept = make_task(agent, state="working")
    Task.objects.filter(pk=kept.pk).update(owner=live.pk)

    claimed = ownership.claim_orphans()

    assert sorted(task.pk for task in claimed) == sorted([orphan.pk, answered.pk])
    assert Task.objects.get(pk=orphan.pk).owner == ownership.process_id()
    assert Task.objects.get(pk=waiting.pk).owner == ""
    assert Task.objects.get(pk=kept.pk).owner == live.pk
    assert ownership.claim_orphans() == []  # nothing left: a second claimant gets nothing


def test_a_lease_that_ran_out_is_taken_anew_and_others_claims_are_reported(echo):
    me = ownership.process_id()
    assert ownership.renew() is True
    RelayProcess.objects.filter(pk=me).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    task = make_task(Agent.objects.get(pk=echo), state="working")
    Task.objects.filter(pk=task.pk).update(owner="someone:else:1")

    assert ownership.renew() is False  # run out: a new lease is taken
    assert RelayProcess.objects.get(pk=me).alive
    assert ownership.claimed_by_others([task.pk]) == [task.pk]


# --- takeover ---------------------------------------------------------------------------------


async def test_a_task_whose_process_died_is_resumed_over_subscribe_and_ends_as_the_agent_says():
    gate_name, gate = new_gate()
    with running(gated_agent) as url:
        agent = await sync_to_async(register)(url)
        target = await sync_to_async(gateway.agent_target)(agent.pk)
        events = await gateway.stream_message(target, context(), request(gate_name))
        first = await anext(events)
        task_id = first["task"]["id"]
        gate.put("one ")
        await until(lambda: Task.objects.get(pk=task_id).artifacts, "the first chunk recorded")
        # The process "dies": its job stops where it is, and its lease is gone.
        await events.aclose()
        driving.stop(task_id)
        await asyncio.sleep(0.1)
        dead = await sync_to_async(dead_process)()
        await sync_to_async(Task.objects.filter(pk=task_id).update)(owner=dead)

        assert await supervisor.take_over_orphans() == 1
        # Given time to subscribe: the a2a-sdk's own resubscription may give an event that
        # lands while it opens both in its opening snapshot and on the stream.
        await asyncio.sleep(0.5)
        gate.put("two ")
        gate.put(None)
        task = await until(
            lambda: Task.objects.filter(pk=task_id, state="completed").first(),
            "the resumed task completed",
        )

    texts = "".join(part["text"] for artifact in task.artifacts for part in artifact["parts"])
    assert texts == "one two "
    assert task.owner == ""


async def input_required_task(url: str) -> tuple[Task, str]:
    """A task through the relay, left input-required by an agent that asks for a name; and
    the agent's own id of it."""
    agent = await sync_to_async(register)(url, ASKS_FOR_INPUT)
    target = await sync_to_async(gateway.agent_target)(agent.pk)
    answer = await gateway.send_message(target, context(), request("hello"))
    task = await sync_to_async(Task.objects.get)(pk=answer["task"]["id"])
    assert task.state == "input-required" and task.owner == ""
    return task, task.upstream_task_id


def answer_in_flight(task: Task, owner: str) -> None:
    """What a process does with the client's answer before it calls the agent (the history,
    and the task owned by that process), the process then dying."""
    services.task_add_message(
        task=task,
        message={"messageId": "m-ada", "role": "ROLE_USER", "parts": [{"text": "Ada"}]},
        owner=owner,
    )


async def test_a_clients_answer_in_flight_when_its_process_died_is_followed_to_its_end():
    """The process that took the client's answer to an input-required task died after the
    agent got it: another process claims the task, still input-required in the relay's
    record, and follows the agent's task to the end the agent gave it."""
    with running(input_required_agent) as url:
        task, upstream_id = await input_required_task(url)
        # The answer reached the agent (sent here directly, as the dead process did).
        async with httpx.AsyncClient(base_url=url, timeout=10) as agent:
            sent = await agent.post(
                "/",
                headers={"A2A-Version": "1.0"},
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": "m-ada",
                            "role": "ROLE_USER",
                            "taskId": upstream_id,
                            "contextId": task.upstream_context_id,
                            "parts": [{"text": "Ada"}],
                        }
                    },
                },
            )
        assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        dead = await sync_to_async(dead_process)()
        await sync_to_async(answer_in_flight)(task, dead)

        assert await supervisor.take_over_orphans() == 1
        done = await until(
            lambda: Task.objects.filter(pk=task.pk, state="completed").first(),
            "the answered task completed",
        )
    assert done.owner == ""
    assert "Ada" in json.dumps(done.status_message)


async def test_a_clients_answer_that_never_reached_the_agent_leaves_the_task_waiting():
    """The process died before the agent got the answer: the agent's task still waits, so
    the relay's does too (the client may send its answer again), and nobody owns it."""
    with running(input_required_agent) as url:
        task, _ = await input_required_task(url)
        sequence = task.last_sequence
        dead = await sync_to_async(dead_process)()
        await sync_to_async(answer_in_flight)(task, dead)

        assert await supervisor.take_over_orphans() == 1
        released = await until(
            lambda: Task.objects.filter(pk=task.pk, owner="").first(), "the task released"
        )
    assert released.state == "input-required"
    assert released.last_sequence == sequence  # no event made up
    assert await sync_to_async(ownership.claim_orphans)() == []


async def test_a_taken_over_task_whose_agent_never_named_it_ends_failed_saying_why():
    agent_probe = Misbehaving("silent")
    with running(agent_probe.app) as url:
        agent = await sync_to_async(register_misbehaving)(url)
        dead = await sync_to_async(dead_process)()
        opened = await sync_to_async(gateway.open_task)(
            await sync_to_async(gateway.agent_target)(agent.pk), context(), request()
        )
        await sync_to_async(Task.objects.filter(pk=opened.task.pk).update)(owner=dead)

        assert await supervisor.take_over_orphans() == 1
        task = await until(
            lambda: Task.objects.filter(pk=opened.task.pk, state="failed").first(),
            "the orphan failed",
        )
    assert "before the agent" in task.error and "named its task" in task.error


# --- silent agents ----------------------------------------------------------------------------


async def test_a_stream_with_headers_and_then_nothing_ends_the_task_failed_within_the_limit(
    settings,
):
    settings.RELAY_STREAM_FIRST_EVENT_SECONDS = 0.5
    agent_probe = Misbehaving("silent")
    with running(agent_probe.app) as url:
        target = await misbehaving_target(url)
        started = asyncio.get_running_loop().time()
        events = await gateway.stream_message(target, context(), request())
        received = await collect(events, 5)
        took = asyncio.get_running_loop().time() - started

    assert took < 3
    state, reason = state_and_text(received[-1])
    assert state == "TASK_STATE_FAILED"
    assert "sent no event for 0.5 s" in reason
    assert agent_probe.stream_closed.wait(5), "the silent stream was not closed"


async def test_a_stream_that_ends_without_a_final_state_answers_with_the_task_and_follows_it(
    settings,
):
    settings.RELAY_FOLLOW_POLL_MAX_SECONDS = 0.2
    agent_probe = Misbehaving("no-final")
    with running(agent_probe.app) as url:
        target = await misbehaving_target(url)
        events = await gateway.stream_message(target, context(), request())
        received = await collect(events, 5)
        task_id = received[0]["task"]["id"]
        # The caller's stream ended with the task as the agent gave it: still working.
        assert "task" in received[-1]
        assert received[-1]["task"]["status"]["state"] == "TASK_STATE_WORKING"
        assert agent_probe.calls.count("GetTask") >= 1
        # The relay follows the task until the agent says it is done.
        agent_probe.done.set()
        task = await until(
            lambda: Task.objects.filter(pk=task_id, state="completed").first(),
            "the followed task completed",
        )
    assert task.owner == ""


async def test_a_stream_silent_past_the_idle_limit_is_followed_by_get_task(settings):
    settings.RELAY_STREAM_FIRST_EVENT_SECONDS = 5
    settings.RELAY_STREAM_IDLE_SECONDS = 0.5
    settings.RELAY_FOLLOW_POLL_MAX_SECONDS = 0.2
    agent_probe = Misbehaving("no-final")
    agent_probe.mode = "working-then-silent"

    async def working_then_silent(request_id):
        frame = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "statusUpdate": {
                    "taskId": UPSTREAM_TASK,
                    "contextId": UPSTREAM_CONTEXT,
                    "status": {"state": "TASK_STATE_WORKING"},
                }
            },
        }
        try:
            yield f"data: {json.dumps(frame)}\n\n"
            await asyncio.sleep(60)
        finally:
            agent_probe.stream_closed.set()

    agent_probe._stream = working_then_silent
    with running(agent_probe.app) as url:
        target = await misbehaving_target(url)
        events = await gateway.stream_message(target, context(), request())
        received = await collect(events, 5)
        assert received[-1]["task"]["status"]["state"] == "TASK_STATE_WORKING"
        assert agent_probe.stream_closed.wait(5), "the silent stream was not closed"
        agent_probe.done.set()
        await until(
            lambda: Task.objects.filter(pk=received[0]["task"]["id"], state="completed").exists(),
            "the followed task completed",
        )


# --- a cancel from anywhere ---------------------------------------------------------------------


async def test_a_task_canceled_by_another_process_stops_the_exchange_and_frees_the_agent(settings):
    settings.RELAY_STREAM_POLL_SECONDS = 0.1
    agent_probe = Misbehaving("silent")
    with running(agent_probe.app) as url:
        target = await misbehaving_target(url)
        opened = await sync_to_async(gateway.open_task)(target, context(), request(), stream=True)
        task_id = opened.task.pk
        events = await gateway.stream_message(target, context(), request(), opened=opened)
        reader = asyncio.create_task(collect(events, 10))
        await until(lambda: "SendStreamingMessage" in agent_probe.calls, "the agent called")
        assert driving.running(task_id)

        # Another process records the cancel: nothing in this process is told directly.
        def cancel_elsewhere():
            services.task_cancel(task=Task.objects.get(pk=task_id))

        await sync_to_async(cancel_elsewhere)()
        async with asyncio.timeout(3):
            while driving.running(task_id):
                await asyncio.sleep(0.02)
        rest = await asyncio.wait_for(reader, 3)

    assert state_and_text(rest[-1])[0] == "TASK_STATE_CANCELED"
    assert agent_probe.stream_closed.wait(5), "the agent's stream was left open"
    task = await sync_to_async(Task.objects.get)(pk=task_id)
    assert task.state == TaskState.CANCELED


# --- the circuit breaker ------------------------------------------------------------------------


async def test_streams_that_break_mid_way_count_as_failures_and_open_the_breaker(settings):
    settings.RELAY_BREAKER_FAILURES = 2
    settings.RELAY_BREAKER_COOLDOWN_SECONDS = 60
    agent_probe = Misbehaving("breaks")
    with running(agent_probe.app) as url:
        agent = await sync_to_async(register_misbehaving)(url)
        for _ in range(2):
            target = await sync_to_async(gateway.agent_target)(agent.pk)
            events = await gateway.stream_message(target, context(), request())
            received = await collect(events, 5)
            assert state_and_text(received[-1])[0] == "TASK_STATE_FAILED"
        stored = await sync_to_async(Agent.objects.get)(pk=agent.pk)
    # Each stream answered once before it broke: an answer that never came whole is no
    # success, so the failures add up.
    assert (stored.breaker_state, stored.breaker_failures) == ("open", 2)


# --- a subscription to a task that waits on its client ---------------------------------------


async def test_a_subscription_to_an_input_required_task_stays_open_for_the_next_turn(api_key):
    """Regression: SubscribeToTask on an input-required task sent the snapshot and closed,
    where the agent keeps the stream for the next turn's events."""
    from tests.agents import ASKS_FOR_INPUT, input_required_agent
    from tests.tasks_app.a2a_http import register as register_spec

    ctx = gateway.CallContext(caller=api_key[0])
    with running(input_required_agent) as url:
        agent = await sync_to_async(register_spec)(url, ASKS_FOR_INPUT)
        target = await sync_to_async(gateway.agent_target)(agent.pk)
        asked = await gateway.send_message(target, ctx, request("hi"))
        task_id = asked["task"]["id"]
        assert asked["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        events = await gateway.subscribe(target, ctx, task_id)
        first = await anext(events)
        assert first["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        follower = asyncio.create_task(collect(events, 10))
        await asyncio.sleep(0.3)
        assert not follower.done(), "the subscription closed on an interrupted task"

        answer = {
            "message": {
                "messageId": "m-ada",
                "role": "ROLE_USER",
                "taskId": task_id,
                "parts": [{"text": "Ada"}],
            }
        }
        done = await gateway.send_message(target, ctx, answer)
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        rest = await asyncio.wait_for(follower, 10)

    assert state_and_text(rest[-1]) == ("TASK_STATE_COMPLETED", "Hello, Ada!")
