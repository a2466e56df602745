"""The JavaScript interop harness itself: the @a2a-js/sdk client runs every operation against
the @a2a-js/sdk agent directly, over both bindings and versions, and reports what the SDK
returned. When an SDK upgrade changes any of this, these tests say so before the differential
tests start disagreeing for a reason that is not the relay's."""

from __future__ import annotations

import pytest

from tests import jsinterop
from tests.jsinterop import JS_CHUNKS, event_kinds, get, ref, run_js_client, send, states, stream
from tests.live import PROTOCOL_IDS, PROTOCOLS

protocols = pytest.mark.parametrize(("binding", "version"), PROTOCOLS, ids=PROTOCOL_IDS)


def every_operation() -> list[dict]:
    return [
        send("echo hi"),  # 0
        stream("stream please"),  # 1
        get(ref(0, "result.task.id"), historyLength=1),  # 2
        {"op": "list"},  # 3
        send("ask"),  # 4
        stream("Ada", taskId=ref(4, "result.task.id")),  # 5
        stream("never", background=True),  # 6
        {"op": "await", "index": 6, "events": 2},  # 7
        {"op": "cancel", "id": ref(6, "events.0.task.id")},  # 8
        {"op": "await", "index": 6},  # 9
        send("message yo"),  # 10
        {
            "op": "push_set",
            "config": {
                "taskId": ref(4, "result.task.id"),
                "id": "hook-1",
                "url": "http://127.0.0.1:9/",
            },
        },  # 11
        {"op": "push_get", "taskId": ref(4, "result.task.id"), "id": "hook-1"},  # 12
        {"op": "push_list", "taskId": ref(4, "result.task.id")},  # 13
        {"op": "push_delete", "taskId": ref(4, "result.task.id"), "id": "hook-1"},  # 14
        {"op": "card"},  # 15
        get("no-such-task"),  # 16
        send("working 300", configuration={"returnImmediately": True}),  # 17
        {"op": "subscribe", "id": ref(17, "result.task.id")},  # 18
    ]


@protocols
def test_the_js_client_runs_every_operation_on_the_js_agent(js, binding, version):
    run = run_js_client(js.url, binding, every_operation(), version=version)
    ops = run.ops
    assert run.client["binding"] == binding
    assert run.client["protocolVersion"].startswith(version)
    assert ops[0].result["task"]["artifacts"][0]["parts"] == [{"text": "hi"}]
    chunks = [e["artifactUpdate"] for e in ops[1].events if "artifactUpdate" in e]
    assert [c["artifact"]["parts"][0]["text"] for c in chunks] == list(JS_CHUNKS)
    if (binding, version) == ("HTTP+JSON", "0.3"):
        # @a2a-js/sdk's 0.3 REST pair (its client and its server) loses `append` on the way.
        assert [c.get("append", False) for c in chunks] == [False, False, False, False]
    else:
        assert [c.get("append", False) for c in chunks] == [False, True, True, True]
    assert [c.get("lastChunk", False) for c in chunks] == [False, False, False, True]
    assert len(ops[2].result["history"]) == 1
    if version == "0.3":  # ListTasks has no 0.3 form; the SDK's 0.3 transports refuse it
        assert ops[3].error["name"] in ("JsonRpcTransportError", "UnsupportedOperationError")
    else:
        assert ops[3].result["tasks"]
    # The follow-up turn opens with the re-sent, still input-required task, then completes.
    assert event_kinds(ops[5].events)[0] == "task"
    assert states(ops[5].events)[0] == "TASK_STATE_INPUT_REQUIRED"
    assert states(ops[5].events)[-1] == "TASK_STATE_COMPLETED"
    assert ops[8].result["status"]["state"] == "TASK_STATE_CANCELED"
    assert states(ops[6].events)[-1] == "TASK_STATE_CANCELED" and ops[6].ended
    assert ops[10].result["message"]["parts"] == [{"text": "yo"}]
    assert ops[11].result["id"] == ops[12].result["id"] == "hook-1"
    assert [config["id"] for config in ops[13].result["configs"]] == ["hook-1"]
    assert ops[14].error is None
    assert "extended" in [skill["id"] for skill in ops[15].result["skills"]]
    assert ops[16].error["name"] == "TaskNotFoundError"
    assert states(ops[18].events) == ["TASK_STATE_WORKING"]


def test_a_missing_sdk_install_is_a_reason_to_skip(monkeypatch, tmp_path):
    monkeypatch.setattr(jsinterop, "SDK_PACKAGE", tmp_path / "absent" / "package.json")
    assert "scripts/ensure-js" in jsinterop.js_missing()


def test_a_missing_node_is_a_reason_to_skip(monkeypatch):
    monkeypatch.setattr(jsinterop.shutil, "which", lambda name: None)
    assert "node is not installed" in jsinterop.js_missing()


def test_a_card_without_the_binding_is_reported_not_guessed(js):
    with pytest.raises(jsinterop.JsClientFailedError, match="offers no GRPC"):
        run_js_client(js.url, "GRPC", [send("echo hi")])
