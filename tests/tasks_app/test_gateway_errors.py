"""Every bad input and every refusal gets the protocol's own answer, in every binding.

JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3 (``/v1``), in process through the ASGI router
(which sends every A2A call to the A2A consumer), against real a2a-sdk agents on 127.0.0.1. Each
refusal is checked for its code, its HTTP status, an ErrorInfo of the right domain first in
the details, the request id echoed, and for storing nothing: the task count is unchanged.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from asgiref.sync import sync_to_async
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from registry.services import api_key_create, api_key_revoke
from tasks_app import gateway
from tasks_app.models import Task
from tests.agents import ASKS_FOR_INPUT, input_required_agent
from tests.factories import extension, make_agent
from tests.servers import running
from tests.tasks_app.a2a_http import (
    BINDINGS,
    EXTENSION_REQUIRED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPC_03,
    JSONRPC_1,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REST_03,
    REST_1,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNAUTHENTICATED,
    UNSUPPORTED_OPERATION,
    VERSION_NOT_SUPPORTED,
    Binding,
    Request,
    call,
    card_document,
    expect_error,
    field_violations,
    register,
    relay_client,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

ALL = pytest.mark.parametrize("binding", BINDINGS, ids=str)
JSONRPC = pytest.mark.parametrize("binding", [JSONRPC_1, JSONRPC_03], ids=str)
REST = pytest.mark.parametrize("binding", [REST_1, REST_03], ids=str)
V1 = pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
REQUIRED_URI = "https://ext.example/must-have/v1"


@pytest.fixture(scope="module")
def asker_url():
    with running(input_required_agent) as url:
        yield url


async def _refuse(request):
    body = await request.json()
    error = {
        "code": -32004,
        "message": "not today",
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "UNSUPPORTED_OPERATION",
                "domain": "a2a-protocol.org",
            }
        ],
    }
    return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error})


@pytest.fixture(scope="module")
def refusing_url():
    """An agent that answers every JSON-RPC call with an A2A error."""
    with running(Starlette(routes=[Route("/", _refuse, methods=["POST"])])) as url:
        yield url


@pytest.fixture
def key(api_key):
    return api_key[1]


async def task_count() -> int:
    return await sync_to_async(Task.objects.count)()


async def send(binding: Binding, agent_id: str, request: Request, headers: dict[str, str]):
    async with relay_client() as client:
        return await call(client, agent_id, request, headers)


async def refused(
    binding: Binding, agent_id: str, request: Request, headers: dict[str, str], expected, **options
):
    """Sends ``request``, checks it was refused with ``expected`` and stored nothing."""
    before = await task_count()
    response = await send(binding, agent_id, request, headers)
    if binding.jsonrpc:
        options.setdefault("request_id", request.request_id)
    info = expect_error(binding, response, expected, **options)
    assert await task_count() == before, "a refused request stored a task"
    return response, info


async def finished_task(agent_id: str, key: str) -> dict:
    """A task the echo agent completed (it answers with a message: the task ends completed)."""
    response = await send(JSONRPC_1, agent_id, JSONRPC_1.send(), JSONRPC_1.headers(key))
    assert "message" in response.json()["result"], response.text
    tasks = await sync_to_async(list)(
        Task.objects.order_by("-created_at").values("id", "state", "history")
    )
    assert tasks[0]["state"] == "completed"
    return tasks[0]


async def waiting_task(agent_id: str, key: str) -> dict:
    """A task the asking agent left in input-required (open, not terminal)."""
    response = await send(JSONRPC_1, agent_id, JSONRPC_1.send(), JSONRPC_1.headers(key))
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


# --- authentication ------------------------------------------------------------------------


@ALL
async def test_a_call_without_a_key_gets_401_with_a_challenge(binding, echo):
    response, _ = await refused(
        binding,
        echo.pk,
        binding.send(),
        binding.headers(),
        UNAUTHENTICATED,
        request_id=...,
        http_status=401,
    )
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@ALL
async def test_a_revoked_key_is_refused_like_a_missing_one(binding, echo, api_key):
    await sync_to_async(api_key_revoke)(api_key=api_key[0])
    response, _ = await refused(
        binding,
        echo.pk,
        binding.send(),
        binding.headers(api_key[1]),
        UNAUTHENTICATED,
        request_id=...,
        http_status=401,
    )
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@REST
async def test_an_unknown_key_is_refused(binding, echo):
    await refused(
        binding,
        echo.pk,
        binding.get_task("x"),
        binding.headers("not-a-key"),
        UNAUTHENTICATED,
        http_status=401,
    )


@ALL
async def test_a_bad_request_without_a_key_gets_401_not_the_error(binding, echo):
    request = Request("POST", "" if binding.jsonrpc else f"{binding.prefix}message:send", b"{")
    await refused(
        binding,
        echo.pk,
        request,
        binding.headers(),
        UNAUTHENTICATED,
        request_id=None,
        http_status=401,
    )


# --- the HTTP edge -------------------------------------------------------------------------


async def test_a_call_to_a_host_django_refuses_gets_djangos_400(echo, key):
    async with relay_client() as client:
        response = await client.post(
            f"/a2a/agents/{echo.pk}/",
            content=json.dumps(JSONRPC_1.send().body),
            headers={**JSONRPC_1.headers(key), "Host": "evil.example"},
        )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")
    assert await task_count() == 0


@pytest.mark.parametrize("path", ["/a2a/agents/{id}", "/a2a/relay"])
async def test_an_endpoint_without_its_slash_redirects_a_post_keeping_its_method(echo, path):
    """Regression: a POST got 301, which clients repeat as a GET; 308 keeps the POST."""
    path = path.format(id=echo.pk)
    async with relay_client() as client:
        response = await client.post(f"{path}?x=1", content=b"{}")
        page = await client.get(path)
    assert response.status_code == 308
    assert response.headers["location"] == f"{path}/?x=1"
    assert not response.content
    assert page.status_code == 301  # a browser's GET, as Django's APPEND_SLASH answers it


async def test_a_jsonrpc_call_to_an_endpoint_without_its_slash_is_answered_after_the_redirect(
    echo, key
):
    async with relay_client() as client:
        response = await client.post(
            f"/a2a/agents/{echo.pk}",
            content=json.dumps(JSONRPC_1.send().body),
            headers={"Content-Type": "application/json", **JSONRPC_1.headers(key)},
            follow_redirects=True,
        )
    assert response.status_code == 200, response.text
    assert "result" in response.json(), response.text


@ALL
async def test_a_body_over_the_size_limit_is_an_invalid_request(binding, echo, key, settings):
    settings.RELAY_MAX_BODY_BYTES = 1000
    request = binding.send(binding.message("x" * 2000))
    _, info = await refused(
        binding,
        echo.pk,
        request,
        binding.headers(key),
        INVALID_REQUEST,
        request_id=None,
        http_status=None if binding.jsonrpc else 413,
    )
    if binding.version == "0.3" and binding.jsonrpc:
        assert "1000 bytes" in info["message"]


async def test_a2a_answers_carry_djangos_security_headers(echo, key):
    response = await send(JSONRPC_1, echo.pk, JSONRPC_1.send(), JSONRPC_1.headers(key))
    assert response.status_code == 200, response.text
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["content-length"] == str(len(response.content))


# --- the envelope --------------------------------------------------------------------------


@JSONRPC
@pytest.mark.parametrize(
    "body", [b"{not json", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe", b"", b'{"id": NaN}']
)
async def test_bytes_that_are_not_json_are_a_parse_error(binding, echo, key, body):
    async with relay_client() as client:
        response = await client.post(
            f"/a2a/agents/{echo.pk}/", content=body, headers=binding.headers(key)
        )
    expect_error(binding, response, PARSE_ERROR, request_id=None)


@REST
async def test_a_rest_body_that_is_not_json_is_a_400(binding, echo, key):
    async with relay_client() as client:
        response = await client.post(
            f"/a2a/agents/{echo.pk}/{binding.prefix}message:send",
            content=b"{not json",
            headers=binding.headers(key),
        )
    expect_error(binding, response, PARSE_ERROR)


@JSONRPC
@pytest.mark.parametrize(
    "body",
    [
        [],
        [{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}],
        "GetTask",
        42,
        b"null",
        True,
    ],
    ids=["empty-batch", "batch", "string", "number", "null", "bool"],
)
async def test_batches_and_non_objects_are_invalid_requests(binding, echo, key, body):
    await refused(
        binding,
        echo.pk,
        Request("POST", "", body),
        binding.headers(key),
        INVALID_REQUEST,
        request_id=None,
    )


@JSONRPC
@pytest.mark.parametrize(
    "body",
    [
        {"id": 1, "method": "GetTask"},
        {"jsonrpc": "1.0", "id": 1, "method": "GetTask"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask"},
        {"jsonrpc": "2.0", "id": True, "method": "GetTask"},
        {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}},
    ],
    ids=[
        "no-version",
        "version-1",
        "method-number",
        "no-method",
        "id-object",
        "id-bool",
        "notification",
    ],
)
async def test_a_malformed_envelope_is_an_invalid_request(binding, echo, key, body):
    # The id is echoed when it could be read, else null (JSON-RPC 2.0, section 5).
    readable = body.get("id") if type(body.get("id")) is int else None
    await refused(
        binding,
        echo.pk,
        Request("POST", "", body),
        binding.headers(key),
        INVALID_REQUEST,
        request_id=readable,
    )


@REST
@pytest.mark.parametrize("body", [[], "text", 3])
async def test_a_rest_body_that_is_not_an_object_is_an_invalid_request(binding, echo, key, body):
    await refused(
        binding,
        echo.pk,
        Request("POST", f"{binding.prefix}message:send", body),
        binding.headers(key),
        INVALID_REQUEST,
    )


@JSONRPC
@pytest.mark.parametrize("method", ["Nope", "message/nope", "sendMessage", "tasks/list", ""])
async def test_an_unknown_method_is_method_not_found(binding, echo, key, method):
    expected = INVALID_REQUEST if method == "" else METHOD_NOT_FOUND
    await refused(binding, echo.pk, binding.rpc(method, {}), binding.headers(key), expected)


@REST
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "nothing/here"),
        ("POST", "message:shout"),
        ("DELETE", "message:send"),
        ("PUT", "tasks/x"),
    ],
)
async def test_an_unknown_rest_route_is_a_404(binding, echo, key, method, path):
    await refused(
        binding,
        echo.pk,
        Request(method, binding.prefix + path),
        binding.headers(key),
        METHOD_NOT_FOUND,
    )


@JSONRPC
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_a_verb_the_jsonrpc_endpoint_does_not_take_is_method_not_found(
    binding, echo, key, method
):
    await refused(
        binding,
        echo.pk,
        Request(method, ""),
        binding.headers(key),
        METHOD_NOT_FOUND,
        request_id=None,
    )


# --- invalid params ------------------------------------------------------------------------


def _bad_sends(binding: Binding) -> list[tuple[str, dict, str]]:
    """(case, params, the field the violation must name)."""
    message = binding.message()
    parts = "parts" if binding.jsonrpc or binding.version == "1.0" else "content"
    return [
        ("no-message", {}, "message"),
        ("message-not-object", {"message": "hello"}, "message"),
        ("no-parts", {"message": {**message, parts: []}}, "message"),
        ("parts-not-array", {"message": {**message, parts: "hello"}}, "message"),
        ("id-not-string", {"message": {**message, "messageId": 5}}, "messageId"),
        ("unknown-role", {"message": {**message, "role": "ROLE_BOSS"}}, "role"),
        (
            "blocking-not-bool" if binding.version == "0.3" else "history-not-int",
            {"message": message, "configuration": {"blocking": "yes", "historyLength": "x"}},
            "configuration",
        ),
    ]


@ALL
@pytest.mark.parametrize("case", range(7), ids=lambda i: f"case{i}")
async def test_invalid_send_params_name_the_field(binding, echo, key, case):
    name, params, field = _bad_sends(binding)[case]
    if binding.jsonrpc:
        request = binding.rpc(binding.method("SendMessage"), params)
    else:
        request = Request("POST", f"{binding.prefix}message:send", params)
    response, _ = await refused(binding, echo.pk, request, binding.headers(key), INVALID_PARAMS)
    violations = field_violations(binding, response)
    assert violations, name
    assert any(field in violation["field"] for violation in violations), (name, violations)


@JSONRPC
@pytest.mark.parametrize("params", [[], "x", 3])
async def test_params_that_are_not_an_object_are_invalid_params(binding, echo, key, params):
    await refused(
        binding,
        echo.pk,
        binding.rpc(binding.method("GetTask"), params),
        binding.headers(key),
        INVALID_PARAMS,
    )


@JSONRPC
@pytest.mark.parametrize("params", [{}, {"id": 5}, {"id": ["x"]}, {"id": "x", "historyLength": -1}])
async def test_get_task_params_of_the_wrong_type_are_invalid_params(binding, echo, key, params):
    response, _ = await refused(
        binding,
        echo.pk,
        binding.rpc(binding.method("GetTask"), params),
        binding.headers(key),
        INVALID_PARAMS,
    )
    assert field_violations(binding, response)


# --- versions ------------------------------------------------------------------------------


@V1
async def test_an_unsupported_version_is_refused_and_named(binding, echo, key):
    _, info = await refused(
        binding,
        echo.pk,
        binding.send(),
        binding.headers(key, **{"A2A-Version": "9.9"}),
        VERSION_NOT_SUPPORTED,
    )
    assert info["metadata"]["requestedVersion"] == "9.9"


@V1
async def test_a_1_0_call_without_the_version_header_is_refused(binding, echo, key):
    headers = {"Authorization": f"Bearer {key}"}
    await refused(binding, echo.pk, binding.send(), headers, VERSION_NOT_SUPPORTED)


@V1
async def test_only_major_minor_counts_in_the_version_header(binding, echo, key):
    response = await send(
        binding, echo.pk, binding.send(), binding.headers(key, **{"A2A-Version": "1.0.7"})
    )
    assert response.status_code == 200, response.text
    assert "message" in (response.json()["result"] if binding.jsonrpc else response.json())


# --- targets and tasks ---------------------------------------------------------------------


@ALL
async def test_an_unknown_agent_is_a_404(binding, echo, key):
    await refused(
        binding,
        "no-such-agent",
        binding.send(),
        binding.headers(key),
        METHOD_NOT_FOUND,
        http_status=404,
    )


@ALL
async def test_a_disabled_agent_is_as_unknown_as_a_missing_one(binding, echo_url, key):
    disabled = await sync_to_async(make_agent)(document=card_document(echo_url), status="disabled")
    await refused(
        binding,
        disabled.pk,
        binding.send(),
        binding.headers(key),
        METHOD_NOT_FOUND,
        http_status=404,
    )


@ALL
@pytest.mark.parametrize("operation", ["get", "cancel", "subscribe", "message"])
async def test_an_unknown_task_is_task_not_found(binding, echo, key, operation):
    task_id = "00000000-0000-0000-0000-000000000000"
    request = {
        "get": lambda: binding.get_task(task_id),
        "cancel": lambda: binding.cancel(task_id),
        "subscribe": lambda: binding.subscribe(task_id),
        "message": lambda: binding.send(binding.message(taskId=task_id)),
    }[operation]()
    await refused(binding, echo.pk, request, binding.headers(key), TASK_NOT_FOUND)


def _without_ids(response) -> str:
    return re.sub(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", response.text
    )


@ALL
@pytest.mark.parametrize("operation", ["get", "cancel", "subscribe"])
async def test_another_keys_task_looks_exactly_like_a_missing_one(binding, echo, key, operation):
    theirs = await finished_task(echo.pk, key)
    _, other_key = await sync_to_async(api_key_create)(name="someone else")
    missing = "11111111-1111-1111-1111-111111111111"
    make = {"get": binding.get_task, "cancel": binding.cancel, "subscribe": binding.subscribe}[
        operation
    ]
    hidden, _ = await refused(
        binding, echo.pk, make(theirs["id"]), binding.headers(other_key), TASK_NOT_FOUND
    )
    absent, _ = await refused(
        binding, echo.pk, make(missing), binding.headers(other_key), TASK_NOT_FOUND
    )
    assert hidden.status_code == absent.status_code
    assert re.sub(r'"id":\d+', "", _without_ids(hidden)) == re.sub(
        r'"id":\d+', "", _without_ids(absent)
    )


@ALL
async def test_a_message_to_a_finished_task_is_unsupported(binding, echo, key):
    task = await finished_task(echo.pk, key)
    request = binding.send(binding.message(taskId=task["id"]))
    await refused(binding, echo.pk, request, binding.headers(key), UNSUPPORTED_OPERATION)
    stored = await sync_to_async(Task.objects.get)(pk=task["id"])
    assert stored.history == task["history"], "the refused message was stored"


@ALL
async def test_cancelling_a_finished_task_is_not_cancelable(binding, echo, key):
    """Regression: the 0.3 HTTP+JSON surface answered 400, where 0.3 servers (the a2a-sdk 0.3
    REST handler) answer 409; 1.0 answers 400."""
    task = await finished_task(echo.pk, key)
    http_status = 409 if (not binding.jsonrpc and binding.version == "0.3") else None
    _, info = await refused(
        binding,
        echo.pk,
        binding.cancel(task["id"]),
        binding.headers(key),
        TASK_NOT_CANCELABLE,
        http_status=http_status,
    )
    stored = await sync_to_async(Task.objects.get)(pk=task["id"])
    assert stored.state == "completed"


@ALL
async def test_a_context_that_is_not_the_tasks_is_invalid_params(binding, asker_url, key):
    asker = await sync_to_async(register)(asker_url, ASKS_FOR_INPUT)
    task = await waiting_task(asker.pk, key)
    request = binding.send(binding.message(taskId=task["id"], contextId="another-context"))
    await refused(binding, asker.pk, request, binding.headers(key), INVALID_PARAMS)
    stored = await sync_to_async(Task.objects.get)(pk=task["id"])
    assert stored.state == "input-required"
    assert len(stored.history) == len(task["history"]), "the refused message was stored"


@ALL
async def test_subscribing_to_a_finished_task_is_unsupported(binding, echo, key):
    task = await finished_task(echo.pk, key)
    await refused(
        binding, echo.pk, binding.subscribe(task["id"]), binding.headers(key), UNSUPPORTED_OPERATION
    )


@pytest.mark.parametrize("binding", [JSONRPC_03, JSONRPC_1], ids=str)
async def test_regression_a_0_3_resubscribe_to_a_finished_task_was_http_400_for_the_0_3_sdk(
    binding, echo, key
):
    """Issue 13: a 0.3 ``tasks/resubscribe`` refused before its first event was answered as
    an application/json reply, which a2a-sdk 0.3's client reads as a broken stream (HTTP 400)
    where the agent's own answer gives it the JSON-RPC error. The 0.3 SDK server answers it
    as a stream of one plain ``data:`` frame holding the error; 1.0 keeps the plain reply."""
    task = await finished_task(echo.pk, key)
    request = binding.subscribe(task["id"])
    response = await send(binding, echo.pk, request, binding.headers(key))
    assert response.status_code == 200, response.text
    content_type = response.headers["content-type"]
    if binding.version == "0.3":
        assert content_type.startswith("text/event-stream"), content_type
        assert response.text.startswith("data: {") and "event:" not in response.text
    else:
        assert content_type.startswith("application/json"), content_type
    expect_error(binding, response, UNSUPPORTED_OPERATION, request_id=request.request_id)


# --- ListTasks -----------------------------------------------------------------------------


LISTS = pytest.mark.parametrize("binding", [JSONRPC_1, REST_1, REST_03], ids=str)


@LISTS
@pytest.mark.parametrize("page_size", [0, 101, -1, "many"])
async def test_a_page_size_outside_1_to_100_is_invalid_params(binding, echo, key, page_size):
    response, _ = await refused(
        binding,
        echo.pk,
        binding.list_tasks(pageSize=page_size),
        binding.headers(key),
        INVALID_PARAMS,
    )
    assert [v["field"] for v in field_violations(binding, response)] == ["pageSize"]


@LISTS
@pytest.mark.parametrize(
    "token",
    [
        "zzz",
        "!!!",
        "bm90IGpzb24",
        "WzEsMl0",
        "eyJhIjogMSwgImIiOiAyfQ",
        "WyJ4Il0",
    ],
    ids=["garbage", "not-base64", "not-json", "numbers", "object", "one-item"],
)
async def test_a_page_token_the_relay_did_not_give_out_is_invalid_params(binding, echo, key, token):
    await refused(
        binding, echo.pk, binding.list_tasks(pageToken=token), binding.headers(key), INVALID_PARAMS
    )


@LISTS
async def test_an_unknown_status_filter_is_invalid_params(binding, echo, key):
    await refused(
        binding,
        echo.pk,
        binding.list_tasks(status="TASK_STATE_BORED"),
        binding.headers(key),
        INVALID_PARAMS,
    )


# --- capabilities --------------------------------------------------------------------------


@ALL
@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
async def test_a_required_extension_that_was_not_activated_is_refused(
    binding, echo_url, key, stream
):
    agent = await sync_to_async(register)(
        echo_url, extensions=[extension(REQUIRED_URI, required=True)]
    )
    _, info = await refused(
        binding, agent.pk, binding.send(stream=stream), binding.headers(key), EXTENSION_REQUIRED
    )
    if binding.version == "1.0":
        assert info["metadata"]["extension"] == REQUIRED_URI
    header = "A2A-Extensions" if binding.version == "1.0" else "X-A2A-Extensions"
    accepted = await send(
        binding,
        agent.pk,
        binding.send(stream=stream),
        binding.headers(key, **{header: REQUIRED_URI}),
    )
    assert accepted.status_code == 200, accepted.text
    assert "error" not in accepted.text[:200], accepted.text


@ALL
async def test_streaming_from_an_agent_that_does_not_stream_is_unsupported(binding, echo_url, key):
    agent = await sync_to_async(register)(echo_url, streaming=False)
    await refused(
        binding, agent.pk, binding.send(stream=True), binding.headers(key), UNSUPPORTED_OPERATION
    )
    task = await finished_task(agent.pk, key)  # a plain send still works
    await refused(
        binding,
        agent.pk,
        binding.subscribe(task["id"]),
        binding.headers(key),
        UNSUPPORTED_OPERATION,
    )


@ALL
async def test_an_extended_card_the_agent_does_not_declare_is_unsupported(binding, echo, key):
    await refused(
        binding, echo.pk, binding.extended_card(), binding.headers(key), UNSUPPORTED_OPERATION
    )


# --- what a refusal leaves behind ----------------------------------------------------------


def _inline_webhook(binding: Binding, url: str) -> dict:
    """``configuration`` with a push config, in the binding's spelling."""
    name = {"1.0": "taskPushNotificationConfig"}.get(binding.version) or (
        "pushNotificationConfig" if binding.jsonrpc else "pushNotification"
    )
    return {name: {"url": url}}


