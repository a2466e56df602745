"""Query budgets of the hot path, counted where the statements run: asgiref's database thread.
Every statement of a call goes through Django's connection there, so ``CaptureQueriesContext``
sees the whole of it: admission, the task's creation, the events written, the answer."""

from __future__ import annotations

import asyncio

import pytest

from relay_project.database import database_sync_to_async
from tasks_app.models import Task
from tests.queries import EVENT_WRITE, USAGE_WRITE, ThreadQueries, kinds, of_the_call
from tests.tasks_app.a2a_http import JSONRPC_1, call, relay_client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


@pytest.fixture(autouse=True)
def caches_outlive_the_test(settings):
    """The budgets count a warm call: the key, the agent and the access rules cached. Their
    5 s lifetime must not run out between the warm-up and the call on a slow machine."""
    settings.RELAY_TARGET_CACHE_SECONDS = 600
    settings.RELAY_API_KEY_CACHE_SECONDS = 600


async def settled() -> None:
    """Waits until no task is still being driven (the job writes after a blocking answer)."""
    for _ in range(100):
        if not await database_sync_to_async(
            Task.objects.exclude(state__in=["completed", "failed", "canceled"]).exists
        )():
            return
        await asyncio.sleep(0.05)


async def warm(client, echo, api_key) -> None:
    """Two calls: the first stamps the key's last use (and drops its cached row), the second
    caches the key again; the agent and the access rules are cached by then too."""
    for _ in range(2):
        await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
        await settled()


async def test_a_send_message_to_a_cached_agent_costs_its_task_insert_and_one_event_write(
    echo, api_key
):
    async with relay_client() as client:
        await warm(client, echo, api_key)
        async with ThreadQueries() as queries:
            response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
            await settled()
    assert "result" in response.json(), response.text
    # With the key, the agent and the rules cached, admission reads nothing: the call is the
    # task's INSERT and, at its end, one event write with the call's usage record. A feature that is not used (no token
    # issuers, no access rules, no Idempotency-Key, tracing off, no alternates, no retry)
    # adds no statement.
    assert kinds(of_the_call(queries.statements)) == [
        "INSERT tasks_app_task",
        EVENT_WRITE,
        USAGE_WRITE,
    ], queries.statements


async def test_a_stream_writes_its_events_in_bursts_not_one_transaction_each(echo, api_key):
    async with relay_client() as client:
        await warm(client, echo, api_key)
        async with ThreadQueries() as queries:
            response = await call(
                client, echo, JSONRPC_1.send(stream=True), JSONRPC_1.headers(api_key[1])
            )
            await settled()
    assert response.text.startswith("data: ") and '"result"' in response.text
    statements = kinds(of_the_call(queries.statements))
    assert statements[0] == "INSERT tasks_app_task"
    # Each burst of events one event write; one UPDATE may give the task up once its stream
    # ended (ownership). Nothing is read: the stream's events come from the writes.
    bursts = statements.count(EVENT_WRITE)
    assert bursts >= 1 and statements.count("UPDATE tasks_app_task") <= 1, statements
    assert "SELECT" not in statements, queries.statements


async def test_an_idempotency_key_costs_no_statement_and_its_repeat_one_select(echo, api_key):
    """The key is written with the task's INSERT (a partial unique index): a first send with
    a key costs what one without does; a repeat costs its failed INSERT and the SELECT that
    finds the stored task, and writes nothing."""
    message = JSONRPC_1.message()
    headers = JSONRPC_1.headers(api_key[1], **{"Idempotency-Key": "budget-1"})
    async with relay_client() as client:
        await warm(client, echo, api_key)
        async with ThreadQueries() as first:
            await call(client, echo, JSONRPC_1.send(message), headers)
            await settled()
        async with ThreadQueries() as repeat:
            response = await call(client, echo, JSONRPC_1.send(message), headers)
    assert "result" in response.json(), response.text
    assert kinds(of_the_call(first.statements)) == [
        "INSERT tasks_app_task",
        EVENT_WRITE,
        USAGE_WRITE,
    ], first.statements
    assert kinds(of_the_call(repeat.statements)) == ["INSERT tasks_app_task", "SELECT"], (
        repeat.statements
    )


async def test_a_send_message_to_a_cached_agent_goes_to_the_database_thread_twice(
    echo, api_key, monkeypatch
):
    """Admission with the task's opening is one hop to the database thread, the answer's
    event write another: a feature that is not used adds none."""
    from relay_project.database import DatabaseSyncToAsync

    hops: list[str] = []
    hop = DatabaseSyncToAsync.thread_handler

    def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return hop(self, *args, **kwargs)

    async with relay_client() as client:
        await warm(client, echo, api_key)
        monkeypatch.setattr(DatabaseSyncToAsync, "thread_handler", counted)
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
        await settled()
    assert "result" in response.json(), response.text
    of_the_call = [name for name in hops if not name.endswith(".exists")]  # settled's polls
    assert len(of_the_call) == 2, hops
