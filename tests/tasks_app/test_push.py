"""Push notifications end to end: config CRUD in every binding, inline configs, delivery to a
real webhook on 127.0.0.1, retries with backoff, the SSRF guard, and secrets at rest.

Deliveries run with ``CELERY_TASK_ALWAYS_EAGER`` (the job runs inside the write that queued it)
or by calling ``deliver_push`` directly, one attempt per call, with ``retry`` recorded.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from celery.exceptions import Retry
from django.urls import reverse
from django.utils import timezone
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response
from starlette.routing import Route

from registry import secrets
from registry.services import api_key_create
from routing.demo.agents import WRITER, build_agent_app
from tasks_app import gateway, push, services
from tasks_app.models import PushDelivery, PushNotificationConfig, Task
from tasks_app.push_delivery import MAX_ATTEMPTS, backoff_seconds, deliver_push
from tests.agents import (
    ASKS_FOR_INPUT,
    CHUNKED_STREAMER,
    chunked_streaming_agent,
    input_required_agent,
)
from tests.servers import running
from tests.tasks_app import stored_tasks
from tests.tasks_app.a2a_http import (
    INVALID_PARAMS,
    JSONRPC_03,
    JSONRPC_1,
    REST_03,
    REST_1,
    TASK_NOT_FOUND,
    Request,
    call,
    expect_error,
    register,
    relay_client,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

TOKEN = "notification-token-0123456789"
CREDENTIALS = "webhook-secret-credentials-42"


class Webhook:
    """A receiver that records every POST and answers the statuses it is told, then 200."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.statuses: list[int] = []
        self.app = Starlette(routes=[Route("/hook/{name}", self._hook, methods=["POST"])])

    async def _hook(self, request: StarletteRequest) -> Response:
        self.received.append(
            {
                "path": request.url.path,
                "headers": dict(request.headers),
                "body": json.loads(await request.body()),
            }
        )
        return Response(status_code=self.statuses.pop(0) if self.statuses else 200)

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)

    def bodies(self, name: str | None = None) -> list[dict]:
        return [r["body"] for r in self.received if name is None or r["path"] == f"/hook/{name}"]


@pytest.fixture(scope="module")
def webhook_server():
    webhook = Webhook()
    with running(webhook) as url:
        yield webhook, url


@pytest.fixture
def webhook(webhook_server):
    webhook, url = webhook_server
    webhook.received.clear()
    webhook.statuses.clear()
    webhook.url = url
    return webhook


@pytest.fixture(scope="module")
def agent_urls():
    with (
        running(lambda url: build_agent_app(WRITER, base_url=url)) as writer,
        running(input_required_agent) as asker,
        running(chunked_streaming_agent) as chunks,
    ):
        yield {"writer": writer, "asker": asker, "chunks": chunks}


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    return settings


@pytest.fixture
def key(api_key):
    return api_key[1]


@pytest.fixture
def writer(agent_urls, transactional_db):
    return register(agent_urls["writer"], WRITER)


@pytest.fixture
def asker(agent_urls, transactional_db):
    return register(agent_urls["asker"], ASKS_FOR_INPUT)


async def send(agent_id: str, request: Request, headers: dict[str, str]):
    async with relay_client() as client:
        return await call(client, agent_id, request, headers)


async def rpc(binding, agent_id: str, key: str, method: str, params) -> dict:
    response = await send(agent_id, binding.rpc(method, params), binding.headers(key))
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" not in body, body
    return body["result"]