@ALL
@pytest.mark.parametrize("url", ["ftp://hooks.example/x", "http://hooks.example/" + "x" * 2048])
async def test_a_send_with_a_webhook_that_cannot_be_stored_stores_no_task(binding, echo, key, url):
    """Regression: the task was opened before the inline config was refused, and stayed
    submitted forever."""
    request = binding.send(configuration=_inline_webhook(binding, url))
    response, _ = await refused(binding, echo.pk, request, binding.headers(key), INVALID_PARAMS)
    fields = [v["field"] for v in field_violations(binding, response)]
    assert fields == ["configuration.taskPushNotificationConfig.url"]


@ALL
async def test_a_context_id_too_long_to_store_is_invalid_params(binding, echo, key):
    request = binding.send(binding.message(contextId="c" * 201))
    response, _ = await refused(binding, echo.pk, request, binding.headers(key), INVALID_PARAMS)
    assert [v["field"] for v in field_violations(binding, response)] == ["message.contextId"]


async def test_an_agents_refusal_of_a_blocking_send_is_passed_on_and_stores_nothing(
    refusing_url, key
):
    agent = await sync_to_async(register)(refusing_url)
    response, _ = await refused(
        JSONRPC_1, agent.pk, JSONRPC_1.send(), JSONRPC_1.headers(key), UNSUPPORTED_OPERATION
    )
    assert response.json()["error"]["message"] == "not today"


