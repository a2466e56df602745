"""A2A errors: codes and statuses, JSON-RPC and REST renderings, and parsing them back."""

import pytest
from a2a.client.transports.rest import _parse_rest_error
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils import error_handlers as sdk_error_handlers
from a2a.utils import errors as sdk_errors

from tasks_app.protocol.errors import (
    A2A_DOMAIN,
    ALL_ERRORS,
    BAD_REQUEST_TYPE,
    ERROR_INFO_TYPE,
    RELAY_DOMAIN,
    RETRY_INFO_TYPE,
    ContentTypeNotSupported,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    FieldViolation,
    InternalError,
    InvalidAgentResponse,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    PushNotificationNotSupported,
    RateLimited,
    TaskNotCancelable,
    TaskNotFound,
    Unauthenticated,
    Unavailable,
    UnsupportedOperation,
    VersionNotSupported,
    error_from_jsonrpc,
    error_from_rest,
    jsonrpc_error_body,
    rest_error_body,
)

# Our class -> the SDK's, to check our table against a2a.utils.errors (the 1.0.1 mapping).
SDK_EQUIVALENTS = {
    JSONParseError: sdk_errors.JSONParseError,
    InvalidRequest: sdk_errors.InvalidRequestError,
    MethodNotFound: sdk_errors.MethodNotFoundError,
    InvalidParams: sdk_errors.InvalidParamsError,
    InternalError: sdk_errors.InternalError,
    TaskNotFound: sdk_errors.TaskNotFoundError,
    TaskNotCancelable: sdk_errors.TaskNotCancelableError,
    PushNotificationNotSupported: sdk_errors.PushNotificationNotSupportedError,
    UnsupportedOperation: sdk_errors.UnsupportedOperationError,
    ContentTypeNotSupported: sdk_errors.ContentTypeNotSupportedError,
    InvalidAgentResponse: sdk_errors.InvalidAgentResponseError,
    ExtendedAgentCardNotConfigured: sdk_errors.ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequired: sdk_errors.ExtensionSupportRequiredError,
    VersionNotSupported: sdk_errors.VersionNotSupportedError,
}


def make_error(cls, **overrides):
    """One instance of each error class, with the extras its class supports."""
    if cls is InvalidParams:
        overrides.setdefault(
            "field_violations", [FieldViolation("message.parts", "must not be empty")]
        )
    if cls is RateLimited:
        overrides.setdefault("retry_after", 30)
    return cls(overrides.pop("message", f"{cls.__name__} happened"), **overrides)


@pytest.mark.parametrize(("ours", "sdk"), SDK_EQUIVALENTS.items())
def test_codes_reasons_and_http_statuses_agree_with_the_sdk(ours, sdk):
    assert ours.code == sdk_errors.JSON_RPC_ERROR_CODE_MAP[sdk]
    if sdk in sdk_errors.A2A_ERROR_MAPPING:  # the SDK maps no reason for JSON parse errors
        mapping = sdk_errors.A2A_ERROR_MAPPING[sdk]
        assert (ours.http_status, ours.status, ours.reason) == (
            mapping.http_code,
            mapping.grpc_status,
            mapping.reason,
        )


@pytest.mark.parametrize(
    ("cls", "code", "http_status", "status", "reason"),
    [
        (Unauthenticated, -31401, 401, "UNAUTHENTICATED", "UNAUTHENTICATED"),
        (RateLimited, -31429, 429, "RESOURCE_EXHAUSTED", "RATE_LIMITED"),
        (Unavailable, -31503, 503, "UNAVAILABLE", "UNAVAILABLE"),
    ],
)
def test_our_own_errors_use_codes_outside_the_reserved_jsonrpc_block(
    cls, code, http_status, status, reason
):
    assert (cls.code, cls.http_status, cls.status, cls.reason) == (
        code,
        http_status,
        status,
        reason,
    )
    assert not -32768 <= cls.code <= -32000
    assert cls.domain == RELAY_DOMAIN


def test_every_error_code_and_reason_names_exactly_one_class():
    codes = [cls.code for cls in ALL_ERRORS]
    assert len(codes) == len(set(codes))
    reasons = [cls.reason for cls in ALL_ERRORS if cls is not JSONParseError]
    assert len(reasons) == len(set(reasons))


