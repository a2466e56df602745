"""An @a2a-js/sdk agent driven with the official Python a2a-sdk client in three places: directly,
through the relay as an agent, and as the only member of a team. Each must behave as the agent
does directly (issue 12): an input-required task answered in a follow-up turn completes (the
JS agent opens that turn by re-sending the task while it is still input-required), a Message
answer stays a Message, and a task the agent leaves working is answered at once."""

from __future__ import annotations

import uuid

import httpx
import pytest
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

from tests.jsinterop import JS_QUESTION, event_kinds, sdk_events, states
from tests.live import CALL_SECONDS, PROTOCOL_IDS, PROTOCOLS, manage, sdk_client

protocols = pytest.mark.parametrize(("binding", "version"), PROTOCOLS, ids=PROTOCOL_IDS)
WORKING_MS = 3000


@pytest.fixture(scope="module")
def cards(relay, js):
    """{target: (card JSON, headers)} for the JS agent directly, at the relay, in a team."""
    relay.register(js.url, "js")
    manage(
        relay.env,
        "shell",
        "-c",
        "from registry.teams import team_create; team_create(team_id='js-team', "
        "name='JS team', members=['js'], default_agent='js')",
    )
    team_card = httpx.get(
        f"{relay.url}/a2a/teams/js-team/.well-known/agent-card.json", timeout=CALL_SECONDS
    )
    team_card.raise_for_status()
    return {
        "direct": (js.card(), {}),
        "relay": (relay.card("js"), relay.auth()),
        "team": (team_card.json(), relay.auth()),
    }


targets = pytest.mark.parametrize("target", ["direct", "relay", "team"])


def user_message(text: str, *, task_id: str = "") -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


def task_id_of(event: dict) -> str:
    body = next(iter(event.values()))
    return body.get("id") or body["taskId"]


@protocols
@targets
async def test_an_input_required_follow_up_of_a_js_agent_completes(cards, target, binding, version):
    card, headers = cards[target]
    async with sdk_client(card, binding, version, headers=headers) as client:
        asked = sdk_events([e async for e in client.send_message(user_message("ask"))])
        assert states(asked)[-1] == "TASK_STATE_INPUT_REQUIRED"
        question = next(iter(asked[-1].values()))["status"]["message"]["parts"]
        assert question == [{"text": JS_QUESTION}]
        task_id = task_id_of(asked[0])

        answered = sdk_events(
            [e async for e in client.send_message(user_message("Ada", task_id=task_id))]
        )
        assert {task_id_of(event) for event in answered} == {task_id}
        assert states(answered)[-1] == "TASK_STATE_COMPLETED"
        greetings = [
            e["artifactUpdate"]["artifact"]["parts"] for e in answered if "artifactUpdate" in e
        ]
        assert greetings == [[{"text": "Hello, Ada!"}]]
        task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


@protocols
@targets
async def test_a_message_answer_of_a_js_agent_stays_a_message(cards, target, binding, version):
    card, headers = cards[target]
    async with sdk_client(card, binding, version, headers=headers, streaming=False) as client:
        answer = sdk_events([e async for e in client.send_message(user_message("message hi"))])
    assert event_kinds(answer) == ["message"]
    assert answer[0]["message"]["parts"] == [{"text": "hi"}]


@protocols
@targets
async def test_a_task_a_js_agent_leaves_working_is_answered_at_once(
    cards, target, binding, version
):
    card, headers = cards[target]
    async with sdk_client(card, binding, version, headers=headers, streaming=False) as client:
        answer = sdk_events(
            [e async for e in client.send_message(user_message(f"working {WORKING_MS}"))]
        )
    assert states(answer) == ["TASK_STATE_WORKING"]
