"""The pure request limits and delegation headers: plain values in, errors or headers out."""

from __future__ import annotations

import json

import pytest

from tasks_app.protocol import delegation
from tasks_app.protocol.errors import InvalidParams, InvalidRequest
from tasks_app.protocol.limits import (
    Limits,
    RequestTooLarge,
    capped_history_length,
    check_body,
    check_params,
    raw_depth,
    value_depth,
)

LIMITS = Limits(
    max_body_bytes=1000,
    max_json_depth=10,
    max_parts=3,
    max_metadata_bytes=200,
    max_metadata_depth=3,
    max_history_length=50,
)


def message(parts: int = 1, **fields):
    return {
        "messageId": "m",
        "role": "ROLE_USER",
        "parts": [{"text": "x"} for _ in range(parts)],
        **fields,
    }


def nested(depth: int):
    value: object = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def violations(error: InvalidParams) -> dict[str, str]:
    return {v.field: v.description for v in error.field_violations}


# --- bodies --------------------------------------------------------------------------------


def test_a_body_over_the_size_limit_is_request_too_large_with_413():
    with pytest.raises(RequestTooLarge) as caught:
        check_body(b" " * 1001, LIMITS)
    assert caught.value.http_status == 413
    assert caught.value.code == -32600
    assert "1000 bytes" in caught.value.message


def test_a_body_at_the_limits_passes():
    body = json.dumps(nested(9)).encode()
    check_body(body.ljust(1000), LIMITS)


def test_a_body_nested_deeper_than_the_limit_is_an_invalid_request():
    with pytest.raises(InvalidRequest, match="nested deeper than the limit of 10"):
        check_body(json.dumps(nested(11)).encode(), LIMITS)


def test_a_hundred_thousand_open_brackets_are_measured_without_recursion():
    assert raw_depth(b"[" * 100_000) == 100_000
    with pytest.raises(InvalidRequest):
        check_body(b"[" * 900, Limits(max_json_depth=64))


@pytest.mark.parametrize(
    ("body", "depth"),
    [
        (b"{}", 1),
        (b"[[1,[2]],{}]", 3),
        (b'{"a": "[[[[{{{{"}', 1),
        (b'{"a": "\\"[[[", "b": [[]]}', 3),
        (b'{"a": "\\\\", "b": [[]]}', 3),
        (b"no json at all", 0),
        (b"]]]]", 0),
    ],
)
def test_brackets_inside_strings_do_not_count(body, depth):
    assert raw_depth(body) == depth


def test_zero_turns_body_limits_off():
    check_body(b"[" * 5000, Limits(max_body_bytes=0, max_json_depth=0))


# --- params --------------------------------------------------------------------------------


def test_too_many_parts_name_the_field_and_the_limit():
    with pytest.raises(InvalidParams) as caught:
        check_params({"message": message(parts=4)}, LIMITS)
    assert violations(caught.value) == {"message.parts": "has 4 parts; the limit is 3"}


def test_metadata_anywhere_in_the_request_is_measured():
    params = {
        "message": message(parts=2, metadata={"ok": 1}),
        "metadata": {"big": "x" * 300},
    }
    params["message"]["parts"][1]["metadata"] = nested(4)
    with pytest.raises(InvalidParams) as caught:
        check_params(params, LIMITS)
    found = violations(caught.value)
    assert set(found) == {"metadata", "message.parts[1].metadata"}
    assert "the limit is 200" in found["metadata"]
    assert found["message.parts[1].metadata"] == "is nested 4 levels deep; the limit is 3"


def test_metadata_size_counts_bytes_not_characters():
    with pytest.raises(InvalidParams, match="bytes of JSON"):
        check_params({"metadata": {"k": "é" * 100}}, LIMITS)  # 200 characters, 211 bytes


def test_a_history_length_over_the_bound_is_capped_not_refused():
    """Regression: historyLength above the bound was refused (-32602); it is a maximum."""
    check_params({"message": message(), "configuration": {"historyLength": 51}}, LIMITS)
    check_params({"id": "t", "historyLength": 5000}, LIMITS)
    assert capped_history_length(5000, LIMITS) == 50
    assert capped_history_length(7, LIMITS) == 7
    assert capped_history_length(None, LIMITS) is None


def test_a_request_within_every_limit_passes():
    check_params(
        {"message": message(parts=3, metadata=nested(3)), "configuration": {"historyLength": 10}},
        LIMITS,
    )


def test_value_depth_is_iterative():
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    assert value_depth(deep) == 50_001
    assert value_depth("scalar") == 0


# --- delegation ----------------------------------------------------------------------------


def test_a_chain_is_read_from_repeated_and_comma_separated_headers():
    assert delegation.parse_chain(["relay-a, relay-b", "relay-c"]) == (
        "relay-a",
        "relay-b",
        "relay-c",
    )
    assert delegation.parse_chain([]) == ()


@pytest.mark.parametrize("value", ["relay a", "relay-a, <script>", "x" * 101, "-leading"])
def test_a_chain_entry_that_is_not_a_relay_id_is_refused(value):
    with pytest.raises(InvalidRequest, match="not a relay id"):
        delegation.parse_chain([value])


def test_a_chain_through_this_relay_is_a_loop():
    with pytest.raises(InvalidRequest, match="refusing a loop"):
        delegation.check_chain(("relay-a", "me"), own_id="me", max_depth=5)


def test_a_chain_at_the_depth_limit_is_refused_and_one_below_passes():
    delegation.check_chain(("a", "b", "c"), own_id="me", max_depth=4)
    with pytest.raises(InvalidRequest, match="the limit is 3"):
        delegation.check_chain(("a", "b", "c", "d"), own_id="me", max_depth=4)


def test_outbound_headers_append_this_relay_and_sign_both_values():
    headers = delegation.outbound_headers(
        key_prefix="abc123",
        key_name="Team Ops; admin=1",
        relay_id="me",
        chain=("relay-a",),
        secret="s3cret",
    )
    assert headers["X-Relay-Caller"] == "key=abc123; name=Team%20Ops%3B%20admin%3D1; relay=me"
    assert headers["X-Relay-Chain"] == "relay-a, me"
    assert delegation.verify("s3cret", headers)
    assert not delegation.verify("other", headers)
    forged = dict(headers, **{"X-Relay-Caller": "key=admin; name=root; relay=me"})
    assert not delegation.verify("s3cret", forged)


def test_without_a_secret_nothing_is_signed():
    headers = delegation.outbound_headers(key_prefix="p", key_name="n", relay_id="me", chain=())
    assert set(headers) == {"X-Relay-Caller", "X-Relay-Chain"}
    assert headers["X-Relay-Chain"] == "me"


def test_relays_of_keeps_relay_entries_only():
    assert delegation.relays_of(["relay:a", "team:demo", "relay:b"]) == ("a", "b")
