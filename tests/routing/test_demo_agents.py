"""The demo and test agents are real A2A servers: checked with the official a2a-sdk client.

Each agent runs under uvicorn on 127.0.0.1; the client talks JSON-RPC 1.0, HTTP+JSON 1.0 and,
through cards whose interfaces say 0.3, the SDK's 0.3 compat transports. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from routing.demo.agents import (
    CLIENT_ROUTING_URI,
    ECHO,
    RESEARCHER,
    TRIAGE,
    WRITER,
    app_factory,
    draft_for,
    research_notes,
)
from tests import agents
from tests.servers import running, running_many

TIMEOUT = 10.0
BINDINGS = ["JSONRPC", "HTTP+JSON"]
PEERS = [
    {
        "id": "writer",
        "name": "Writer Agent",
        "description": "Turns notes into a short draft document.",
        "capabilities": ["writing", "drafting", "editing"],
    },
    {
        "id": "researcher",
        "name": "Research Agent",
        "description": "Searches its offline notes and summarizes the facts on a topic.",
        "capabilities": ["research", "search", "facts", "summarize"],
        "supportsClientRouting": True,
    },
]


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    apps = {spec.slug: app_factory(spec) for spec in (TRIAGE, RESEARCHER, WRITER, ECHO)} | {
        "v1-only": agents.v1_only_agent,
        "v03-only": agents.v0_3_only_agent,
        "v02": agents.v0_2_agent,
        "prefixed": agents.prefixed_agent,
        "misadvertised": agents.misadvertised_agent,
        "chunked": agents.chunked_streaming_agent,
        "input-required": agents.input_required_agent,
        "never-finishes": agents.never_finishing_agent,
    }
    with running_many(apps) as started:
        yield started


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        yield client


async def fetch_card(http: httpx.AsyncClient, url: str) -> AgentCard:
    response = await http.get(f"{url}/.well-known/agent-card.json")
    response.raise_for_status()
    return parse_agent_card(response.json())


def only_version(card: AgentCard, version: str) -> AgentCard:
    """A copy of `card` keeping the interfaces of one protocol version (to pick the transport)."""
    narrowed = AgentCard()
    narrowed.CopyFrom(card)
    del narrowed.supported_interfaces[:]
    narrowed.supported_interfaces.extend(
        i for i in card.supported_interfaces if i.protocol_version.startswith(version)
    )
    return narrowed


async def connect(
    http: httpx.AsyncClient,
    url: str,
    *,
    version: str = "1.0",
    bindings: list[str] = BINDINGS,
    streaming: bool = True,
) -> Client:
    card = only_version(await fetch_card(http, url), version)
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=bindings, streaming=streaming
    )
    return await create_client(card, config)


def user_message(text: str, *, routing: dict | None = None, task: Task | None = None) -> Message:
    message = Message(message_id=f"msg-{text[:20]}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if routing is not None:
        message.metadata.update({CLIENT_ROUTING_URI: routing})
        message.extensions.append(CLIENT_ROUTING_URI)
    if task is not None:
        message.task_id = task.id
        message.context_id = task.context_id
    return message


async def events(client: Client, message: Message) -> list[StreamResponse]:
    """Every event of one send (streamed or not), within TIMEOUT seconds."""
    async with asyncio.timeout(TIMEOUT):
        return [event async for event in client.send_message(SendMessageRequest(message=message))]


async def ask(client: Client, message: Message) -> Message:
    """Sends `message` and returns the agent's single Message answer."""
    received = await events(client, message)
    assert [e.WhichOneof("payload") for e in received] == ["message"]
    return received[0].message


async def get_task(client: Client, task_id: str) -> Task:
    async with asyncio.timeout(TIMEOUT):
        return await client.get_task(GetTaskRequest(id=task_id))


def routing_of(message: Message) -> dict | None:
    return MessageToDict(message.metadata).get(CLIENT_ROUTING_URI)


