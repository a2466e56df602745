"""Attacks on the A2A endpoints: oversized and deeply nested bodies, too many parts, fat and
deep metadata, huge history requests, bursts over the rate limits, too many streams per key,
and a smuggled delegation header. Each gets its documented answer in the caller's binding,
and nothing is stored.

Calls go through the ASGI router (the consumer daphne serves) to real agents on 127.0.0.1,
one of them recording every request it receives so the headers the relay sends upstream can
be checked as the agent saw them.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache

from registry.services import api_key_create
from relay_project import ratelimit
from routing.demo.agents import ECHO, build_agent_app
from tasks_app import delegation as relay_delegation
from tasks_app.api import calls, parsing, replies
from tasks_app.models import Task
from tasks_app.protocol import delegation
from tests.live import Recording
from tests.servers import running
from tests.tasks_app.a2a_http import (
    BINDINGS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPC_03,
    JSONRPC_1,
    REST_1,
    Expected,
    call,
    expect_error,
    field_violations,
    register,
    relay_client,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls", "fresh_counters"),
]

ALL = pytest.mark.parametrize("binding", BINDINGS, ids=str)
RATE_LIMITED = Expected(-31429, "RATE_LIMITED", 429, domain="brass-relay")
RECORDER = Recording(lambda url: build_agent_app(ECHO, base_url=url))


@pytest.fixture
def fresh_counters():
    """Rate and stream counters live in the cache, which outlives a test's database rows."""
    from django.core.cache import caches

    if "locmem" not in type(caches["default"]).__module__:
        pytest.skip("clears the cache: only with the embedded profile's local-memory cache")
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(scope="module")
def recorder_url():
    with running(RECORDER) as url:
        yield url


@pytest.fixture
def echo(recorder_url, transactional_db):
    RECORDER.requests.clear()
    return register(recorder_url)


@pytest.fixture
def key(api_key):
    return api_key[1]


async def task_count() -> int:
    return await sync_to_async(Task.objects.count)()


async def refused(binding, agent_id, request, headers, expected, **options):
    """Sends ``request``; checks the refusal and that nothing was stored or sent upstream."""
    before, sent_before = await task_count(), len(RECORDER.posts())
    async with relay_client() as client:
        response = await call(client, agent_id, request, headers)
    if binding.jsonrpc:
        options.setdefault("request_id", request.request_id)
    info = expect_error(binding, response, expected, **options)
    assert await task_count() == before, "a refused request stored a task"
    assert len(RECORDER.posts()) == sent_before, "a refused request reached the agent"
    return response, info


def message_text(binding, response) -> str:
    body = response.json()
    return body["error"]["message"]


def nested(depth: int):
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


# --- oversized and deeply nested bodies ----------------------------------------------------


@ALL
async def test_a_body_nested_too_deep_for_any_parser_is_an_invalid_request(binding, echo, key):
    request = binding.send(binding.message())
    body = json.dumps(request.body).encode()
    deep = body[:-1] + b', "extra": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    request = type(request)(request.method, request.path, deep, request.query, request.request_id)
    response, _ = await refused(
        binding, echo.pk, request, binding.headers(key), INVALID_REQUEST, request_id=None
    )
    assert "nested deeper than the limit of 64 levels" in message_text(binding, response)


@ALL
async def test_metadata_nested_past_the_json_depth_limit_is_refused_before_parsing(
    binding, echo, key, settings
):
    settings.RELAY_MAX_JSON_DEPTH = 20
    request = binding.send(binding.message(metadata=nested(30)))
    await refused(binding, echo.pk, request, binding.headers(key), INVALID_REQUEST, request_id=None)


