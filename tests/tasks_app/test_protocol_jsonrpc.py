"""The JSON-RPC binding: envelopes, methods, params, results, stream frames, upstream calls."""

import json

import pytest
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2 as pb2_v10
from google.protobuf.json_format import ParseDict

from tasks_app.protocol.errors import (
    InvalidAgentResponse,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    TaskNotFound,
    UnsupportedOperation,
    VersionNotSupported,
    jsonrpc_error_body,
)
from tasks_app.protocol.jsonrpc import (
    canonical_params,
    jsonrpc_request_body,
    jsonrpc_result_body,
    jsonrpc_stream_frame,
    parse_jsonrpc,
    parse_jsonrpc_response,
)
from tasks_app.protocol.versions import (
    METHODS,
    Operation,
    ProtocolVersion,
    activation_header_name,
    check_method_version,
    lookup_method,
    negotiate_version,
    requested_extensions,
)

Op = Operation


def envelope(**overrides):
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "t1"}}
    body.update(overrides)
    return json.dumps(body).encode()


def make_task_v1(**overrides):
    task = {
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "TASK_STATE_CANCELED", "timestamp": "2026-01-02T03:04:05.000Z"},
        "metadata": {"n": 1},
    }
    task.update(overrides)
    return task


def make_message_03(**overrides):
    message = {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    message.update(overrides)
    return message


# --- envelopes -------------------------------------------------------------------------


def test_a_well_formed_request_names_its_operation_and_version():
    request = parse_jsonrpc(envelope())
    assert (request.id, request.method, request.operation, request.version) == (
        7,
        "GetTask",
        Op.GET_TASK,
        ProtocolVersion.V1_0,
    )
    assert request.params == {"id": "t1"}


@pytest.mark.parametrize(
    ("body", "error", "request_id"),
    [
        (b"{", JSONParseError, None),
        (b"\xff\xfe", JSONParseError, None),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"x": NaN}}',
            JSONParseError,
            None,
        ),
        (b"[]", InvalidRequest, None),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]', InvalidRequest, None),
        (b'"GetTask"', InvalidRequest, None),
        (b'{"jsonrpc": "2.0", "method": "GetTask"}', InvalidRequest, None),
        (envelope(id=True), InvalidRequest, None),
        (envelope(id=1.5), InvalidRequest, None),
        (envelope(id={"a": 1}), InvalidRequest, None),
        (envelope(jsonrpc="1.0"), InvalidRequest, 7),
        (envelope(method=""), InvalidRequest, 7),
        (envelope(method=5), InvalidRequest, 7),
        (envelope(params=["t1"]), InvalidParams, 7),
        (envelope(method="tasks/list"), MethodNotFound, 7),
        (envelope(id="abc", method="getTask"), MethodNotFound, "abc"),
    ],
)
def test_bad_envelopes_raise_the_jsonrpc_error_with_the_id_they_could_read(body, error, request_id):
    with pytest.raises(error) as caught:
        parse_jsonrpc(body)
    assert caught.value.request_id == request_id


def test_a_null_id_and_missing_params_are_accepted():
    request = parse_jsonrpc(b'{"jsonrpc": "2.0", "id": null, "method": "GetExtendedAgentCard"}')
    assert (request.id, request.params) == (None, {})


def test_a_parse_failure_renders_as_a_jsonrpc_error_with_a_null_id():
    with pytest.raises(JSONParseError) as caught:
        parse_jsonrpc(b"not json")
    body = jsonrpc_error_body(caught.value, caught.value.request_id, "1.0")
    assert (body["id"], body["error"]["code"]) == (None, -32700)


# --- versions and extension headers -----------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, "0.3"),
        ({"A2A-Version": ""}, "0.3"),
        ({"A2A-Version": "  "}, "0.3"),
        ({"A2A-Version": "1.0"}, "1.0"),
        ({"a2a-version": " 1.0 "}, "1.0"),
        ({"A2A-Version": "1.0.1"}, "1.0"),
        ({"A2A-Version": "0.3"}, "0.3"),
        ({"A2A-Version": "0.3.0"}, "0.3"),
        ({"A2A-Version": ["", "1.0"]}, "1.0"),
        ([(b"a2a-version", b"1.0"), (b"content-type", b"application/json")], "1.0"),
    ],
)
def test_the_version_header_is_read_as_major_minor_and_defaults_to_03(headers, expected):
    assert negotiate_version(headers) == expected


@pytest.mark.parametrize("value", ["1.1", "2.0", "0.2", "1", "v1.0", "latest", "1.0-beta"])
def test_any_other_version_is_not_supported(value):
    with pytest.raises(VersionNotSupported) as caught:
        negotiate_version({"A2A-Version": value})
    assert caught.value.metadata["supportedVersions"] == "1.0,0.3"