# --- triage ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_triage_routes_a_research_request_to_the_researcher(urls, http, version):
    client = await connect(http, urls["triage"], version=version, bindings=["JSONRPC"])
    routing = {"agentCards": PEERS, "sender": "user"}

    answer = await ask(client, user_message("please research the weather", routing=routing))

    assert get_message_text(answer) == "please research the weather"
    assert routing_of(answer) == {"recipient": "researcher", "reason": "matched words: research"}
    assert CLIENT_ROUTING_URI in answer.extensions


async def test_triage_forwards_an_agents_finished_work_to_the_user(urls, http):
    client = await connect(http, urls["triage"])
    routing = {"agentCards": PEERS, "sender": "researcher"}

    answer = await ask(client, user_message("Research notes on the weather", routing=routing))

    assert get_message_text(answer) == "Research notes on the weather"
    assert routing_of(answer)["recipient"] == "user"


async def test_triage_answers_the_user_itself_when_no_peer_matches(urls, http):
    client = await connect(http, urls["triage"], bindings=["HTTP+JSON"])

    answer = await ask(
        client, user_message("bake a cake", routing={"agentCards": PEERS, "sender": "user"})
    )

    assert routing_of(answer) == {"recipient": "user", "reason": "no peer matched"}


async def test_triage_without_routing_metadata_answers_politely(urls, http):
    client = await connect(http, urls["triage"])

    answer = await ask(client, user_message("hello there"))

    assert get_message_text(answer) == 'Hello from the triage agent. You said: "hello there".'
    assert routing_of(answer) is None


def test_triage_card_declares_client_routing_and_writer_card_does_not(urls):
    triage = httpx.get(f"{urls['triage']}/.well-known/agent-card.json", timeout=TIMEOUT).json()
    writer = httpx.get(f"{urls['writer']}/.well-known/agent-card.json", timeout=TIMEOUT).json()

    assert triage["capabilities"]["extensions"] == [
        {
            "uri": CLIENT_ROUTING_URI,
            "description": "Receives peer agents and chooses the next recipient",
            "required": False,
        }
    ]
    assert "extensions" not in writer["capabilities"]
    assert {i["url"] for i in triage["supportedInterfaces"]} == {urls["triage"]}
    assert triage["protocolVersion"] == "0.3"  # hybrid card: the 0.3 fields too
    assert triage["url"] == urls["triage"]


# --- researcher, writer, echo ------------------------------------------------------------


async def test_researcher_answers_the_same_notes_every_time_and_leaves_routing_open(urls, http):
    client = await connect(http, urls["researcher"])
    routing = {"agentCards": PEERS, "sender": "triage"}

    first = await ask(client, user_message("research the weather", routing=routing))
    second = await ask(client, user_message("research the weather", routing=routing))

    assert get_message_text(first) == get_message_text(second)
    assert get_message_text(first) == research_notes("research the weather")
    assert "key terms: research, weather" in get_message_text(first)
    assert routing_of(first) is None


async def test_researcher_names_the_writer_for_a_report(urls, http):
    client = await connect(http, urls["researcher"], version="0.3")
    routing = {"agentCards": PEERS, "sender": "triage"}

    answer = await ask(client, user_message("research solar power for a report", routing=routing))

    assert routing_of(answer) == {"recipient": "writer", "reason": "a report needs a writer"}


async def test_researcher_sends_writing_requests_back_to_the_sender(urls, http):
    client = await connect(http, urls["researcher"])
    routing = {"agentCards": PEERS, "sender": "triage"}

    answer = await ask(client, user_message("write a poem about rain", routing=routing))

    assert routing_of(answer) == {"recipient": "sender", "reason": "not research"}


@pytest.mark.parametrize(("version", "streaming"), [("1.0", True), ("1.0", False), ("0.3", True)])
async def test_writer_completes_a_task_with_a_draft_artifact(urls, http, version, streaming):
    client = await connect(http, urls["writer"], version=version, streaming=streaming)

    received = await events(client, user_message("notes on the weather in Lisbon"))
    task_id = next(e.task.id for e in received if e.HasField("task"))
    task = await get_task(client, task_id)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.name for a in task.artifacts] == ["draft"]
    assert get_artifact_text(task.artifacts[0]) == draft_for("notes on the weather in Lisbon")
    assert get_message_text(task.status.message) == "Draft ready."


