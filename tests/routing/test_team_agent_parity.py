"""A team whose only member is an agent behaves, for an A2A client, exactly as that agent at the
relay (issue 12). The same cases run against both targets, over JSON-RPC and HTTP+JSON in 1.0
and 0.3 and over gRPC (1.0), through the official a2a-sdk client built from the target's own
card: the relay's card of the agent, or the team's card (over gRPC, the tenant ``agents/<id>``
or ``teams/<id>`` its GRPC interface names). The same agent also runs served over gRPC only, as
a second member in a team of its own (targets ``grpc-agent`` and ``grpc-team``), which every
case calls over JSON-RPC 1.0 and over gRPC.

One live relay (daphne and ``manage.py run_grpc``, its own SQLite file, Celery jobs run eagerly
so that push notifications are posted at once) and one in-process a2a-sdk agent on 127.0.0.1 whose
behaviour the first word of the message chooses (see ``Parity``). What a client observes is
normalised the same way for both targets (ids numbered by first appearance, timestamps
dropped). A team adds one thing to the events it forwards from its member: the
``metadata[client-routing URI]`` entry naming the member and the hop. Exactly that entry is
stripped before comparing, and asserted separately. Every case passes for both targets: the
team adds no event, message or history entry of its own (its hops are in its trace).
"""

from __future__ import annotations

import asyncio
import queue
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import httpx
import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from registry.extensions import CLIENT_ROUTING_URI as URI
from routing.demo import agents as demo_agents
from routing.demo.agents import TaskExecutor, build_agent_app, text_message
from tests.agents import CHUNKS, task_spec
from tests.grpc_agents import grpc_agent
from tests.jsinterop import observable, sdk_events
from tests.live import (
    ALL_PROTOCOL_IDS,
    ALL_PROTOCOLS,
    CALL_SECONDS,
    GATE_SECONDS,
    GRPC_PROTOCOL,
    eventually,
    free_port,
    live_relay,
    manage,
    sdk_client,
)
from tests.servers import running

MEMBER = "parity"
TEAM = "parity-team"
GRPC_MEMBER = "parity-grpc"
"""The same agent served over gRPC only (``tests.grpc_agents``)."""
GRPC_TEAM = "parity-grpc-team"
LATER_SECONDS = 1.5
QUESTION = "What name should I greet?"
TOKEN = "parity-push-token-0123456789"

# --- the agent ------------------------------------------------------------------------------

STORE = InMemoryTaskStore()
"""The agent's task store, reachable from the test so a task left working can end later."""
GRPC_STORE = InMemoryTaskStore()
"""The gRPC agent's (it runs on an event loop of its own)."""
GATES: dict[str, queue.Queue] = {}


class Parity(TaskExecutor):
    """Behaves as the first word of the message says:

    - ``message <text>``: answers with a Message of ``<text>`` (no task).
    - ``echo <text>``: a task completed at once with artifact "echo" = ``<text>``.
    - ``chunks``: working, artifact "story" in CHUNKS (append, lastChunk), completed.
    - ``later``: answers with its task working; the task completes LATER_SECONDS later, with
      artifact "report", as a long job the agent finishes on its own.
    - ``ask``: input-required (QUESTION); the follow-up on the task completes with artifact
      "greeting" = "Hello, <text>!".
    - ``gate <name>``: working, then one chunk of artifact "story" per item the test puts in
      gate ``<name>`` (see ``new_gate``), completed on None.
    """

    def __init__(self, store: InMemoryTaskStore = STORE) -> None:
        self.store = store

    async def execute(self, context: RequestContext, event_queue) -> None:
        word, _, rest = context.get_user_input().strip().partition(" ")
        if context.current_task is None and word == "message":
            reply = Message(
                message_id=uuid.uuid4().hex,
                role=Role.ROLE_AGENT,
                parts=[Part(text=rest)],
                context_id=context.context_id or "",
            )
            await event_queue.enqueue_event(reply)
            return
        await super().execute(context, event_queue)

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        text = context.get_user_input().strip()
        word, _, rest = text.partition(" ")
        if context.current_task is not None:
            greeting = f"Hello, {text}!"
            await updater.add_artifact(
                [Part(text=greeting)], artifact_id="greeting", name="greeting", last_chunk=True
            )
            await updater.complete(text_message(updater, greeting))
        elif word == "echo":
            await updater.add_artifact(
                [Part(text=rest)], artifact_id="echo", name="echo", last_chunk=True
            )
            await updater.complete(text_message(updater, rest))
        elif word == "chunks":
            await updater.start_work(text_message(updater, "Writing."))
            for index, chunk in enumerate(CHUNKS):
                await updater.add_artifact(
                    [Part(text=chunk)],
                    artifact_id="story",
                    name="story",
                    append=index > 0,
                    last_chunk=index == len(CHUNKS) - 1,
                )
            await updater.complete(text_message(updater, "Story streamed."))
        elif word == "later":
            await updater.start_work(text_message(updater, "Started; come back later."))
            call = context.call_context
            loop = asyncio.get_running_loop()
            loop.create_task(_finish_later(updater.task_id, call, self.store))
        elif word == "ask":
            await updater.requires_input(text_message(updater, QUESTION))
        elif word == "gate":
            await updater.start_work(text_message(updater, "Waiting for the gate."))
            gate, index = GATES[rest], 0
            while (chunk := await asyncio.to_thread(gate.get, True, GATE_SECONDS)) is not None:
                await updater.add_artifact(
                    [Part(text=chunk)], artifact_id="story", name="story", append=index > 0
                )
                index += 1
            await updater.complete(text_message(updater, "Released."))
        else:
            await updater.failed(text_message(updater, f"unknown behaviour {word!r}"))


