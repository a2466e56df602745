"""Attacks on the A2A endpoints and the task API, each answered as documented and storing
nothing.

In process through the ASGI router (the consumer serves every A2A call), against a real
a2a-sdk echo agent on 127.0.0.1, in JSON-RPC 1.0 and 0.3 and HTTP+JSON 1.0 and 0.3, and on the
task API. The answers:

- no key: 401, ``WWW-Authenticate: Bearer realm="brass-relay"``;
- an unknown, revoked or expired key: 401, the same plus ``error="invalid_token"``;
- an agent or team outside the key's scope, or any target for a key that may not call: the
  answer an unknown target gets (404, the same message), never "forbidden";
- another key's task: TaskNotFound, as for a task that does not exist.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from registry.models import ApiKey
from registry.services import api_key_create, api_key_revoke
from registry.teams import team_create
from tasks_app.models import Task
from tests.tasks_app.a2a_http import (
    BINDINGS,
    JSONRPC_1,
    METHOD_NOT_FOUND,
    TASK_NOT_FOUND,
    UNAUTHENTICATED,
    Binding,
    Request,
    expect_error,
    register,
    relay_client,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

ALL = pytest.mark.parametrize("binding", BINDINGS, ids=str)
NO_KEY_CHALLENGE = 'Bearer realm="brass-relay"'
BAD_KEY_CHALLENGE = 'Bearer realm="brass-relay", error="invalid_token"'


@pytest.fixture
def other(echo_url, transactional_db):
    """A second agent (the same server under another id)."""
    return register(echo_url)


@pytest.fixture
def crew(echo):
    return team_create(team_id="crew", name="Crew", members=[echo.pk], default_agent=echo.pk)


@pytest.fixture
def rivals(other):
    return team_create(team_id="rivals", name="Rivals", members=[other.pk], default_agent=other.pk)


def new_key(**scope) -> str:
    return api_key_create(name="caller", **scope)[1]


async def post(path: str, request: Request, headers: dict[str, str]):
    content = request.body
    if content is not None and not isinstance(content, bytes):
        content = json.dumps(content).encode()
    async with relay_client() as client:
        return await client.request(
            request.method,
            path + request.path,
            content=content,
            params=request.query,
            headers={"Content-Type": "application/json", **headers},
        )


def agent_path(agent_id: str) -> str:
    return f"/a2a/agents/{agent_id}/"


def team_path(team_id: str) -> str:
    return f"/a2a/teams/{team_id}/"


async def refused(
    binding: Binding, path: str, request: Request, headers, expected, http_status: int
):
    before = await sync_to_async(Task.objects.count)()
    response = await post(path, request, headers)
    # A call refused for its key is answered like one never read: no request id.
    options = (
        {"request_id": None if expected is UNAUTHENTICATED else request.request_id}
        if binding.jsonrpc
        else {}
    )
    expect_error(binding, response, expected, http_status=http_status, **options)
    assert await sync_to_async(Task.objects.count)() == before, "a refused call stored a task"
    return response


# --- who calls -----------------------------------------------------------------------------


@ALL
async def test_no_key_gets_401_with_the_bare_challenge(binding, echo):
    response = await refused(
        binding, agent_path(echo.pk), binding.send(), binding.headers(), UNAUTHENTICATED, 401
    )
    assert response.headers["WWW-Authenticate"] == NO_KEY_CHALLENGE


@ALL
@pytest.mark.parametrize("kind", ["unknown", "revoked", "expired"])
async def test_a_bad_key_gets_401_saying_invalid_token(binding, echo, kind):
    if kind == "unknown":
        secret = "br_not-a-key-at-all"
    else:
        api_key, secret = await sync_to_async(api_key_create)(name=kind)
        if kind == "revoked":
            await sync_to_async(api_key_revoke)(api_key=api_key)
        else:
            await sync_to_async(ApiKey.objects.filter(pk=api_key.pk).update)(
                expires_at=timezone.now() - timedelta(seconds=1)
            )
    response = await refused(
        binding, agent_path(echo.pk), binding.send(), binding.headers(secret), UNAUTHENTICATED, 401
    )
    assert response.headers["WWW-Authenticate"] == BAD_KEY_CHALLENGE
    assert secret not in response.text


async def test_a_key_that_expires_is_refused_from_that_moment_even_when_cached(echo):
    api_key, secret = await sync_to_async(api_key_create)(name="short-lived")
    ok = await post(agent_path(echo.pk), JSONRPC_1.send(), JSONRPC_1.headers(secret))
    assert ok.status_code == 200 and "result" in ok.json(), ok.text
    await sync_to_async(ApiKey.objects.filter(pk=api_key.pk).update)(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    response = await post(agent_path(echo.pk), JSONRPC_1.send(), JSONRPC_1.headers(secret))

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == BAD_KEY_CHALLENGE


# --- what it may call ----------------------------------------------------------------------


async def _not_found_like_an_unknown_agent(binding: Binding, agent_id: str, headers):
    """The answer for ``agent_id`` equals the one for an agent that does not exist (but for
    the id in the message)."""
    refusal = await refused(
        binding, agent_path(agent_id), binding.send(), headers, METHOD_NOT_FOUND, 404
    )
    unknown = await refused(
        binding, agent_path("no-such-agent"), binding.send(), headers, METHOD_NOT_FOUND, 404
    )
    assert (refusal.json().keys(), refusal.status_code) == (
        unknown.json().keys(),
        unknown.status_code,
    )
    message = _message(binding, refusal)
    assert message == f"no agent {agent_id!r} at this relay"
    assert _message(binding, unknown) == "no agent 'no-such-agent' at this relay"
    assert "forbidden" not in refusal.text.lower() and "scope" not in refusal.text.lower()


def _message(binding: Binding, response) -> str:
    return response.json()["error"]["message"]


@ALL
async def test_a_key_scoped_to_another_agent_finds_no_agent(binding, echo, other):
    secret = await sync_to_async(new_key)(agents=[other.pk])
    await _not_found_like_an_unknown_agent(binding, echo.pk, binding.headers(secret))
    allowed = await post(agent_path(other.pk), binding.send(), binding.headers(secret))
    assert allowed.status_code == 200 and "error" not in allowed.json(), allowed.text


@ALL
async def test_a_key_that_may_not_call_finds_no_agent(binding, echo):
    secret = await sync_to_async(new_key)(can_call=False)
    await _not_found_like_an_unknown_agent(binding, echo.pk, binding.headers(secret))


@ALL
async def test_a_key_scoped_to_a_team_finds_no_agent(binding, echo, crew):
    secret = await sync_to_async(new_key)(teams=[crew.pk])
    await _not_found_like_an_unknown_agent(binding, echo.pk, binding.headers(secret))


@ALL
async def test_a_key_scoped_to_another_team_finds_no_team(binding, crew, rivals):
    secret = await sync_to_async(new_key)(teams=[rivals.pk])
    refusal = await refused(
        binding, team_path(crew.pk), binding.send(), binding.headers(secret), METHOD_NOT_FOUND, 404
    )
    assert _message(binding, refusal) == "no team 'crew' at this relay"
    unknown = await refused(
        binding, team_path("nobody"), binding.send(), binding.headers(secret), METHOD_NOT_FOUND, 404
    )
    assert _message(binding, unknown) == "no team 'nobody' at this relay"


async def test_a_key_scoped_to_an_agent_finds_no_team(echo, crew):
    secret = await sync_to_async(new_key)(agents=[echo.pk])
    await refused(
        JSONRPC_1,
        team_path(crew.pk),
        JSONRPC_1.send(),
        JSONRPC_1.headers(secret),
        METHOD_NOT_FOUND,
        404,
    )


async def test_a_key_scoped_to_a_team_calls_its_members_through_the_team(echo, crew):
    """The key names the team, not its member: the relay calls the member on the team task's
    behalf, and that is not refused."""
    secret = await sync_to_async(new_key)(teams=[crew.pk])

    response = await post(team_path(crew.pk), JSONRPC_1.send(), JSONRPC_1.headers(secret))

    body = response.json()
    assert response.status_code == 200 and "result" in body, response.text
    # The echo member answers with a Message, and so does the team (a single exchange).
    answer = body["result"]["message"]
    task = await Task.objects.aget(context_id=answer["contextId"], target_kind="team")
    assert task.state == "completed"
    children = await sync_to_async(list)(
        Task.objects.filter(parent_id=task.pk).values_list("target_kind", "target_id")
    )
    assert children == [("agent", echo.pk)]


async def test_the_relay_endpoint_applies_the_scope_of_the_target_it_forwards_to(
    echo, other, settings
):
    settings.RELAY_DEFAULT_TARGET = f"agent:{echo.pk}"
    outsider = await sync_to_async(new_key)(agents=[other.pk])
    insider = await sync_to_async(new_key)(agents=[echo.pk])

    refusal = await refused(
        JSONRPC_1,
        "/a2a/relay/",
        JSONRPC_1.send(),
        JSONRPC_1.headers(outsider),
        METHOD_NOT_FOUND,
        404,
    )
    allowed = await post("/a2a/relay/", JSONRPC_1.send(), JSONRPC_1.headers(insider))

    assert _message(JSONRPC_1, refusal) == "no relay 'default' at this relay"
    assert allowed.status_code == 200 and "result" in allowed.json(), allowed.text


# --- whose task ----------------------------------------------------------------------------


async def _task_of(secret: str, agent_id: str) -> str:
    response = await post(
        agent_path(agent_id), JSONRPC_1.send(returnImmediately=False), JSONRPC_1.headers(secret)
    )
    assert response.status_code == 200, response.text
    await sync_to_async(Task.objects.get)(target_id=agent_id)
    return await sync_to_async(
        Task.objects.filter(target_id=agent_id).values_list("pk", flat=True).get
    )()


@ALL
async def test_another_keys_task_is_not_found(binding, echo):
    owner = await sync_to_async(new_key)()
    snoop = await sync_to_async(new_key)()
    task_id = await _task_of(owner, echo.pk)

    for request in (binding.get_task(task_id), binding.cancel(task_id)):
        response = await refused(
            binding, agent_path(echo.pk), request, binding.headers(snoop), TASK_NOT_FOUND, None
        )
        missing = await refused(
            binding,
            agent_path(echo.pk),
            _same_call(binding, request, "no-such-task"),
            binding.headers(snoop),
            TASK_NOT_FOUND,
            None,
        )
        # Word for word the answer for a task that does not exist, but for the id asked for.
        assert response.status_code == missing.status_code
        assert json.dumps(response.json()["error"]).replace(task_id, "ID") == json.dumps(
            missing.json()["error"]
        ).replace("no-such-task", "ID")
    task = await sync_to_async(Task.objects.get)(pk=task_id)
    assert task.state == "completed", "the snoop's cancel reached the task"


def _same_call(binding: Binding, request: Request, task_id: str) -> Request:
    if binding.jsonrpc:
        return binding.rpc(request.body["method"], {"id": task_id})
    if request.method == "GET":
        return binding.get_task(task_id)
    return binding.cancel(task_id)


async def test_listing_tasks_shows_only_the_callers_own(echo):
    owner = await sync_to_async(new_key)()
    snoop = await sync_to_async(new_key)()
    await _task_of(owner, echo.pk)

    mine = await post(agent_path(echo.pk), JSONRPC_1.list_tasks(), JSONRPC_1.headers(owner))
    theirs = await post(agent_path(echo.pk), JSONRPC_1.list_tasks(), JSONRPC_1.headers(snoop))

    assert len(mine.json()["result"]["tasks"]) == 1
    assert theirs.json()["result"]["tasks"] == []


# --- the task API --------------------------------------------------------------------------


async def task_api(method: str, path: str, headers: dict[str, str], body=None):
    async with relay_client() as client:
        return await client.request(
            method,
            path,
            headers={"Content-Type": "application/json", **headers},
            content=json.dumps(body).encode() if body is not None else None,
        )


def send_body(**target) -> dict:
    return {
        **target,
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
    }


def _rest_error(response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and error["details"][0]["reason"] == reason, error
    return error


@pytest.mark.parametrize("path", ["/a2a/tasks/send", "/a2a/tasks/sendSubscribe"])
async def test_the_task_api_answers_no_key_and_a_bad_key_with_401(echo, path):
    before = await sync_to_async(Task.objects.count)()
    bare = await task_api("POST", path, {}, send_body(agentId=echo.pk))
    bad = await task_api(
        "POST", path, {"Authorization": "Bearer br_nope"}, send_body(agentId=echo.pk)
    )

    _rest_error(bare, 401, "UNAUTHENTICATED")
    _rest_error(bad, 401, "UNAUTHENTICATED")
    assert bare.headers["WWW-Authenticate"] == NO_KEY_CHALLENGE
    assert bad.headers["WWW-Authenticate"] == BAD_KEY_CHALLENGE
    assert await sync_to_async(Task.objects.count)() == before


@pytest.mark.parametrize("path", ["/a2a/tasks/send", "/a2a/tasks/sendSubscribe"])
@pytest.mark.parametrize("target", ["agent", "team"])
async def test_the_task_api_finds_no_target_outside_the_keys_scope(
    echo, other, crew, rivals, path, target
):
    secret = await sync_to_async(new_key)(agents=[other.pk], teams=[rivals.pk])
    body = send_body(agentId=echo.pk) if target == "agent" else send_body(teamId=crew.pk)

    response = await task_api("POST", path, {"Authorization": f"Bearer {secret}"}, body)

    error = _rest_error(response, 404, "METHOD_NOT_FOUND")
    named = echo.pk if target == "agent" else crew.pk
    assert error["message"] == f"no {target} {named!r} at this relay"
    assert await sync_to_async(Task.objects.count)() == 0


async def test_a_batch_with_one_target_outside_the_scope_runs_nothing(echo, other):
    secret = await sync_to_async(new_key)(agents=[other.pk])
    body = {"requests": [send_body(agentId=other.pk), send_body(agentId=echo.pk)]}

    response = await task_api(
        "POST", "/a2a/tasks/sendBatch", {"Authorization": f"Bearer {secret}"}, body
    )

    _rest_error(response, 404, "METHOD_NOT_FOUND")
    assert await sync_to_async(Task.objects.count)() == 0


@pytest.mark.parametrize("suffix", ["", "/cancel", "/trace"])
async def test_the_task_api_hides_another_keys_task(echo, suffix):
    owner = await sync_to_async(new_key)()
    snoop = await sync_to_async(new_key)()
    task_id = await _task_of(owner, echo.pk)
    method = "POST" if suffix == "/cancel" else "GET"
    body = {} if method == "POST" else None

    theirs = await task_api(
        method, f"/a2a/tasks/{task_id}{suffix}", {"Authorization": f"Bearer {snoop}"}, body
    )
    missing = await task_api(
        method, f"/a2a/tasks/nothing-here{suffix}", {"Authorization": f"Bearer {snoop}"}, body
    )
    mine = await task_api("GET", f"/a2a/tasks/{task_id}", {"Authorization": f"Bearer {owner}"})

    _rest_error(theirs, 404, "TASK_NOT_FOUND")
    _rest_error(missing, 404, "TASK_NOT_FOUND")
    assert mine.status_code == 200 and mine.json()["id"] == task_id
    assert (await sync_to_async(Task.objects.get)(pk=task_id)).state == "completed"