@pytest.mark.parametrize(
    ("version", "binding"),
    [("1.0", "JSONRPC"), ("1.0", "HTTP+JSON"), ("0.3", "JSONRPC"), ("0.3", "HTTP+JSON")],
)
async def test_echo_echoes_on_every_binding_and_version(urls, http, version, binding):
    client = await connect(http, urls["echo"], version=version, bindings=[binding])

    answer = await ask(client, user_message("hello, echo"))

    assert get_message_text(answer) == "hello, echo"


# --- streaming, input-required, cancel ---------------------------------------------------


async def test_chunked_streamer_yields_several_artifact_updates(urls, http):
    client = await connect(http, urls["chunked"])

    received = await events(client, user_message("tell me a story"))
    chunks = [e.artifact_update for e in received if e.HasField("artifact_update")]

    assert len(chunks) == len(agents.CHUNKS)
    assert [c.append for c in chunks] == [False, True, True, True]
    assert [c.last_chunk for c in chunks] == [False, False, False, True]
    assert "".join(get_artifact_text(c.artifact) for c in chunks) == "".join(agents.CHUNKS)
    task = await get_task(client, chunks[0].task_id)
    assert [a.artifact_id for a in task.artifacts] == ["story"]  # chunks appended to one
    assert get_artifact_text(task.artifacts[0], delimiter="") == "".join(agents.CHUNKS)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_input_required_then_completed_on_the_next_message(urls, http, version):
    client = await connect(http, urls["input-required"], version=version, streaming=False)

    [first] = await events(client, user_message("greet someone"))
    assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_message_text(first.task.status.message) == "What name should I greet?"

    [second] = await events(client, user_message("Ada", task=first.task))
    assert second.task.id == first.task.id
    assert second.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(second.task.artifacts[0]) == "Hello, Ada!"


async def test_never_finishing_task_stays_working_until_cancelled(urls, http):
    client = await connect(http, urls["never-finishes"])

    async with asyncio.timeout(TIMEOUT):
        stream = client.send_message(SendMessageRequest(message=user_message("work forever")))
        async for event in stream:
            if event.HasField("status_update"):
                task_id = event.status_update.task_id
                assert event.status_update.status.state == TaskState.TASK_STATE_WORKING
                break
        await stream.aclose()
        await asyncio.sleep(0.2)
        assert (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_WORKING

        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))

    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_CANCELED


# --- cards and URLs ----------------------------------------------------------------------


async def test_prefixed_agent_card_is_only_at_the_prefixed_path(urls, http):
    origin = urls["prefixed"]
    agent_url = origin + agents.PREFIX

    assert (await http.get(f"{origin}/.well-known/agent-card.json")).status_code == 404
    assert (await http.get(f"{origin}/.well-known/agent.json")).status_code == 404
    card = (await http.get(f"{agent_url}/.well-known/agent-card.json")).json()
    assert {i["url"] for i in card["supportedInterfaces"]} == {agent_url}

    for binding in BINDINGS:
        client = await connect(http, agent_url, bindings=[binding])
        assert get_message_text(await ask(client, user_message("prefixed"))) == "prefixed"


async def test_v0_3_only_agent_has_a_pure_0_3_card_and_speaks_only_0_3(urls, http):
    url = urls["v03-only"]
    card = (await http.get(f"{url}/.well-known/agent-card.json")).json()

    assert "supportedInterfaces" not in card
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == url
    assert card["preferredTransport"] == "JSONRPC"
    assert card["additionalInterfaces"] == [{"transport": "HTTP+JSON", "url": url}]

    for binding, transport in [
        ("JSONRPC", CompatJsonRpcTransport),
        ("HTTP+JSON", CompatRestTransport),
    ]:
        client = await connect(http, url, version="0.3", bindings=[binding])
        assert isinstance(client._transport, transport)
        assert get_message_text(await ask(client, user_message("old"))) == "old"

    refused = await http.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
    )
    assert refused.json()["error"]["code"] == -32601
    assert (await http.post(f"{url}/message:send", json={})).status_code == 404