async def open_task(asker_id: str, key: str) -> str:
    """A task waiting for input (open) at the asking agent."""
    result = await rpc(
        JSONRPC_1, asker_id, key, "SendMessage", {"message": JSONRPC_1.message("hi")}
    )
    assert result["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return result["task"]["id"]


def hook_config(webhook, name: str = "a", **fields) -> dict:
    return {
        "url": f"{webhook.url}/hook/{name}",
        "token": TOKEN,
        "authentication": {"scheme": "Bearer", "credentials": CREDENTIALS},
        **fields,
    }


def assert_no_credentials(payload) -> None:
    """A2A answers give the token back as set (issue 13), never the credentials."""
    text = json.dumps(payload)
    assert CREDENTIALS not in text, text


# --- CRUD ------------------------------------------------------------------------------------


async def test_push_configs_round_trip_over_jsonrpc_1_0(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    created = await rpc(
        JSONRPC_1,
        asker.pk,
        key,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "id": "cfg-1", **hook_config(webhook)},
    )
    assert created["id"] == "cfg-1" and created["taskId"] == task_id
    assert created["url"] == f"{webhook.url}/hook/a"
    assert created["authentication"] == {"scheme": "Bearer"}
    assert created["token"] == TOKEN
    assert_no_credentials(created)

    fetched = await rpc(
        JSONRPC_1,
        asker.pk,
        key,
        "GetTaskPushNotificationConfig",
        {"taskId": task_id, "id": "cfg-1"},
    )
    assert fetched == created
    second = await rpc(
        JSONRPC_1,
        asker.pk,
        key,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, **hook_config(webhook, "b")},
    )
    assert second["id"] == task_id  # no id given: the task's id, as the SDK does
    listed = await rpc(
        JSONRPC_1, asker.pk, key, "ListTaskPushNotificationConfigs", {"taskId": task_id}
    )
    assert [c["id"] for c in listed["configs"]] == ["cfg-1", task_id]
    assert listed["nextPageToken"] == ""
    assert_no_credentials(listed)

    for _ in range(2):  # idempotent
        deleted = await rpc(
            JSONRPC_1,
            asker.pk,
            key,
            "DeleteTaskPushNotificationConfig",
            {"taskId": task_id, "id": "cfg-1"},
        )
        assert deleted is None
    listed = await rpc(
        JSONRPC_1, asker.pk, key, "ListTaskPushNotificationConfigs", {"taskId": task_id}
    )
    assert [c["id"] for c in listed["configs"]] == [task_id]
    gone = await send(
        asker.pk,
        JSONRPC_1.rpc("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "cfg-1"}),
        JSONRPC_1.headers(key),
    )
    expect_error(JSONRPC_1, gone, TASK_NOT_FOUND)


async def test_creating_a_config_again_with_its_id_replaces_it(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    for name in ("a", "b"):
        await rpc(
            JSONRPC_1,
            asker.pk,
            key,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "same", **hook_config(webhook, name)},
        )
    stored = await sync_to_async(list)(PushNotificationConfig.objects.values_list("url", flat=True))
    assert stored == [f"{webhook.url}/hook/b"]


async def test_push_configs_round_trip_over_jsonrpc_0_3(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    config = {
        "id": "legacy",
        "url": f"{webhook.url}/hook/a",
        "token": TOKEN,
        "authentication": {"schemes": ["Bearer"], "credentials": CREDENTIALS},
    }
    created = await rpc(
        JSONRPC_03,
        asker.pk,
        key,
        "tasks/pushNotificationConfig/set",
        {"taskId": task_id, "pushNotificationConfig": config},
    )
    assert created["taskId"] == task_id
    inner = created["pushNotificationConfig"]
    assert inner["id"] == "legacy" and inner["url"] == config["url"]
    assert inner["authentication"] == {"schemes": ["Bearer"]}
    assert inner["token"] == TOKEN
    assert_no_credentials(created)

    fetched = await rpc(
        JSONRPC_03,
        asker.pk,
        key,
        "tasks/pushNotificationConfig/get",
        {"id": task_id, "pushNotificationConfigId": "legacy"},
    )
    assert fetched == created
    listed = await rpc(
        JSONRPC_03, asker.pk, key, "tasks/pushNotificationConfig/list", {"id": task_id}
    )
    assert listed == [created]  # 0.3: a bare array
    for _ in range(2):
        deleted = await rpc(
            JSONRPC_03,
            asker.pk,
            key,
            "tasks/pushNotificationConfig/delete",
            {"id": task_id, "pushNotificationConfigId": "legacy"},
        )
        assert deleted is None
    assert (
        await rpc(JSONRPC_03, asker.pk, key, "tasks/pushNotificationConfig/list", {"id": task_id})
        == []
    )


async def test_a_0_3_get_without_a_config_id_reads_the_tasks_own_config(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    await rpc(
        JSONRPC_03,
        asker.pk,
        key,
        "tasks/pushNotificationConfig/set",
        {"taskId": task_id, "pushNotificationConfig": {"url": f"{webhook.url}/hook/a"}},
    )
    fetched = await rpc(
        JSONRPC_03, asker.pk, key, "tasks/pushNotificationConfig/get", {"id": task_id}
    )
    assert fetched["pushNotificationConfig"]["id"] == task_id


async def test_push_configs_round_trip_over_rest_1_0(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    base = f"tasks/{task_id}/pushNotificationConfigs"
    headers = REST_1.headers(key)
    created = await send(
        asker.pk, Request("POST", base, {"id": "r1", **hook_config(webhook)}), headers
    )
    assert created.status_code == 200, created.text
    assert created.headers["content-type"].startswith("application/a2a+json")
    config = created.json()
    assert config["id"] == "r1" and config["taskId"] == task_id
    assert config["token"] == TOKEN
    assert_no_credentials(config)

    fetched = await send(asker.pk, Request("GET", f"{base}/r1"), headers)
    assert fetched.json() == config
    listed = await send(asker.pk, Request("GET", base), headers)
    assert listed.json() == {"configs": [config], "nextPageToken": ""}
    for _ in range(2):
        deleted = await send(asker.pk, Request("DELETE", f"{base}/r1"), headers)
        assert (deleted.status_code, deleted.json()) == (200, {})
    missing = await send(asker.pk, Request("GET", f"{base}/r1"), headers)
    expect_error(REST_1, missing, TASK_NOT_FOUND)


async def test_a_body_naming_another_task_than_the_path_is_invalid_params(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    response = await send(
        asker.pk,
        Request(
            "POST",
            f"tasks/{task_id}/pushNotificationConfigs",
            {"taskId": "another-task", **hook_config(webhook)},
        ),
        REST_1.headers(key),
    )
    expect_error(REST_1, response, INVALID_PARAMS)
    assert await sync_to_async(PushNotificationConfig.objects.count)() == 0


async def test_push_configs_round_trip_over_rest_0_3(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    base = f"v1/tasks/{task_id}/pushNotificationConfigs"
    body = {
        "parent": f"tasks/{task_id}",
        "configId": "v03",
        "config": {"pushNotificationConfig": {"url": f"{webhook.url}/hook/a", "token": TOKEN}},
    }
    created = await send(asker.pk, Request("POST", base, body), REST_03.headers(key))
    assert created.status_code == 200, created.text
    assert created.json()["name"] == f"tasks/{task_id}/pushNotificationConfigs/v03"
    assert_no_credentials(created.json())
    listed = await send(asker.pk, Request("GET", base), REST_03.headers(key))
    assert [c["name"] for c in listed.json()["configs"]] == [created.json()["name"]]
    deleted = await send(asker.pk, Request("DELETE", f"{base}/v03"), REST_03.headers(key))
    assert (deleted.status_code, deleted.json()) == (200, {})


@pytest.mark.parametrize(
    "url",
    ["ftp://hooks.example/x", "not a url", "", "http://user:pw@hooks.example/x", "http:///nohost"],
)
async def test_a_webhook_url_of_the_wrong_shape_is_invalid_params(asker, key, url):
    task_id = await open_task(asker.pk, key)
    response = await send(
        asker.pk,
        JSONRPC_1.rpc("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}),
        JSONRPC_1.headers(key),
    )
    expect_error(JSONRPC_1, response, INVALID_PARAMS)
    assert await sync_to_async(PushNotificationConfig.objects.count)() == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/",
        "http://[::1]:8080/hook",
        "http://[::ffff:192.168.0.1]/",
        "http://localhost:9/hook",
        "https://api.localhost/hook",
    ],
)
async def test_a_webhook_at_a_private_address_is_refused_when_it_is_set(asker, key, url, settings):
    task_id = await open_task(asker.pk, key)
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    response = await send(
        asker.pk,
        JSONRPC_1.rpc("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}),
        JSONRPC_1.headers(key),
    )
    expect_error(JSONRPC_1, response, INVALID_PARAMS)
    assert "relay does not call loopback" in response.json()["error"]["message"]
    assert await sync_to_async(PushNotificationConfig.objects.count)() == 0


async def test_an_inline_private_webhook_refuses_the_message_and_stores_no_task(
    asker, key, settings
):
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    request = JSONRPC_1.send(
        configuration={"taskPushNotificationConfig": {"url": "http://169.254.169.254/hook"}}
    )
    response = await send(asker.pk, request, JSONRPC_1.headers(key))
    expect_error(JSONRPC_1, response, INVALID_PARAMS)
    assert await sync_to_async(Task.objects.count)() == 0


async def test_another_keys_task_takes_no_push_config(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    _, other = await sync_to_async(api_key_create)(name="other")
    for method, params in [
        ("CreateTaskPushNotificationConfig", {"taskId": task_id, **hook_config(webhook)}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": task_id}),
    ]:
        response = await send(asker.pk, JSONRPC_1.rpc(method, params), JSONRPC_1.headers(other))
        expect_error(JSONRPC_1, response, TASK_NOT_FOUND)
    assert await sync_to_async(PushNotificationConfig.objects.count)() == 0


# --- secrets ---------------------------------------------------------------------------------


async def test_credentials_and_token_are_encrypted_at_rest(asker, key, webhook):
    task_id = await open_task(asker.pk, key)
    await rpc(
        JSONRPC_1,
        asker.pk,
        key,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, **hook_config(webhook)},
    )
    stored = await sync_to_async(PushNotificationConfig.objects.get)()
    assert CREDENTIALS not in stored.auth_credentials and TOKEN not in stored.token
    assert secrets.decrypt(stored.auth_credentials) == CREDENTIALS
    assert secrets.decrypt(stored.token) == TOKEN


def test_the_a2a_view_gives_the_token_as_set_and_only_the_scheme_of_the_credentials(
    transactional_db,
):
    config = PushNotificationConfig(
        config_id="c",
        task_id="t",
        url="https://h.example/",
        token=secrets.encrypt("abc123"),
        auth_scheme="Bearer",
        auth_credentials=secrets.encrypt(CREDENTIALS),
    )
    assert push.config_view(config) == {
        "id": "c",
        "taskId": "t",
        "url": "https://h.example/",
        "token": "abc123",
        "authentication": {"scheme": "Bearer"},
    }


async def test_the_push_token_never_appears_in_logs_admin_pages_or_the_task_api(
    writer, key, webhook, eager, caplog, admin_client
):
    """Issue 13: the token goes back to the task's own caller in A2A answers only."""
    caplog.set_level(logging.DEBUG)
    params = {
        "message": JSONRPC_1.message("write this"),
        "configuration": {"taskPushNotificationConfig": hook_config(webhook, id="inline")},
    }
    result = await rpc(JSONRPC_1, writer.pk, key, "SendMessage", params)
    task_id = result["task"]["id"]
    await rpc(
        JSONRPC_1,
        writer.pk,
        key,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "id": "set", **hook_config(webhook)},
    )
    listed = await rpc(
        JSONRPC_1, writer.pk, key, "ListTaskPushNotificationConfigs", {"taskId": task_id}
    )
    assert {c["token"] for c in listed["configs"]} == {TOKEN}  # the caller's own answer
    assert webhook.received, "a notification was delivered"
    assert any(r["headers"].get("x-a2a-notification-token") == TOKEN for r in webhook.received)

    async with relay_client() as client:
        task_api = await client.get(
            f"/a2a/tasks/{task_id}", headers={"Authorization": f"Bearer {key}"}
        )
    assert task_api.status_code == 200, task_api.text
    config = await sync_to_async(PushNotificationConfig.objects.get)(config_id="set")
    delivery = await sync_to_async(PushDelivery.objects.first)()
    pages = {"task API": task_api.text}
    for name, url in {
        "config list": reverse("admin:tasks_app_pushnotificationconfig_changelist"),
        "config page": reverse("admin:tasks_app_pushnotificationconfig_change", args=[config.pk]),
        "delivery list": reverse("admin:tasks_app_pushdelivery_changelist"),
        "delivery page": reverse("admin:tasks_app_pushdelivery_change", args=[delivery.pk]),
        "task page": reverse("admin:tasks_app_task_change", args=[task_id]),
    }.items():
        response = await sync_to_async(admin_client.get)(url)
        assert response.status_code == 200, (name, response.status_code)
        pages[name] = response.content.decode()
    assert "/hook/a" in pages["config page"]  # the page shows the config, not its token
    for name, text in pages.items():
        assert TOKEN not in text and CREDENTIALS not in text, name
    assert caplog.records, "the calls logged something"
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    assert TOKEN not in logged and CREDENTIALS not in logged


# --- delivery --------------------------------------------------------------------------------


def _kinds(bodies: list[dict]) -> list[str]:
    return [next(iter(body)) for body in bodies]


async def test_every_update_of_a_streamed_task_is_posted_to_the_webhook(
    writer, key, webhook, eager
):
    params = {
        "message": JSONRPC_1.message("write this"),
        "configuration": {"taskPushNotificationConfig": hook_config(webhook)},
    }
    response = await send(
        writer.pk, JSONRPC_1.rpc("SendStreamingMessage", params), JSONRPC_1.headers(key)
    )
    assert response.status_code == 200 and response.text.startswith("data: "), response.text
    task = await sync_to_async(Task.objects.get)()
    assert task.state == "completed"

    bodies = webhook.bodies("a")
    assert _kinds(bodies) == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert bodies[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert bodies[2]["artifactUpdate"]["artifact"]["name"] == "draft"
    assert {
        body[kind].get("taskId", body[kind].get("id"))
        for body, kind in zip(bodies, _kinds(bodies), strict=True)
    } == {task.pk}
    for received in webhook.received:
        assert received["headers"]["authorization"] == f"Bearer {CREDENTIALS}"
        assert received["headers"]["x-a2a-notification-token"] == TOKEN
        assert received["headers"]["content-type"].startswith("application/a2a+json")
    deliveries = await sync_to_async(list)(PushDelivery.objects.values_list("outcome", "attempts"))
    assert deliveries == [("delivered", 1)] * 4


async def test_a_blocking_send_with_an_inline_config_posts_the_final_task(
    writer, key, webhook, eager
):
    params = {
        "message": JSONRPC_1.message("write this"),
        "configuration": {"taskPushNotificationConfig": {"url": f"{webhook.url}/hook/plain"}},
    }
    result = await rpc(JSONRPC_1, writer.pk, key, "SendMessage", params)
    task_id = result["task"]["id"]
    bodies = webhook.bodies("plain")
    assert bodies and bodies[-1]["task"]["id"] == task_id
    assert bodies[-1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    headers = webhook.received[-1]["headers"]
    assert "authorization" not in headers and "x-a2a-notification-token" not in headers
    configs = await rpc(
        JSONRPC_1, writer.pk, key, "ListTaskPushNotificationConfigs", {"taskId": task_id}
    )
    assert [c["url"] for c in configs["configs"]] == [f"{webhook.url}/hook/plain"]


async def test_a_0_3_client_gets_0_3_notifications(writer, key, webhook, eager):
    params = {
        "message": JSONRPC_03.message("write this"),
        "configuration": {
            "pushNotificationConfig": {
                "url": f"{webhook.url}/hook/old",
                "token": TOKEN,
                "authentication": {"schemes": ["Basic"], "credentials": CREDENTIALS},
            }
        },
    }
    result = await rpc(JSONRPC_03, writer.pk, key, "message/send", params)
    assert result["kind"] == "task" and result["status"]["state"] == "completed"
    bodies = webhook.bodies("old")
    assert bodies, "nothing was delivered"
    last = bodies[-1]
    assert last["kind"] == "task" and last["id"] == result["id"], last
    assert last["status"]["state"] == "completed"
    assert "TASK_STATE" not in json.dumps(bodies) and "statusUpdate" not in json.dumps(bodies)
    assert webhook.received[-1]["headers"]["authorization"] == f"Basic {CREDENTIALS}"
    assert webhook.received[-1]["headers"]["x-a2a-notification-token"] == TOKEN


async def test_a_config_added_while_the_task_runs_gets_the_rest_of_its_updates(
    agent_urls, key, webhook, eager
):
    """Regression: the producer kept the task it started with (no push configs then), so a
    config created after a returnImmediately send never received anything."""
    agent = await sync_to_async(register)(agent_urls["chunks"], CHUNKED_STREAMER)
    result = await rpc(
        JSONRPC_1,
        agent.pk,
        key,
        "SendMessage",
        {
            "message": JSONRPC_1.message("tell me a story"),
            "configuration": {"returnImmediately": True},
        },
    )
    task_id = result["task"]["id"]
    await rpc(
        JSONRPC_1,
        agent.pk,
        key,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, **hook_config(webhook, "late")},
    )
    await asyncio.wait_for(gateway._running[task_id], 10)
    bodies = webhook.bodies("late")
    assert bodies, "the config created while the task ran got nothing"
    assert bodies[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_deleted_config_gets_nothing_more(asker, key, webhook, eager):
    task_id = await open_task(asker.pk, key)
    await rpc(
        JSONRPC_1,
        asker.pk,
        key,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "id": "gone", **hook_config(webhook)},
    )
    await rpc(
        JSONRPC_1,
        asker.pk,
        key,
        "DeleteTaskPushNotificationConfig",
        {"taskId": task_id, "id": "gone"},
    )
    await rpc(JSONRPC_1, asker.pk, key, "CancelTask", {"id": task_id})
    assert webhook.received == []


# --- retries, backoff and the SSRF guard -----------------------------------------------------


@pytest.fixture
def recorded_retries(monkeypatch):
    """``deliver_push.retry`` records its countdown instead of scheduling anything."""
    countdowns: list[int] = []

    def retry(*, countdown, exc=None, **options):
        countdowns.append(countdown)
        return Retry(when=countdown)

    monkeypatch.setattr(deliver_push, "retry", retry)
    return countdowns


def _pending_delivery(webhook, name: str = "a") -> int:
    """A completed task with one push config and one pending delivery of its last event."""
    task = stored_tasks.open_task("pusher")
    push.config_create(task=task, config=hook_config(webhook, name))
    queued: list[int] = []
    original = deliver_push.delay
    deliver_push.delay = queued.append
    try:
        services.task_record(task=task, event=services.status_event(task, "completed", "done"))
    finally:
        deliver_push.delay = original
    (delivery_id,) = queued
    return delivery_id


def test_a_failing_webhook_is_retried_with_backoff_until_the_maximum(
    transactional_db, webhook, recorded_retries
):
    delivery_id = _pending_delivery(webhook)
    webhook.statuses.extend([500] * MAX_ATTEMPTS)
    for attempt in range(1, MAX_ATTEMPTS):
        with pytest.raises(Retry):
            deliver_push(delivery_id)
        delivery = PushDelivery.objects.get(pk=delivery_id)
        assert (delivery.outcome, delivery.attempts) == ("pending", attempt)
        assert "500" in delivery.last_error
    assert deliver_push(delivery_id) == "failed"
    delivery = PushDelivery.objects.get(pk=delivery_id)
    assert (delivery.outcome, delivery.attempts) == ("failed", MAX_ATTEMPTS)
    assert recorded_retries == [2, 4, 8, 16, 32]
    assert recorded_retries == [backoff_seconds(n) for n in range(1, MAX_ATTEMPTS)]
    assert len(webhook.received) == MAX_ATTEMPTS
    assert deliver_push(delivery_id) == "skipped"  # a finished delivery is not sent again
    assert len(webhook.received) == MAX_ATTEMPTS


def test_a_webhook_that_recovers_gets_the_update_once(transactional_db, webhook, recorded_retries):
    delivery_id = _pending_delivery(webhook)
    webhook.statuses.extend([503, 500])
    for _ in range(2):
        with pytest.raises(Retry):
            deliver_push(delivery_id)
    assert deliver_push(delivery_id) == "delivered"
    delivery = PushDelivery.objects.get(pk=delivery_id)
    assert (delivery.outcome, delivery.attempts, delivery.last_error) == ("delivered", 3, "")
    assert recorded_retries == [2, 4]
    assert len(webhook.received) == 3
    assert deliver_push(delivery_id) == "skipped"


def test_eager_celery_runs_every_attempt_then_gives_up(transactional_db, webhook, eager):
    delivery_id = _pending_delivery(webhook)
    webhook.statuses.extend([500] * (MAX_ATTEMPTS + 2))
    deliver_push.delay(delivery_id)
    delivery = PushDelivery.objects.get(pk=delivery_id)
    assert (delivery.outcome, delivery.attempts) == ("failed", MAX_ATTEMPTS)
    assert len(webhook.received) == MAX_ATTEMPTS


def test_a_webhook_at_a_private_address_is_refused_without_sending(
    transactional_db, webhook, settings
):
    delivery_id = _pending_delivery(webhook)
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    assert deliver_push(delivery_id) == "refused"
    delivery = PushDelivery.objects.get(pk=delivery_id)
    assert delivery.outcome == "failed" and delivery.attempts == 1
    assert "non-public" in delivery.last_error
    assert webhook.received == []


def test_an_unreachable_webhook_is_retried(transactional_db, webhook, recorded_retries):
    delivery_id = _pending_delivery(webhook)
    PushNotificationConfig.objects.update(url="http://127.0.0.1:9/hook")  # discard port
    with pytest.raises(Retry):
        deliver_push(delivery_id)
    delivery = PushDelivery.objects.get(pk=delivery_id)
    assert (delivery.outcome, delivery.attempts) == ("pending", 1)
    assert delivery.last_error and recorded_retries == [2]


# --- order: one config's events one at a time, oldest first (issue 34, item 3) -----------------


def _pending_deliveries(webhook) -> list[int]:
    """A task with one push config and three pending deliveries: working, a chunk, completed."""
    task = stored_tasks.open_task("orderly")
    push.config_create(task=task, config=hook_config(webhook))
    queued: list[int] = []
    original = deliver_push.delay
    deliver_push.delay = queued.append
    try:
        services.task_record(task=task, event=services.status_event(task, "working"))
        services.task_record(
            task=task,
            event={
                "artifactUpdate": {
                    "taskId": task.pk,
                    "contextId": task.context_id,
                    "artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]},
                }
            },
        )
        services.task_record(task=task, event=services.status_event(task, "completed", "done"))
    finally:
        deliver_push.delay = original
    return queued


def test_a_failed_delivery_holds_back_the_later_events_until_its_retry(
    transactional_db, webhook, recorded_retries
):
    first, second, third = _pending_deliveries(webhook)
    webhook.statuses.append(500)
    with pytest.raises(Retry):
        deliver_push(first)
    # The later events' jobs leave them behind the one waiting for its retry.
    assert deliver_push(second) == "queued" and deliver_push(third) == "queued"
    assert _kinds(webhook.bodies()) == ["statusUpdate"]
    assert deliver_push(first) == "delivered"  # the retry sends the rest, in order
    assert _kinds(webhook.bodies()) == [
        "statusUpdate",
        "statusUpdate",
        "artifactUpdate",
        "statusUpdate",
    ]
    assert set(PushDelivery.objects.values_list("outcome", flat=True)) == {"delivered"}
    assert recorded_retries == [2]
    assert deliver_push(third) == "skipped"


def test_a_delivery_given_up_lets_the_later_events_follow(
    transactional_db, webhook, recorded_retries
):
    first, *_ = _pending_deliveries(webhook)
    webhook.statuses.extend([500] * MAX_ATTEMPTS)
    for _ in range(MAX_ATTEMPTS - 1):
        with pytest.raises(Retry):
            deliver_push(first)
    assert deliver_push(first) == "failed"
    assert _kinds(webhook.bodies()[MAX_ATTEMPTS:]) == ["artifactUpdate", "statusUpdate"]
    outcomes = PushDelivery.objects.order_by("pk").values_list("outcome", flat=True)
    assert list(outcomes) == ["failed", "delivered", "delivered"]


def test_a_config_another_job_is_delivering_is_left_to_that_job(transactional_db, webhook):
    first, *_ = _pending_deliveries(webhook)
    PushNotificationConfig.objects.update(delivering_until=timezone.now() + timedelta(minutes=1))
    assert deliver_push(first) == "queued"
    assert webhook.received == []
    # A lease that ran out (its job died) is taken over.
    PushNotificationConfig.objects.update(delivering_until=timezone.now() - timedelta(seconds=1))
    assert deliver_push(first) == "delivered"
    assert len(webhook.received) == 3
    assert PushNotificationConfig.objects.get().delivering_until is None


async def test_with_tracing_on_the_delivery_job_continues_the_calls_trace(
    writer, key, webhook, eager, monkeypatch
):
    from relay_project import tracing
    from tests.otlp_receiver import tracing_to_receiver

    caller_trace = "0af7651916cd43dd8448eb211c80319c"
    params = {
        "message": JSONRPC_1.message("write this"),
        "configuration": {"taskPushNotificationConfig": {"url": f"{webhook.url}/hook/traced"}},
    }
    with tracing_to_receiver(monkeypatch) as receiver:
        headers = {
            **JSONRPC_1.headers(key),
            "traceparent": f"00-{caller_trace}-b7ad6b7169203331-01",
        }
        response = await send(writer.pk, JSONRPC_1.rpc("SendMessage", params), headers)
        assert response.status_code == 200, response.text
        tracing.flush()
        spans = receiver.wait_for(
            lambda spans: (
                any(s.name == "push.deliver" for s in spans)
                and any(s.name.startswith("invoke_agent") for s in spans)
            )
        )

    # A send has no a2a.call span: its events are recorded in the job driving the task, whose
    # trace context is the caller's, so each delivery is a child of the caller's span.
    assert not [s for s in spans if s.name.startswith("a2a.call")]
    jobs = [s for s in spans if s.name == "push.deliver"]
    assert jobs
    assert {(job.trace_id, job.parent_span_id) for job in jobs} == {
        (caller_trace, "b7ad6b7169203331")
    }
    sent = {r["headers"].get("traceparent") for r in webhook.received}
    assert sent == {f"00-{caller_trace}-{job.span_id}-01" for job in jobs}
