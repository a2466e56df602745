"""The plain parts of the gRPC binding: tenants and the cards' GRPC interface, errors as gRPC
statuses and back, upstream addresses, metadata and the SSRF guard."""

from __future__ import annotations

import grpc
import pytest
from a2a.types import a2a_pb2
from a2a.utils.grpc_status import status_from_call
from google.rpc import error_details_pb2, status_pb2

from tasks_app import cards
from tasks_app.grpc import service, targets
from tasks_app.grpc import upstream as grpc_upstream
from tasks_app.protocol.errors import (
    FieldViolation,
    InvalidParams,
    RateLimited,
    TaskNotCancelable,
    TaskNotFound,
    Unauthenticated,
)
from tasks_app.protocol.versions import Operation, ProtocolVersion
from tasks_app.upstream import UpstreamError, choose_endpoint

# --- tenants and cards -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenant", "target"),
    [
        ("agents/echo", ("agent", "echo")),
        ("teams/crew-1", ("team", "crew-1")),
        ("/agents/echo/", ("agent", "echo")),
        ("relay", ("relay", "default")),
        ("", ("relay", "default")),
    ],
)
def test_a_tenant_names_a_target(tenant, target):
    assert targets.target_of_tenant(tenant) == target


@pytest.mark.parametrize("tenant", ["agents", "agents/", "robots/x", "agents/a/b", "agents/ä"])
def test_a_tenant_naming_no_target_is_invalid_params(tenant):
    with pytest.raises(InvalidParams) as refused:
        targets.target_of_tenant(tenant)
    assert refused.value.field_violations[0].field == "tenant"


@pytest.mark.parametrize(
    ("base", "tenant"),
    [
        ("https://relay.example/a2a/agents/echo/", "agents/echo"),
        ("https://relay.example/prefix/a2a/teams/crew/", "teams/crew"),
        ("https://relay.example/a2a/relay/", "relay"),
    ],
)
def test_the_tenant_of_a_base_url_is_its_path_under_a2a(base, tenant):
    assert targets.tenant_of_base(base) == tenant
    assert targets.target_of_tenant(tenant)  # and it reads back


def test_cards_list_grpc_only_when_its_port_is_set(settings):
    base = "https://relay.example/a2a/agents/echo/"
    settings.RELAY_GRPC_PORT = 0
    assert all(i["protocolBinding"] != "GRPC" for i in cards.relay_interfaces(base))
    settings.RELAY_GRPC_PORT = 8101
    assert cards.relay_interfaces(base)[-1] == {
        "url": "http://relay.example:8101",
        "protocolBinding": "GRPC",
        "protocolVersion": "1.0",
        "tenant": "agents/echo",
    }
    settings.RELAY_GRPC_PUBLIC_ADDRESS = "grpc.relay.example:443"
    assert cards.relay_interfaces(base)[-1]["url"] == "https://grpc.relay.example:443"
    settings.RELAY_GRPC_PUBLIC_ADDRESS = "grpcs://grpc.relay.example"
    assert cards.relay_interfaces(base)[-1]["url"] == "grpcs://grpc.relay.example"
    # 0.3 readers get no gRPC: 0.3 gRPC was another service.
    hybrid = cards.hybrid_card(
        {
            "name": "n",
            "description": "d",
            "version": "1",
            "supportedInterfaces": cards.relay_interfaces(base),
        }
    )
    assert all(i["transport"] != "GRPC" for i in hybrid.get("additionalInterfaces", []))


def test_an_ipv6_host_is_bracketed(settings):
    settings.RELAY_GRPC_PORT = 8101
    settings.RELAY_GRPC_PUBLIC_ADDRESS = ""
    assert targets.public_url("http://[::1]:8000/a2a/relay/") == "http://[::1]:8101"


# --- requests ------------------------------------------------------------------------------


def test_a_request_message_becomes_canonical_params_without_its_tenant():
    request = a2a_pb2.GetTaskRequest(tenant="agents/echo", id="t-1", history_length=0)
    kind, target_id, call = service.parse_call(Operation.GET_TASK, request, [])
    assert (kind, target_id) == ("agent", "echo")
    assert call.params == {"id": "t-1", "historyLength": 0}
    assert call.version == ProtocolVersion.V1_0
    assert call.binding == "GRPC"