def test_the_version_may_come_from_the_query_but_the_header_wins():
    assert negotiate_version({}, {"A2A-Version": "1.0"}) == "1.0"
    assert negotiate_version({"A2A-Version": "0.3"}, {"A2A-Version": "1.0"}) == "0.3"


def test_requested_extensions_merge_both_headers_trimmed_and_once_each():
    headers = [
        ("A2A-Extensions", " urn:a , urn:b,,"),
        ("X-A2A-Extensions", "urn:b, urn:c"),
        ("a2a-extensions", "urn:d"),
    ]
    assert requested_extensions(headers) == ("urn:a", "urn:b", "urn:d", "urn:c")
    assert requested_extensions({"X-A2A-Extensions": ["urn:x", "urn:y,urn:x"]}) == (
        "urn:x",
        "urn:y",
    )
    assert requested_extensions({"Accept": "application/json"}) == ()


def test_extensions_are_activated_by_the_header_of_each_version():
    assert activation_header_name("1.0") == "A2A-Extensions"
    assert activation_header_name(ProtocolVersion.V0_3) == "X-A2A-Extensions"


# --- methods ---------------------------------------------------------------------------

METHOD_TABLE = [
    ("SendMessage", Op.SEND, "1.0"),
    ("SendStreamingMessage", Op.STREAM, "1.0"),
    ("GetTask", Op.GET_TASK, "1.0"),
    ("ListTasks", Op.LIST_TASKS, "1.0"),
    ("CancelTask", Op.CANCEL, "1.0"),
    ("SubscribeToTask", Op.SUBSCRIBE, "1.0"),
    ("CreateTaskPushNotificationConfig", Op.PUSH_CREATE, "1.0"),
    ("GetTaskPushNotificationConfig", Op.PUSH_GET, "1.0"),
    ("ListTaskPushNotificationConfigs", Op.PUSH_LIST, "1.0"),
    ("DeleteTaskPushNotificationConfig", Op.PUSH_DELETE, "1.0"),
    ("GetExtendedAgentCard", Op.EXTENDED_CARD, "1.0"),
    ("message/send", Op.SEND, "0.3"),
    ("message/stream", Op.STREAM, "0.3"),
    ("tasks/get", Op.GET_TASK, "0.3"),
    ("tasks/cancel", Op.CANCEL, "0.3"),
    ("tasks/resubscribe", Op.SUBSCRIBE, "0.3"),
    ("tasks/pushNotificationConfig/set", Op.PUSH_CREATE, "0.3"),
    ("tasks/pushNotificationConfig/get", Op.PUSH_GET, "0.3"),
    ("tasks/pushNotificationConfig/list", Op.PUSH_LIST, "0.3"),
    ("tasks/pushNotificationConfig/delete", Op.PUSH_DELETE, "0.3"),
    ("agent/getAuthenticatedExtendedCard", Op.EXTENDED_CARD, "0.3"),
]


@pytest.mark.parametrize(("name", "operation", "version"), METHOD_TABLE)
def test_every_method_name_maps_to_one_operation_in_one_version(name, operation, version):
    method = lookup_method(name)
    assert (method.operation, method.version) == (operation, version)
    request_body = jsonrpc_request_body(1, operation, version, {"id": "t", "taskId": "t"})
    assert request_body["method"] == name


def test_the_method_table_has_nothing_more_than_the_spec():
    assert sorted(METHODS) == sorted(name for name, _, _ in METHOD_TABLE)


def test_list_tasks_cannot_be_sent_to_a_03_agent_over_jsonrpc():
    with pytest.raises(UnsupportedOperation):
        jsonrpc_request_body(1, Op.LIST_TASKS, "0.3", {})


def test_a_10_method_needs_the_10_header_while_03_methods_never_do():
    with pytest.raises(VersionNotSupported, match="A2A-Version: 1.0"):
        check_method_version(lookup_method("SendMessage"), ProtocolVersion.V0_3)
    check_method_version(lookup_method("SendMessage"), ProtocolVersion.V1_0)
    check_method_version(lookup_method("message/send"), ProtocolVersion.V1_0)
    check_method_version(lookup_method("message/send"), ProtocolVersion.V0_3)


# --- params ----------------------------------------------------------------------------


def test_03_send_params_become_a_10_send_message_request():
    params = {
        "message": make_message_03(contextId="c1", metadata={"n": 5}),
        "configuration": {
            "blocking": False,
            "historyLength": 2,
            "acceptedOutputModes": ["text/plain"],
        },
        "metadata": {"trace": {"depth": 1}},
    }
    assert canonical_params(Op.SEND, "0.3", params) == {
        "message": {
            "messageId": "m1",
            "contextId": "c1",
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
            "metadata": {"n": 5},
        },
        "configuration": {
            "acceptedOutputModes": ["text/plain"],
            "historyLength": 2,
            "returnImmediately": True,
        },
        "metadata": {"trace": {"depth": 1}},
    }