async def _finish_later(task_id: str, call, store: InMemoryTaskStore) -> None:
    await asyncio.sleep(LATER_SECONDS)
    done = Task()
    done.CopyFrom(await store.get(task_id, call))
    done.status.state = TaskState.TASK_STATE_COMPLETED
    done.artifacts.append(Artifact(artifact_id="report", parts=[Part(text="the report")]))
    await store.save(done, call)


PARITY = task_spec(MEMBER, "Parity", "Behaves as the message's first word says.", Parity)
GRPC_PARITY = task_spec(
    GRPC_MEMBER, "Parity", "Behaves as the message's first word says.", lambda: Parity(GRPC_STORE)
)


def parity_agent(base_url: str):
    with mock.patch.object(demo_agents, "InMemoryTaskStore", lambda: STORE):
        return build_agent_app(PARITY, base_url=base_url)


@contextmanager
def new_gate() -> Iterator[tuple[str, queue.Queue]]:
    """A gate for ``gate <name>``: yields (its name, its queue); closed (None put) afterwards,
    so an agent still waiting on it lets go even when the test failed."""
    name = f"g{uuid.uuid4().hex[:8]}"
    GATES[name] = queue.Queue()
    try:
        yield name, GATES[name]
    finally:
        GATES.pop(name).put(None)


# --- a webhook for push notifications ---------------------------------------------------------