async def test_an_agents_refusal_after_return_immediately_ends_the_task_failed(refusing_url, key):
    """Regression: nobody waited for the agent's error, so the task stayed submitted."""
    agent = await sync_to_async(register)(refusing_url)
    request = JSONRPC_1.send(configuration={"returnImmediately": True})
    response = await send(JSONRPC_1, agent.pk, request, JSONRPC_1.headers(key))
    task_id = response.json()["result"]["task"]["id"]
    if task_id in gateway._running:
        await asyncio.wait_for(gateway._running[task_id], 10)
    response = await send(JSONRPC_1, agent.pk, JSONRPC_1.get_task(task_id), JSONRPC_1.headers(key))
    status = response.json()["result"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert "not today" in json.dumps(status["message"])


@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_an_agents_refusal_of_a_stream_ends_the_stream_with_the_failed_task(
    binding, refusing_url, key
):
    """Regression: the task was deleted under its own stream, which then waited forever."""
    agent = await sync_to_async(register)(refusing_url)
    response = await asyncio.wait_for(
        send(binding, agent.pk, binding.send(stream=True), binding.headers(key)), 10
    )
    frames = [
        json.loads(line[6:]) for line in response.text.split("\n") if line.startswith("data: ")
    ]
    last = frames[-1]["result"] if binding.jsonrpc else frames[-1]
    first = frames[0]["result"] if binding.jsonrpc else frames[0]
    assert list(first) == ["task"], frames  # a stream starts with the task
    assert (last.get("statusUpdate") or last["task"])["status"]["state"] == "TASK_STATE_FAILED"
    stored = await sync_to_async(Task.objects.get)()
    assert stored.state == "failed" and "not today" in stored.error


@ALL
async def test_a_nul_character_in_a_message_is_invalid_params_and_stores_nothing(
    binding, echo, key
):
    """Regression: U+0000 in a message, metadata or an id gave -32603 (the database refused
    it) instead of -32602."""
    request = binding.send(binding.message("before\x00after"))
    async with relay_client() as client:
        response = await call(client, echo.pk, request, binding.headers(key))
    expect_error(binding, response, INVALID_PARAMS, request_id=request.request_id)
    assert await task_count() == 0


@pytest.mark.parametrize("binding", [JSONRPC_1, REST_1], ids=str)
async def test_a_nul_character_in_a_task_id_is_invalid_params(binding, echo, key):
    # In the URL of HTTP+JSON, percent-encoded (the path reaches the relay decoded).
    request = binding.get_task("task\x00id" if binding.jsonrpc else "task%00id")
    async with relay_client() as client:
        response = await call(client, echo.pk, request, binding.headers(key))
    expect_error(binding, response, INVALID_PARAMS, request_id=request.request_id)
