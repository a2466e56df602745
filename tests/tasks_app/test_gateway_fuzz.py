"""Fuzzing the gateway: whatever arrives, the answer is a well-formed A2A answer, never a 500,
and nothing half-written is left in the database.

Hypothesis sends JSON-RPC bodies (arbitrary JSON, real method names of both versions with
plausible params and junk spliced in, raw bytes) and REST requests (real and invented paths
and verbs, query strings, bodies) through the ASGI router to a fast echo agent on 127.0.0.1.
After each example every stored task must be a valid 1.0 Task, terminal (the echo agent
answers at once), with a history of real messages and one event per sequence number.

The task API (``/a2a/tasks/send``, ``sendBatch``, ``sendSubscribe``) gets the same treatment,
and bodies shaped as attacks (deeply nested, oversized, too many parts, fat metadata) go to
every binding with small limits: each is refused in its binding's envelope, and a refused
request leaves the task and event tables as they were.

How many examples each test runs is the Hypothesis profile's (tests/conftest.py,
RELAY_FUZZ_PROFILE): a few in the edit loop, more in ``make test``.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from asgiref.sync import sync_to_async
from hypothesis import event, given
from hypothesis import strategies as st

from tasks_app import gateway
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task, TaskEvent
from tasks_app.protocol.validation import parse_v1
from tasks_app.protocol.versions import METHODS, Operation, ProtocolVersion
from tasks_app.services import snapshot_of
from tests.tasks_app.a2a_http import ERROR_INFO, register, relay_client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

EXISTING = "@existing-task"  # replaced by the id of a real (completed) task of the caller
STREAM_KINDS = {"task", "message", "statusUpdate", "artifactUpdate"}
STATES = {state.value for state in TaskState}

# --- strategies ----------------------------------------------------------------------------


def mostly(good, bad):
    """``good`` seven times in eight (so calls get past the first checks), else ``bad``.
    Hypothesis leans to the first branches of ``one_of`` and the first items of
    ``sampled_from``, so ``bad`` is the last of eight items."""
    return st.sampled_from(range(8)).flatmap(lambda n: bad if n == 7 else good)


def usually(right, strategy):
    return mostly(st.just(right), strategy)


texts = st.text(max_size=12)
names = mostly(st.text(min_size=1, max_size=12), st.sampled_from(["", " "]))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=10,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
task_ids = st.sampled_from([EXISTING, "", "no-such-task", "x" * 100]) | texts
urls = (
    st.sampled_from(
        [
            "http://127.0.0.1:9/hook",
            "https://hooks.example/a2a",
            "ftp://x/y",
            "not a url",
            "http://user:secret@hooks.example/",
            "",
        ]
    )
    | texts
)
ints = st.integers(-5, 200) | st.sampled_from(["10", "ten", 1.5, True, None])


def maybe(**fields):
    return st.fixed_dictionaries({}, optional=fields)


parts_v1 = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"text": texts}, optional={"mediaType": texts, "metadata": json_objects}
        ),
        st.fixed_dictionaries({"data": json_values}),
        st.fixed_dictionaries({"url": urls}, optional={"filename": texts}),
        st.fixed_dictionaries(
            {"raw": st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode()) | texts}
        ),
        json_objects,
    ),
    min_size=1,
    max_size=3,
)
parts_v1 = mostly(parts_v1, st.just([]))
messages_v1 = st.fixed_dictionaries(
    {
        "messageId": names,
        "role": st.sampled_from(["ROLE_USER"] * 4 + ["ROLE_AGENT", "user"]),
        "parts": parts_v1,
    },
    optional={
        "taskId": task_ids,
        "contextId": texts,
        "metadata": json_objects,
        "extensions": st.lists(texts, max_size=2),
        "referenceTaskIds": st.lists(task_ids, max_size=2),
    },
)
parts_v03 = st.lists(
    st.one_of(
        st.fixed_dictionaries({"kind": st.just("text"), "text": texts}),
        st.fixed_dictionaries({"kind": st.just("data"), "data": json_objects}),
        st.fixed_dictionaries(
            {"kind": st.just("file"), "file": maybe(uri=urls, bytes=texts, mimeType=texts)}
        ),
        json_objects,
    ),
    min_size=1,
    max_size=3,
)
parts_v03 = mostly(parts_v03, st.just([]))
messages_v03 = st.fixed_dictionaries(
    {
        "kind": st.just("message"),
        "messageId": names,
        "role": st.sampled_from(["user"] * 4 + ["agent", "ROLE_USER"]),
        "parts": parts_v03,
    },
    optional={"taskId": task_ids, "contextId": texts, "metadata": json_objects},
)
messages_v03_rest = st.fixed_dictionaries(  # 0.3 proto JSON, as the /v1 REST routes take
    {
        "messageId": names,
        "role": st.sampled_from(["ROLE_USER"] * 4 + ["user", "ROLE_AGENT"]),
        "content": st.lists(st.fixed_dictionaries({"text": texts}) | json_objects, max_size=2),
    },
    optional={"taskId": task_ids, "contextId": texts, "metadata": json_objects},
)
push_configs_v1 = st.fixed_dictionaries(
    {"url": urls},
    optional={
        "id": texts,
        "token": texts,
        "taskId": task_ids,
        "authentication": maybe(scheme=texts, credentials=texts),
    },
)
push_configs_v03 = st.fixed_dictionaries(
    {"url": urls},
    optional={
        "id": texts,
        "token": texts,
        "authentication": maybe(schemes=st.lists(texts, max_size=2), credentials=texts),
    },
)

PARAMS_V1 = {
    Operation.SEND: st.fixed_dictionaries(
        {"message": messages_v1},
        optional={
            "configuration": maybe(
                returnImmediately=st.booleans(),
                historyLength=ints,
                acceptedOutputModes=st.lists(texts, max_size=2),
                taskPushNotificationConfig=push_configs_v1,
            ),
            "metadata": json_objects,
            "tenant": texts,
        },
    ),
    Operation.GET_TASK: st.fixed_dictionaries({"id": task_ids}, optional={"historyLength": ints}),
    Operation.LIST_TASKS: maybe(
        pageSize=ints,
        pageToken=texts,
        contextId=texts,
        historyLength=ints,
        includeArtifacts=st.booleans(),
        status=st.sampled_from(["TASK_STATE_COMPLETED", "done"]),
        statusTimestampAfter=st.sampled_from(["2020-01-01T00:00:00Z", "yesterday"]),
    ),
    Operation.CANCEL: st.fixed_dictionaries({"id": task_ids}, optional={"metadata": json_objects}),
    Operation.SUBSCRIBE: st.fixed_dictionaries({"id": task_ids}),
    Operation.PUSH_CREATE: push_configs_v1.map(lambda c: {"taskId": EXISTING, **c}),
    Operation.PUSH_GET: st.fixed_dictionaries({"taskId": task_ids, "id": texts}),
    Operation.PUSH_LIST: st.fixed_dictionaries({"taskId": task_ids}, optional={"pageSize": ints}),
    Operation.PUSH_DELETE: st.fixed_dictionaries({"taskId": task_ids, "id": texts}),
    Operation.EXTENDED_CARD: maybe(tenant=texts),
}
PARAMS_V1[Operation.STREAM] = PARAMS_V1[Operation.SEND]
PARAMS_V03 = {
    Operation.SEND: st.fixed_dictionaries(
        {"message": messages_v03},
        optional={
            "configuration": maybe(
                blocking=st.booleans(),
                historyLength=ints,
                acceptedOutputModes=st.lists(texts, max_size=2),
                pushNotificationConfig=push_configs_v03,
            ),
            "metadata": json_objects,
        },
    ),
    Operation.GET_TASK: st.fixed_dictionaries({"id": task_ids}, optional={"historyLength": ints}),
    Operation.CANCEL: st.fixed_dictionaries({"id": task_ids}),
    Operation.SUBSCRIBE: st.fixed_dictionaries({"id": task_ids}),
    Operation.PUSH_CREATE: st.fixed_dictionaries(
        {"taskId": task_ids, "pushNotificationConfig": push_configs_v03}
    ),
    Operation.PUSH_GET: st.fixed_dictionaries(
        {"id": task_ids}, optional={"pushNotificationConfigId": texts}
    ),
    Operation.PUSH_LIST: st.fixed_dictionaries({"id": task_ids}),
    Operation.PUSH_DELETE: st.fixed_dictionaries(
        {"id": task_ids, "pushNotificationConfigId": texts}
    ),
    Operation.EXTENDED_CARD: json_objects,
}
PARAMS_V03[Operation.STREAM] = PARAMS_V03[Operation.SEND]


@st.composite
def with_junk(draw, params):
    """``params`` with up to two values somewhere inside replaced by random JSON."""
    value = draw(params)
    for _ in range(draw(usually(0, st.integers(1, 2)))):
        holders = list(_objects_in(value))
        holder = draw(st.sampled_from(holders))
        key = draw(st.sampled_from([*holder, None]) if holder else st.none())
        holder[key if key is not None else draw(texts)] = draw(json_values)
    return value


def _objects_in(value):
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _objects_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects_in(item)


version_headers = st.sampled_from([None, "1.0", "0.3", "", "9.9", "1", "x.y", "1.0.3"])


@st.composite
def method_calls(draw):
    """(body, A2A-Version header) for a real method with plausible, sometimes junky params."""
    # Sends weigh more: they are what writes tasks.
    name = draw(
        st.sampled_from(
            sorted(METHODS)
            + ["SendMessage", "SendStreamingMessage", "message/send", "message/stream"] * 2
        )
    )
    method = METHODS[name]
    v1 = method.version == ProtocolVersion.V1_0
    table = PARAMS_V1 if v1 else PARAMS_V03
    params = draw(
        usually(None, json_values).flatmap(
            lambda junk: with_junk(table[method.operation]) if junk is None else st.just(junk)
        )
    )
    body = {
        "jsonrpc": "2.0",
        "id": draw(st.integers(0, 10**6) | texts | st.none()),
        "method": name,
        "params": params,
    }
    if draw(st.sampled_from(range(6))) == 5:  # now and then break the envelope too
        key = draw(st.sampled_from(["jsonrpc", "id", "method", "params", "extra"]))
        if draw(st.booleans()):
            body.pop(key, None)
        else:
            body[key] = draw(json_values)
    return body, draw(usually("1.0" if v1 else None, version_headers))


extension_headers = st.sampled_from([None, None, "https://ext.example/a", ", ,", "\u00e9"])

REST_PATHS = [
    "message:send",
    "message:stream",
    "tasks",
    "tasks/{id}",
    "tasks/{id}:cancel",
    "tasks/{id}:subscribe",
    "tasks/{id}/pushNotificationConfigs",
    "tasks/{id}/pushNotificationConfigs/{cid}",
    "extendedAgentCard",
    "card",
    "{junk}",
    "tasks/{id}/{junk}",
    "message:{junk}",
]
# No "." or ".." segments: the client resolves them away from the agent's URL.
segments = st.sampled_from([EXISTING, "x", "%2F", "a b", "\u00fc"]) | st.text(
    "abcXYZ019-_~:@!$&'()*+,;=", min_size=1, max_size=12
)


REST_VERBS = {
    "message:send": "POST",
    "message:stream": "POST",
    "tasks": "GET",
    "tasks/{id}": "GET",
    "tasks/{id}:cancel": "POST",
    "tasks/{id}:subscribe": "POST",
    "tasks/{id}/pushNotificationConfigs": "POST",
    "tasks/{id}/pushNotificationConfigs/{cid}": "GET",
    "extendedAgentCard": "GET",
    "card": "GET",
}


@st.composite
def rest_requests(draw):
    """(verb, path, query, body, A2A-Version header): mostly a real route with a plausible
    body, sometimes anything."""
    template = draw(st.sampled_from(REST_PATHS))
    path = template.format(
        id=draw(usually(EXISTING, segments)), cid=draw(segments), junk=draw(segments)
    )
    prefix = draw(st.sampled_from(["", "", "v1/", "tenant-a/"]))
    verb = draw(
        usually(REST_VERBS.get(template, "GET"), st.sampled_from(["GET", "POST", "DELETE", "PUT"]))
    )
    version = draw(usually(None if prefix == "v1/" else "1.0", version_headers))
    query = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "pageSize",
                    "page_size",
                    "historyLength",
                    "status",
                    "pageToken",
                    "includeArtifacts",
                    "contextId",
                    "statusTimestampAfter",
                    "junk",
                ]
            ),
            st.text(max_size=8) | st.integers(-3, 200).map(str),
            max_size=3,
        )
    )
    operation = {
        "message:send": Operation.SEND,
        "message:stream": Operation.STREAM,
        "tasks/{id}/pushNotificationConfigs": Operation.PUSH_CREATE,
    }.get(template)
    if verb == "POST" and operation is not None:
        if prefix != "v1/":
            plausible = PARAMS_V1[operation]
        elif operation is Operation.PUSH_CREATE:
            plausible = push_configs_v03.map(
                lambda config: {"config": {"pushNotificationConfig": config}}
            )
        else:
            plausible = st.fixed_dictionaries(
                {"message": messages_v03_rest},
                optional={"configuration": maybe(blocking=st.booleans(), historyLength=ints)},
            )
        body = draw(
            usually(None, json_values).flatmap(
                lambda junk: with_junk(plausible) if junk is None else st.just(junk)
            )
        )
    else:
        body = draw(st.none() | json_values)
    return verb, prefix + path, query, body, version


# --- checks --------------------------------------------------------------------------------


def _sse_payloads(response) -> list[dict]:
    frames = [block for block in response.text.split("\n\n") if block.strip()]
    payloads = []
    for frame in frames:
        # Only CR and LF end SSE lines (not str.splitlines' U+0085, U+2028...).
        data = [line[6:] for line in frame.split("\n") if line.startswith("data: ")]
        if not data:
            assert frame.startswith(":"), frame  # only comments may carry no data
            continue
        payloads.append(json.loads("\n".join(data)))
    assert payloads, "a 200 stream with no event"
    return payloads


def _check_error_info(details) -> None:
    assert isinstance(details, list) and details, details
    assert details[0]["@type"] == ERROR_INFO, details
    assert details[0]["domain"] in ("a2a-protocol.org", "brass-relay"), details
    assert isinstance(details[0]["reason"], str) and details[0]["reason"], details


def _check_jsonrpc_object(body, *, legacy: bool) -> None:
    assert isinstance(body, dict) and body.get("jsonrpc") == "2.0", body
    assert "id" in body, body
    assert ("result" in body) != ("error" in body), body
    if "error" in body:
        error = body["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str), body
        assert error["code"] != -32603, body  # an internal error is the JSON-RPC 500
        if not legacy and "data" in error:
            _check_error_info(error["data"])


def _outcome(body) -> str:
    """What an answer was, for ``--hypothesis-show-statistics``."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return f"error {body['error'].get('code') or body['error'].get('status')}"
    return "result"