def test_extensions_and_version_come_from_metadata():
    request = a2a_pb2.ListTasksRequest(tenant="teams/crew")
    pairs = [("a2a-version", "1.0"), ("a2a-extensions", "urn:a, urn:b"), ("authorization", "x")]
    _, _, call = service.parse_call(Operation.LIST_TASKS, request, pairs)
    assert call.extensions == ("urn:a", "urn:b")
    assert call.params["pageSize"] == 50
    with pytest.raises(Exception, match="1.0 only"):
        service.parse_call(Operation.LIST_TASKS, request, [("a2a-version", "0.3")])
    with pytest.raises(Exception, match="not supported"):
        service.parse_call(Operation.LIST_TASKS, request, [("a2a-version", "7.1")])


def test_a_nul_in_a_text_is_refused():
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(message_id="m", role=1, parts=[a2a_pb2.Part(text="a\x00")])
    )
    with pytest.raises(InvalidParams):
        service.parse_call(Operation.SEND, request, [])


# --- errors as statuses ----------------------------------------------------------------------


def unpacked(trailing) -> status_pb2.Status:
    status = status_pb2.Status()
    status.ParseFromString(dict(trailing)["grpc-status-details-bin"])
    return status


@pytest.mark.parametrize(
    ("error", "code", "domain"),
    [
        (TaskNotFound("gone"), grpc.StatusCode.NOT_FOUND, "a2a-protocol.org"),
        (TaskNotCancelable("done"), grpc.StatusCode.FAILED_PRECONDITION, "a2a-protocol.org"),
        (Unauthenticated("who"), grpc.StatusCode.UNAUTHENTICATED, "brass-relay"),
    ],
)
def test_an_error_is_its_code_and_an_error_info(error, code, domain):
    got_code, message, trailing = service.rich_status(error)
    assert got_code == code
    assert message == error.message
    status = unpacked(trailing)
    assert status.code == code.value[0]
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == (error.reason, domain)


def test_field_violations_and_retry_info_travel_as_details():
    _, _, trailing = service.rich_status(
        InvalidParams(field_violations=[FieldViolation("message.parts", "is required")])
    )
    bad = error_details_pb2.BadRequest()
    assert unpacked(trailing).details[1].Unpack(bad)
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("message.parts", "is required")
    ]
    code, _, trailing = service.rich_status(RateLimited("slow down", retry_after=7))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    retry = error_details_pb2.RetryInfo()
    assert unpacked(trailing).details[1].Unpack(retry)
    assert retry.retry_delay.seconds == 7


class FakeRpcError(grpc.aio.AioRpcError):
    def __init__(self, code, details, trailing=()):
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details)


@pytest.mark.parametrize(
    "error", [TaskNotFound("no such task"), TaskNotCancelable("it ended"), InvalidParams("bad")]
)
def test_an_agents_status_is_rebuilt_as_the_a2a_error(error):
    code, message, trailing = service.rich_status(error)
    rebuilt = grpc_upstream.error_of(FakeRpcError(code, message, trailing), "a")
    assert type(rebuilt) is type(error)
    assert rebuilt.message == error.message
    assert status_from_call(FakeRpcError(code, message, trailing)) is not None


@pytest.mark.parametrize(
    ("code", "details", "category"),
    [
        # UNAVAILABLE is "refused" (safe to retry) only when gRPC says nothing connected; from
        # a server that took the call it may have reached the agent.
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", "refused"),
        (grpc.StatusCode.UNAVAILABLE, "server shutting down", "protocol"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "down", "timeout"),
        (grpc.StatusCode.UNAUTHENTICATED, "down", "http_status"),
    ],
)
def test_transport_failures_are_upstream_errors(code, details, category):
    rebuilt = grpc_upstream.error_of(FakeRpcError(code, details), "a")
    assert isinstance(rebuilt, UpstreamError)
    assert rebuilt.category == category


def test_a_bare_code_picks_the_error_by_its_http_status():
    rebuilt = grpc_upstream.error_of(FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, "nope"), "a")
    assert not isinstance(rebuilt, UpstreamError)
    assert rebuilt.message == "nope"


# --- upstream addresses, metadata, the guard --------------------------------------------------


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("agent.example:50051", ("agent.example", 50051, False)),
        ("grpc://agent.example:7000", ("agent.example", 7000, False)),
        ("grpcs://agent.example", ("agent.example", 443, True)),
        ("https://agent.example:8443", ("agent.example", 8443, True)),
        ("http://127.0.0.1:8001", ("127.0.0.1", 8001, False)),
        ("[::1]:50051", ("::1", 50051, False)),
    ],
)
def test_grpc_interface_urls(url, parsed):
    assert grpc_upstream.parse_target(url) == parsed


