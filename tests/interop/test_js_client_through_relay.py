"""The official @a2a-js/sdk client against a2a-sdk agents, once directly and once through the
relay: over JSON-RPC and HTTP+JSON, in A2A 1.0 and 0.3, the client must see the same results and
events (ids and timestamps aside), and the same errors."""

from __future__ import annotations

import pytest

from routing.demo.agents import ECHO, app_factory
from tests.agents import CHUNKS, chunked_streaming_agent, input_required_agent
from tests.jsinterop import event_kinds, get, observable, ref, run_js_client, send, states, stream
from tests.live import PROTOCOL_IDS, PROTOCOLS

protocols = pytest.mark.parametrize(("binding", "version"), PROTOCOLS, ids=PROTOCOL_IDS)


@pytest.fixture(scope="module")
def agents(relay):
    """{relay agent id: the agent's own URL} of the a2a-sdk agents the tests call."""
    return {
        "echo": relay.serve_agent("echo", app_factory(ECHO)),
        "chunked": relay.serve_agent("chunked", chunked_streaming_agent),
        "asks": relay.serve_agent("asks", input_required_agent),
    }


def both(relay, agents, agent_id, binding, version, operations):
    """(direct, through the relay): the JS client's runs of ``operations`` on one agent."""
    direct = run_js_client(agents[agent_id], binding, operations, version=version)
    relayed = run_js_client(
        relay.agent_url(agent_id), binding, operations, version=version, headers=relay.auth()
    )
    assert direct.client["protocolVersion"].startswith(version)
    assert relayed.client["protocolVersion"].startswith(version)
    return direct, relayed


def seen(run) -> list:
    """Everything the client saw, in a form two runs can be compared in."""
    return observable([[op.result, op.events, op.error] for op in run.ops])


@protocols
def test_a_message_answer_is_the_same_sent_or_streamed(relay, agents, binding, version):
    direct, relayed = both(
        relay, agents, "echo", binding, version, [send("hello"), stream("hello again")]
    )
    assert direct.ops[0].result["message"]["parts"] == [{"text": "hello"}]
    assert event_kinds(direct.ops[1].events) == ["message"]
    assert seen(relayed) == seen(direct)


@protocols
def test_a_task_and_its_chunks_are_the_same_sent_or_streamed(relay, agents, binding, version):
    operations = [send("a story"), stream("another story"), get(ref(0, "result.task.id"))]
    direct, relayed = both(relay, agents, "chunked", binding, version, operations)
    task = direct.ops[0].result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [part["text"] for part in task["artifacts"][0]["parts"]] == list(CHUNKS)
    assert states(direct.ops[1].events)[-1] == "TASK_STATE_COMPLETED"
    assert event_kinds(direct.ops[1].events).count("artifactUpdate") == len(CHUNKS)
    assert direct.ops[2].result["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen(relayed) == seen(direct)


@protocols
def test_an_input_required_conversation_reaches_the_same_end(relay, agents, binding, version):
    """The a2a-sdk agent's follow-up stream does not start with the task (the spec says it
    must: the peer's fault, seen directly); the relay's does, then carries every event the
    agent sent, in order, to the same end. The first turn is the same event for event."""
    operations = [stream("greet someone"), stream("Ada", taskId=ref(0, "events.0.task.id"))]
    direct, relayed = both(relay, agents, "asks", binding, version, operations)
    assert states(direct.ops[0].events)[-1] == "TASK_STATE_INPUT_REQUIRED"
    assert observable(relayed.ops[0].events) == observable(direct.ops[0].events)
    agent_sent = direct.ops[1].events
    assert event_kinds(agent_sent) == ["artifactUpdate", "statusUpdate"]
    assert states(agent_sent)[-1] == "TASK_STATE_COMPLETED"
    relayed_events = relayed.ops[1].events
    assert event_kinds(relayed_events)[0] == "task"
    assert observable(relayed_events[-len(agent_sent) :]) == observable(agent_sent)


@protocols
def test_an_unknown_task_is_the_same_error(relay, agents, binding, version):
    direct, relayed = both(relay, agents, "chunked", binding, version, [get("no-such-task")])
    if (binding, version) == ("HTTP+JSON", "0.3"):
        # @a2a-js/sdk's 0.3 REST transport throws a plain Error naming the HTTP status, from
        # the agent directly as from the relay.
        expected = "Error"
        assert "404" in direct.ops[0].error["message"]
        assert "404" in relayed.ops[0].error["message"]
    else:
        expected = "TaskNotFoundError"
    assert direct.ops[0].error["name"] == expected
    assert relayed.ops[0].error["name"] == expected
    assert relayed.ops[0].error["code"] == direct.ops[0].error["code"]
    assert relayed.ops[0].error["status"] == direct.ops[0].error["status"]
