"""The per-process caches of the A2A path: agent targets and API keys.

A call admitted with both cached costs one query (the task's INSERT). Whatever changes an
agent or a key in this process takes effect on the next call; a change the process did not
see (another process's) takes effect within the cache's stated lifetime.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from registry import services
from registry.models import Agent
from tasks_app.api import admission, parsing
from tasks_app.protocol.errors import InvalidRequest, Unauthenticated
from tests.tasks_app.a2a_http import (
    JSONRPC_1,
    METHOD_NOT_FOUND,
    UNAUTHENTICATED,
    call,
    card_document,
    expect_error,
    relay_client,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


async def send(agent_id: str, secret: str):
    async with relay_client() as client:
        return await call(client, agent_id, JSONRPC_1.send(), JSONRPC_1.headers(secret))


def answered(response) -> bool:
    assert response.status_code != 500, response.text
    return "result" in response.json()


def test_a_call_with_its_key_and_agent_cached_costs_one_query(echo, api_key):
    body = json.dumps(JSONRPC_1.send().body).encode()
    parsed = parsing.parse_jsonrpc_call({"A2A-Version": "1.0"}, body)
    for _ in range(2):  # the first call also records the key's last use
        admission.admit_parsed(f"Bearer {api_key[1]}", ("agent", echo.pk, parsed))
    with CaptureQueriesContext(connection) as queries:
        admitted = admission.admit_parsed(f"Bearer {api_key[1]}", ("agent", echo.pk, parsed))
    assert admitted.opened is not None and admitted.target.id == echo.pk
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["INSERT"]


async def test_a_disabled_agent_is_refused_on_the_next_call(echo, api_key):
    assert answered(await send(echo.pk, api_key[1]))
    await sync_to_async(services.agent_update)(agent=echo, fields={"status": "disabled"})
    response = await send(echo.pk, api_key[1])
    expect_error(JSONRPC_1, response, METHOD_NOT_FOUND, http_status=404)


async def test_a_deleted_agent_is_refused_on_the_next_call(echo, api_key):
    agent_id = echo.pk
    assert answered(await send(agent_id, api_key[1]))
    await sync_to_async(services.agent_delete)(agent=echo)
    response = await send(agent_id, api_key[1])
    expect_error(JSONRPC_1, response, METHOD_NOT_FOUND, http_status=404)


async def test_a_moved_agent_is_called_at_its_new_address_on_the_next_call(echo, api_key):
    assert answered(await send(echo.pk, api_key[1]))
    await sync_to_async(services.agent_update)(
        agent=echo, fields={"invocation_url": "http://127.0.0.1:9/"}
    )
    response = await send(echo.pk, api_key[1])
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", task


async def test_a_change_another_process_made_counts_within_the_cache_lifetime(
    echo, api_key, settings
):
    settings.RELAY_TARGET_CACHE_SECONDS = 0.3
    assert answered(await send(echo.pk, api_key[1]))
    # A queryset update sends no signal: this process learns of it like of another's write.
    await sync_to_async(Agent.objects.filter(pk=echo.pk).update)(status="disabled")
    assert answered(await send(echo.pk, api_key[1]))
    await asyncio.sleep(0.4)
    response = await send(echo.pk, api_key[1])
    expect_error(JSONRPC_1, response, METHOD_NOT_FOUND, http_status=404)


async def test_a_new_agent_is_callable_at_once_after_calls_to_its_unknown_id(echo_url, api_key):
    response = await send("late-comer", api_key[1])
    expect_error(JSONRPC_1, response, METHOD_NOT_FOUND, http_status=404)
    await sync_to_async(_register_as)("late-comer", echo_url)
    assert answered(await send("late-comer", api_key[1]))


def _register_as(agent_id: str, url: str) -> None:
    from tests.factories import card_client

    with card_client(card_document(url)) as client:
        services.agent_register(url=f"{url}/card", agent_id=agent_id, client=client)


async def test_a_key_revoked_after_it_was_used_is_refused_on_the_next_call(echo, api_key):
    for _ in range(3):  # cached by the second call, used from the cache by the third
        assert answered(await send(echo.pk, api_key[1]))
    await sync_to_async(services.api_key_revoke)(api_key=api_key[0])
    response = await send(echo.pk, api_key[1])
    expect_error(JSONRPC_1, response, UNAUTHENTICATED, request_id=None, http_status=401)


async def test_a_cached_key_is_refused_once_it_expires(echo, transactional_db):
    api_key, secret = await sync_to_async(services.api_key_create)(
        name="short-lived", expires_at=timezone.now() + timedelta(hours=1)
    )
    for _ in range(3):
        assert answered(await send(echo.pk, secret))
    later = timezone.now() + timedelta(hours=2)
    with mock.patch("registry.models.timezone.now", return_value=later):
        response = await send(echo.pk, secret)
    expect_error(JSONRPC_1, response, UNAUTHENTICATED, request_id=None, http_status=401)


async def test_admission_refuses_a_call_with_the_call_it_parsed(echo, api_key):
    body = json.dumps(JSONRPC_1.send().body).encode()
    parsed = parsing.parse_jsonrpc_call({"A2A-Version": "1.0"}, body)
    with pytest.raises(admission.Refused) as refused:
        await admission.admission(
            f"Bearer {api_key[1]}", lambda: ("agent", "no-such-agent", parsed)
        )
    assert isinstance(refused.value.error, parsing.TargetNotFound)
    assert refused.value.call is parsed  # its error is answered with the call's id and version
    with pytest.raises(admission.Refused) as refused:
        await admission.admission("Bearer not-a-key", lambda: ("agent", echo.pk, parsed))
    assert isinstance(refused.value.error, parsing.InvalidApiKey)
    assert refused.value.call is None  # answered like an unparsed call


async def test_admission_refuses_an_unparsable_call_from_a_keyless_caller_as_unauthenticated(echo):
    def parse():
        raise InvalidRequest("not a call")

    with pytest.raises(admission.Refused) as refused:
        await admission.admission(None, parse)
    assert isinstance(refused.value.error, Unauthenticated)


async def test_admission_refuses_an_unparsable_call_from_a_valid_key_with_its_own_error(api_key):
    def parse():
        raise InvalidRequest("not a call")

    with pytest.raises(admission.Refused) as refused:
        await admission.admission(f"Bearer {api_key[1]}", parse)
    assert isinstance(refused.value.error, InvalidRequest)
