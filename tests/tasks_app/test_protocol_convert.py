"""0.3 <-> 1.0 conversion and 1.0 validation: fidelity, SDK agreement, and the documented gaps."""

import base64
import copy
import json

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import conversions, proto_utils
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2 as pb2_v10
from google.protobuf.json_format import MessageToDict, ParseDict

from tasks_app.protocol.card_conversion import (
    agent_card_hybrid,
    agent_card_to_v03,
    agent_card_to_v1,
)
from tasks_app.protocol.convert import (
    request_from_v1,
    request_to_v1,
    result_from_v1,
    result_to_v1,
    stream_response_from_v1,
    stream_response_to_v1,
)
from tasks_app.protocol.errors import (
    FieldViolation,
    InvalidAgentResponse,
    InvalidParams,
    UnsupportedOperation,
    VersionNotSupported,
)
from tasks_app.protocol.objects import with_artifact_flags
from tasks_app.protocol.validation import parse_v1
from tasks_app.protocol.versions import Dialect, Operation

Op = Operation
LEGACY = [Dialect.V03_JSONRPC, Dialect.V03_REST]
ROUTING = "https://ranch.woi.dev/extensions/client-routing/v1"
METADATA = {
    ROUTING: {"peers": [{"id": "agent-a", "weight": 3}, {"id": "agent-b", "weight": 1}], "hops": 2},
    "count": 7,
    "big": 2**64 + 1,
    "ratio": 0.5,
    "flags": [True, None, 1, "x"],
    "nested": {"deep": {"deeper": [1, {"n": 2}]}},
}