def test_grpc_is_chosen_only_when_nothing_better_of_the_version_is_offered():
    grpc_10 = {"url": "a:1", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "t"}
    rest_10 = {"url": "http://a/", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    rpc_03 = {"url": "http://a/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
    grpc_03 = {"url": "a:1", "protocolBinding": "GRPC", "protocolVersion": "0.3"}
    chosen = choose_endpoint(agent_id="a", interfaces=[grpc_10, rpc_03])
    assert (chosen.binding, chosen.version, chosen.tenant) == ("GRPC", "1.0", "t")
    assert choose_endpoint(agent_id="a", interfaces=[grpc_10, rest_10]).binding == "HTTP+JSON"
    assert choose_endpoint(agent_id="a", interfaces=[grpc_03, rpc_03]).binding == "JSONRPC"


def test_metadata_carries_version_extensions_credentials_and_relay_headers():
    metadata = grpc_upstream.metadata_for(
        [("Authorization", "Bearer agent-secret"), ("Content-Type", "x")],
        ["urn:a", "urn:a", "urn:b"],
        {"X-Relay-Chain": "relay:one"},
    )
    assert dict(metadata) == {
        "authorization": "Bearer agent-secret",
        "a2a-version": "1.0",
        "a2a-extensions": "urn:a, urn:b",
        "x-relay-chain": "relay:one",
    }


async def test_the_ssrf_guard_refuses_private_addresses(settings):
    from relay_project.outbound import UnsafeURLError

    settings.RELAY_ALLOW_PRIVATE_URLS = False
    with pytest.raises(UnsafeURLError):
        await grpc_upstream.checked_address("127.0.0.1", 50051)
    with pytest.raises(UnsafeURLError):
        await grpc_upstream.channel_for("10.0.0.8:50051")
    settings.RELAY_ALLOW_PRIVATE_URLS = True
    assert await grpc_upstream.checked_address("127.0.0.1", 50051) == "127.0.0.1"


# --- numbers out of protobuf Structs ----------------------------------------------------------


def test_struct_numbers_come_back_as_ints_where_a_double_holds_them_exactly():
    from google.protobuf.json_format import ParseDict

    from tasks_app.grpc.values import integral_numbers, message_to_json

    sent = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"data": {"level": 2, "items": [1, -3, 2.5], "big": 2**53, "neg": -(2**53)}}],
        "metadata": {"level": 2, "ratio": 0.5, "nested": {"count": 0}, "flag": True},
    }
    message = ParseDict(sent, a2a_pb2.Message())
    back = message_to_json(message)
    assert back == sent
    data = back["parts"][0]["data"]
    assert type(data["level"]) is int and type(data["items"][0]) is int
    assert type(data["items"][2]) is float
    assert type(data["big"]) is int and type(back["metadata"]["nested"]["count"]) is int
    assert back["metadata"]["flag"] is True
    # Beyond 2**53 a double holds no exact integer: what arrived stays the double it is.
    beyond = integral_numbers({"n": float(2**53 + 2)})
    assert beyond == {"n": float(2**53 + 2)} and type(beyond["n"]) is float
    assert integral_numbers([1.0, "1.0", None]) == [1, "1.0", None]


def test_a_grpc_request_reaches_the_gateway_with_its_integers():
    from google.protobuf.json_format import ParseDict

    request = ParseDict(
        {
            "tenant": "agents/echo",
            "message": {
                "messageId": "m-2",
                "role": "ROLE_USER",
                "parts": [{"data": {"level": 2}}],
                "metadata": {"level": 2},
            },
            "metadata": {"retries": 3},
        },
        a2a_pb2.SendMessageRequest(),
    )
    _, _, call = service.parse_call(Operation.SEND, request, [])
    message = call.params["message"]
    assert type(message["metadata"]["level"]) is int
    assert type(message["parts"][0]["data"]["level"]) is int
    assert type(call.params["metadata"]["retries"]) is int


def test_a_grpc_agents_answer_becomes_json_with_its_integers():
    from google.protobuf.json_format import ParseDict

    answer = ParseDict(
        {"message": {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"data": {"n": 7}}]}},
        a2a_pb2.SendMessageResponse(),
    )
    assert type(grpc_upstream.answer_dict(answer)["message"]["parts"][0]["data"]["n"]) is int