async def test_v1_only_agent_refuses_0_3_method_names(urls, http):
    url = urls["v1-only"]
    card = (await http.get(f"{url}/.well-known/agent-card.json")).json()

    assert "protocolVersion" not in card and "url" not in card
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}
    refused = await http.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {
                    "messageId": "m",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "x"}],
                }
            },
        },
    )
    assert refused.json()["error"]["code"] == -32601
    client = await connect(http, url)
    assert get_message_text(await ask(client, user_message("new"))) == "new"


async def test_v0_2_card_is_only_at_agent_json(urls, http):
    url = urls["v02"]

    assert (await http.get(f"{url}/.well-known/agent-card.json")).status_code == 404
    card = (await http.get(f"{url}/.well-known/agent.json")).json()
    assert card["protocolVersion"] == "0.2.5"
    assert card["url"] == url
    answer = await http.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "message/send",
            "params": {
                "message": {
                    "messageId": "m",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}],
                }
            },
        },
    )
    assert answer.json()["result"]["parts"] == [{"kind": "text", "text": "hi"}]


async def test_misadvertised_agent_card_points_elsewhere_but_it_answers_where_it_is(urls, http):
    url = urls["misadvertised"]
    card = await fetch_card(http, url)
    advertised = {i.url for i in card.supported_interfaces}

    assert url not in advertised and len(advertised) == 1
    with pytest.raises(httpx.ConnectError):
        await http.get(f"{advertised.pop()}/.well-known/agent-card.json")
    for interface in card.supported_interfaces:
        interface.url = url
    client = await create_client(
        only_version(card, "1.0"),
        ClientConfig(httpx_client=http, supported_protocol_bindings=BINDINGS),
    )
    assert get_message_text(await ask(client, user_message("really here"))) == "really here"


# --- plain card servers ------------------------------------------------------------------


def test_card_server_serves_a_card_that_can_change_with_etags():
    server = agents.CardServer()
    with running(server) as url:
        first = httpx.get(f"{url}/.well-known/agent-card.json", timeout=TIMEOUT)
        assert parse_agent_card(first.json()).name == "Echo Agent"
        assert first.json()["url"] == url
        unchanged = httpx.get(
            f"{url}/.well-known/agent-card.json",
            headers={"If-None-Match": first.headers["etag"]},
            timeout=TIMEOUT,
        )
        assert unchanged.status_code == 304

        server.set_card(lambda base_url: agents.sample_card(base_url, version="2.0.0"))
        changed = httpx.get(
            f"{url}/.well-known/agent-card.json",
            headers={"If-None-Match": first.headers["etag"]},
            timeout=TIMEOUT,
        )
        assert changed.status_code == 200
        assert changed.json()["version"] == "2.0.0"
        assert server.hits == 3


def test_broken_card_servers_fail_in_their_own_way():
    target = agents.CardServer()
    with running(target) as target_url:
        broken = {
            "missing": agents.card_missing_fields_server(),
            "not-json": agents.non_json_card_server(),
            "oversized": agents.oversized_card_server(),
            "failing": agents.failing_card_server(),
            "redirect": agents.redirecting_card_server(f"{target_url}/.well-known/agent-card.json"),
        }
        with running_many(broken) as urls, httpx.Client(timeout=TIMEOUT) as http:
            card_of = {
                name: http.get(f"{url}/.well-known/agent-card.json") for name, url in urls.items()
            }

            assert card_of["missing"].json() == {"name": "Incomplete Agent"}
            assert card_of["not-json"].headers["content-type"].startswith("text/html")
            with pytest.raises(ValueError):
                card_of["not-json"].json()
            assert len(card_of["oversized"].content) > agents.ONE_MIB
            assert parse_agent_card(card_of["oversized"].json()).name == "Echo Agent"
            assert card_of["failing"].status_code == 500
            assert card_of["redirect"].status_code == 302
            assert (
                card_of["redirect"].headers["location"]
                == f"{target_url}/.well-known/agent-card.json"
            )
            followed = http.get(
                f"{urls['redirect']}/.well-known/agent-card.json", follow_redirects=True
            )
            assert followed.json()["url"] == target_url
