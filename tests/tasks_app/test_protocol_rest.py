"""The REST binding: routes, requests from path/query/body, results, frames, upstream calls."""

import json

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import conversions, proto_utils
from a2a.types import a2a_pb2 as pb2_v10
from google.protobuf.json_format import MessageToDict, ParseDict

from tasks_app.protocol.errors import (
    InvalidAgentResponse,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    TaskNotCancelable,
    TaskNotFound,
    VersionNotSupported,
    rest_error_body,
)
from tasks_app.protocol.rest import (
    ROUTES,
    match_rest_route,
    parse_rest_request,
    parse_rest_response,
    rest_result_body,
    rest_stream_frame,
    rest_upstream_request,
)
from tasks_app.protocol.versions import Operation

Op = Operation


def make_task_v1(**overrides):
    task = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_CANCELED"}}
    task.update(overrides)
    return task


def make_send_v1():
    return {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


ROUTE_TABLE = [
    ("POST", "/message:send", "1.0", Op.SEND, {}),
    ("POST", "/message:stream", "1.0", Op.STREAM, {}),
    ("GET", "/tasks/t1", "1.0", Op.GET_TASK, {"id": "t1"}),
    ("GET", "/tasks", "1.0", Op.LIST_TASKS, {}),
    ("POST", "/tasks/t1:cancel", "1.0", Op.CANCEL, {"id": "t1"}),
    ("GET", "/tasks/t1:subscribe", "1.0", Op.SUBSCRIBE, {"id": "t1"}),
    ("POST", "/tasks/t1:subscribe", "1.0", Op.SUBSCRIBE, {"id": "t1"}),
    ("POST", "/tasks/t1/pushNotificationConfigs", "1.0", Op.PUSH_CREATE, {"taskId": "t1"}),
    ("GET", "/tasks/t1/pushNotificationConfigs", "1.0", Op.PUSH_LIST, {"taskId": "t1"}),
    (
        "GET",
        "/tasks/t1/pushNotificationConfigs/p1",
        "1.0",
        Op.PUSH_GET,
        {"taskId": "t1", "id": "p1"},
    ),
    (
        "DELETE",
        "/tasks/t1/pushNotificationConfigs/p1",
        "1.0",
        Op.PUSH_DELETE,
        {"taskId": "t1", "id": "p1"},
    ),
    ("GET", "/extendedAgentCard", "1.0", Op.EXTENDED_CARD, {}),
    ("POST", "/v1/message:send", "0.3", Op.SEND, {}),
    ("POST", "/v1/message:stream", "0.3", Op.STREAM, {}),
    ("GET", "/v1/tasks/t1", "0.3", Op.GET_TASK, {"id": "t1"}),
    ("GET", "/v1/tasks", "0.3", Op.LIST_TASKS, {}),
    ("POST", "/v1/tasks/t1:cancel", "0.3", Op.CANCEL, {"id": "t1"}),
    ("GET", "/v1/tasks/t1:subscribe", "0.3", Op.SUBSCRIBE, {"id": "t1"}),
    ("POST", "/v1/tasks/t1:subscribe", "0.3", Op.SUBSCRIBE, {"id": "t1"}),
    ("POST", "/v1/tasks/t1/pushNotificationConfigs", "0.3", Op.PUSH_CREATE, {"taskId": "t1"}),
    ("GET", "/v1/tasks/t1/pushNotificationConfigs", "0.3", Op.PUSH_LIST, {"taskId": "t1"}),
    (
        "GET",
        "/v1/tasks/t1/pushNotificationConfigs/p1",
        "0.3",
        Op.PUSH_GET,
        {"taskId": "t1", "id": "p1"},
    ),
    (
        "DELETE",
        "/v1/tasks/t1/pushNotificationConfigs/p1",
        "0.3",
        Op.PUSH_DELETE,
        {"taskId": "t1", "id": "p1"},
    ),
    ("GET", "/v1/card", "0.3", Op.EXTENDED_CARD, {}),
]


@pytest.mark.parametrize(("verb", "path", "version", "operation", "variables"), ROUTE_TABLE)
def test_every_route_invokes_its_operation_with_its_path_variables(
    verb, path, version, operation, variables
):
    found = match_rest_route(verb, path, version)
    assert (found.route.operation, found.variables, found.tenant) == (operation, variables, None)


def test_the_route_table_holds_exactly_the_spec_routes():
    matched = [
        match_rest_route(verb, path, version).route for verb, path, version, _, _ in ROUTE_TABLE
    ]
    assert sorted(matched, key=repr) == sorted(ROUTES, key=repr)


def test_a_trailing_slash_and_a_tenant_prefix_are_understood_in_10():
    found = match_rest_route("GET", "/acme/tasks/t1/", "1.0")
    assert (found.route.operation, found.variables, found.tenant) == (
        Op.GET_TASK,
        {"id": "t1"},
        "acme",
    )
    assert parse_rest_request("GET", "/acme/tasks/t1", {}, None, "1.0") == (
        Op.GET_TASK,
        {"id": "t1", "tenant": "acme"},
    )


def test_a_custom_method_suffix_wins_over_a_task_id():
    assert match_rest_route("GET", "/tasks/t1:subscribe", "1.0").route.operation is Op.SUBSCRIBE


def test_a_verb_the_path_does_not_take_is_refused_with_the_allowed_verbs():
    with pytest.raises(MethodNotFound) as caught:
        match_rest_route("GET", "/message:send", "1.0")
    assert caught.value.metadata == {"allow": "POST"}


def test_an_unknown_path_is_method_not_found():
    with pytest.raises(MethodNotFound):
        match_rest_route("GET", "/v1/agents", "0.3")


def test_a_10_path_without_the_version_header_asks_for_it():
    with pytest.raises(VersionNotSupported, match="A2A-Version: 1.0"):
        match_rest_route("POST", "/message:send", "0.3")


# --- 1.0 requests ----------------------------------------------------------------------


def test_a_10_send_body_becomes_canonical_params():
    body = json.dumps(
        {"message": {"message_id": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    )
    assert parse_rest_request("POST", "/message:send", {}, body, "1.0") == (Op.SEND, make_send_v1())


def test_list_tasks_reads_camel_and_snake_case_query_parameters():
    query = {
        "contextId": "c1",
        "status": ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"],
        "page_size": "20",
        "pageToken": "abc",
        "historyLength": "0",
        "status_timestamp_after": "2026-01-02T05:04:05+02:00",
        "includeArtifacts": "true",
        "A2A-Version": "1.0",
    }
    assert parse_rest_request("GET", "/tasks", query, None, "1.0") == (
        Op.LIST_TASKS,
        {
            "contextId": "c1",
            "status": "TASK_STATE_WORKING",
            "pageSize": 20,
            "pageToken": "abc",
            "historyLength": 0,
            "statusTimestampAfter": "2026-01-02T03:04:05.000Z",
            "includeArtifacts": True,
        },
    )


def test_list_tasks_page_size_defaults_to_50_and_must_stay_within_1_to_100():
    assert parse_rest_request("GET", "/tasks", {}, None, "1.0")[1] == {"pageSize": 50}
    for bad in ("0", "101", "ten"):
        with pytest.raises(InvalidParams) as caught:
            parse_rest_request("GET", "/tasks", {"pageSize": bad}, None, "1.0")
        assert [v.field for v in caught.value.field_violations] == ["pageSize"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"includeArtifacts": "yes"}, "includeArtifacts"),
        ({"status": "sleeping"}, "status"),
        ({"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
        ({"statusTimestampAfter": "2026-01-02T03:04:05"}, "statusTimestampAfter"),
        ({"historyLength": "-2"}, "historyLength"),
    ],
)
def test_bad_query_parameters_name_themselves(query, field):
    with pytest.raises(InvalidParams) as caught:
        parse_rest_request("GET", "/tasks", query, None, "1.0")
    assert [v.field for v in caught.value.field_violations] == [field]


def test_a_push_config_takes_its_task_id_from_the_path():
    body = json.dumps({"url": "https://hook", "token": "k"})
    assert parse_rest_request("POST", "/tasks/t1/pushNotificationConfigs", {}, body, "1.0") == (
        Op.PUSH_CREATE,
        {"url": "https://hook", "token": "k", "taskId": "t1"},
    )


def test_a_body_that_contradicts_the_path_is_refused():
    body = json.dumps({"taskId": "t2", "url": "https://hook"})
    with pytest.raises(InvalidParams, match="taskId"):
        parse_rest_request("POST", "/tasks/t1/pushNotificationConfigs", {}, body, "1.0")


def test_cancel_keeps_its_metadata_and_an_empty_body_is_fine():
    body = json.dumps({"metadata": {"reason": "user", "n": 2}})
    assert parse_rest_request("POST", "/tasks/t1:cancel", {}, body, "1.0") == (
        Op.CANCEL,
        {"metadata": {"reason": "user", "n": 2}, "id": "t1"},
    )
    assert parse_rest_request("POST", "/tasks/t1:cancel", {}, b"", "1.0") == (
        Op.CANCEL,
        {"id": "t1"},
    )


@pytest.mark.parametrize(("body", "error"), [(b"{", JSONParseError), (b"[1]", InvalidRequest)])
def test_a_body_that_is_not_a_json_object_is_refused(body, error):
    with pytest.raises(error):
        parse_rest_request("POST", "/message:send", {}, body, "1.0")


# --- 0.3 requests ----------------------------------------------------------------------


def sdk_03_rest_send_body(request_v1: dict) -> dict:
    """The body a2a-sdk's CompatRestTransport sends to a 0.3 REST agent."""
    core = ParseDict(request_v1, pb2_v10.SendMessageRequest())
    compat = conversions.to_compat_send_message_request(core, request_id=0)
    proto = pb2_v03.SendMessageRequest(
        request=proto_utils.ToProto.message(compat.params.message),
        configuration=proto_utils.ToProto.message_send_configuration(compat.params.configuration),
        metadata=proto_utils.ToProto.metadata(compat.params.metadata),
    )
    return MessageToDict(proto, preserving_proto_field_name=True)


def test_a_03_send_body_from_the_sdk_client_becomes_the_original_request():
    original = {
        "message": {
            "messageId": "m1",
            "contextId": "c1",
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}, {"url": "https://x/a.pdf", "mediaType": "application/pdf"}],
            "extensions": ["urn:x"],
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "returnImmediately": True},
    }
    body = sdk_03_rest_send_body(original)
    assert "request" in body and "content" in body["request"]  # snake_case proto names
    assert parse_rest_request("POST", "/v1/message:send", {}, json.dumps(body), "0.3") == (
        Op.SEND,
        original,
    )


