"""Admission of an A2A call: the caller's key looked up and counted in one round trip to the
cache, sent from the event loop before the call is parsed; then the call admitted on the loop
when what it needs is in the process's memory, in a database thread otherwise, counted once
either way."""

from __future__ import annotations

import json

import pytest

from tasks_app.api import calls
from tests.live import manage, relay_env

ADMISSION = """
import asyncio, json
from django.core.cache import cache
from registry import auth
from registry.services import api_key_create
from relay_project import database_threads, ratelimit
from tasks_app.api import calls
from tasks_app.gateway import targets
from tasks_app.protocol.versions import Operation, ProtocolVersion
from tests.factories import make_agent

make_agent(agent_id="echo")
key, secret = api_key_create(name="admission")

hops = []
run = database_threads.run
def counted(function, *args):
    hops.append(args[0].__name__)
    return run(function, *args)
database_threads.run = counted

def send(**message):
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], **message}}
    return calls.Call("JSONRPC", ProtocolVersion.V1_0, Operation.SEND, params, 1)

def get_task():
    return calls.Call("JSONRPC", ProtocolVersion.V1_0, Operation.GET_TASK, {"id": "t"}, 1)

def count():
    return int(cache.get(ratelimit._Counter.current("key", key.prefix, None).name))

async def admit(call, target="echo"):
    hops.clear()
    try:
        admitted = await calls.admission(f"Bearer {secret}", lambda: ("agent", target, call))
    except calls.Refused as refused:
        return [list(hops), type(refused.error).__name__, count()]
    opened = admitted.opened
    return [list(hops), None if opened is None else opened.stored, count()]

async def main():
    out = {}
    out["first"] = await admit(send())
    out["last_use_recorded"] = await admit(send())
    out["cached"] = await admit(send())
    out["get_task"] = await admit(get_task())
    cache.delete(auth._cache_key(key.key_hash))
    out["key_not_cached"] = await admit(send())
    targets.forget_agent_targets()
    out["target_not_cached"] = await admit(send())
    out["conversation"] = await admit(send(contextId="a-conversation"))
    out["unknown_target"] = await admit(send(), target="nobody")
    out["cached_again"] = await admit(send())
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.mark.production
def test_a_call_whose_key_and_target_are_cached_is_admitted_on_the_loop_and_counted_once(
    tmp_path, services
):
    """In the production profile. Nothing of a SendMessage's admission needs a database
    thread once its key and its agent are cached: its task is stored with its message later.
    What is not cached (the key at first and after its last use is recorded, a target
    forgotten, a conversation's context) sends admission to a thread, from the same answer
    of Redis, so every call is counted once."""
    env = relay_env(tmp_path, **services)
    manage(env, "migrate", "--verbosity=0")
    out = json.loads(manage(env, "shell", "-c", ADMISSION).strip().splitlines()[-1])
    thread = ["admit_parsed"]
    assert out["first"] == [thread, False, 1]
    assert out["last_use_recorded"] == [thread, False, 2]  # the key is read afresh, once
    assert out["cached"] == [[], False, 3]
    assert out["get_task"] == [[], None, 4]
    assert out["key_not_cached"] == [thread, False, 5]
    assert out["target_not_cached"] == [thread, False, 6]
    assert out["conversation"] == [thread, False, 7]
    assert out["unknown_target"] == [thread, "TargetNotFound", 8]
    assert out["cached_again"] == [[], False, 9]


def parsed(kind: str, call_text: str, headers=None) -> tuple[str, str, calls.Call]:
    body = json.dumps(json.loads(call_text)).encode()
    return kind, "target", calls.parse_jsonrpc_call(headers or {"A2A-Version": "1.0"}, body)


SEND = (
    '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
    '{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]%s}%s}}'
)


def send(message_fields: str = "", params_fields: str = "") -> str:
    return SEND % (message_fields, params_fields)


@pytest.fixture
def writes_from_the_loop(monkeypatch):
    """As on PostgreSQL: a blocking SendMessage's task is stored with its message."""
    from tasks_app import services

    monkeypatch.setattr(services, "writes_from_the_loop", lambda: True)


@pytest.mark.parametrize(
    ("kind", "call_text"),
    [
        ("agent", send()),
        ("agent", '{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}'),
        ("agent", '{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "t"}}'),
    ],
)
def test_a_call_that_opens_no_task_or_one_stored_with_its_message_may_be_admitted_on_the_loop(
    kind, call_text, writes_from_the_loop
):
    assert calls.admits_in_memory(parsed(kind, call_text))


def test_on_sqlite_a_send_message_is_admitted_in_a_thread_which_stores_its_task():
    assert not calls.admits_in_memory(parsed("agent", send()))


def test_an_unparsable_call_may_be_refused_on_the_loop():
    assert calls.admits_in_memory(calls.InvalidRequest("not a call"))


@pytest.mark.parametrize(
    ("kind", "call_text"),
    [
        ("relay", send()),  # the relay's own endpoint reads where it points from the database
        ("skill", send()),  # choosing an agent by skill reads the registry
        ("team", send()),  # a team reads its members' health at every call
        ("team", '{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}'),
        ("agent", send(', "taskId": "t"')),  # a follow-up reads its task
        ("agent", send(', "contextId": "c"')),  # a conversation reads its agent's context
        ("agent", send(params_fields=', "configuration": {"returnImmediately": true}')),
        (
            "agent",
            send(
                params_fields=', "configuration": {"taskPushNotificationConfig": '
                '{"url": "https://example.com/hook"}}'
            ),
        ),
        (
            "agent",
            '{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": '
            '{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}',
        ),
    ],
)
def test_a_call_whose_admission_needs_the_database_is_admitted_in_a_thread(
    kind, call_text, writes_from_the_loop
):
    assert not calls.admits_in_memory(parsed(kind, call_text))


def test_with_a_per_agent_rate_limit_a_call_to_an_agent_is_admitted_in_a_thread(settings):
    call = parsed(
        "agent", '{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}'
    )
    settings.RELAY_RATE_LIMIT_PER_AGENT = 0
    assert calls.admits_in_memory(call)
    settings.RELAY_RATE_LIMIT_PER_AGENT = 100  # its count is one more round trip to the cache
    assert not calls.admits_in_memory(call)


def test_where_queries_may_run_on_the_loop_admission_runs_in_a_thread(monkeypatch):
    call = parsed(
        "agent", '{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}'
    )
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    assert not calls.admits_in_memory(call)