class Webhook:
    """Records every POST (its notification token and JSON body) and answers 200; ``url`` is
    set once it is served."""

    def __init__(self) -> None:
        self.url = ""
        self.received: list[tuple[str, str, dict[str, Any]]] = []
        self.app = Starlette(routes=[Route("/hook/{name}", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        token = request.headers.get("x-a2a-notification-token", "")
        self.received.append((request.path_params["name"], token, await request.json()))
        return Response(status_code=200)

    def bodies(self, name: str) -> list[dict[str, Any]]:
        return [body for hook, _, body in self.received if hook == name]

    def tokens(self, name: str) -> set[str]:
        return {token for hook, token, _ in self.received if hook == name}


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    # Some hundred calls a minute from one key: above the default limit of calls per key.
    with live_relay(
        tmp_path_factory.mktemp("parity"),
        CELERY_TASK_ALWAYS_EAGER="true",
        RELAY_RATE_LIMIT_PER_KEY="100000",
        RELAY_GRPC_PORT=str(free_port()),
    ) as live:
        live.serve_agent(MEMBER, parity_agent)
        with grpc_agent(GRPC_PARITY, task_store=GRPC_STORE) as served:
            live.register(served.base_url, GRPC_MEMBER)
            manage(
                live.env,
                "shell",
                "-c",
                "from registry.teams import team_create; "
                + "; ".join(
                    f"team_create(team_id='{team}', name='Parity team', members=['{member}'], "
                    f"default_agent='{member}')"
                    for team, member in ((TEAM, MEMBER), (GRPC_TEAM, GRPC_MEMBER))
                ),
            )
            with live.grpc_server():
                yield live


@pytest.fixture(scope="module")
def cards(relay) -> dict[str, dict[str, Any]]:
    def team_card(team_id: str) -> dict[str, Any]:
        answer = httpx.get(
            f"{relay.url}/a2a/teams/{team_id}/.well-known/agent-card.json", timeout=CALL_SECONDS
        )
        answer.raise_for_status()
        return answer.json()

    return {
        "agent": relay.card(MEMBER),
        "team": team_card(TEAM),
        "grpc-agent": relay.card(GRPC_MEMBER),
        "grpc-team": team_card(GRPC_TEAM),
    }


@pytest.fixture(scope="module")
def webhook():
    hook = Webhook()
    with running(hook.app) as url:
        hook.url = url
        yield hook


protocols = pytest.mark.parametrize(("binding", "version"), ALL_PROTOCOLS, ids=ALL_PROTOCOL_IDS)
TARGETS = ["agent", "team"]
targets = pytest.mark.parametrize("target", TARGETS)
GRPC_TARGETS = ["grpc-agent", "grpc-team"]
"""The agent served over gRPC, alone and as a team's member."""
cases = pytest.mark.parametrize(
    ("binding", "version", "target"),
    [
        pytest.param(binding, version, target, id=f"{target}-{binding}-{version}")
        for targets_of_case, protocols_of_case in (
            (TARGETS, ALL_PROTOCOLS),
            (GRPC_TARGETS, [("JSONRPC", "1.0"), GRPC_PROTOCOL]),
        )
        for binding, version in protocols_of_case
        for target in targets_of_case
    ],
)
"""Every protocol in front of the agent served over JSON-RPC and its team; JSON-RPC 1.0 and
gRPC in front of the agent served over gRPC and its team."""


def member_of(target: str) -> str:
    return GRPC_MEMBER if target in GRPC_TARGETS else MEMBER


@pytest.fixture
def connect(relay, cards, target, binding, version):
    """``connect(streaming=True)``: an a2a-sdk client of the target on this protocol."""

    def make(*, streaming: bool = True):
        return sdk_client(
            cards[target], binding, version, headers=relay.auth(), streaming=streaming
        )

    return make


# --- observing ------------------------------------------------------------------------------


def request(text: str, *, task_id: str = "", **configuration: Any) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(**configuration)
    )


def strip_member(
    events: list[dict[str, Any]], target: str, *, hop: int = 1
) -> list[dict[str, Any]]:
    """The events without the member entry a team adds to what it forwards. For a team, every
    artifact update (they all come from the member) must carry it, naming the member and
    ``hop`` (a follow-up turn is the team's next hop), and wherever else it appears it names the
    same (a task snapshot may still name the hop that left it as it is); the agent's events
    carry none."""
    stripped = []
    for index, event in enumerate(events):
        kind, body = next(iter(event.items()))
        metadata = dict(body.get("metadata") or {})
        entry = metadata.pop(URI, None)
        if target.endswith("team") and (entry is not None or kind == "artifactUpdate"):
            hops = range(1, hop + 1) if kind == "task" else (hop,)
            assert entry is not None, f"event {index} of {events}"
            assert entry["member"] == member_of(target), f"event {index} of {events}"
            assert entry["hop"] in hops, f"event {index} of {events}"
        else:
            assert entry is None, f"event {index} of {events}"
        body = {key: value for key, value in body.items() if key != "metadata"}
        if metadata:
            body["metadata"] = metadata
        stripped.append({kind: body})
    return stripped


def summary(events: list[dict[str, Any]]) -> list[tuple]:
    """Each event as (kind, state, artifact id, append, lastChunk, texts): what a client acts
    on, in order."""
    rows = []
    for event in events:
        kind, body = next(iter(event.items()))
        status = body.get("status") or {}
        artifact = body.get("artifact") or {}
        parts = (
            artifact.get("parts")
            or (status.get("message") or {}).get("parts")
            or body.get("parts")
            or []
        )
        rows.append(
            (
                kind,
                status.get("state", ""),
                artifact.get("artifactId", ""),
                body.get("append", False),
                body.get("lastChunk", False),
                tuple(part.get("text", "") for part in parts),
            )
        )
    return rows


async def collect(stream) -> list[dict[str, Any]]:
    async with asyncio.timeout(CALL_SECONDS):
        return sdk_events([event async for event in stream])


def task_id_of(event: dict[str, Any]) -> str:
    body = next(iter(event.values()))
    return body.get("id") or body["taskId"]


def as_json(task) -> dict[str, Any]:
    return MessageToDict(task)


WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"


async def ended(client, task_id: str) -> dict[str, Any]:
    async def done():
        task = as_json(await client.get_task(GetTaskRequest(id=task_id)))
        return task if task["status"]["state"] not in (WORKING, "TASK_STATE_SUBMITTED") else None

    return await eventually(done, f"task {task_id} ending", timeout=CALL_SECONDS, interval=0.2)


SUBMITTED = "TASK_STATE_SUBMITTED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
CANCELED = "TASK_STATE_CANCELED"
STORY = [
    ("artifactUpdate", "", "story", index > 0, index == len(CHUNKS) - 1, (chunk,))
    for index, chunk in enumerate(CHUNKS)
]


async def observe(
    client, target: str, text: str, *, hop: int = 1, **options: Any
) -> list[dict[str, Any]]:
    """The events of one send, member entry stripped (see ``strip_member``)."""
    events = await collect(client.send_message(request(text, **options)))
    return strip_member(events, target, hop=hop)


# --- the cases --------------------------------------------------------------------------------


@cases
async def test_a_send_answers_with_the_completed_task(connect, target, binding, version):
    async with connect(streaming=False) as client:
        answer = await observe(client, target, "echo hi")
    assert summary(answer) == [("task", COMPLETED, "", False, False, ("hi",))]
    assert [artifact["parts"] for artifact in answer[0]["task"]["artifacts"]] == [[{"text": "hi"}]]


@cases
async def test_a_message_answer_stays_a_message(connect, target, binding, version):
    async with connect(streaming=False) as client:
        answer = await observe(client, target, "message hi")
    assert summary(answer) == [("message", "", "", False, False, ("hi",))]
    assert answer[0]["message"]["role"] == "ROLE_AGENT"


@cases
async def test_a_blocking_send_answers_at_once_with_a_task_left_working(
    connect, target, binding, version
):
    async with connect(streaming=False) as client:
        started = asyncio.get_running_loop().time()
        answer = await observe(client, target, "later")
        assert asyncio.get_running_loop().time() - started < LATER_SECONDS
        assert summary(answer) == [
            ("task", WORKING, "", False, False, ("Started; come back later.",))
        ]
        # The relay goes on following the task, and records its end.
        done = await ended(client, task_id_of(answer[0]))
    assert done["status"]["state"] == COMPLETED
    assert [artifact["artifactId"] for artifact in done["artifacts"]] == ["report"]


@cases
async def test_return_immediately_answers_with_the_submitted_task(
    connect, target, binding, version
):
    async with connect(streaming=False) as client:
        with new_gate() as (name, gate):
            answer = await observe(client, target, f"gate {name}", return_immediately=True)
            assert summary(answer) == [("task", SUBMITTED, "", False, False, ())]
            gate.put("only chunk")
            gate.put(None)
            done = await ended(client, task_id_of(answer[0]))
    assert done["status"]["state"] == COMPLETED
    assert [artifact["parts"] for artifact in done["artifacts"]] == [[{"text": "only chunk"}]]


@cases
async def test_a_stream_carries_every_artifact_chunk_in_order(connect, target, binding, version):
    async with connect() as client:
        events = await observe(client, target, "chunks")
    assert summary(events) == [
        ("task", SUBMITTED, "", False, False, ()),
        ("statusUpdate", WORKING, "", False, False, ("Writing.",)),
        *STORY,
        ("statusUpdate", COMPLETED, "", False, False, ("Story streamed.",)),
    ]
    assert {task_id_of(event) for event in events} == {task_id_of(events[0])}


@cases
async def test_an_input_required_task_completes_on_its_follow_up(connect, target, binding, version):
    async with connect() as client:
        asked = await observe(client, target, "ask")
        assert summary(asked) == [
            ("task", SUBMITTED, "", False, False, ()),
            ("statusUpdate", INPUT_REQUIRED, "", False, False, (QUESTION,)),
        ]
        task_id = task_id_of(asked[0])
        answered = await observe(client, target, "Ada", task_id=task_id, hop=2)
        stored = as_json(await client.get_task(GetTaskRequest(id=task_id)))
    # The stream opens with the task working again, not with the question it answers.
    assert summary(answered) == [
        ("task", WORKING, "", False, False, ()),
        ("artifactUpdate", "", "greeting", False, True, ("Hello, Ada!",)),
        ("statusUpdate", COMPLETED, "", False, False, ("Hello, Ada!",)),
    ]
    assert {task_id_of(event) for event in answered} == {task_id}
    assert stored["status"]["state"] == COMPLETED


async def read_until(stream, events: list[dict[str, Any]], react) -> None:
    """Reads ``stream`` to its end into ``events`` (member entry not yet stripped), awaiting
    ``react(event)`` after each one."""
    async with asyncio.timeout(CALL_SECONDS):
        async for event in stream:
            events.append(MessageToDict(event))
            await react(events[-1])


def state_of(event: dict[str, Any]) -> str:
    return (next(iter(event.values())).get("status") or {}).get("state", "")


@cases
async def test_a_cancel_mid_stream_ends_the_stream_canceled(connect, target, binding, version):
    events: list[dict[str, Any]] = []
    canceled: list[dict[str, Any]] = []
    opened: list[str] = []
    async with connect() as client, connect(streaming=False) as other:
        with new_gate() as (name, gate):

            async def react(event):
                if state_of(event) == WORKING and not opened:
                    opened.append("first")
                    gate.put("first")
                if "artifactUpdate" in event and not canceled:
                    task_id = event["artifactUpdate"]["taskId"]
                    canceled.append(as_json(await other.cancel_task(CancelTaskRequest(id=task_id))))

            await read_until(client.send_message(request(f"gate {name}")), events, react)
    assert canceled[0]["status"]["state"] == CANCELED
    assert summary(strip_member(events, target)) == [
        ("task", SUBMITTED, "", False, False, ()),
        ("statusUpdate", WORKING, "", False, False, ("Waiting for the gate.",)),
        ("artifactUpdate", "", "story", False, False, ("first",)),
        ("statusUpdate", CANCELED, "", False, False, ()),
    ]


async def error_name(call) -> str:
    """The class name of the error ``call`` raised (it must raise)."""
    with pytest.raises(Exception) as raised:  # noqa: B017 - the type is what is compared
        await call
    return type(raised.value).__name__


EXPECTED_ERRORS = ("TaskNotCancelableError", "TaskNotFoundError", "TaskNotFoundError")
V0_3_REST_ERRORS = ("A2AClientError", "MethodNotFoundError", "MethodNotFoundError")
"""What a2a-sdk 1.3's 0.3 HTTP+JSON client makes of the same errors: it reads only a 0.3
``{"type": ...}`` body, not the ``google.rpc.Status`` one a2a-sdk 1.3 servers (and the relay,
as they do) answer on the 0.3 routes, so it falls back on the HTTP status (409, 404)."""


@cases
async def test_errors_have_the_same_type(connect, target, binding, version):
    async with connect(streaming=False) as client:
        done = await observe(client, target, "echo finished")
        names = (
            await error_name(client.cancel_task(CancelTaskRequest(id=task_id_of(done[0])))),
            await error_name(client.get_task(GetTaskRequest(id=str(uuid.uuid4())))),
            await error_name(client.cancel_task(CancelTaskRequest(id=str(uuid.uuid4())))),
        )
    rest_0_3 = (binding, version) == ("HTTP+JSON", "0.3")
    assert names == (V0_3_REST_ERRORS if rest_0_3 else EXPECTED_ERRORS)


@cases
async def test_subscribe_streams_the_rest_of_a_running_task(connect, target, binding, version):
    events: list[dict[str, Any]] = []
    async with connect(streaming=False) as sender, connect() as client:
        with new_gate() as (name, gate):
            answer = await observe(sender, target, f"gate {name}", return_immediately=True)
            task_id = task_id_of(answer[0])

            async def working():
                task = as_json(await sender.get_task(GetTaskRequest(id=task_id)))
                return task["status"]["state"] == WORKING

            await eventually(working, "the task working", timeout=CALL_SECONDS, interval=0.1)

            async def react(event):
                if len(events) == 1:
                    gate.put("after subscribing")
                    gate.put(None)

            await read_until(client.subscribe(SubscribeToTaskRequest(id=task_id)), events, react)
    assert {task_id_of(event) for event in events} == {task_id}
    assert summary(strip_member(events, target)) == [
        ("task", WORKING, "", False, False, ("Waiting for the gate.",)),
        ("artifactUpdate", "", "story", False, False, ("after subscribing",)),
        ("statusUpdate", COMPLETED, "", False, False, ("Released.",)),
    ]


def history(task: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (message["role"], tuple(part.get("text", "") for part in message["parts"]))
        for message in task.get("history", [])
    ]


@cases
async def test_get_honours_history_length(connect, target, binding, version):
    async with connect() as client:
        asked = await observe(client, target, "ask")
        task_id = task_id_of(asked[0])
        await observe(client, target, "Ada", task_id=task_id, hop=2)
        whole = as_json(await client.get_task(GetTaskRequest(id=task_id)))
        last = as_json(await client.get_task(GetTaskRequest(id=task_id, history_length=1)))
        two = as_json(await client.get_task(GetTaskRequest(id=task_id, history_length=2)))
    assert history(whole) == [
        ("ROLE_USER", ("ask",)),
        ("ROLE_AGENT", (QUESTION,)),
        ("ROLE_USER", ("Ada",)),
        ("ROLE_AGENT", ("Hello, Ada!",)),
    ]
    assert history(last) == history(whole)[-1:]
    assert history(two) == history(whole)[-2:]
    assert whole["status"]["state"] == COMPLETED


@pytest.mark.parametrize(
    ("binding", "version"),
    [*ALL_PROTOCOLS[:2], GRPC_PROTOCOL],
    ids=[*ALL_PROTOCOL_IDS[:2], ALL_PROTOCOL_IDS[-1]],
)
@targets
async def test_list_shows_the_callers_task_of_a_context(connect, target, binding, version):
    async with connect(streaming=False) as client:
        answer = await observe(client, target, "echo listed")
        task = answer[0]["task"]
        listed = as_json(await client.list_tasks(ListTasksRequest(context_id=task["contextId"])))
    assert [(found["id"], found["status"]["state"]) for found in listed["tasks"]] == [
        (task["id"], COMPLETED)
    ]


V0_3_KINDS = {"task": "task", "status-update": "statusUpdate", "artifact-update": "artifactUpdate"}


def pushed(body: dict[str, Any]) -> tuple[str, str]:
    """(kind, state) of a push body: a 1.0 StreamResponse, or a 0.3 object with ``kind``."""
    if "kind" in body:
        state = (body.get("status") or {}).get("state", "")
        return V0_3_KINDS[body["kind"]], state and f"TASK_STATE_{state.upper().replace('-', '_')}"
    return next(iter(body)), state_of(body)


@cases
async def test_a_blocking_send_pushes_the_final_task_to_the_webhook(
    connect, webhook, target, binding, version
):
    name = uuid.uuid4().hex[:8]
    config = TaskPushNotificationConfig(url=f"{webhook.url}/hook/{name}", token=TOKEN)
    async with connect(streaming=False) as client:
        answer = await observe(client, target, "chunks", task_push_notification_config=config)
    assert state_of(answer[0]) == COMPLETED

    def delivered():
        bodies = webhook.bodies(name)
        return bodies if bodies and pushed(bodies[-1])[1] == COMPLETED else None

    bodies = await eventually(delivered, "the last push", timeout=CALL_SECONDS)
    assert webhook.tokens(name) == {TOKEN}
    assert [pushed(body) for body in bodies] == [("task", COMPLETED)]


# --- agent and team side by side ----------------------------------------------------------


@protocols
@pytest.mark.parametrize(
    "text",
    [
        "echo hi",
        "message hi",
        "later",
    ],
)
async def test_the_team_answers_a_send_exactly_as_the_agent(relay, cards, text, binding, version):
    """The whole answer, normalised, side by side: not only what ``summary`` keeps."""
    seen = {}
    for target in TARGETS:
        async with sdk_client(
            cards[target], binding, version, headers=relay.auth(), streaming=False
        ) as client:
            seen[target] = observable(
                strip_member(await collect(client.send_message(request(text))), target)
            )
    assert seen["team"] == seen["agent"]


@protocols
async def test_a_team_stream_is_the_agents_with_each_forwarded_event_naming_its_member(
    relay, cards, binding, version
):
    """The whole stream, normalised, side by side: the team sends what its member sends, in
    its order, and adds no event of its own; every event after the task names the member and
    the hop it comes from."""
    seen = {}
    for target in TARGETS:
        async with sdk_client(cards[target], binding, version, headers=relay.auth()) as client:
            seen[target] = await collect(client.send_message(request("chunks")))
    assert observable(strip_member(seen["team"], "team")) == observable(
        strip_member(seen["agent"], "agent")
    )
    origins = [next(iter(event.values())).get("metadata", {}).get(URI) for event in seen["team"]]
    assert origins[1:] == [{"member": MEMBER, "hop": 1}] * (len(seen["team"]) - 1)