def test_a_03_send_body_in_camel_case_proto_json_is_read_too():
    body = {
        "message": {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}]},
        "configuration": {"blocking": True},
    }
    assert parse_rest_request("POST", "/v1/message:stream", {}, json.dumps(body), "0.3") == (
        Op.STREAM,
        make_send_v1(),
    )


@pytest.mark.parametrize(
    "body",
    [
        {
            "parent": "tasks/t1",
            "configId": "p1",
            "config": {
                "name": "tasks/t1/pushNotificationConfigs/p1",
                "pushNotificationConfig": {
                    "url": "https://hook",
                    "authentication": {"schemes": ["Bearer"]},
                },
            },
        },
        {
            "name": "tasks/t1/pushNotificationConfigs/p1",
            "push_notification_config": {
                "id": "p1",
                "url": "https://hook",
                "authentication": {"schemes": ["Bearer"]},
            },
        },
        {"id": "p1", "url": "https://hook", "authentication": {"schemes": ["Bearer"]}},
    ],
)
def test_every_03_push_config_body_shape_gives_the_same_canonical_config(body):
    assert parse_rest_request(
        "POST", "/v1/tasks/t1/pushNotificationConfigs", {}, json.dumps(body), "0.3"
    ) == (
        Op.PUSH_CREATE,
        {"taskId": "t1", "id": "p1", "url": "https://hook", "authentication": {"scheme": "Bearer"}},
    )