def check_jsonrpc_response(response, sent: dict) -> None:
    assert response.status_code != 500, response.text
    legacy = isinstance(sent, dict) and str(sent.get("method", "")).count("/") > 0
    if response.headers["content-type"].startswith("text/event-stream"):
        assert response.status_code == 200
        for payload in _sse_payloads(response):
            _check_jsonrpc_object(payload, legacy=legacy)
        event("stream")
        return
    assert response.status_code in (200, 401, 404), response.text
    body = response.json()
    event(_outcome(body))
    _check_jsonrpc_object(body, legacy=legacy)
    if response.status_code != 200:
        assert "error" in body, body


def check_rest_response(response) -> None:
    assert response.status_code != 500, response.text
    content_type = response.headers.get("content-type", "")
    if response.status_code in (301, 308):  # ".." and "//" resolve to a URL without its slash
        assert not response.content
        return
    if content_type.startswith("text/event-stream"):
        assert response.status_code == 200
        for payload in _sse_payloads(response):
            assert len(payload) == 1 and (set(payload) <= STREAM_KINDS | {"error"}), payload
        event("stream")
        return
    body = response.json()
    event(f"{response.status_code} {_outcome(body)}")
    if response.status_code >= 400:
        assert content_type.startswith("application/json"), content_type
        assert set(body) == {"error"}, body
        error = body["error"]
        assert error["code"] == response.status_code, body
        assert isinstance(error["status"], str) and isinstance(error["message"], str), body
        _check_error_info(error["details"])
    else:
        assert response.status_code == 200, response.text
        assert isinstance(body, dict | list), body


