"""With Redis unreachable, every call that needs it is refused at once with a clear error:
the A2A bindings with their own 503 error (JSON-RPC code -31503, HTTP+JSON ``UNAVAILABLE``),
the task API in its envelope, the registry and team APIs with their JSON error body. Nothing
is stored, and one WARNING line says why. Registry reads that need no key still work.

In process, through the ASGI router, with the cache pointed at a port where nothing listens
(the production profile's backend and connection settings): no Redis server is needed.
"""

from __future__ import annotations

import logging
import time

import pytest
from asgiref.sync import sync_to_async

from relay_project import redis_clients
from tasks_app.models import Task
from tests.live import free_port
from tests.tasks_app.a2a_http import (
    BINDINGS,
    JSONRPC_1,
    Expected,
    call,
    expect_error,
    register,
    relay_client,
)

pytestmark = pytest.mark.django_db(transaction=True)

UNAVAILABLE = Expected(-31503, "UNAVAILABLE", 503, domain="brass-relay")
REFUSED_WITHIN_SECONDS = 1.5


@pytest.fixture
def redis_down(settings):
    """The production profile's cache, on a port nothing listens on."""
    settings.CACHES = {
        "default": {
            "BACKEND": "relay_project.redis_cache.SharedPoolRedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {
                "socket_connect_timeout": 0.5,
                "socket_timeout": 2.0,
                "health_check_interval": 30,
            },
        }
    }
    yield
    redis_clients.forget_pools()


@pytest.fixture
def echo(transactional_db):
    # Never reached: the call is refused before the relay looks at its target.
    return register("http://127.0.0.1:9/")


async def task_count() -> int:
    return await sync_to_async(Task.objects.count)()


@pytest.fixture
def warnings():
    """The WARNING lines that say Redis is unreachable. Caught on the loggers themselves:
    Django's logging setup, run again when the ASGI application is first imported, takes
    pytest's capture handler off the root logger."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno == logging.WARNING and "Redis is unreachable" in record.getMessage():
                lines.append(record.getMessage())

    handler = Keep()
    loggers = [logging.getLogger(name) for name in ("tasks_app.api.calls", "registry.api.errors")]
    for logger in loggers:
        logger.addHandler(handler)
    yield lines
    for logger in loggers:
        logger.removeHandler(handler)


@pytest.mark.parametrize("binding", BINDINGS, ids=str)
@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
async def test_an_a2a_call_is_refused_at_once_with_503_and_stores_nothing(
    binding, stream, echo, api_key, redis_down, warnings
):
    request = binding.send(stream=stream)
    started = time.monotonic()
    async with relay_client() as client:
        response = await call(client, echo.pk, request, binding.headers(api_key[1]))
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS
    options = {"request_id": request.request_id} if binding.jsonrpc else {}
    expect_error(binding, response, UNAVAILABLE, http_status=503, **options)
    assert "the relay's Redis is unreachable" in response.json()["error"]["message"]
    assert await task_count() == 0
    assert len(warnings) == 1
    assert f"an A2A call to agent {echo.pk!r}" in warnings[0]


async def test_a_call_that_fails_to_parse_is_refused_for_redis_too(api_key, redis_down):
    # Its key is checked first (a caller without one gets 401 whatever is wrong): in Redis.
    async with relay_client() as client:
        response = await client.post(
            "/a2a/agents/anything/", content=b"{not json", headers=JSONRPC_1.headers(api_key[1])
        )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == -31503


async def test_the_task_api_answers_503_in_its_envelope(echo, api_key, redis_down, warnings):
    async with relay_client() as client:
        response = await client.post(
            "/a2a/tasks/send",
            json={"agentId": echo.pk, "message": JSONRPC_1.message()},
            headers={"Authorization": f"Bearer {api_key[1]}"},
        )
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (503, "UNAVAILABLE")
    assert error["details"][0]["reason"] == "UNAVAILABLE"
    assert await task_count() == 0
    assert len(warnings) == 1


def test_the_registry_and_team_apis_answer_503_with_their_error_body(api, redis_down, warnings):
    for method, path, body in [
        ("post", "/a2a/registry", {"url": "http://127.0.0.1:9/"}),
        ("get", "/a2a/registry", None),
        ("get", "/a2a/teams", None),
    ]:
        response = getattr(api, method)(path, body, format="json")
        assert response.status_code == 503, (path, response.content)
        assert response.json() == {
            "error": {
                "code": "unavailable",
                "message": "the relay's Redis is unreachable; try again shortly",
            }
        }
    assert len(warnings) == 3
    assert "POST /a2a/registry" in warnings[0]


def test_registry_reads_without_a_key_need_no_redis(anonymous, redis_down):
    assert anonymous.get("/a2a/registry").status_code == 200


@pytest.fixture
def redis_up_then_down(settings):
    """The production profile's cache on the local Redis (a fresh key prefix); the test calls
    the fixture's value to point it at a port nothing listens on, as if Redis went down."""
    import uuid

    pytest.importorskip("redis")
    options = {"socket_connect_timeout": 0.5, "socket_timeout": 2.0}
    backend = "relay_project.redis_cache.SharedPoolRedisCache"
    settings.CACHES = {
        "default": {
            "BACKEND": backend,
            "LOCATION": "redis://127.0.0.1:6379/0",
            "KEY_PREFIX": f"down-{uuid.uuid4().hex}",
            "OPTIONS": options,
        }
    }

    def down():
        redis_clients.forget_pools()
        settings.CACHES = {
            "default": {
                "BACKEND": backend,
                "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
                "OPTIONS": options,
            }
        }

    yield down
    redis_clients.forget_pools()