@pytest.mark.parametrize(
    ("verb", "path", "query", "expected"),
    [
        (
            "GET",
            "/v1/tasks/t1",
            {"historyLength": "3"},
            (Op.GET_TASK, {"id": "t1", "historyLength": 3}),
        ),
        ("GET", "/v1/tasks/t1", {"historyLength": "0"}, (Op.GET_TASK, {"id": "t1"})),
        ("POST", "/v1/tasks/t1:cancel", {}, (Op.CANCEL, {"id": "t1"})),
        (
            "GET",
            "/v1/tasks/t1/pushNotificationConfigs",
            {"pageSize": "5"},
            (Op.PUSH_LIST, {"taskId": "t1", "pageSize": 5}),
        ),
        (
            "DELETE",
            "/v1/tasks/t1/pushNotificationConfigs/p1",
            {},
            (Op.PUSH_DELETE, {"taskId": "t1", "id": "p1"}),
        ),
        ("GET", "/v1/card", {}, (Op.EXTENDED_CARD, {})),
        (
            "GET",
            "/v1/tasks",
            {"status": "TASK_STATE_CANCELLED"},
            (Op.LIST_TASKS, {"status": "TASK_STATE_CANCELED", "pageSize": 50}),
        ),
    ],
)
def test_03_requests_without_a_body_come_from_the_path_and_query(verb, path, query, expected):
    assert parse_rest_request(verb, path, query, None, "0.3") == expected