def test_a_jsonrpc_10_error_carries_an_error_info_first_in_an_array():
    body = jsonrpc_error_body(TaskNotFound(metadata={"taskId": "t1"}), 4, "1.0")
    assert body == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {
            "code": -32001,
            "message": "Task not found",
            "data": [
                {
                    "@type": ERROR_INFO_TYPE,
                    "reason": "TASK_NOT_FOUND",
                    "domain": A2A_DOMAIN,
                    "metadata": {"taskId": "t1"},
                }
            ],
        },
    }


def test_invalid_params_add_a_bad_request_with_field_violations():
    error = InvalidParams(field_violations=[FieldViolation("message.parts", "must not be empty")])
    data = jsonrpc_error_body(error, "r1", "1.0")["error"]["data"]
    assert [detail["@type"] for detail in data] == [ERROR_INFO_TYPE, BAD_REQUEST_TYPE]
    assert data[1]["fieldViolations"] == [
        {"field": "message.parts", "description": "must not be empty"}
    ]
    assert error.message == "message.parts: must not be empty"


def test_rate_limited_adds_a_retry_info_in_10_and_retry_after_in_03():
    error = RateLimited(retry_after=12)
    assert jsonrpc_error_body(error, 1, "1.0")["error"]["data"][-1] == {
        "@type": RETRY_INFO_TYPE,
        "retryDelay": "12s",
    }
    assert jsonrpc_error_body(error, 1, "0.3")["error"]["data"] == {"retryAfter": 12}


def test_a_jsonrpc_03_error_omits_data_when_there_is_nothing_to_say():
    assert jsonrpc_error_body(TaskNotFound(), None, "0.3") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32001, "message": "Task not found"},
    }


def test_a_jsonrpc_03_error_puts_metadata_and_violations_in_free_form_data():
    error = InvalidParams(
        field_violations=[FieldViolation("id", "is required")], metadata={"hint": "x"}
    )
    assert jsonrpc_error_body(error, 1, "0.3")["error"]["data"] == {
        "hint": "x",
        "fieldViolations": [{"field": "id", "description": "is required"}],
    }


def test_metadata_values_become_strings_as_error_info_requires():
    error = TaskNotFound(metadata={"attempts": 3, "ok": True, "taskId": "t"})
    assert error.metadata == {"attempts": "3", "ok": "true", "taskId": "t"}


def test_a_rest_error_is_a_google_rpc_status_with_the_error_info():
    status, body = rest_error_body(TaskNotFound("no task t1", metadata={"taskId": "t1"}))
    assert status == 404
    assert body == {
        "error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": "no task t1",
            "details": [
                {
                    "@type": ERROR_INFO_TYPE,
                    "reason": "TASK_NOT_FOUND",
                    "domain": A2A_DOMAIN,
                    "metadata": {"taskId": "t1"},
                }
            ],
        }
    }


@pytest.mark.parametrize("cls", ALL_ERRORS)
def test_a_10_jsonrpc_error_parses_back_into_the_same_error(cls):
    original = make_error(cls, metadata={"taskId": "t7"})
    parsed = error_from_jsonrpc(jsonrpc_error_body(original, 1, "1.0")["error"])
    assert type(parsed) is cls
    assert (parsed.message, parsed.metadata) == (original.message, original.metadata)
    assert parsed.details() == original.details()


@pytest.mark.parametrize("cls", ALL_ERRORS)
def test_a_rest_error_parses_back_into_the_same_error(cls):
    original = make_error(cls, metadata={"taskId": "t7"})
    status, body = rest_error_body(original)
    parsed = error_from_rest(status, body)
    expected = InvalidRequest if cls is JSONParseError else cls  # REST has no parse error
    assert type(parsed) is expected
    assert (parsed.message, parsed.metadata) == (original.message, original.metadata)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (-32001, TaskNotFound),
        (-32002, TaskNotCancelable),
        (-32007, ExtendedAgentCardNotConfigured),
        (-32602, InvalidParams),
        (-32700, JSONParseError),
    ],
)
def test_a_03_jsonrpc_error_is_read_by_its_code(code, expected):
    assert type(error_from_jsonrpc({"code": code, "message": "m"})) is expected


def test_a_03_error_keeps_its_free_form_data_for_03_clients():
    upstream = {"code": -32001, "message": "gone", "data": {"taskId": "t1", "tries": 2}}
    parsed = error_from_jsonrpc(upstream)
    assert parsed.data == {"taskId": "t1", "tries": 2}
    assert jsonrpc_error_body(parsed, 5, "0.3")["error"] == upstream