def stored_tasks_are_whole() -> None:
    """Every task is a valid 1.0 Task, ended (the echo agent answers at once), with a history
    of real messages and one stored event per sequence number."""
    for task in Task.objects.prefetch_related("events"):
        assert task.state in STATES, task.state
        assert task.is_terminal, f"task {task.pk} left {task.state}: {task.history} {task.error}"
        assert task.context_id
        assert task.history and all(
            isinstance(m, dict)
            and m.get("messageId")
            and m.get("parts")
            and m.get("role") in ("ROLE_USER", "ROLE_AGENT")
            for m in task.history
        ), task.history
        assert [e.sequence for e in task.events.all()] == list(range(1, task.last_sequence + 1))
        parse_v1("Task", snapshot_of(task))


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def world(echo_url, api_key, monkeypatch, transactional_db):
    """The echo agent, the caller's key and one completed task of that caller. Push
    deliveries are recorded, not sent (the fuzzer invents webhook URLs)."""
    from tasks_app.push_delivery import deliver_push

    queued: list[int] = []
    monkeypatch.setattr(deliver_push, "delay", queued.append)
    agent = register(echo_url)
    return {"agent": agent.pk, "key": api_key[1], "queued": queued}


async def _existing_task(world) -> str:
    """The caller's completed task, made once; every other task is removed, so each example
    starts clean and a failure is pinned on the example that caused it."""
    if "task" in world:
        await sync_to_async(Task.objects.exclude(pk=world["task"]).delete)()
    else:
        async with relay_client() as client:
            response = await client.post(
                f"/a2a/agents/{world['agent']}/",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": "m",
                            "role": "ROLE_USER",
                            "parts": [{"text": "hi"}],
                        }
                    },
                },
                headers={"Authorization": f"Bearer {world['key']}", "A2A-Version": "1.0"},
            )
        assert "result" in response.json(), response.text
        world["task"] = await sync_to_async(Task.objects.values_list("pk", flat=True).get)()
    return world["task"]


