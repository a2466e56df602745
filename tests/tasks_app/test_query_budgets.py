"""Query budgets of the hot path, counted where the statements run: asgiref's database thread.
Every statement of a call goes through Django's connection there, so ``CaptureQueriesContext``
sees the whole of it: admission, the task's creation, the events written, the answer."""

from __future__ import annotations

import asyncio

import pytest

from relay_project.database import database_sync_to_async
from tasks_app.models import Task
from tests.queries import EVENT_WRITE, USAGE_WRITE, ThreadQueries, kinds
from tests.tasks_app.a2a_http import JSONRPC_1, call, relay_client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


async def settled() -> None:
    """Waits until no task is still being driven (the job writes after a blocking answer)."""
    for _ in range(100):
        if not await database_sync_to_async(
            Task.objects.exclude(state__in=["completed", "failed", "canceled"]).exists
        )():
            return
        await asyncio.sleep(0.05)


async def test_a_send_message_to_a_cached_agent_costs_its_task_insert_and_one_event_write(
    echo, api_key
):
    async with relay_client() as client:
        await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))  # warm caches
        await settled()
        async with ThreadQueries() as queries:
            response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
            await settled()
    assert "result" in response.json(), response.text
    # Admission reads the key, the agent and the relay's own team (3 SELECTs), inserts the
    # task; its end is one event write, with the call's usage record.
    statements = kinds(queries.statements)
    writes = [kind for kind in statements if kind != "SELECT"]
    assert writes == ["INSERT tasks_app_task", EVENT_WRITE, USAGE_WRITE], queries.statements
    assert statements.count("SELECT") <= 4, queries.statements


async def test_a_stream_writes_its_events_in_bursts_not_one_transaction_each(echo, api_key):
    async with relay_client() as client:
        await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
        await settled()
        async with ThreadQueries() as queries:
            response = await call(
                client, echo, JSONRPC_1.send(stream=True), JSONRPC_1.headers(api_key[1])
            )
            await settled()
    assert response.text.startswith("data: ") and '"result"' in response.text
    writes = [kind for kind in kinds(queries.statements) if kind != "SELECT"]
    assert writes[0] == "INSERT tasks_app_task"
    # Each burst of events one event write; one UPDATE may give the task up once its stream
    # ended (ownership).
    bursts = writes.count(EVENT_WRITE)
    assert bursts >= 1 and writes.count("UPDATE tasks_app_task") <= 1, writes
    assert kinds(queries.statements).count("SELECT") <= 4 + bursts, queries.statements


async def test_an_idempotency_key_costs_no_statement_and_its_repeat_one_select(echo, api_key):
    """The key is written with the task's INSERT (a partial unique index): a first send with
    a key costs what one without does; a repeat costs its failed INSERT and the SELECT that
    finds the stored task, and writes nothing."""
    message = JSONRPC_1.message()
    headers = JSONRPC_1.headers(api_key[1], **{"Idempotency-Key": "budget-1"})
    async with relay_client() as client:
        await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))  # warm caches
        await settled()
        async with ThreadQueries() as first:
            await call(client, echo, JSONRPC_1.send(message), headers)
            await settled()
        async with ThreadQueries() as repeat:
            response = await call(client, echo, JSONRPC_1.send(message), headers)
    assert "result" in response.json(), response.text
    statements = kinds(first.statements)
    assert [kind for kind in statements if kind != "SELECT"] == [
        "INSERT tasks_app_task",
        EVENT_WRITE,
        USAGE_WRITE,
    ], first.statements
    assert statements.count("SELECT") <= 4, first.statements
    repeated = kinds(repeat.statements)
    assert [kind for kind in repeated if kind != "SELECT"] == ["INSERT tasks_app_task"]
    assert repeated.count("SELECT") <= 4 + 1, repeat.statements