def test_the_error_info_reason_wins_over_a_generic_code():
    error = {
        "code": -32603,
        "message": "m",
        "data": [{"@type": ERROR_INFO_TYPE, "reason": "TASK_NOT_CANCELABLE", "domain": A2A_DOMAIN}],
    }
    assert type(error_from_jsonrpc(error)) is TaskNotCancelable


def test_an_unknown_code_becomes_an_internal_error_that_remembers_the_code():
    parsed = error_from_jsonrpc({"code": -32050, "message": "quota"})
    assert type(parsed) is InternalError
    assert parsed.message == "quota"
    assert parsed.metadata["upstreamCode"] == "-32050"


@pytest.mark.parametrize("error", ["boom", None, ["x"]])
def test_a_malformed_jsonrpc_error_is_an_invalid_agent_response(error):
    assert type(error_from_jsonrpc(error)) is InvalidAgentResponse


@pytest.mark.parametrize(
    ("status", "body", "task_scoped", "expected"),
    [
        (404, {"message": "Task not found"}, True, TaskNotFound),  # a2a-sdk 0.3.x
        (404, {"message": "Not Found"}, False, MethodNotFound),
        (409, {"message": "Task cannot be canceled"}, True, TaskNotCancelable),
        (422, {"message": "bad"}, False, InvalidParams),
        (501, {"message": "nope"}, False, UnsupportedOperation),
        (502, None, False, InvalidAgentResponse),
        (503, "Service Unavailable", False, InternalError),
        (418, None, False, InvalidRequest),
        (401, {}, False, Unauthenticated),
        (429, {}, False, RateLimited),
        (
            404,
            {"type": "https://a2a-protocol.org/errors/task-not-found", "detail": "d"},
            False,
            TaskNotFound,
        ),
        (400, {"type": "TaskNotCancelableError", "message": "m"}, False, TaskNotCancelable),
        (
            400,
            {"type": "AuthenticatedExtendedCardNotConfiguredError"},
            False,
            ExtendedAgentCardNotConfigured,
        ),
        (
            400,
            {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "m"}},
            False,
            InvalidRequest,
        ),
    ],
)
def test_rest_errors_without_an_error_info_are_read_from_type_or_status(
    status, body, task_scoped, expected
):
    assert type(error_from_rest(status, body, task_scoped=task_scoped)) is expected


def test_a_problem_details_body_keeps_its_detail_as_the_message():
    body = {
        "type": "https://a2a-protocol.org/errors/task-not-found",
        "title": "T",
        "detail": "no t9",
    }
    assert error_from_rest(404, body).message == "no t9"


def test_field_violations_and_retry_after_survive_a_rest_round_trip():
    status, body = rest_error_body(
        InvalidParams(field_violations=[FieldViolation("pageSize", "must be between 1 and 100")])
    )
    assert error_from_rest(status, body).field_violations == (
        FieldViolation("pageSize", "must be between 1 and 100"),
    )
    status, body = rest_error_body(RateLimited(retry_after=7))
    assert error_from_rest(status, body).retry_after == 7


def test_sdk_error_bodies_parse_into_our_errors():
    sdk_error = sdk_errors.TaskNotFoundError("no such task", data={"taskId": "t1"})
    rest_body = sdk_error_handlers.build_rest_error_payload(sdk_error)
    parsed = error_from_rest(404, rest_body)
    assert (type(parsed), parsed.message, parsed.metadata) == (
        TaskNotFound,
        "no such task",
        {"taskId": "t1"},
    )
    jsonrpc_body = build_error_response(3, sdk_errors.VersionNotSupportedError("nope"))
    assert type(error_from_jsonrpc(jsonrpc_body["error"])) is VersionNotSupported


# REST reports JSON parse errors as INVALID_REQUEST, as the SDK does, so they are left out.
@pytest.mark.parametrize("cls", [cls for cls in SDK_EQUIVALENTS if cls is not JSONParseError])
def test_the_sdk_client_reads_our_rest_errors_as_the_same_error(cls):
    _, body = rest_error_body(make_error(cls, metadata={"taskId": "t"}))
    parsed = _parse_rest_error(body, "fallback")
    assert type(parsed) is SDK_EQUIVALENTS[cls]
    assert parsed.data == {"taskId": "t"}
