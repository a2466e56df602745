"""A snapshot an agent gives (a resubscription's first event, a GetTask poll) becomes the
events that lead to it from the relay's task, so a stream gets each change as an event."""

from __future__ import annotations

from tasks_app.snapshots import changes_between


def task(state: str, *artifacts: dict, message: dict | None = None) -> dict:
    status = {"state": state, **({"message": message} if message else {})}
    return {"id": "t", "contextId": "c", "status": status, "artifacts": list(artifacts)}


def artifact(artifact_id: str, *texts: str) -> dict:
    return {"artifactId": artifact_id, "parts": [{"text": text} for text in texts]}


def test_an_unchanged_snapshot_brings_no_event():
    same = task("TASK_STATE_WORKING", artifact("a", "one"))
    assert changes_between(same, same) == []


def test_new_artifacts_come_whole_in_the_agents_order():
    before = task("TASK_STATE_WORKING", artifact("chunk-0", "0"))
    after = task(
        "TASK_STATE_WORKING",
        artifact("chunk-0", "0"),
        artifact("chunk-1", "1"),
        artifact("chunk-2", "2"),
    )
    assert changes_between(before, after) == [
        {"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": artifact("chunk-1", "1")}},
        {"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": artifact("chunk-2", "2")}},
    ]


def test_an_artifact_that_grew_comes_as_an_append_of_its_new_parts():
    before = task("TASK_STATE_WORKING", artifact("story", "one "))
    after = task("TASK_STATE_WORKING", artifact("story", "one ", "two ", "three"))
    [change] = changes_between(before, after)
    assert change["artifactUpdate"]["append"] is True
    assert change["artifactUpdate"]["artifact"] == artifact("story", "two ", "three")


def test_an_artifact_that_changed_otherwise_comes_whole_and_replaces():
    before = task("TASK_STATE_WORKING", artifact("story", "draft"))
    after = task("TASK_STATE_WORKING", artifact("story", "final text"))
    [change] = changes_between(before, after)
    assert "append" not in change["artifactUpdate"]
    assert change["artifactUpdate"]["artifact"] == artifact("story", "final text")


def test_a_final_status_comes_after_the_artifacts_and_a_working_one_before():
    before = task("TASK_STATE_SUBMITTED")
    done = task("TASK_STATE_COMPLETED", artifact("a", "x"))
    assert [next(iter(event)) for event in changes_between(before, done)] == [
        "artifactUpdate",
        "statusUpdate",
    ]
    working = task("TASK_STATE_WORKING", artifact("a", "x"))
    assert [next(iter(event)) for event in changes_between(before, working)] == [
        "statusUpdate",
        "artifactUpdate",
    ]


def test_a_new_status_message_in_the_same_state_is_a_status_update():
    before = task("TASK_STATE_WORKING")
    after = task(
        "TASK_STATE_WORKING",
        message={"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "halfway"}]},
    )
    [change] = changes_between(before, after)
    assert change["statusUpdate"]["status"] == after["status"]


def test_an_agents_zoneless_and_offset_timestamps_reach_the_relay_in_utc():
    from tasks_app.snapshots import IdMap

    ids = IdMap(task_id="t", context_id="c", upstream_task_id="up", upstream_context_id="uc")
    event = {
        "statusUpdate": {
            "taskId": "up",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-11-28T16:58:00.944946"},
            "metadata": {"timestamp": "left alone"},
        }
    }
    task = {"id": "up", "status": {"state": "X", "timestamp": "2026-11-28T18:58:00+02:00"}}
    unreadable = {"task": {"id": "up", "status": {"state": "X", "timestamp": "yesterday"}}}

    relayed = ids.to_relay(event)["statusUpdate"]
    assert relayed["status"]["timestamp"] == "2026-11-28T16:58:00.944Z"
    assert relayed["metadata"] == {"timestamp": "left alone"}
    assert ids.to_relay(task)["status"]["timestamp"] == "2026-11-28T16:58:00.000Z"
    assert ids.to_relay(unreadable)["task"]["status"] == {"state": "X"}
