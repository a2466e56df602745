"""Admission over gRPC is the other bindings' admission: a key's scope, revoked keys, the
per-key rate limit, stream slots, request limits and the extensions echoed. A real
``grpc.aio`` server with the relay's service on a free 127.0.0.1 port, in this process (so the
settings can change per test), in front of real a2a-sdk agents on 127.0.0.1; calls through
a2a-sdk's generated stub."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import grpc
import pytest
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    a2a_pb2_grpc,
)
from a2a.utils.grpc_status import status_from_call
from asgiref.sync import sync_to_async
from google.rpc import error_details_pb2

from registry.services import api_key_create, api_key_revoke
from tasks_app.grpc.server import build_server
from tasks_app.models import Task
from tests.agents import NEVER_FINISHES, never_finishing_agent
from tests.servers import running
from tests.tasks_app.a2a_http import register

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

CALL_SECONDS = 20


@asynccontextmanager
async def relay_grpc():
    """The relay's gRPC service on a free port, built with the settings as they are now."""
    server, port = build_server("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield a2a_pb2_grpc.A2AServiceStub(channel)
    finally:
        await server.stop(0)


def auth(key: str, *more: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"), *more)


def message(text: str = "hello", *, parts: int = 1) -> Message:
    return Message(message_id=f"m-{text}", role=Role.ROLE_USER, parts=[Part(text=text)] * parts)


async def refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call, CALL_SECONDS)
    return caught.value


def reason_of(error: grpc.aio.AioRpcError) -> str:
    info = error_details_pb2.ErrorInfo()
    assert status_from_call(error).details[0].Unpack(info)
    return info.reason


new_key = sync_to_async(lambda **scope: api_key_create(name="caller", **scope)[1])


async def test_a_target_outside_the_keys_scope_looks_like_an_unknown_one(echo, echo_url):
    other = await sync_to_async(register)(echo_url)
    key = await new_key(agents=[other.pk])
    async with relay_grpc() as stub:
        outside = await refused(
            stub.ListTasks(ListTasksRequest(tenant=f"agents/{echo.pk}"), metadata=auth(key))
        )
        unknown = await refused(
            stub.ListTasks(ListTasksRequest(tenant="agents/nobody"), metadata=auth(key))
        )
        inside = await stub.ListTasks(
            ListTasksRequest(tenant=f"agents/{other.pk}"), metadata=auth(key)
        )
    assert outside.code() == unknown.code() == grpc.StatusCode.NOT_FOUND
    assert outside.details().replace(echo.pk, "X") == unknown.details().replace("nobody", "X")
    assert list(inside.tasks) == []


async def test_a_revoked_key_is_unauthenticated(echo):
    row, key = await sync_to_async(api_key_create)(name="revoked")
    await sync_to_async(api_key_revoke)(api_key=row)
    async with relay_grpc() as stub:
        error = await refused(
            stub.GetTask(GetTaskRequest(tenant=f"agents/{echo.pk}", id="x"), metadata=auth(key))
        )
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert reason_of(error) == "UNAUTHENTICATED"


async def test_the_per_key_rate_limit_counts_grpc_calls(echo, settings):
    settings.RELAY_RATE_LIMIT_PER_KEY = 2
    key = await new_key()
    request = ListTasksRequest(tenant=f"agents/{echo.pk}")
    async with relay_grpc() as stub:
        await stub.ListTasks(request, metadata=auth(key))
        await stub.ListTasks(request, metadata=auth(key))
        error = await refused(stub.ListTasks(request, metadata=auth(key)))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reason_of(error) == "RATE_LIMITED"
    retry = error_details_pb2.RetryInfo()
    assert status_from_call(error).details[1].Unpack(retry)
    assert 1 <= retry.retry_delay.seconds <= 60


async def test_request_limits_refuse_before_anything_is_stored(echo, settings):
    settings.RELAY_MAX_PARTS = 2
    key = await new_key()
    async with relay_grpc() as stub:
        error = await refused(
            stub.SendMessage(
                SendMessageRequest(tenant=f"agents/{echo.pk}", message=message(parts=3)),
                metadata=auth(key),
            )
        )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(error) == "INVALID_PARAMS"
    assert await sync_to_async(Task.objects.count)() == 0


async def test_a_message_over_the_size_limit_is_refused_by_grpc(echo, settings):
    settings.RELAY_MAX_BODY_BYTES = 2048
    key = await new_key()
    async with relay_grpc() as stub:
        error = await refused(
            stub.SendMessage(
                SendMessageRequest(tenant=f"agents/{echo.pk}", message=message("x" * 4096)),
                metadata=auth(key),
            )
        )
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await sync_to_async(Task.objects.count)() == 0


async def test_a_key_holds_as_many_streams_as_its_slots(settings):
    settings.RELAY_MAX_STREAMS_PER_KEY = 1
    key = await new_key()
    with running(never_finishing_agent) as url:
        agent = await sync_to_async(register)(url, NEVER_FINISHES, streaming=True)
        request = SendMessageRequest(tenant=f"agents/{agent.pk}", message=message("forever"))
        async with relay_grpc() as stub:
            first = stub.SendStreamingMessage(request, metadata=auth(key))
            await asyncio.wait_for(first.read(), CALL_SECONDS)
            second = stub.SendStreamingMessage(request, metadata=auth(key))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await asyncio.wait_for(second.read(), CALL_SECONDS)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "streams open" in caught.value.details()
            first.cancel()  # the client leaves: its slot is given back

            async def third_opens() -> bool:
                third = stub.SendStreamingMessage(request, metadata=auth(key))
                try:
                    await asyncio.wait_for(third.read(), CALL_SECONDS)
                    return True
                except grpc.aio.AioRpcError:
                    return False
                finally:
                    third.cancel()

            deadline = asyncio.get_running_loop().time() + 10
            while not await third_opens():
                assert asyncio.get_running_loop().time() < deadline, "the slot never came back"
                await asyncio.sleep(0.1)


async def test_the_extensions_the_target_supports_are_named_back(echo_url):
    agent = await sync_to_async(register)(
        echo_url, extensions=[{"uri": "urn:x-relay-test:tone", "required": False}]
    )
    key = await new_key()
    async with relay_grpc() as stub:
        call = stub.SendMessage(
            SendMessageRequest(tenant=f"agents/{agent.pk}", message=message()),
            metadata=auth(key, ("a2a-extensions", "urn:x-relay-test:tone, urn:x-unknown")),
        )
        answer = await asyncio.wait_for(call, CALL_SECONDS)
        initial = dict(await call.initial_metadata())
    assert answer.WhichOneof("payload") == "message"
    assert initial["a2a-extensions"] == "urn:x-relay-test:tone"


async def test_with_tracing_on_a_grpc_call_continues_the_callers_traceparent(monkeypatch):
    from routing.demo.agents import ECHO, build_agent_app
    from tests.live import Recording
    from tests.otlp_receiver import tracing_to_receiver

    caller_trace = "5b8efff798038103d269b633813fc60c"
    recording = Recording(lambda url: build_agent_app(ECHO, base_url=url))
    with running(recording) as url, tracing_to_receiver(monkeypatch) as receiver:
        agent = await sync_to_async(register)(url)
        key = await new_key()
        async with relay_grpc() as stub:
            await asyncio.wait_for(
                stub.SendMessage(
                    SendMessageRequest(tenant=f"agents/{agent.pk}", message=message("traced")),
                    metadata=auth(key, ("traceparent", f"00-{caller_trace}-eee19b7ec3c1b174-01")),
                ),
                CALL_SECONDS,
            )
        spans = receiver.wait_for(
            lambda spans: any(s.name.startswith("invoke_agent") for s in spans)
        )

    # A send is traced by the spans of its work, under the caller's span.
    assert not [s for s in spans if s.name.startswith("a2a.call")]
    (span,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert (span.trace_id, span.parent_span_id) == (caller_trace, "eee19b7ec3c1b174")
    assert span.attributes["a2a.method"] == "SendMessage"
    sent = [r.headers.get("traceparent") for r in recording.requests if r.method == "POST"]
    assert sent == [f"00-{caller_trace}-{span.span_id}-01"]


async def test_with_tracing_on_a_refused_grpc_send_is_a_failed_call_span(echo, monkeypatch):
    from registry.models import ApiKey
    from registry.usage_models import Quota
    from tests.otlp_receiver import tracing_to_receiver

    caller_trace, caller_span = "6c8efff798038103d269b633813fc60d", "abc19b7ec3c1b175"
    key = await new_key()
    await sync_to_async(
        lambda: Quota.objects.create(api_key=ApiKey.objects.get(name="caller"), calls_per_day=0)
    )()
    traced = auth(key, ("traceparent", f"00-{caller_trace}-{caller_span}-01"))
    with tracing_to_receiver(monkeypatch) as receiver:
        async with relay_grpc() as stub:
            request = SendMessageRequest(tenant=f"agents/{echo.pk}", message=message("over"))
            error = await refused(stub.SendMessage(request, metadata=traced))
            assert reason_of(error) == "RATE_LIMITED"
            answered = time.time_ns()
            task = await refused(
                stub.GetTask(
                    GetTaskRequest(tenant=f"agents/{echo.pk}", id="no-such-task"), metadata=traced
                )
            )
            assert task.code() == grpc.StatusCode.NOT_FOUND
        spans = receiver.wait_for(lambda spans: len(spans) >= 2)

    (call,) = [s for s in spans if s.name == "a2a.call SendMessage"]
    assert (call.trace_id, call.parent_span_id) == (caller_trace, caller_span)
    assert call.kind == 2  # SPAN_KIND_SERVER
    assert call.status == 2  # STATUS_CODE_ERROR
    assert call.attributes["error.type"] == "RATE_LIMITED"
    assert call.attributes["a2a.target"] == f"grpc:agents/{echo.pk}"
    assert call.start < call.end <= answered
    # Any other call has its span, admitted or not.
    (get,) = [s for s in spans if s.name == "a2a.call GetTask"]
    assert (get.trace_id, get.parent_span_id, get.status) == (caller_trace, caller_span, 2)
    assert get.attributes["error.type"] == "TASK_NOT_FOUND"


async def test_a_key_over_its_daily_quota_is_refused_over_grpc(echo):
    from registry.models import ApiKey
    from registry.usage_models import Quota

    key = await new_key()
    await sync_to_async(
        lambda: Quota.objects.create(api_key=ApiKey.objects.get(name="caller"), calls_per_day=1)
    )()
    request = SendMessageRequest(tenant=f"agents/{echo.pk}", message=message("once"))
    async with relay_grpc() as stub:
        await stub.SendMessage(request, metadata=auth(key))
        again = SendMessageRequest(tenant=f"agents/{echo.pk}", message=message("twice"))
        error = await refused(stub.SendMessage(again, metadata=auth(key)))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reason_of(error) == "RATE_LIMITED"
    assert "allows 1 call per day (1 made)" in error.details()