async def test_nothing_follows_the_final_event_of_a_stream_whose_redis_went_down(
    api_key, redis_up_then_down, settings, allow_private_urls
):
    """Issue 34, item 12: the stream's slot went back to Redis after its final ``completed``
    event; with Redis down that raised, and the caller got an error frame after the end."""
    import json

    from tasks_app.api import calls, parsing, replies
    from tasks_app.consumers import A2AConsumer, A2AFrames
    from tests.agents import CHUNKED_STREAMER, chunked_streaming_agent
    from tests.servers import running

    settings.RELAY_MAX_STREAMS_PER_KEY = 2

    class Sent(A2AConsumer):
        frames: list[bytes] = []

        async def send_body(self, body, *, more_body=False):
            self.frames.append(body)

    with running(chunked_streaming_agent) as url:
        agent = await sync_to_async(register)(url, CHUNKED_STREAMER)
        request = JSONRPC_1.send(stream=True)
        outcome = await calls.answer(
            parsing.HttpCall(
                kind="agent",
                target_id=agent.pk,
                rest="",
                http_method="POST",
                query={},
                headers=[
                    (k.lower().encode(), v.encode())
                    for k, v in JSONRPC_1.headers(api_key[1]).items()
                ],
                body=json.dumps(request.body).encode(),
            )
        )
        assert isinstance(outcome, replies.Stream), outcome

        async def redis_goes_down_after_the_first_event():
            first = True
            async for item in outcome.events:
                yield item
                if first:
                    first = False
                    redis_up_then_down()

        class Events:  # what the consumer pumps: the stream, closed as the stream closes
            def __init__(self):
                self.items = redis_goes_down_after_the_first_event()

            def __aiter__(self):
                return self.items

            async def aclose(self):
                await outcome.events.aclose()

        consumer = Sent()
        await consumer._pump(Events(), A2AFrames(outcome.call))
    frames = [frame for frame in consumer.frames if frame.startswith((b"data", b"event"))]
    last = json.loads(frames[-1].split(b"data: ", 1)[1])
    assert "error" not in last, frames[-2:]
    assert last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", frames
    assert consumer.frames[-1] == b""