# --- results and frames ----------------------------------------------------------------


def test_a_03_send_result_is_a_proto_json_send_message_response():
    body = rest_result_body(Op.SEND, "0.3", {"task": make_task_v1()})
    assert body == {
        "task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_CANCELLED"}}
    }
    parsed = ParseDict(body, pb2_v03.SendMessageResponse())
    assert parsed.task.status.state == pb2_v03.TASK_STATE_CANCELLED


def test_a_10_result_is_sent_as_it_is_and_a_delete_answers_an_empty_object():
    task = make_task_v1()
    assert rest_result_body(Op.GET_TASK, "1.0", task) is task
    assert rest_result_body(Op.PUSH_DELETE, "1.0", None) == {}
    assert rest_result_body(Op.PUSH_DELETE, "0.3", None) == {}


def test_a_03_push_config_list_is_proto_json_the_sdk_client_reads():
    result = {
        "configs": [{"taskId": "t1", "id": "p1", "url": "https://hook"}],
        "nextPageToken": "n",
    }
    body = rest_result_body(Op.PUSH_LIST, "0.3", result)
    assert body == {
        "configs": [
            {
                "name": "tasks/t1/pushNotificationConfigs/p1",
                "pushNotificationConfig": {"id": "p1", "url": "https://hook"},
            }
        ],
        "nextPageToken": "n",
    }
    proto = ParseDict(body, pb2_v03.ListTaskPushNotificationConfigResponse())
    config = proto_utils.FromProto.task_push_notification_config(proto.configs[0])
    assert (config.task_id, config.push_notification_config.url) == ("t1", "https://hook")


def test_a_03_stream_frame_is_a_proto_json_stream_response_with_final():
    event = {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
        }
    }
    frame = rest_stream_frame("0.3", event)
    assert frame == {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
            "final": True,
        }
    }
    assert rest_stream_frame("1.0", event) == event


def test_streaming_operations_have_no_single_rest_result():
    with pytest.raises(ValueError, match="rest_stream_frame"):
        rest_result_body(Op.SUBSCRIBE, "1.0", {})


