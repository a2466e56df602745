"""What an MCP tool call costs the relay, held to the A2A call's budget: the same statements,
the same trips to the database thread (admission with the key, the tool and the task's
opening in one, the answer's event write in the other), the call rules checked once; and a
plain JSON call whose key is checked in that admission still gets 401 for a bad key."""

from __future__ import annotations

import json

import pytest

from bench.gateway_load import mcp_request
from relay_project.database import database_sync_to_async
from routing.demo.agents import ECHO, app_factory
from routing.mcp.tools import tool_name
from tests.queries import EVENT_WRITE, USAGE_WRITE, ThreadQueries, kinds, of_the_call
from tests.servers import running
from tests.tasks_app.a2a_http import register, relay_client
from tests.tasks_app.test_query_budgets import settled, warm

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


@pytest.fixture(scope="module")
def echo_url():
    with running(app_factory(ECHO)) as url:
        yield url


@pytest.fixture
def echo(echo_url, transactional_db):
    """The echo agent registered at the relay; its id."""
    return register(echo_url).pk


async def mcp_call(client, key: str | None, agent: str, **changes):
    body, headers = mcp_request(tool_name("agent", agent), text="budget")
    if changes:
        body = json.dumps({**json.loads(body), **changes}).encode()
    if key is not None:
        headers = {**headers, "Authorization": f"Bearer {key}"}
    return await client.post("/mcp", content=body, headers=headers)


def answered(response) -> dict:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    result = response.json()["result"]
    assert not result.get("isError"), result
    return result


async def warmed(client, echo, api_key) -> None:
    await warm(client, echo, api_key)
    for _ in range(2):
        answered(await mcp_call(client, api_key[1], echo))
        await settled()


async def test_a_tool_call_costs_the_statements_of_an_a2a_send(echo, api_key):
    async with relay_client() as client:
        await warmed(client, echo, api_key)
        async with ThreadQueries() as queries:
            result = answered(await mcp_call(client, api_key[1], echo))
            await settled()
    assert result["content"][0]["text"].startswith("budget")
    # As test_query_budgets holds the A2A send: with the key, the agent and the rules cached,
    # finding the tool and admitting the call read nothing.
    assert kinds(of_the_call(queries.statements)) == [
        "INSERT tasks_app_task",
        EVENT_WRITE,
        USAGE_WRITE,
    ], queries.statements


async def test_a_tool_call_goes_to_the_database_thread_twice_and_checks_the_rules_once(
    echo, api_key, monkeypatch
):
    from registry import access
    from relay_project.database import DatabaseSyncToAsync

    hops: list[str] = []
    hop = DatabaseSyncToAsync.thread_handler
    verdicts: list[str] = []
    call_verdict = access.call_verdict  # check_call's evaluation of the rules, and the listing's

    def judged(*args, **kwargs):
        verdicts.append(kwargs["target_id"])
        return call_verdict(*args, **kwargs)

    def counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return hop(self, *args, **kwargs)

    async with relay_client() as client:
        await warmed(client, echo, api_key)
        monkeypatch.setattr(DatabaseSyncToAsync, "thread_handler", counted)
        monkeypatch.setattr(access, "call_verdict", judged)
        answered(await mcp_call(client, api_key[1], echo))
        await settled()
    of_the_call = [name for name in hops if not name.endswith(".exists")]  # settled's polls
    assert of_the_call[0] == "tool_admitted", hops
    assert len(of_the_call) == 2, hops
    assert verdicts == [echo]


@pytest.mark.parametrize("key", [None, "not-a-key"])
async def test_a_plain_tool_call_without_a_valid_key_gets_401(echo, key):
    async with relay_client() as client:
        for changes in ({}, {"params": {"name": tool_name("agent", echo)}}):  # the second: no _meta
            response = await mcp_call(client, key, echo, **changes)
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_tool_outside_the_keys_scope_is_unknown(echo):
    from registry.services import api_key_create

    _, calls_nothing = await database_sync_to_async(api_key_create)(
        name="calls nothing", can_call=False
    )
    async with relay_client() as client:
        response = await mcp_call(client, calls_nothing, echo)
    assert response.status_code == 400, response.text
    assert f"no tool {tool_name('agent', echo)!r} here" in response.json()["error"]["message"]