def _with_existing(value, task_id: str):
    text = json.dumps(value)
    return json.loads(text.replace(json.dumps(EXISTING)[1:-1], task_id))


async def _settle() -> None:
    """Waits for producers a returnImmediately send left running."""
    running_now = list(gateway._running.values())
    if running_now:
        await asyncio.wait_for(asyncio.gather(*running_now, return_exceptions=True), 10)


def _headers(world, version, extensions) -> dict:
    headers = {"Authorization": f"Bearer {world['key']}"}
    if version is not None:
        headers["A2A-Version"] = version
    if extensions is not None:
        headers["A2A-Extensions"] = extensions.encode("latin-1")  # as a client would send it
    return headers


# --- the fuzzers ---------------------------------------------------------------------------


@given(
    call=mostly(method_calls(), st.tuples(json_values, version_headers)),
    extensions=extension_headers,
)
async def test_any_jsonrpc_body_gets_a_jsonrpc_answer(world, call, extensions):
    body, version = _with_existing(list(call), await _existing_task(world))
    before = await sync_to_async(rows)()
    async with relay_client() as client:
        response = await client.post(
            f"/a2a/agents/{world['agent']}/",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **_headers(world, version, extensions)},
        )
    check_jsonrpc_response(response, body)
    await _settle()
    if _is_error(response):
        assert await sync_to_async(rows)() == before, response.text
    await sync_to_async(stored_tasks_are_whole)()


