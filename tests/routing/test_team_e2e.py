"""Teams end to end: the relay in-process over ASGI (JSON-RPC 1.0 at /a2a/teams/{id}/), its
members real a2a-sdk agents on 127.0.0.1, every member call recorded as it went on the wire.

The scripted members (tests.agents.Script) answer with the recipients each test lists; "echo"
and the task agents do not speak the client-routing extension.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from registry.extensions import CLIENT_ROUTING_URI as URI
from registry.models import Agent
from registry.services import agent_register
from registry.teams import team_create
from routing.demo.agents import DEMO_AGENTS, ECHO, app_factory
from routing.demo.setup import DEMO_QUESTION, demo_team_ensure
from routing.management.commands.ask_team import ask_team
from routing.models import MemberContext, RoutingHop
from tasks_app.models import Task
from tasks_app.relay_endpoint import default_target
from tests.agents import Script, input_required_agent, scripted_agent
from tests.live import Recording
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

WAIT_SECONDS = 15.0
LEAD, WORKER, HELPER, OLD = Script("lead"), Script("worker"), Script("helper"), Script("old")
AGENTS = {
    "lead": Recording(scripted_agent(LEAD)),
    "worker": Recording(scripted_agent(WORKER)),
    "helper": Recording(scripted_agent(HELPER)),
    "old": Recording(scripted_agent(OLD, versions=("0.3",))),
    "echo": Recording(app_factory(ECHO)),
    "asks": Recording(input_required_agent),
}


@pytest.fixture(scope="module")
def agent_urls():
    with running_many(AGENTS) as urls:
        yield urls


@pytest.fixture(scope="module")
def demo_urls():
    with running_many({spec.slug: app_factory(spec) for spec in DEMO_AGENTS}) as urls:
        yield urls


@pytest.fixture(autouse=True)
def registered(agent_urls, allow_private_urls):
    """Every test agent registered, scripts empty and recordings cleared."""
    for script in (LEAD, WORKER, HELPER, OLD):
        script.load()
    for agent_id, url in agent_urls.items():
        AGENTS[agent_id].requests.clear()
        agent_register(url=url, agent_id=agent_id)


@pytest.fixture
async def relay(api_key):
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=WAIT_SECONDS,
    ) as client:
        yield client


def make_team(*members: str, default: str = "lead", team_id: str = "crew", hops: int = 10):
    return team_create(
        team_id=team_id,
        name=f"Team {team_id}",
        members=list(members),
        default_agent=default,
        max_routing_hops=hops,
    )


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def addressed_to(recipient: str) -> dict[str, Any]:
    return {"metadata": {URI: {"recipient": recipient}}}


async def send(
    relay,
    message: dict[str, Any],
    *,
    team_id: str = "crew",
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message}
    if configuration:
        params["configuration"] = configuration
    response = await relay.post(
        f"/a2a/teams/{team_id}/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body
    if "message" in body["result"]:
        # A single exchange answered with a Message: the team's task is found by its context.
        return await team_task_of(relay, body["result"]["message"])
    return body["result"]["task"]


async def team_task_of(relay, message: dict[str, Any]) -> dict[str, Any]:
    """The team task a Message answer belongs to (the only task of its context)."""
    listed = await relay.post(
        "/a2a/teams/crew/",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "ListTasks",
            "params": {"contextId": message["contextId"]},
        },
    )
    tasks = listed.json()["result"]["tasks"]
    assert len(tasks) == 1, tasks
    return tasks[0]


async def trace(relay, task_id: str) -> list[dict[str, Any]]:
    response = await relay.get(f"/a2a/tasks/{task_id}/trace")
    assert response.status_code == 200, response.text
    return response.json()["hops"]


def route(hops: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(from, to, outcome, next) per hop."""
    return [(hop["from"], hop["to"], hop["outcome"], hop["next"]) for hop in hops]


def text_of(message: dict[str, Any] | None) -> str:
    return "\n".join(part["text"] for part in (message or {}).get("parts", []) if "text" in part)


def answer_text(task: dict[str, Any]) -> str:
    return text_of(task["status"].get("message"))


def sent_message(request) -> dict[str, Any]:
    """The message of a recorded JSON-RPC call (1.0 or 0.3)."""
    return request.json()["params"]["message"]