def same_json(left, right) -> bool:
    """Equal as JSON text: unlike ==, tells 7 from 7.0 and True from 1."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def make_message_v1(**overrides):
    message = {
        "messageId": "m1",
        "contextId": "c1",
        "taskId": "t1",
        "role": "ROLE_USER",
        "parts": [
            {"text": "hello", "metadata": {"part": 1}},
            {"data": {"order": 42, "items": [1, 2]}, "metadata": METADATA},
            {
                "url": "https://files.example/a.pdf",
                "mediaType": "application/pdf",
                "filename": "a.pdf",
            },
            {"raw": "aGVsbG8=", "mediaType": "text/plain"},
        ],
        "metadata": METADATA,
        "extensions": [ROUTING],
        "referenceTaskIds": ["t0", "t00"],
    }
    message.update(overrides)
    return message


def make_artifact_v1(**overrides):
    artifact = {
        "artifactId": "a1",
        "name": "report",
        "description": "the report",
        "parts": [{"text": "result"}, {"data": {"score": 3}}],
        "metadata": METADATA,
        "extensions": [ROUTING],
    }
    artifact.update(overrides)
    return artifact


def make_task_v1(**overrides):
    task = {
        "id": "t1",
        "contextId": "c1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": make_message_v1(messageId="m2", role="ROLE_AGENT"),
            "timestamp": "2026-01-02T03:04:05.678Z",
        },
        "artifacts": [make_artifact_v1()],
        "history": [make_message_v1()],
        "metadata": METADATA,
    }
    task.update(overrides)
    return task


def make_send_request_v1(**overrides):
    request = {
        "message": make_message_v1(),
        "configuration": {
            "acceptedOutputModes": ["text/plain", "application/json"],
            "taskPushNotificationConfig": {
                "id": "p1",
                "url": "https://hooks.example/a2a",
                "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "secret"},
            },
            "historyLength": 3,
            "returnImmediately": True,
        },
        "metadata": METADATA,
    }
    request.update(overrides)
    return request


def make_push_config_v1(**overrides):
    config = {
        "taskId": "t1",
        "id": "p1",
        "url": "https://hooks.example/a2a",
        "token": "tok",
        "authentication": {"scheme": "Bearer", "credentials": "secret"},
    }
    config.update(overrides)
    return config


STREAM_EVENTS_V1 = [
    {"task": make_task_v1()},
    {"message": make_message_v1(role="ROLE_AGENT")},
    {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "metadata": METADATA,
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": make_message_v1(role="ROLE_AGENT"),
            },
        }
    },
    {
        "artifactUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "artifact": make_artifact_v1(),
            "append": True,
            "lastChunk": True,
            "metadata": METADATA,
        }
    },
]


# --- fidelity: 1.0 -> 0.3 -> 1.0 -------------------------------------------------------


@pytest.mark.parametrize("dialect", LEGACY)
@pytest.mark.parametrize(
    ("operation", "params"),
    [
        (Op.SEND, make_send_request_v1()),
        (Op.SEND, make_send_request_v1(configuration={"acceptedOutputModes": ["text/plain"]})),
        (Op.STREAM, make_send_request_v1()),
        (Op.PUSH_CREATE, make_push_config_v1()),
        (Op.GET_TASK, {"id": "t1", "historyLength": 4}),
        (Op.SUBSCRIBE, {"id": "t1"}),
        (Op.PUSH_GET, {"taskId": "t1", "id": "p1"}),
        (Op.PUSH_LIST, {"taskId": "t1"}),
        (Op.PUSH_DELETE, {"taskId": "t1", "id": "p1"}),
    ],
)
def test_requests_survive_a_trip_through_03_unchanged(operation, params, dialect):
    legacy = request_from_v1(operation, params, dialect)
    assert same_json(request_to_v1(operation, json.loads(json.dumps(legacy)), dialect), params)


def test_cancel_metadata_survives_a_trip_through_03_jsonrpc():
    params = {"id": "t1", "metadata": METADATA}
    legacy = request_from_v1(Op.CANCEL, params, Dialect.V03_JSONRPC)
    assert same_json(request_to_v1(Op.CANCEL, legacy, Dialect.V03_JSONRPC), params)


@pytest.mark.parametrize("dialect", LEGACY)
@pytest.mark.parametrize(
    ("operation", "result"),
    [
        (Op.SEND, {"task": make_task_v1()}),
        (Op.SEND, {"message": make_message_v1(role="ROLE_AGENT")}),
        (Op.GET_TASK, make_task_v1()),
        (Op.CANCEL, make_task_v1(status={"state": "TASK_STATE_CANCELED"})),
        (Op.PUSH_CREATE, make_push_config_v1()),
        (Op.PUSH_GET, make_push_config_v1(authentication={"scheme": "Basic"})),
        (Op.PUSH_LIST, {"configs": [make_push_config_v1(), make_push_config_v1(id="p2")]}),
        (Op.PUSH_DELETE, None),
    ],
)
def test_results_survive_a_trip_through_03_unchanged(operation, result, dialect):
    legacy = json.loads(json.dumps(result_from_v1(operation, result, dialect)))
    assert same_json(result_to_v1(operation, legacy, dialect), result)


@pytest.mark.parametrize("dialect", LEGACY)
@pytest.mark.parametrize("event", STREAM_EVENTS_V1, ids=lambda e: next(iter(e)))
def test_stream_events_survive_a_trip_through_03_unchanged(event, dialect):
    legacy = json.loads(json.dumps(stream_response_from_v1(event, dialect)))
    assert same_json(stream_response_to_v1(legacy, dialect), event)


@pytest.mark.parametrize("dialect", LEGACY)
def test_metadata_ints_stay_ints_and_ids_stay_put_through_03(dialect):
    back = result_to_v1(Op.GET_TASK, result_from_v1(Op.GET_TASK, make_task_v1(), dialect), dialect)
    message = back["history"][0]
    assert type(message["metadata"]["count"]) is int
    assert message["metadata"]["big"] == 2**64 + 1
    assert message["metadata"][ROUTING]["peers"][0]["weight"] == 3
    assert list(message["metadata"]) == list(METADATA)  # key order kept too
    assert (message["messageId"], message["taskId"], message["contextId"]) == ("m1", "t1", "c1")
    assert message["referenceTaskIds"] == ["t0", "t00"]
    assert message["extensions"] == [ROUTING]
    assert back["artifacts"][0]["artifactId"] == "a1"
    assert type(back["artifacts"][0]["parts"][1]["data"]["score"]) is int


# --- fidelity: 0.3 -> 1.0 -> 0.3 -------------------------------------------------------


def make_message_03(**overrides):
    message = {
        "kind": "message",
        "messageId": "m1",
        "role": "agent",
        "parts": [
            {"kind": "text", "text": "hello", "metadata": METADATA},
            {"kind": "data", "data": {"n": 1}},
            {
                "kind": "file",
                "file": {"uri": "https://f/a.pdf", "mimeType": "application/pdf", "name": "a.pdf"},
            },
            {"kind": "file", "file": {"bytes": "aGVsbG8="}},
        ],
        "contextId": "c1",
        "taskId": "t1",
        "referenceTaskIds": ["t0"],
        "extensions": [ROUTING],
        "metadata": METADATA,
    }
    message.update(overrides)
    return message


def make_task_03(state="input-required", metadata=METADATA):
    message = make_message_03(metadata=metadata)
    message["parts"][0]["metadata"] = metadata
    return {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {"state": state, "message": message, "timestamp": "2026-01-02T03:04:05Z"},
        "artifacts": [
            {"artifactId": "a1", "parts": [{"kind": "text", "text": "r"}], "metadata": metadata}
        ],
        "history": [{**message, "role": "user"}],
        "metadata": metadata,
    }


JSONRPC_03_EVENTS = [
    make_task_03(),
    make_task_03(state="unknown"),
    make_message_03(),
    {
        "kind": "status-update",
        "taskId": "t1",
        "contextId": "c1",
        "final": True,
        "status": {"state": "completed"},
        "metadata": METADATA,
    },
    {
        "kind": "status-update",
        "taskId": "t1",
        "contextId": "c1",
        "final": False,
        "status": {"state": "working", "message": make_message_03()},
    },
    {
        "kind": "artifact-update",
        "taskId": "t1",
        "contextId": "c1",
        "append": False,
        "lastChunk": True,
        "artifact": {"artifactId": "a1", "parts": [{"kind": "data", "data": {"k": [1, 2]}}]},
        "metadata": METADATA,
    },
]


@pytest.mark.parametrize("event", JSONRPC_03_EVENTS, ids=lambda e: e["kind"])
def test_03_jsonrpc_events_survive_a_trip_through_10_unchanged(event):
    canonical = stream_response_to_v1(event, Dialect.V03_JSONRPC)
    assert same_json(stream_response_from_v1(canonical, Dialect.V03_JSONRPC), event)


def test_03_jsonrpc_send_params_survive_a_trip_through_10_unchanged():
    params = {
        "message": make_message_03(role="user"),
        "configuration": {
            "acceptedOutputModes": ["text/plain"],
            "pushNotificationConfig": {
                "url": "https://h",
                "token": "k",
                "authentication": {"schemes": ["Bearer"], "credentials": "c"},
            },
            "historyLength": 2,
            "blocking": False,
        },
        "metadata": METADATA,
    }
    canonical = request_to_v1(Op.SEND, params, Dialect.V03_JSONRPC)
    assert same_json(request_from_v1(Op.SEND, canonical, Dialect.V03_JSONRPC), params)


REST_03_EVENTS = [
    {
        "task": {
            "id": "t1",
            "contextId": "c1",
            "status": {
                "state": "TASK_STATE_CANCELLED",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "content": [{"text": "bye"}]},
            },
            "history": [
                {
                    "messageId": "m1",
                    "role": "ROLE_USER",
                    "content": [
                        {"text": "x", "metadata": METADATA},
                        {"data": {"data": {"n": 1}}},
                        {
                            "file": {
                                "fileWithUri": "https://f",
                                "mimeType": "image/png",
                                "name": "f.png",
                            }
                        },
                        {"file": {"fileWithBytes": "YUdWc2JHOD0="}},  # "hello", twice
                    ],
                    "metadata": METADATA,
                    "extensions": [ROUTING],
                }
            ],
            "metadata": METADATA,
        }
    },
    {
        "message": {
            "messageId": "m1",
            "contextId": "c1",
            "role": "ROLE_AGENT",
            "content": [{"text": "x"}],
        }
    },
    {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_AUTH_REQUIRED"},
            "final": True,
        }
    },
    {
        "artifactUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]},
            "lastChunk": True,
            "metadata": METADATA,
        }
    },
]


@pytest.mark.parametrize("event", REST_03_EVENTS, ids=lambda e: next(iter(e)))
def test_03_rest_events_survive_a_trip_through_10_unchanged(event):
    canonical = stream_response_to_v1(event, Dialect.V03_REST)
    assert same_json(stream_response_from_v1(canonical, Dialect.V03_REST), event)


def test_03_rest_snake_case_proto_json_is_read_like_camel_case():
    snake = {
        "status_update": {
            "task_id": "t1",
            "context_id": "c1",
            "status": {
                "state": "TASK_STATE_WORKING",
                "update": {"message_id": "m", "role": 2, "content": [{"text": "x"}]},
            },
        }
    }
    assert stream_response_to_v1(snake, Dialect.V03_REST) == {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]},
            },
        }
    }


# --- agreement with the SDK's converters ------------------------------------------------

# Struct-safe: the SDK's path would turn ints into floats, so this metadata has none.
SDK_SAFE_METADATA = {"s": "x", "ratio": 0.5, "nested": {"list": ["a", True]}}


def sdk_safe_task():
    message = make_message_v1(
        metadata=SDK_SAFE_METADATA,
        referenceTaskIds=["t0"],
        parts=[
            {"text": "hi", "metadata": SDK_SAFE_METADATA},
            {"data": {"k": "v"}},
            {"url": "https://f/a.pdf", "mediaType": "application/pdf", "filename": "a.pdf"},
        ],
    )
    return make_task_v1(
        status={
            "state": "TASK_STATE_COMPLETED",
            "message": message,
            "timestamp": "2026-01-02T03:04:05Z",
        },
        history=[message],
        artifacts=[make_artifact_v1(metadata=SDK_SAFE_METADATA, parts=[{"text": "r"}])],
        metadata=SDK_SAFE_METADATA,
    )


def test_our_03_jsonrpc_task_equals_the_sdk_conversion():
    task = sdk_safe_task()
    sdk = conversions.to_compat_task(ParseDict(task, pb2_v10.Task()))
    assert same_json(
        result_from_v1(Op.GET_TASK, task, Dialect.V03_JSONRPC),
        sdk.model_dump(mode="json", by_alias=True, exclude_none=True),
    )


def test_our_03_rest_task_equals_the_sdk_proto_json():
    task = sdk_safe_task()
    for message in [task["status"]["message"], *task["history"]]:
        message.pop("referenceTaskIds", None)  # not in the 0.3 proto; we send it as an extra
    sdk_model = conversions.to_compat_task(ParseDict(task, pb2_v10.Task()))
    assert same_json(
        result_from_v1(Op.GET_TASK, task, Dialect.V03_REST),
        MessageToDict(proto_utils.ToProto.task(sdk_model)),
    )


def test_our_03_artifact_update_equals_the_sdk_conversion():
    event = {
        "taskId": "t1",
        "contextId": "c1",
        "artifact": make_artifact_v1(metadata=SDK_SAFE_METADATA),
        "append": True,
        "lastChunk": True,
    }
    event["artifact"]["parts"] = [{"text": "x"}]
    sdk = conversions.to_compat_task_artifact_update_event(
        ParseDict(event, pb2_v10.TaskArtifactUpdateEvent())
    )
    ours = stream_response_from_v1({"artifactUpdate": event}, Dialect.V03_JSONRPC)
    assert same_json(ours, sdk.model_dump(mode="json", by_alias=True, exclude_none=True))


def test_interrupted_status_updates_are_final_in_03_where_the_sdk_says_not():
    event = {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}
    sdk = conversions.to_compat_task_status_update_event(
        ParseDict(event, pb2_v10.TaskStatusUpdateEvent())
    )
    ours = stream_response_from_v1({"statusUpdate": event}, Dialect.V03_JSONRPC)
    assert (ours["final"], sdk.final) == (True, False)
    assert same_json(
        {**ours, "final": False}, sdk.model_dump(mode="json", by_alias=True, exclude_none=True)
    )


def test_the_sdk_struct_path_turns_ints_into_floats_which_is_why_we_map_dicts():
    message = make_message_v1(metadata={"count": 7})
    sdk = conversions.to_compat_message(ParseDict(message, pb2_v10.Message()))
    assert type(sdk.metadata["count"]) is float
    ours = result_from_v1(Op.SEND, {"message": message}, Dialect.V03_JSONRPC)
    assert type(ours["metadata"]["count"]) is int


def test_a_non_object_data_part_uses_the_sdk_compat_convention_both_ways():
    legacy = stream_response_from_v1(
        {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"data": [1, 2]}]}},
        Dialect.V03_JSONRPC,
    )
    assert legacy["parts"] == [
        {"kind": "data", "data": {"value": [1, 2]}, "metadata": {"data_part_compat": True}}
    ]
    sdk_part = conversions.to_core_part(types_v03.Part.model_validate(legacy["parts"][0]))
    assert MessageToDict(sdk_part) == {"data": [1.0, 2.0]}
    assert stream_response_to_v1(legacy, Dialect.V03_JSONRPC)["message"]["parts"] == [
        {"data": [1, 2]}
    ]


def test_sdk_03_objects_read_by_our_converter_match_the_sdk_reading():
    # Without the 2**64 + 1, which the SDK's Struct cannot even hold as a float exactly.
    metadata = {key: value for key, value in METADATA.items() if key != "big"}
    task = make_task_03(state="rejected", metadata=metadata)
    sdk_core = MessageToDict(conversions.to_core_task(types_v03.Task.model_validate(task)))
    ours = result_to_v1(Op.GET_TASK, task, Dialect.V03_JSONRPC)
    assert ours == sdk_core  # == on purpose: the SDK's floats equal our ints


# --- deliberate gaps ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "configuration", "return_immediately"),
    [
        (Dialect.V03_JSONRPC, {"blocking": True}, None),
        (Dialect.V03_JSONRPC, {"blocking": False}, True),
        (Dialect.V03_JSONRPC, {}, None),
        (Dialect.V03_REST, {"blocking": True}, None),
        (Dialect.V03_REST, {"blocking": False}, True),
        (Dialect.V03_REST, {}, True),  # proto3: an absent bool is false, i.e. non-blocking
    ],
)
def test_03_blocking_becomes_10_return_immediately(dialect, configuration, return_immediately):
    message = {"messageId": "m", "role": "ROLE_USER" if dialect is Dialect.V03_REST else "user"}
    params = {"message": message, "configuration": configuration}
    got = request_to_v1(Op.SEND, params, dialect).get("configuration", {}).get("returnImmediately")
    assert got is return_immediately


@pytest.mark.parametrize("dialect", LEGACY)
@pytest.mark.parametrize(
    ("configuration", "blocking"), [(None, True), ({}, True), ({"returnImmediately": True}, False)]
)
def test_10_to_03_always_says_whether_to_block(configuration, blocking, dialect):
    params = {"message": make_message_v1()}
    if configuration is not None:
        params["configuration"] = configuration
    assert request_from_v1(Op.SEND, params, dialect)["configuration"]["blocking"] is blocking


def test_history_length_0_means_unlimited_in_03_and_is_left_out_of_10():
    assert request_to_v1(Op.GET_TASK, {"id": "t", "historyLength": 0}, Dialect.V03_JSONRPC) == {
        "id": "t"
    }
    assert request_from_v1(Op.GET_TASK, {"id": "t", "historyLength": 0}, Dialect.V03_JSONRPC) == {
        "id": "t"
    }


def test_03_authentication_keeps_only_its_first_scheme():
    params = {
        "taskId": "t",
        "pushNotificationConfig": {
            "url": "https://h",
            "authentication": {"schemes": ["Bearer", "Basic"]},
        },
    }
    assert request_to_v1(Op.PUSH_CREATE, params, Dialect.V03_JSONRPC)["authentication"] == {
        "scheme": "Bearer"
    }


def test_an_unknown_03_state_reads_as_unspecified_and_back():
    canonical = result_to_v1(Op.GET_TASK, make_task_03(state="unknown"), Dialect.V03_JSONRPC)
    assert canonical["status"]["state"] == "TASK_STATE_UNSPECIFIED"
    assert (
        result_from_v1(Op.GET_TASK, canonical, Dialect.V03_REST)["status"]["state"]
        == "TASK_STATE_UNSPECIFIED"
    )


def test_03_timestamps_with_an_offset_become_utc_with_z():
    task = make_task_03()
    task["status"]["timestamp"] = "2026-01-02T05:04:05.5+02:00"
    assert (
        result_to_v1(Op.GET_TASK, task, Dialect.V03_JSONRPC)["status"]["timestamp"]
        == "2026-01-02T03:04:05.500Z"
    )


def test_a_task_without_context_gets_an_empty_one_in_03_that_vanishes_again():
    task = {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}
    legacy = result_from_v1(Op.GET_TASK, task, Dialect.V03_JSONRPC)
    assert legacy["contextId"] == ""
    assert result_to_v1(Op.GET_TASK, legacy, Dialect.V03_JSONRPC) == task


def test_list_tasks_has_no_03_jsonrpc_method():
    with pytest.raises(UnsupportedOperation):
        request_from_v1(Op.LIST_TASKS, {}, Dialect.V03_JSONRPC)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (
            lambda: result_to_v1(
                Op.GET_TASK,
                {"kind": "task", "id": "t", "status": {"state": "paused"}},
                Dialect.V03_JSONRPC,
            ),
            InvalidAgentResponse,
        ),
        (
            lambda: result_to_v1(
                Op.SEND, {"kind": "status-update", "taskId": "t", "status": {}}, Dialect.V03_JSONRPC
            ),
            InvalidAgentResponse,
        ),
        (
            lambda: stream_response_to_v1({"kind": "telegram"}, Dialect.V03_JSONRPC),
            InvalidAgentResponse,
        ),
        (
            lambda: stream_response_to_v1({"task": {"id": 5}}, Dialect.V03_REST),
            InvalidAgentResponse,
        ),
        (lambda: result_to_v1(Op.GET_TASK, "not a task", Dialect.V03_REST), InvalidAgentResponse),
        (
            lambda: request_to_v1(
                Op.SEND, {"message": {"role": "bot", "parts": []}}, Dialect.V03_JSONRPC
            ),
            InvalidParams,
        ),
        (lambda: request_to_v1(Op.PUSH_GET, {"name": "agents/x"}, Dialect.V03_REST), InvalidParams),
    ],
)
def test_objects_that_cannot_be_converted_raise_the_right_a2a_error(call, error):
    with pytest.raises(error, match="malformed"):
        call()


# --- 1.0 validation ----------------------------------------------------------------------


def test_parse_v1_refuses_what_protobuf_parse_dict_silently_accepts():
    # json_format iterates the string's characters as (ignored) unknown field names.
    assert not ParseDict(
        {"message": "hi"}, pb2_v10.SendMessageRequest(), ignore_unknown_fields=True
    ).message.parts
    with pytest.raises(InvalidParams) as caught:
        parse_v1("SendMessageRequest", {"message": "hi"})
    assert [v.field for v in caught.value.field_violations] == ["message"]


def test_parse_v1_normalises_keys_enums_numbers_and_defaults():
    data = {
        "message_id": "m1",
        "role": 2,
        "context_id": "",
        "parts": [{"raw": "aGk", "media_type": "text/plain", "filename": None}],
        "metadata": {"snake_case_key": 1, "n": 2},
        "whatever": True,
    }
    assert same_json(
        parse_v1("Message", data),
        {
            "messageId": "m1",
            "role": "ROLE_AGENT",
            "parts": [{"raw": "aGk=", "mediaType": "text/plain"}],
            "metadata": {"snake_case_key": 1, "n": 2},
        },
    )


@pytest.mark.parametrize(
    ("message_type", "data", "field", "description"),
    [
        (
            "Message",
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 5}]},
            "parts[0].text",
            "must be a string",
        ),
        (
            "Message",
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "!!"}]},
            "parts[0].raw",
            "must be base64",
        ),
        (
            "Message",
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "u"}]},
            "parts[0].url",
            "cannot be set together with text",
        ),
        (
            "Message",
            {"messageId": "m", "role": "ROLE_USER", "parts": "x"},
            "parts",
            "must be a JSON array",
        ),
        (
            "Message",
            {"messageId": "m", "role": "ROLE_OWNER", "parts": [{"text": "a"}]},
            "role",
            "unknown value 'ROLE_OWNER'",
        ),
        (
            "Message",
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}], "metadata": [1]},
            "metadata",
            "must be a JSON object",
        ),
        ("GetTaskRequest", {"id": "t", "historyLength": 2**31}, "historyLength", "is out of range"),
        (
            "GetTaskRequest",
            {"id": "t", "historyLength": True},
            "historyLength",
            "must be an integer",
        ),
        (
            "ListTasksRequest",
            {"statusTimestampAfter": "2026-01-02T03:04:05"},
            "statusTimestampAfter",
            "must be an RFC 3339 timestamp",
        ),
        (
            "TaskPushNotificationConfig",
            {"url": "u", "authentication": {}},
            "authentication.scheme",
            "is required",
        ),
    ],
)
def test_parse_v1_names_each_bad_field(message_type, data, field, description):
    with pytest.raises(InvalidParams) as caught:
        parse_v1(message_type, data)
    assert FieldViolation(field, description) in caught.value.field_violations


def test_a_response_may_carry_its_required_fields_at_their_defaults():
    listing = {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
    assert parse_v1("ListTasksResponse", listing) == listing


# --- agent cards -------------------------------------------------------------------------


def make_card_03():
    return {
        "protocolVersion": "0.3.0",
        "name": "Echo",
        "description": "Echoes",
        "url": "https://agents.example/echo/rpc",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": "https://agents.example/echo/rest", "transport": "HTTP+JSON"}
        ],
        "version": "1.2.3",
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
            "extensions": [
                {"uri": ROUTING, "required": False, "params": {"maxPeers": 5, "weights": [1, 2]}}
            ],
        },
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
        },
        "security": [{"bearer": ["read"]}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["demo"]}],
        "supportsAuthenticatedExtendedCard": True,
    }


def test_a_03_card_becomes_a_10_card_with_interfaces_and_typed_schemes():
    card = agent_card_to_v1(make_card_03())
    assert card["supportedInterfaces"] == [
        {
            "url": "https://agents.example/echo/rpc",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "0.3",
        },
        {
            "url": "https://agents.example/echo/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "0.3",
        },
    ]
    assert card["capabilities"]["extendedAgentCard"] is True
    assert same_json(
        card["capabilities"]["extensions"][0]["params"], {"maxPeers": 5, "weights": [1, 2]}
    )
    assert card["securitySchemes"]["key"] == {
        "apiKeySecurityScheme": {"location": "header", "name": "X-Key"}
    }
    assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": ["read"]}}}]
    assert "url" not in card
    parse_v1("AgentCard", card)


def test_a_10_card_becomes_a_03_card_from_its_03_interfaces():
    legacy = agent_card_to_v03(agent_card_to_v1(make_card_03()))
    assert (legacy["url"], legacy["preferredTransport"], legacy["protocolVersion"]) == (
        "https://agents.example/echo/rpc",
        "JSONRPC",
        "0.3.0",  # as 0.3 agents say it, not the interface's Major.Minor
    )
    assert legacy["additionalInterfaces"] == [
        {"url": "https://agents.example/echo/rest", "transport": "HTTP+JSON"}
    ]
    assert same_json(
        legacy["capabilities"]["extensions"][0]["params"], {"maxPeers": 5, "weights": [1, 2]}
    )
    assert legacy["securitySchemes"]["key"] == {"type": "apiKey", "in": "header", "name": "X-Key"}
    types_v03.AgentCard.model_validate(legacy)


def test_the_hybrid_card_serves_both_versions_and_the_sdk_reads_it_as_the_same_card():
    card_v1 = agent_card_to_v1(make_card_03())
    hybrid = agent_card_hybrid(card_v1)
    assert hybrid["supportedInterfaces"] == card_v1["supportedInterfaces"]
    assert hybrid["url"] == "https://agents.example/echo/rpc"
    # Each scheme in one shape only (issue 13: the 0.3 shape, which a2a-sdk 1.x maps itself).
    assert hybrid["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
    }
    assert types_v03.AgentCard.model_validate(hybrid).url == hybrid["url"]
    assert MessageToDict(parse_agent_card(copy.deepcopy(hybrid))) == card_v1
    assert same_json(agent_card_to_v1(hybrid), card_v1)
    assert "url" not in card_v1  # the hybrid was built on a copy


def test_a_card_without_a_03_interface_has_no_03_form():
    card = agent_card_to_v1(make_card_03())
    for interface in card["supportedInterfaces"]:
        interface["protocolVersion"] = "1.0"
    with pytest.raises(VersionNotSupported):
        agent_card_to_v03(card)
    assert agent_card_hybrid(card) == card


def test_an_invalid_03_card_is_refused_with_its_fields():
    card = make_card_03()
    del card["url"]
    with pytest.raises(InvalidParams) as caught:
        agent_card_to_v1(card)
    assert "url" in [v.field for v in caught.value.field_violations]


BINARY = bytes(range(256))
BINARY_RAW = base64.b64encode(BINARY).decode()
BINARY_03_REST = base64.b64encode(BINARY_RAW.encode()).decode()


def test_item1_a_10_file_goes_to_03_rest_base64_encoded_twice_as_a2a_sdk_0_3_writes_it():
    """Issue 13, item 1: a2a-sdk 0.3.x reads ``fileWithBytes`` as the base64 of the base64
    text; the relay sent it encoded once, and 0.3 REST clients failed with
    UnicodeDecodeError on a binary file."""
    event = {
        "artifactUpdate": {
            "taskId": "t",
            "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"raw": BINARY_RAW, "filename": "b.bin"}]},
        }
    }
    rest = stream_response_from_v1(event, Dialect.V03_REST)
    file = rest["artifactUpdate"]["artifact"]["parts"][0]["file"]
    assert file == {"fileWithBytes": BINARY_03_REST, "name": "b.bin"}
    assert base64.b64decode(base64.b64decode(file["fileWithBytes"]).decode()) == BINARY


def test_item1_a_03_rest_file_reaches_10_as_its_bytes_and_one_encoded_once_is_still_read():
    """Issue 13, item 1: a file a 0.3 REST client uploads reached 1.0 agents as base64 text."""

    def sent(file_with_bytes):
        params = {
            "message": {
                "messageId": "m",
                "role": "ROLE_USER",
                "content": [
                    {"file": {"fileWithBytes": file_with_bytes, "mimeType": "application/pdf"}}
                ],
            }
        }
        return request_to_v1(Op.SEND, params, Dialect.V03_REST)["message"]["parts"][0]

    assert sent(BINARY_03_REST) == {"raw": BINARY_RAW, "mediaType": "application/pdf"}
    assert sent(BINARY_RAW)["raw"] == BINARY_RAW  # a peer that follows the proto alone


# --- artifact-update flags (issue 13) ---------------------------------------------------------


def artifact_update_03() -> dict:
    artifact = {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}
    return {"kind": "artifact-update", "taskId": "t", "contextId": "c", "artifact": artifact}


def test_a_1_0_agents_artifact_update_reaches_0_3_callers_with_both_flags_as_its_sdk_sends():
    """a2a-sdk's 0.3 compat layer and @a2a-js/sdk send ``append`` and ``lastChunk`` always,
    false ones too, where 1.0 proto JSON leaves false out."""
    from_agent = {
        "artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a"}, "lastChunk": True}
    }
    stored = with_artifact_flags(from_agent)
    assert stored["artifactUpdate"]["append"] is False
    assert stored["artifactUpdate"]["lastChunk"] is True
    legacy = stream_response_from_v1(stored, Dialect.V03_JSONRPC)
    assert (legacy["append"], legacy["lastChunk"]) == (False, True)
    assert with_artifact_flags({"statusUpdate": {"taskId": "t"}}) == {
        "statusUpdate": {"taskId": "t"}
    }


def test_a_0_3_agents_omitted_append_stays_omitted_for_0_3_callers():
    """a2a-sdk 0.3.26 leaves ``append`` out when unset; its 0.3 callers see it so through the
    relay as they do directly."""
    stored = stream_response_to_v1(artifact_update_03(), Dialect.V03_JSONRPC)
    legacy = stream_response_from_v1(stored, Dialect.V03_JSONRPC)
    assert "append" not in legacy and "lastChunk" not in legacy
    explicit = stream_response_to_v1(
        {**artifact_update_03(), "append": False, "lastChunk": True}, Dialect.V03_JSONRPC
    )
    assert stream_response_from_v1(explicit, Dialect.V03_JSONRPC)["append"] is False