@given(raw=st.binary(max_size=80) | st.text(max_size=40).map(str.encode), version=version_headers)
async def test_any_bytes_get_a_jsonrpc_answer(world, raw, version):
    async with relay_client() as client:
        response = await client.post(
            f"/a2a/agents/{world['agent']}/", content=raw, headers=_headers(world, version, None)
        )
    check_jsonrpc_response(response, {})
    await sync_to_async(stored_tasks_are_whole)()


@given(request=rest_requests(), extensions=extension_headers)
async def test_any_rest_request_gets_a_rest_answer(world, request, extensions):
    verb, path, query, body, version = _with_existing(list(request), await _existing_task(world))
    content = None if body is None else json.dumps(body).encode()
    before = await sync_to_async(rows)()
    async with relay_client() as client:
        response = await client.request(
            verb,
            f"/a2a/agents/{world['agent']}/{path}",
            params=query,
            content=content,
            headers={"Content-Type": "application/json", **_headers(world, version, extensions)},
        )
    check_rest_response(response)
    await _settle()
    if response.status_code not in (301, 308) and _is_error(response):
        assert await sync_to_async(rows)() == before, response.text
    await sync_to_async(stored_tasks_are_whole)()


# --- the task API, and bodies shaped as attacks --------------------------------------------


def rows() -> tuple[int, int]:
    return Task.objects.count(), TaskEvent.objects.count()


def _is_error(response) -> bool:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return False
    body = response.json()
    return response.status_code >= 400 or (isinstance(body, dict) and "error" in body)


@st.composite
def task_api_requests(draw):
    """(path, body) for the task API: mostly a send to the agent, sometimes anything."""
    path = draw(
        st.sampled_from(
            ["/a2a/tasks/send"] * 3 + ["/a2a/tasks/sendBatch", "/a2a/tasks/sendSubscribe"]
        )
    )
    send = draw(with_junk(PARAMS_V1[Operation.SEND]))
    target = draw(
        mostly(
            st.just({"agentId": "@agent"}),
            st.sampled_from(
                [
                    {},
                    {"agentId": "nobody"},
                    {"teamId": "@agent"},
                    {"agentId": "@agent", "teamId": "x"},
                    {"agentId": 7},
                ]
            ),
        )
    )
    entry = {**target, **send}
    if path.endswith("sendBatch"):
        body = draw(
            mostly(
                st.fixed_dictionaries(
                    {"requests": st.lists(st.just(entry), min_size=1, max_size=3)},
                    optional={
                        "executionMode": st.sampled_from(["parallel", "sequential", "x"]),
                        "aggregationStrategy": st.sampled_from(["individual", "merge", "y"]),
                    },
                ),
                json_values,
            )
        )
    else:
        body = draw(mostly(st.just(entry), json_values))
    return path, body