async def test_the_task_api_refuses_oversized_and_deep_bodies_with_its_envelope(
    echo, key, settings
):
    settings.RELAY_MAX_BODY_BYTES = 2000
    big = {
        "agentId": echo.pk,
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * 3000}]},
    }
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    async with relay_client() as client:
        for path in ("/a2a/tasks/send", "/a2a/tasks/sendSubscribe"):
            response = await client.post(path, content=json.dumps(big), headers=headers)
            expect_error(REST_1, response, INVALID_REQUEST, http_status=413)
            assert "2000 bytes" in response.json()["error"]["message"]
            deep = b'{"agentId": "' + echo.pk.encode() + b'", "x": ' + b"[" * 100 + b"]" * 100
            response = await client.post(path, content=deep + b"}", headers=headers)
            expect_error(REST_1, response, INVALID_REQUEST)
    assert await task_count() == 0


# --- parts, metadata, history --------------------------------------------------------------


@ALL
async def test_a_message_with_too_many_parts_names_the_limit(binding, echo, key, settings):
    settings.RELAY_MAX_PARTS = 3
    request = binding.send(binding.message())
    parts_key = "content" if binding.version == "0.3" and not binding.jsonrpc else "parts"
    message = request.body["params"]["message"] if binding.jsonrpc else request.body["message"]
    message[parts_key] = message[parts_key] * 4
    response, _ = await refused(binding, echo.pk, request, binding.headers(key), INVALID_PARAMS)
    if binding.version == "1.0":
        assert field_violations(binding, response) == [
            {"field": "message.parts", "description": "has 4 parts; the limit is 3"}
        ]


@ALL
async def test_fat_or_deep_metadata_is_invalid_params(binding, echo, key, settings):
    settings.RELAY_MAX_METADATA_BYTES = 500
    settings.RELAY_MAX_METADATA_DEPTH = 4
    request = binding.send(binding.message(metadata=nested(6)), metadata={"blob": "x" * 600})
    response, _ = await refused(binding, echo.pk, request, binding.headers(key), INVALID_PARAMS)
    if binding.version == "1.0":
        fields = {v["field"]: v["description"] for v in field_violations(binding, response)}
        assert fields == {
            "message.metadata": "is nested 6 levels deep; the limit is 4",
            "metadata": "is 611 bytes of JSON; the limit is 500",
        }


@ALL
async def test_a_history_length_over_the_bound_is_capped_not_refused(
    binding, echo, key, api_key, settings
):
    """Regression: a historyLength above RELAY_MAX_HISTORY_LENGTH was refused with -32602; it
    is a maximum, so the relay gives at most its own bound."""
    settings.RELAY_MAX_HISTORY_LENGTH = 1
    task = await sync_to_async(task_with_history)(echo.pk, api_key[0], messages=3)
    async with relay_client() as client:
        get = binding.get_task(task.pk)
        if binding.jsonrpc:
            get.body["params"]["historyLength"] = 5000
            response = await call(client, echo.pk, get, binding.headers(key))
            got = response.json()["result"]
        else:
            response = await client.get(
                f"/a2a/agents/{echo.pk}/{get.path}",
                params={"historyLength": 5000},
                headers=binding.headers(key),
            )
            got = response.json()
    assert response.status_code == 200, response.text
    assert len(got["history"]) == 1


async def test_the_task_api_caps_history_length(echo, key, api_key, settings):
    settings.RELAY_MAX_HISTORY_LENGTH = 2
    task = await sync_to_async(task_with_history)(echo.pk, api_key[0], messages=3)
    async with relay_client() as client:
        response = await client.get(
            f"/a2a/tasks/{task.pk}?historyLength=11", headers={"Authorization": f"Bearer {key}"}
        )
    assert response.status_code == 200, response.text
    assert len(response.json()["history"]) == 2