def message_calls(agent_id: str) -> list:
    return [
        request
        for request in AGENTS[agent_id].posts()
        if request.json().get("method")
        in ("SendStreamingMessage", "SendMessage", "message/stream", "message/send")
    ]


# --- who gets the message ------------------------------------------------------------------


async def test_the_default_agent_gets_the_first_message_and_without_a_decision_answers(relay):
    await sync_to_async(make_team)("lead", "worker")

    task = await send(relay, user_message("hello"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer_text(task) == "lead: hello"
    assert [text for text, _ in LEAD.received] == ["hello"]
    assert LEAD.received[0][1]["sender"] == "user"
    assert WORKER.received == []
    assert route(await trace(relay, task["id"])) == [("user", "lead", "replied", "user")]


async def test_a_caller_can_address_a_member_through_the_metadata(relay):
    await sync_to_async(make_team)("lead", "worker")
    WORKER.load("user")

    task = await send(relay, user_message("straight to you", **addressed_to("worker")))

    assert answer_text(task) == "worker: straight to you"
    assert LEAD.received == []
    assert route(await trace(relay, task["id"])) == [("user", "worker", "replied", "user")]


async def test_a_caller_naming_a_stranger_reaches_the_default_agent_with_a_routing_error(relay):
    await sync_to_async(make_team)("lead", "worker")

    task = await send(relay, user_message("hi", **addressed_to("nobody")))

    assert LEAD.received[0][1]["routingError"] == "recipient 'nobody' is not a member of this team"
    hops = await trace(relay, task["id"])
    assert hops[0]["to"] == "lead"
    assert hops[0]["routingError"] == "recipient 'nobody' is not a member of this team"


async def test_user_default_worker_default_user_using_only_metadata(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker", "user")

    task = await send(relay, user_message("hello"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer_text(task) == "lead: worker: lead: hello"
    assert route(await trace(relay, task["id"])) == [
        ("user", "lead", "routed", "worker"),
        ("lead", "worker", "routed", "lead"),
        ("worker", "lead", "replied", "user"),
    ]
    assert WORKER.received[0] == ("lead: hello", WORKER.received[0][1])
    assert WORKER.received[0][1]["sender"] == "lead"
    assert LEAD.received[1][1]["sender"] == "worker"
    # The lead's routing data was for the router: the caller gets the answer without it.
    assert URI not in (task["status"]["message"].get("metadata") or {})


# --- the extension on the wire -------------------------------------------------------------


async def test_a_member_with_the_extension_gets_its_peers_and_the_activation_header(relay):
    await sync_to_async(make_team)("lead", "worker", "echo")
    LEAD.load("echo", "user")

    await send(relay, user_message("hello"))

    first = message_calls("lead")[0]
    assert first.headers["a2a-extensions"] == URI
    message = sent_message(first)
    assert URI in message["extensions"]
    routing = message["metadata"][URI]
    assert routing["sender"] == "user"
    assert [(card["id"], card["supportsClientRouting"]) for card in routing["agentCards"]] == [
        ("worker", True),
        ("echo", False),
    ]
    assert routing["agentCards"][0]["capabilities"] == ["worker", "scripted"]


async def test_a_member_without_the_extension_gets_nothing_about_the_team(relay):
    await sync_to_async(make_team)("lead", "worker", "echo")
    LEAD.load("echo", "user")

    task = await send(relay, user_message("hello"))

    [call] = message_calls("echo")
    assert b"client-routing" not in call.body
    assert "a2a-extensions" not in call.headers
    assert "x-a2a-extensions" not in call.headers
    assert text_of(sent_message(call)) == "lead: hello"
    assert "metadata" not in sent_message(call) or URI not in sent_message(call)["metadata"]
    assert route(await trace(relay, task["id"]))[1:] == [
        ("lead", "echo", "routed", "lead"),
        ("echo", "lead", "replied", "user"),
    ]
    hops = await trace(relay, task["id"])
    assert hops[1]["peersOffered"] == []
    assert hops[0]["peersOffered"] == ["worker", "echo"]


async def test_the_callers_extensions_and_request_metadata_reach_every_member(relay):
    """Regression: members saw neither the caller's A2A-Extensions nor params.metadata."""
    await sync_to_async(make_team)("lead", "worker", "echo")
    LEAD.load("echo", "user")
    tracing = "https://example.com/extensions/tracing/v1"
    metadata = {"trace": {"id": 12345678901234567890, "sampled": True}}
    response = await relay.post(
        "/a2a/teams/crew/",
        headers={"A2A-Extensions": tracing},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": user_message("hello"), "metadata": metadata},
        },
    )
    assert "result" in response.json(), response.text

    [with_routing] = message_calls("lead")[:1]
    [without_routing] = message_calls("echo")
    for call in (with_routing, without_routing):
        assert call.json()["params"]["metadata"] == metadata
    # The routing extension is added for the member that speaks it, once; never for the other.
    assert with_routing.headers["a2a-extensions"].split(", ") == [tracing, URI]
    assert without_routing.headers["a2a-extensions"] == tracing


async def test_a_team_of_0_3_and_1_0_members_activates_the_extension_in_each_spelling(relay):
    await sync_to_async(make_team)("lead", "old")
    LEAD.load("old", "user")
    OLD.load(None)

    task = await send(relay, user_message("mixed"))

    assert answer_text(task) == "lead: old: lead: mixed"
    [old_call] = message_calls("old")
    # A blocking call to the team is a blocking call to each member, as to an agent.
    assert old_call.json()["method"] == "message/send"
    assert old_call.headers["x-a2a-extensions"] == URI
    assert "a2a-extensions" not in old_call.headers
    assert [card["id"] for card in sent_message(old_call)["metadata"][URI]["agentCards"]] == [
        "lead"
    ]
    lead_call = message_calls("lead")[0]
    assert lead_call.json()["method"] == "SendMessage"
    assert lead_call.headers["a2a-extensions"] == URI
    assert "x-a2a-extensions" not in lead_call.headers


# --- sender, missing and bad recipients ----------------------------------------------------


async def test_sender_sends_the_answer_back_to_the_agent_that_sent_the_message(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker", "user")
    WORKER.load("sender")

    task = await send(relay, user_message("go"))

    assert route(await trace(relay, task["id"]))[1:] == [
        ("lead", "worker", "routed", "lead"),
        ("worker", "lead", "replied", "user"),
    ]


async def test_sender_from_a_member_the_caller_addressed_answers_the_caller(relay):
    await sync_to_async(make_team)("lead", "worker")
    WORKER.load("sender")

    task = await send(relay, user_message("go", **addressed_to("worker")))

    assert answer_text(task) == "worker: go"
    assert route(await trace(relay, task["id"])) == [("user", "worker", "replied", "user")]
    assert LEAD.received == []


@pytest.mark.parametrize(
    ("recipient", "error"),
    [
        ("nobody", "recipient 'nobody' is not a member of this team"),
        ("worker", "agent 'worker' cannot route to itself"),
    ],
    ids=["unknown", "self"],
)
async def test_a_bad_recipient_from_a_worker_goes_to_the_default_agent_with_a_routing_error(
    relay, recipient, error
):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker", "user")
    WORKER.load(recipient)

    task = await send(relay, user_message("go"))

    hops = await trace(relay, task["id"])
    assert route(hops)[2] == ("worker", "lead", "replied", "user")
    assert hops[2]["routingError"] == error
    assert LEAD.received[1][1]["routingError"] == error


async def test_the_default_agent_naming_itself_answers_the_caller_with_a_routing_error(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("lead")

    task = await send(relay, user_message("me again"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    note = task["status"]["message"]["metadata"][URI]
    assert note == {"routingError": "agent 'lead' cannot route to itself"}
    hops = await trace(relay, task["id"])
    assert route(hops) == [("user", "lead", "replied", "user")]
    assert hops[0]["routingError"] == "agent 'lead' cannot route to itself"


async def test_two_agents_bouncing_a_message_stop_at_the_hop_limit(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load(*["worker"] * 10)
    WORKER.load(*["lead"] * 10)

    task = await send(relay, user_message("ping"))

    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert answer_text(task) == "routing stopped after 10 hops (the team's limit)"
    hops = await trace(relay, task["id"])
    assert [hop["order"] for hop in hops] == list(range(1, 11))
    assert [hop["outcome"] for hop in hops] == ["routed"] * 9 + ["capped"]
    assert (len(LEAD.received), len(WORKER.received)) == (5, 5)
    stored = await Task.objects.aget(pk=task["id"])
    assert stored.error == "routing stopped after 10 hops (the team's limit)"


# --- streaming -------------------------------------------------------------------------------


def sse_results(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])["result"]
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


async def test_a_streamed_conversation_shows_each_hop_in_order_then_the_answer(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker", "user")

    response = await relay.post(
        "/a2a/teams/crew/",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("stream it")},
        },
    )

    assert response.headers["content-type"].startswith("text/event-stream")
    results = sse_results(response.text)
    assert list(results[0]) == ["task"]
    # Every event after the task is a member's, naming the member and the hop it comes from.
    origins, states = [], []
    for result in results[1:]:
        kind, body = next(iter(result.items()))
        origin = (body["metadata"][URI]["member"], body["metadata"][URI]["hop"])
        if origin not in origins:
            origins.append(origin)
        if kind == "statusUpdate":
            states.append(body["status"]["state"])
    assert origins == [("lead", 1), ("worker", 2), ("lead", 3)]
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert set(states[:-1]) <= {"TASK_STATE_WORKING"}
    assert (
        text_of(results[-1]["statusUpdate"]["status"]["message"]) == "lead: worker: lead: stream it"
    )
    # The team task's history holds the caller's message and the members' answers, no relay
    # notes: the hops are in the trace.
    stored = await Task.objects.aget(pk=results[0]["task"]["id"])
    assert [(message["role"], text_of(message)) for message in stored.history] == [
        ("ROLE_USER", "stream it"),
        ("ROLE_AGENT", "lead: stream it"),
        ("ROLE_AGENT", "worker: lead: stream it"),
        ("ROLE_AGENT", "lead: worker: lead: stream it"),
    ]
    assert route(await trace(relay, stored.id)) == [
        ("user", "lead", "routed", "worker"),
        ("lead", "worker", "routed", "lead"),
        ("worker", "lead", "replied", "user"),
    ]


# --- waiting on the caller, health ---------------------------------------------------


async def test_a_member_asking_for_input_parks_the_team_and_the_reply_goes_back_to_it(relay):
    await sync_to_async(make_team)("lead", "asks")
    LEAD.load("asks", "user")

    parked = await send(relay, user_message("greet someone"))

    assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert answer_text(parked) == "What name should I greet?"
    waiting = await MemberContext.objects.aget(context_id=parked["contextId"], agent_id="asks")
    assert waiting.upstream_task_id  # the member's open task, kept while it waits
    done = await send(relay, user_message("Ada", taskId=parked["id"]))

    assert done["id"] == parked["id"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer_text(done) == "lead: Hello, Ada!\nHello, Ada!"
    assert [artifact["name"] for artifact in done["artifacts"]] == ["greeting"]
    assert route(await trace(relay, done["id"])) == [
        ("user", "lead", "routed", "asks"),
        ("lead", "asks", "parked", "user"),
        ("user", "asks", "routed", "lead"),
        ("asks", "lead", "replied", "user"),
    ]
    first, second = message_calls("asks")
    upstream_task = (await RoutingHop.objects.aget(task_id=done["id"], order=2)).upstream_task_id
    assert upstream_task
    assert "taskId" not in sent_message(first)
    assert sent_message(second)["taskId"] == upstream_task == waiting.upstream_task_id
    await waiting.arefresh_from_db()
    assert waiting.upstream_task_id == ""  # done: nothing open any more
    children = [task async for task in Task.objects.filter(parent_id=done["id"], agent_id="asks")]
    assert len(children) == 1  # the same member task, continued


async def test_an_unhealthy_member_is_left_out_and_routing_to_it_is_a_routing_error(relay):
    await sync_to_async(make_team)("lead", "worker", "helper")
    await Agent.objects.filter(pk="worker").aupdate(health=Agent.Health.UNHEALTHY)
    LEAD.load("helper", "user")
    HELPER.load("worker")

    task = await send(relay, user_message("needs the worker"))

    hops = await trace(relay, task["id"])
    assert route(hops) == [
        ("user", "lead", "routed", "helper"),
        ("lead", "helper", "routed", "lead"),
        ("helper", "lead", "replied", "user"),
    ]
    assert hops[2]["routingError"] == "recipient 'worker' is unavailable (unhealthy)"
    assert hops[0]["peersOffered"] == ["helper"]
    assert WORKER.received == []


async def test_an_unhealthy_default_agent_answers_at_once_with_a_failed_task(relay):
    await sync_to_async(make_team)("lead", "worker")
    await Agent.objects.filter(pk="lead").aupdate(health=Agent.Health.UNHEALTHY)

    task = await send(relay, user_message("anyone?"))

    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert answer_text(task) == "the team's default agent 'lead' is unavailable"
    assert await trace(relay, task["id"]) == []
    assert message_calls("lead") == [] and message_calls("worker") == []


async def test_each_member_keeps_its_own_upstream_context_across_turns(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker", "user", "worker", "user")
    first = await send(relay, user_message("turn one"))

    second = await send(relay, user_message("turn two", contextId=first["contextId"]))

    assert second["id"] != first["id"]
    lead_contexts = [sent_message(call)["contextId"] for call in message_calls("lead")]
    worker_contexts = [sent_message(call)["contextId"] for call in message_calls("worker")]
    assert len(set(lead_contexts)) == 1 and len(lead_contexts) == 4
    assert len(set(worker_contexts)) == 1 and len(worker_contexts) == 2
    assert lead_contexts[0] != worker_contexts[0]
    assert await MemberContext.objects.filter(context_id=first["contextId"]).acount() == 2


# --- the trace API and page ----------------------------------------------------------------


async def test_the_trace_is_scoped_to_the_caller(relay):
    from registry.services import api_key_create

    await sync_to_async(make_team)("lead", "worker")
    task = await send(relay, user_message("mine"))
    _, other_key = await sync_to_async(api_key_create)(name="someone else")

    response = await relay.get(
        f"/a2a/tasks/{task['id']}/trace", headers={"Authorization": f"Bearer {other_key}"}
    )

    assert response.status_code == 404
    assert response.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
    missing = await relay.get("/a2a/tasks/no-such-task/trace")
    assert missing.status_code == 404
    anonymous = await relay.get(f"/a2a/tasks/{task['id']}/trace", headers={"Authorization": ""})
    assert anonymous.status_code == 401


async def test_the_task_page_draws_the_conversation_for_staff_only(
    relay, client, django_user_model
):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker", "user")
    WORKER.load("nobody")
    task = await send(relay, user_message("draw me"))

    def pages():
        anonymous = client.get(f"/tasks/{task['id']}/")
        staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
        client.force_login(staff)
        return anonymous, client.get(f"/tasks/{task['id']}/"), client.get("/tasks/nope/")

    anonymous, page, missing = await sync_to_async(pages)()

    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    assert missing.status_code == 404
    html = page.content.decode()
    assert page.status_code == 200
    assert '<svg class="sequence"' in html
    assert html.count('class="seq-lifeline') == 3  # user, lead, worker
    assert html.count('class="seq-arrow seq-') == 4  # three hops and the reply
    assert "2. lead step 1" in html
    assert "seq-error" in html and "recipient &#x27;nobody&#x27; is not a member" in html
    assert "seq-return" in html and ">reply<" in html
    assert 'class="routing-trace"' in html and "hop-routing-error" in html


# --- the demo ------------------------------------------------------------------------------


async def test_the_demo_team_researches_then_writes_and_ask_team_prints_each_hop(relay, demo_urls):
    def set_up():
        Agent.objects.filter(pk="echo").delete()  # the test double, not the demo's echo
        for slug, url in demo_urls.items():
            agent_register(url=url, agent_id=slug)
        return demo_team_ensure()

    assert "demo" in await sync_to_async(set_up)()
    lines: list[str] = []
    key = relay.headers["Authorization"].removeprefix("Bearer ")

    task = await ask_team(relay, team="demo", text=DEMO_QUESTION, key=key, write=lines.append)

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert route(await trace(relay, task["id"])) == [
        ("user", "triage", "routed", "researcher"),
        ("triage", "researcher", "routed", "writer"),
        ("researcher", "writer", "routed", "triage"),
        ("writer", "triage", "replied", "user"),
    ]
    hop_lines = [line for line in lines if line.lstrip()[:2].rstrip(".").isdigit()]
    assert [line.split(".")[0].strip() for line in hop_lines] == ["1", "2", "3", "4"]
    assert "triage -> researcher: matched words: research" in hop_lines[1]
    assert any(line.startswith("DRAFT: ") for line in lines)
    assert any("[artifact draft]" in line for line in lines)
    assert await sync_to_async(default_target)() == ("team", "demo")


async def test_a_member_whose_circuit_breaker_is_open_is_left_out(relay):
    await sync_to_async(make_team)("lead", "worker", "helper")
    await Agent.objects.filter(pk="worker").aupdate(
        breaker_state=Agent.Breaker.OPEN, breaker_failures=5, breaker_opened_at=timezone.now()
    )
    LEAD.load("helper", "user")
    HELPER.load("worker")

    task = await send(relay, user_message("needs the worker"))

    hops = await trace(relay, task["id"])
    assert hops[0]["peersOffered"] == ["helper"]
    assert hops[2]["routingError"] == "recipient 'worker' is unavailable (unhealthy)"
    assert WORKER.received == []


async def test_a_default_agent_whose_breaker_is_open_answers_at_once(relay):
    await sync_to_async(make_team)("lead", "worker")
    await Agent.objects.filter(pk="lead").aupdate(
        breaker_state=Agent.Breaker.OPEN, breaker_failures=5, breaker_opened_at=timezone.now()
    )

    task = await send(relay, user_message("anyone?"))

    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert answer_text(task) == "the team's default agent 'lead' is unavailable"
    assert message_calls("lead") == []


async def test_a_breaker_whose_cooldown_passed_lets_the_member_be_routed_to_again(relay, settings):
    settings.RELAY_BREAKER_COOLDOWN_SECONDS = 30
    await sync_to_async(make_team)("lead", "worker")
    await Agent.objects.filter(pk="lead").aupdate(
        breaker_state=Agent.Breaker.OPEN,
        breaker_failures=5,
        breaker_opened_at=timezone.now() - timedelta(seconds=31),
    )
    LEAD.load("user")

    task = await send(relay, user_message("anyone?"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    lead = await Agent.objects.aget(pk="lead")
    assert (lead.breaker_state, lead.breaker_failures) == (Agent.Breaker.CLOSED, 0)


# --- the answer's kind ------------------------------------------------------------------


async def send_raw(relay, message: dict[str, Any]) -> dict[str, Any]:
    response = await relay.post(
        "/a2a/teams/crew/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
    )
    assert response.status_code == 200, response.text
    return response.json()["result"]


async def test_a_single_exchange_answered_with_a_message_is_answered_with_a_message(relay):
    """Regression: a member's Message made the team answer with a Task."""
    await sync_to_async(make_team)("lead", "worker")

    result = await send_raw(relay, user_message("hello"))

    assert list(result) == ["message"]
    assert result["message"]["parts"] == [{"text": "lead: hello"}]
    assert result["message"]["role"] == "ROLE_AGENT"
    assert "taskId" not in result["message"]
    task = await team_task_of(relay, result["message"])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert route(await trace(relay, task["id"])) == [("user", "lead", "replied", "user")]


async def test_a_conversation_of_two_exchanges_is_answered_with_a_task(relay):
    await sync_to_async(make_team)("lead", "worker")
    LEAD.load("worker")
    WORKER.load("user")

    result = await send_raw(relay, user_message("hello"))

    assert list(result) == ["task"]
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_member_that_refuses_the_connection_fails_the_team_task_not_completes_it(relay):
    down = Script("down")
    with running_many({"down": Recording(scripted_agent(down))}) as urls:
        await sync_to_async(agent_register)(url=urls["down"], agent_id="down")
    # The server is gone: the member's port refuses the connection.
    await sync_to_async(make_team)("lead", "down")
    LEAD.load("down", "user")

    task = await send(relay, user_message("write it"))

    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "'down'" in answer_text(task) and "refused" in answer_text(task)
    assert len(message_calls("lead")) == 1  # the error text is not routed on to the lead
    hops = await trace(relay, task["id"])
    assert [(hop["from"], hop["to"], hop["outcome"]) for hop in hops][-1] == (
        "lead",
        "down",
        "failed",
    )