# --- upstream --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "version", "params", "call"),
    [
        (
            Op.GET_TASK,
            "1.0",
            {"id": "t1", "historyLength": 2, "tenant": "acme"},
            ("GET", "/acme/tasks/t1", {"historyLength": "2"}, None),
        ),
        (
            Op.LIST_TASKS,
            "1.0",
            {"pageSize": 10, "includeArtifacts": True},
            ("GET", "/tasks", {"pageSize": "10", "includeArtifacts": "true"}, None),
        ),
        (
            Op.CANCEL,
            "1.0",
            {"id": "t1", "metadata": {"a": 1}},
            ("POST", "/tasks/t1:cancel", {}, {"metadata": {"a": 1}}),
        ),
        (Op.SUBSCRIBE, "1.0", {"id": "t1"}, ("POST", "/tasks/t1:subscribe", {}, None)),
        (
            Op.PUSH_CREATE,
            "1.0",
            {"taskId": "t1", "url": "https://h"},
            ("POST", "/tasks/t1/pushNotificationConfigs", {}, {"url": "https://h"}),
        ),
        (
            Op.PUSH_DELETE,
            "1.0",
            {"taskId": "t1", "id": "p1"},
            ("DELETE", "/tasks/t1/pushNotificationConfigs/p1", {}, None),
        ),
        (Op.EXTENDED_CARD, "1.0", {}, ("GET", "/extendedAgentCard", {}, None)),
        (
            Op.GET_TASK,
            "0.3",
            {"id": "t1", "historyLength": 2},
            ("GET", "/v1/tasks/t1", {"historyLength": "2"}, None),
        ),
        (
            Op.LIST_TASKS,
            "0.3",
            {"status": "TASK_STATE_CANCELED"},
            ("GET", "/v1/tasks", {"status": "TASK_STATE_CANCELLED"}, None),
        ),
        (
            Op.PUSH_GET,
            "0.3",
            {"taskId": "t1", "id": "p1"},
            ("GET", "/v1/tasks/t1/pushNotificationConfigs/p1", {}, None),
        ),
        (
            Op.PUSH_LIST,
            "0.3",
            {"taskId": "t1", "pageSize": 5},
            ("GET", "/v1/tasks/t1/pushNotificationConfigs", {"pageSize": "5"}, None),
        ),
        (Op.EXTENDED_CARD, "0.3", {}, ("GET", "/v1/card", {}, None)),
    ],
)
def test_upstream_calls_spread_params_over_path_query_and_body(operation, version, params, call):
    made = rest_upstream_request(operation, version, params)
    assert (made.http_method, made.path, made.query, made.body) == call


def test_an_upstream_03_push_config_is_created_the_way_the_sdk_server_expects():
    made = rest_upstream_request(
        Op.PUSH_CREATE, "0.3", {"taskId": "t1", "id": "p1", "url": "https://h"}
    )
    request = ParseDict(made.body, pb2_v03.CreateTaskPushNotificationConfigRequest())
    parsed = proto_utils.FromProto.task_push_notification_config_request(request)
    assert (parsed.task_id, parsed.push_notification_config.id) == ("t1", "p1")


def test_an_upstream_03_send_body_is_read_by_the_sdk_server_code():
    made = rest_upstream_request(Op.SEND, "0.3", make_send_v1())
    params = proto_utils.FromProto.message_send_params(
        ParseDict(made.body, pb2_v03.SendMessageRequest())
    )
    assert (params.message.parts[0].root.text, params.configuration.blocking) == ("hi", True)


def test_upstream_responses_become_canonical_results_or_raise_their_error():
    legacy_task = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_CANCELLED"}}
    assert parse_rest_response(200, json.dumps(legacy_task), Op.GET_TASK, "0.3") == make_task_v1()
    assert parse_rest_response(200, b"{}", Op.PUSH_DELETE, "1.0") is None
    status, body = rest_error_body(TaskNotCancelable())
    with pytest.raises(TaskNotCancelable):
        parse_rest_response(status, body, Op.CANCEL, "1.0")
    with pytest.raises(TaskNotFound):
        parse_rest_response(404, b"Not Found", Op.GET_TASK, "0.3")
    with pytest.raises(InvalidAgentResponse):
        parse_rest_response(200, b"<html>", Op.GET_TASK, "1.0")


def test_an_error_frame_in_an_upstream_stream_raises_its_error():
    _, body = rest_error_body(TaskNotFound())
    with pytest.raises(TaskNotFound):
        parse_rest_response(200, json.dumps(body), Op.SUBSCRIBE, "1.0")
    frame = {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_WORKING"},
            "final": False,
        }
    }
    assert parse_rest_response(200, json.dumps(frame), Op.SUBSCRIBE, "0.3") == {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_WORKING"},
        }
    }


def test_a_03_task_listing_carries_proto_json_tasks_and_the_paging_fields():
    listing = {"tasks": [make_task_v1()], "nextPageToken": "", "pageSize": 50, "totalSize": 1}
    body = rest_result_body(Op.LIST_TASKS, "0.3", listing)
    assert body["tasks"][0]["status"]["state"] == "TASK_STATE_CANCELLED"
    assert (body["nextPageToken"], body["pageSize"], body["totalSize"]) == ("", 50, 1)