@pytest.mark.parametrize(
    ("operation", "params", "expected"),
    [
        (
            Op.GET_TASK,
            {"id": "t1", "historyLength": 3, "metadata": {"a": 1}},
            {"id": "t1", "historyLength": 3},
        ),
        (Op.GET_TASK, {"id": "t1", "historyLength": 0}, {"id": "t1"}),
        (Op.CANCEL, {"id": "t1", "metadata": {"a": 1}}, {"id": "t1", "metadata": {"a": 1}}),
        (Op.SUBSCRIBE, {"id": "t1"}, {"id": "t1"}),
        (
            Op.PUSH_CREATE,
            {
                "taskId": "t1",
                "pushNotificationConfig": {
                    "id": "p1",
                    "url": "https://hook",
                    "token": "k",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"},
                },
            },
            {
                "taskId": "t1",
                "id": "p1",
                "url": "https://hook",
                "token": "k",
                "authentication": {"scheme": "Bearer", "credentials": "c"},
            },
        ),
        (Op.PUSH_GET, {"id": "t1", "pushNotificationConfigId": "p1"}, {"taskId": "t1", "id": "p1"}),
        (Op.PUSH_GET, {"id": "t1"}, {"taskId": "t1", "id": "t1"}),
        (Op.PUSH_LIST, {"id": "t1"}, {"taskId": "t1"}),
        (
            Op.PUSH_DELETE,
            {"id": "t1", "pushNotificationConfigId": "p1"},
            {"taskId": "t1", "id": "p1"},
        ),
        (Op.EXTENDED_CARD, {}, {}),
    ],
)
def test_03_params_of_every_method_become_their_10_request(operation, params, expected):
    assert canonical_params(operation, "0.3", params) == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "message"),
        ({"message": make_message_03(parts=[])}, "message.parts"),
        ({"message": make_message_03(messageId=5)}, "message.messageId"),
        ({"message": make_message_03(role="bot")}, "message.role"),
        ({"message": make_message_03(parts=[{"kind": "text"}])}, "message.parts[0].text"),
        (
            {"message": make_message_03(parts=[{"kind": "file", "file": {"name": "x"}}])},
            "message.parts[0].file.bytes",
        ),
        (
            {"message": make_message_03(), "configuration": {"historyLength": "many"}},
            "configuration.historyLength",
        ),
    ],
)
def test_bad_03_params_name_the_offending_field(params, field):
    with pytest.raises(InvalidParams) as caught:
        canonical_params(Op.SEND, "0.3", params)
    assert field in [v.field for v in caught.value.field_violations]


@pytest.mark.parametrize(
    ("operation", "params", "field"),
    [
        (Op.SEND, {"message": "hi"}, "message"),
        (
            Op.SEND,
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
            "message.parts",
        ),
        (
            Op.SEND,
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{}]}},
            "message.parts[0]",
        ),
        (Op.SEND, {"message": {"messageId": "m", "parts": [{"text": "a"}]}}, "message.role"),
        (Op.GET_TASK, {}, "id"),
        (Op.GET_TASK, {"id": "t", "historyLength": -1}, "historyLength"),
        (Op.LIST_TASKS, {"pageSize": 0}, "pageSize"),
        (Op.LIST_TASKS, {"pageSize": 101}, "pageSize"),
        (Op.LIST_TASKS, {"status": "working"}, "status"),
        (Op.PUSH_CREATE, {"url": "https://hook"}, "taskId"),
        (Op.PUSH_DELETE, {"taskId": "t"}, "id"),
    ],
)
def test_bad_10_params_name_the_offending_field(operation, params, field):
    with pytest.raises(InvalidParams) as caught:
        canonical_params(operation, "1.0", params)
    assert field in [v.field for v in caught.value.field_violations]


def test_10_params_are_normalised_to_camel_case_without_unknown_fields():
    params = {"id": "t1", "history_length": "4", "tenant": "acme", "colour": "blue"}
    assert canonical_params(Op.GET_TASK, "1.0", params) == {
        "id": "t1",
        "historyLength": 4,
        "tenant": "acme",
    }


def test_list_tasks_page_size_defaults_to_50():
    assert canonical_params(Op.LIST_TASKS, "1.0", {})["pageSize"] == 50
    assert canonical_params(Op.LIST_TASKS, "1.0", {"pageSize": 100})["pageSize"] == 100


# --- results ---------------------------------------------------------------------------