@given(request=task_api_requests())
async def test_any_task_api_body_gets_a_rest_answer_and_a_refusal_writes_nothing(world, request):
    path, body = _with_existing(list(request), await _existing_task(world))
    body = json.loads(json.dumps(body).replace('"@agent"', json.dumps(world["agent"])))
    before = await sync_to_async(rows)()
    async with relay_client() as client:
        response = await client.post(
            path,
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **_headers(world, None, None)},
        )
    check_rest_response(response)
    await _settle()
    if _is_error(response):
        assert await sync_to_async(rows)() == before, response.text
    await sync_to_async(stored_tasks_are_whole)()


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def attacks(draw):
    """(binding, path, body, what it attacks): an otherwise good send with one attack, sized
    so it crosses one limit only (of those the test sets)."""
    binding = draw(st.sampled_from(["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "task-api"]))
    kind = draw(st.sampled_from(["depth", "size", "parts", "metadata-size", "metadata-depth"]))
    text = "hi"
    parts = [{"text": text}]
    metadata: object = {}
    extra = ""
    if kind == "depth":
        extra = _deep(draw(st.integers(17, 1500)))
    elif kind == "size":
        text = "x" * draw(st.integers(4100, 20_000))
        parts = [{"text": text}]
    elif kind == "parts":
        parts = [{"text": text}] * draw(st.integers(4, 40))
    elif kind == "metadata-size":
        metadata = {"blob": "m" * draw(st.integers(300, 3000))}
    else:
        depth = draw(st.integers(5, 10))
        metadata = json.loads('{"k": ' * depth + "0" + "}" * depth)
    if binding == "jsonrpc-0.3":
        parts = [{"kind": "text", **p} for p in parts]
        message = {"kind": "message", "messageId": "m", "role": "user", "parts": parts}
    else:
        message = {"messageId": "m", "role": "ROLE_USER", "parts": parts}
    if metadata:
        message["metadata"] = metadata
    params = {"message": message}
    if binding.startswith("jsonrpc"):
        method = "SendMessage" if binding.endswith("1.0") else "message/send"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        path = ""
    elif binding == "rest-1.0":
        body, path = json.dumps(params), "message:send"
    else:
        body, path = json.dumps({"agentId": "@agent", **params}), None
    if extra:
        body = body[:-1] + ', "extra": ' + extra + "}"
    return binding, path, body, kind


@given(attack=attacks())
async def test_attack_shaped_bodies_are_refused_in_every_binding_and_store_nothing(
    world, attack, settings
):
    settings.RELAY_MAX_BODY_BYTES = 4096
    settings.RELAY_MAX_JSON_DEPTH = 16
    settings.RELAY_MAX_PARTS = 3
    settings.RELAY_MAX_METADATA_BYTES = 256
    settings.RELAY_MAX_METADATA_DEPTH = 4
    binding, path, body, kind = attack
    event(f"{binding} {kind}")
    await _existing_task(world)
    body = body.replace('"@agent"', json.dumps(world["agent"]))
    url = "/a2a/tasks/send" if path is None else f"/a2a/agents/{world['agent']}/{path}"
    version = "1.0" if binding != "jsonrpc-0.3" else None
    before = await sync_to_async(rows)()
    async with relay_client() as client:
        response = await client.post(
            url,
            content=body.encode(),
            headers={"Content-Type": "application/json", **_headers(world, version, None)},
        )
    assert await sync_to_async(rows)() == before, response.text
    assert response.status_code != 500, response.text
    payload = response.json()
    if binding.startswith("jsonrpc"):
        assert response.status_code == 200, response.text
        code = payload["error"]["code"]
        assert code == (-32600 if kind in ("depth", "size") else -32602), payload
    else:
        error = payload["error"]
        expected = 413 if kind == "size" else 400
        assert response.status_code == expected == error["code"], payload
        assert error["details"][0]["reason"] == (
            "INVALID_REQUEST" if kind in ("depth", "size") else "INVALID_PARAMS"
        ), payload