def task_with_history(agent_id: str, caller, *, messages: int):
    """A task of the caller's key at the agent, with ``messages`` user messages."""
    from tasks_app import services

    history = [
        {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": f"turn {n}"}]}
        for n in range(messages)
    ]
    task = services.task_open(
        caller=caller,
        target_kind="agent",
        target_id=agent_id,
        agent_id=agent_id,
        message=history[0],
        client_version="1.0",
    )
    for entry in history[1:]:
        task = services.task_add_message(task=task, message=entry)
    return task


# --- rate limits ---------------------------------------------------------------------------


@ALL
async def test_a_burst_over_the_key_limit_gets_429_with_retry_after(binding, echo, key, settings):
    settings.RELAY_RATE_LIMIT_PER_KEY = 3
    async with relay_client() as client:
        for _ in range(3):
            response = await call(client, echo.pk, binding.send(), binding.headers(key))
            assert response.status_code == 200, response.text
    tasks = await task_count()
    response, info = await refused(
        binding, echo.pk, binding.send(), binding.headers(key), RATE_LIMITED, http_status=429
    )
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert await task_count() == tasks
    if binding.version == "1.0":
        details = (
            response.json()["error"]["data"]
            if binding.jsonrpc
            else response.json()["error"]["details"]
        )
        assert details[1] == {
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": f"{response.headers['Retry-After']}s",
        }
    elif binding.jsonrpc:
        assert info["data"] == {"retryAfter": int(response.headers["Retry-After"])}
    assert "3 calls per minute" in message_text(binding, response)


async def test_junk_counts_against_the_limit_and_a_limited_key_gets_429_for_it(echo, key, settings):
    settings.RELAY_RATE_LIMIT_PER_KEY = 2
    headers = {"Authorization": f"Bearer {key}"}
    async with relay_client() as client:
        for _ in range(2):
            response = await client.post(
                f"/a2a/agents/{echo.pk}/", content=b"{nope", headers=headers
            )
            assert response.json()["error"]["code"] == -32700
        response = await client.post(f"/a2a/agents/{echo.pk}/", content=b"{nope", headers=headers)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == -31429


async def test_a_keys_own_limit_replaces_the_default_and_zero_means_none(echo, settings):
    settings.RELAY_RATE_LIMIT_PER_KEY = 1
    roomy, roomy_secret = await sync_to_async(api_key_create)(name="roomy")
    free, free_secret = await sync_to_async(api_key_create)(name="free")
    await sync_to_async(type(roomy).objects.filter(pk=roomy.pk).update)(rate_limit_per_minute=3)
    await sync_to_async(type(free).objects.filter(pk=free.pk).update)(rate_limit_per_minute=0)
    statuses: dict[str, list[int]] = {"roomy": [], "free": []}
    async with relay_client() as client:
        for name, secret in (("roomy", roomy_secret), ("free", free_secret)):
            for _ in range(5):
                response = await call(
                    client, echo.pk, JSONRPC_1.get_task("none"), JSONRPC_1.headers(secret)
                )
                statuses[name].append(response.status_code)
    assert statuses == {"roomy": [200, 200, 200, 429, 429], "free": [200] * 5}


async def test_the_agent_limit_counts_every_key(echo, settings):
    settings.RELAY_RATE_LIMIT_PER_AGENT = 2
    secrets = [(await sync_to_async(api_key_create)(name=f"k{n}"))[1] for n in range(3)]
    async with relay_client() as client:
        answers = [
            await call(client, echo.pk, JSONRPC_1.send(), JSONRPC_1.headers(secret))
            for secret in secrets
        ]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert "for this agent" in answers[2].json()["error"]["message"]
    assert await task_count() == 2


async def test_the_task_api_shares_the_keys_budget(echo, key, settings):
    settings.RELAY_RATE_LIMIT_PER_KEY = 2
    body = {
        "agentId": echo.pk,
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
    }
    headers = {"Authorization": f"Bearer {key}"}
    async with relay_client() as client:
        first = await client.post("/a2a/tasks/send", json=body, headers=headers)
        second = await call(client, echo.pk, JSONRPC_1.send(), JSONRPC_1.headers(key))
        third = await client.post("/a2a/tasks/send", json=body, headers=headers)
    assert first.status_code == 200 and second.status_code == 200, (first.text, second.text)
    expect_error(REST_1, third, RATE_LIMITED)
    assert third.headers["Retry-After"].isdigit()
    assert await task_count() == 2


# --- concurrent streams --------------------------------------------------------------------


def stream_call(agent_id: str, secret: str) -> parsing.HttpCall:
    request = JSONRPC_1.send(stream=True)
    headers = [(b"authorization", f"Bearer {secret}".encode()), (b"a2a-version", b"1.0")]
    return parsing.HttpCall(
        kind="agent",
        target_id=agent_id,
        rest="",
        http_method="POST",
        query={},
        headers=headers,
        body=json.dumps(request.body).encode(),
    )


async def test_a_key_over_its_stream_limit_is_refused_until_a_stream_closes(
    echo, api_key, settings
):
    settings.RELAY_MAX_STREAMS_PER_KEY = 2
    row, secret = api_key
    first = await calls.answer(stream_call(echo.pk, secret))
    second = await calls.answer(stream_call(echo.pk, secret))
    assert isinstance(first, replies.Stream) and isinstance(second, replies.Stream)
    assert ratelimit.streams_open(row) == 2
    tasks = await task_count()

    third = await calls.answer(stream_call(echo.pk, secret))
    assert isinstance(third, replies.Reply) and third.status == 429, third
    assert "already has 2 streams open" in third.body["error"]["message"]
    assert await task_count() == tasks, "a refused stream stored a task"

    async for _ in first.events:  # read to its end: the slot comes back
        pass
    assert ratelimit.streams_open(row) == 1
    await second.events.aclose()  # closed unread, as when the client leaves
    assert ratelimit.streams_open(row) == 0
    again = await calls.answer(stream_call(echo.pk, secret))
    assert isinstance(again, replies.Stream)
    await again.events.aclose()


async def test_a_stream_refused_before_its_first_event_gives_its_slot_back(echo, api_key, settings):
    settings.RELAY_MAX_STREAMS_PER_KEY = 1
    row, secret = api_key
    request = stream_call(echo.pk, secret)
    body = json.loads(request.body)
    body["params"]["message"]["taskId"] = "no-such-task"
    refused_call = parsing.HttpCall(**{**request.__dict__, "body": json.dumps(body).encode()})
    reply = await calls.answer(refused_call)
    assert isinstance(reply, replies.Reply) and reply.body["error"]["code"] == -32001
    assert ratelimit.streams_open(row) == 0


# --- delegation ----------------------------------------------------------------------------


@pytest.mark.parametrize("binding", [JSONRPC_1, JSONRPC_03, REST_1], ids=str)
@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
async def test_a_smuggled_delegation_header_never_reaches_the_agent(
    binding, stream, echo, api_key, settings
):
    settings.RELAY_DELEGATION_SECRET = "agents-know-this"
    row, secret = api_key
    forged = {
        "X-Relay-Caller": "key=admin; name=root; relay=trusted",
        "X-Relay-Signature": "sha256=" + "0" * 64,
        "x-relay-caller": "key=admin2",
    }
    async with relay_client() as client:
        response = await call(
            client, echo.pk, binding.send(stream=stream), binding.headers(secret, **forged)
        )
    assert response.status_code == 200, response.text
    seen = RECORDER.posts()[-1].headers
    own = relay_delegation.relay_id()
    assert seen["x-relay-caller"] == f"key={row.prefix}; name=test%20caller; relay={own}"
    assert seen["x-relay-chain"] == own
    assert delegation.verify("agents-know-this", seen)
    assert "admin" not in json.dumps(seen)


async def test_the_inbound_chain_is_kept_on_the_task_and_passed_on(echo, key):
    async with relay_client() as client:
        response = await call(
            client,
            echo.pk,
            JSONRPC_1.send(),
            JSONRPC_1.headers(key, **{"X-Relay-Chain": "relay-a, relay-b"}),
        )
    assert response.status_code == 200, response.text
    own = relay_delegation.relay_id()
    assert RECORDER.posts()[-1].headers["x-relay-chain"] == f"relay-a, relay-b, {own}"
    task = await sync_to_async(Task.objects.get)()
    assert task.delegation_chain == ["relay:relay-a", "relay:relay-b"]


@ALL
async def test_a_call_that_already_passed_this_relay_is_refused_as_a_loop(binding, echo, key):
    own = relay_delegation.relay_id()
    response, _ = await refused(
        binding,
        echo.pk,
        binding.send(),
        binding.headers(key, **{"X-Relay-Chain": f"relay-a, {own}"}),
        INVALID_REQUEST,
    )
    assert "refusing a loop" in message_text(binding, response)


@ALL
async def test_a_chain_at_the_depth_limit_is_refused(binding, echo, key, settings):
    settings.RELAY_MAX_DELEGATION_DEPTH = 3
    chain = "relay-a, relay-b, relay-c"
    response, _ = await refused(
        binding,
        echo.pk,
        binding.send(),
        binding.headers(key, **{"X-Relay-Chain": chain}),
        INVALID_REQUEST,
    )
    assert "the limit is 2" in message_text(binding, response)


async def test_an_agent_credential_named_like_a_delegation_header_does_not_win(echo, key):
    from tasks_app import upstream

    endpoint = upstream.Endpoint(
        agent_id="a",
        url="http://127.0.0.1:9/",
        binding="JSONRPC",
        version="1.0",
        headers=(("x-relay-caller", "key=forged"), ("X-Api-Key", "k")),
    )
    headers = upstream._headers(endpoint, (), {"X-Relay-Caller": "key=real"})
    assert [v for n, v in headers.items() if n.lower() == "x-relay-caller"] == ["key=real"]
    assert headers["X-Api-Key"] == "k"


# --- SSRF on agent calls -------------------------------------------------------------------


async def test_an_agent_at_a_private_address_is_never_called(echo, key, settings):
    """Registered while private URLs were allowed; with them off, a call is not sent and the
    task fails saying why."""
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    async with relay_client() as client:
        response = await call(client, echo.pk, JSONRPC_1.send(), JSONRPC_1.headers(key))
    assert "result" in response.json(), response.text
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert "at an address the relay may not call" in text
    assert RECORDER.posts() == []


async def test_dns_rebinding_on_an_agent_call_reaches_only_the_checked_address(
    recorder_url, key, settings, monkeypatch
):
    """The agent's host answers a public address first and a private one after: the relay
    connects to the address it checked, so the private server gets nothing."""
    import socket

    from relay_project import outbound

    RECORDER.requests.clear()
    port = int(recorder_url.rsplit(":", 1)[1])
    agent = await sync_to_async(register)(f"http://rebind.test:{port}/")
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    real_public = outbound.is_public_address
    monkeypatch.setattr(
        outbound,
        "is_public_address",
        lambda address: address == "127.0.0.1" or real_public(address),
    )
    answers = ["127.0.0.1", "127.0.0.2"]
    real_getaddrinfo = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.test":
            address = answers.pop(0) if len(answers) > 1 else answers[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    private = Recording(lambda url: build_agent_app(ECHO, base_url=url))
    from routing.demo.serve import serve

    with serve(private, host="127.0.0.2", port=port):
        async with relay_client() as client:
            first = await call(client, agent.pk, JSONRPC_1.send(), JSONRPC_1.headers(key))
            second = await call(client, agent.pk, JSONRPC_1.send(), JSONRPC_1.headers(key))
    assert "message" in first.json()["result"], first.text
    assert private.requests == []
    assert len(RECORDER.posts()) >= 1
    result = second.json()["result"]
    if "task" in result:  # a new connection met the private answer: refused, not sent
        assert result["task"]["status"]["state"] == "TASK_STATE_FAILED"


async def test_the_task_api_answers_a_body_over_every_limit_with_413_not_a_500(echo, key):
    """Regression: a body over Django's upload limit made the task API answer 500."""
    big = {
        "agentId": echo.pk,
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * 3_000_000}]},
    }
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    async with relay_client() as client:
        for path in ("/a2a/tasks/send", "/a2a/tasks/sendBatch"):
            response = await client.post(path, content=json.dumps(big), headers=headers)
            expect_error(REST_1, response, INVALID_REQUEST, http_status=413)
    assert await task_count() == 0