def test_a_10_send_result_is_wrapped_and_a_03_one_is_the_bare_task_with_kind():
    result = {"task": make_task_v1()}
    assert jsonrpc_result_body(1, Op.SEND, "1.0", result) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": result,
    }
    legacy = jsonrpc_result_body(1, Op.SEND, "0.3", result)["result"]
    assert legacy["kind"] == "task"
    assert legacy["status"]["state"] == "canceled"
    assert (
        types_v03.SendMessageSuccessResponse.model_validate(
            jsonrpc_result_body(1, Op.SEND, "0.3", result)
        ).result.id
        == "t1"
    )


def test_a_03_push_config_list_is_a_bare_array():
    result = {"configs": [{"taskId": "t1", "id": "p1", "url": "https://hook"}], "nextPageToken": ""}
    body = jsonrpc_result_body("x", Op.PUSH_LIST, "0.3", result)
    assert body["result"] == [
        {"taskId": "t1", "pushNotificationConfig": {"id": "p1", "url": "https://hook"}}
    ]
    types_v03.ListTaskPushNotificationConfigSuccessResponse.model_validate(body)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_deleting_a_push_config_answers_null(version):
    assert jsonrpc_result_body(1, Op.PUSH_DELETE, version, None)["result"] is None


def test_a_10_result_body_is_what_the_sdk_can_parse():
    body = jsonrpc_result_body(1, Op.GET_TASK, "1.0", make_task_v1())
    assert ParseDict(body["result"], pb2_v10.Task()).status.state == pb2_v10.TASK_STATE_CANCELED


def test_streaming_operations_have_no_single_result():
    with pytest.raises(ValueError, match="jsonrpc_stream_frame"):
        jsonrpc_result_body(1, Op.STREAM, "1.0", {})


@pytest.mark.parametrize(
    ("state", "final"),
    [
        ("TASK_STATE_WORKING", False),
        ("TASK_STATE_INPUT_REQUIRED", True),
        ("TASK_STATE_AUTH_REQUIRED", True),
        ("TASK_STATE_COMPLETED", True),
        ("TASK_STATE_REJECTED", True),
    ],
)
def test_03_status_frames_are_final_when_the_task_ends_or_waits(state, final):
    event = {"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": state}}}
    frame = jsonrpc_stream_frame(9, "0.3", event)
    assert frame["result"]["kind"] == "status-update"
    assert frame["result"]["final"] is final
    assert types_v03.SendStreamingMessageSuccessResponse.model_validate(frame).id == 9


def test_10_stream_frames_carry_the_stream_response_unchanged():
    event = {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_WORKING"},
        }
    }
    assert jsonrpc_stream_frame(9, "1.0", event) == {"jsonrpc": "2.0", "id": 9, "result": event}


# --- upstream --------------------------------------------------------------------------


def test_a_request_to_a_03_agent_uses_the_03_method_and_params():
    params = {"message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}
    body = jsonrpc_request_body("r", Op.STREAM, "0.3", params)
    assert body["method"] == "message/stream"
    assert body["params"]["message"]["role"] == "agent"
    types_v03.SendStreamingMessageRequest.model_validate(body)


def test_an_upstream_error_response_raises_the_rebuilt_error():
    response = jsonrpc_error_body(TaskNotFound(metadata={"taskId": "t1"}), 1, "1.0")
    with pytest.raises(TaskNotFound) as caught:
        parse_jsonrpc_response(json.dumps(response), Op.GET_TASK, "1.0")
    assert caught.value.metadata == {"taskId": "t1"}


def test_an_upstream_03_result_comes_back_canonical():
    response = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"kind": "message", **make_message_03(role="agent")},
    }
    assert parse_jsonrpc_response(response, Op.SEND, "0.3") == {
        "message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    }


@pytest.mark.parametrize("response", [b"<html>", b"[1]", b'{"jsonrpc": "2.0", "id": 1}'])
def test_a_malformed_upstream_response_is_an_invalid_agent_response(response):
    with pytest.raises(InvalidAgentResponse):
        parse_jsonrpc_response(response, Op.GET_TASK, "1.0")


def test_an_upstream_03_result_that_cannot_convert_is_an_invalid_agent_response():
    response = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"kind": "task", "id": "t", "status": {"state": "paused"}},
    }
    with pytest.raises(InvalidAgentResponse, match="paused"):
        parse_jsonrpc_response(response, Op.GET_TASK, "0.3")


def test_a_03_client_gets_the_extended_card_in_03_shape():
    card = {
        "name": "Echo",
        "description": "Echoes",
        "version": "1",
        "supportedInterfaces": [
            {"url": "https://a/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ],
        "capabilities": {"extendedAgentCard": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
    }
    legacy = jsonrpc_result_body(1, Op.EXTENDED_CARD, "0.3", card)["result"]
    assert (legacy["url"], legacy["supportsAuthenticatedExtendedCard"]) == ("https://a/rpc", True)
    assert "supportedInterfaces" not in legacy
    assert jsonrpc_result_body(1, Op.EXTENDED_CARD, "1.0", card)["result"] is card
