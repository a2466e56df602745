"""The usage extension's reading and the price arithmetic, as plain values."""

from __future__ import annotations

from decimal import Decimal

import pytest

from registry.usage_models import AgentPrice
from tasks_app.usage.extension import USAGE_URI, Tokens, tokens_of
from tasks_app.usage.records import cost_of, money_text


def final(metadata, *, where="event"):
    status = {"state": "TASK_STATE_COMPLETED"}
    if where == "message":
        status["message"] = {"messageId": "m", "role": "ROLE_AGENT", "metadata": metadata}
        return {"statusUpdate": {"status": status}}
    return {"statusUpdate": {"status": status, "metadata": metadata}}


def test_the_extension_is_read_from_the_update_its_message_or_the_task():
    usage = {USAGE_URI: {"inputTokens": 10, "outputTokens": 4, "model": "m"}}
    assert tokens_of([final(usage)]) == Tokens(10, 4, "m")
    assert tokens_of([final(usage, where="message")]) == Tokens(10, 4, "m")
    assert tokens_of([{"task": {"status": {}, "metadata": usage}}]) == Tokens(10, 4, "m")


def test_kagent_usage_metadata_is_read_and_protobuf_floats_become_integers():
    kagent = {"kagent_usage_metadata": {"promptTokenCount": 7.0, "candidatesTokenCount": 3}}
    assert tokens_of([final(kagent)]) == Tokens(7, 3)
    assert tokens_of([final({"adk_usage_metadata": {"prompt_token_count": 2}})]) == Tokens(2, 0)


@pytest.mark.parametrize("count", [-1, 1.5, "12", True, None, 10**16])
def test_a_count_that_is_not_a_whole_number_from_zero_is_ignored(count):
    assert tokens_of([final({USAGE_URI: {"inputTokens": count}})]) is None


def test_the_last_event_that_reports_wins_and_none_is_none():
    first = final({USAGE_URI: {"inputTokens": 1, "outputTokens": 1}})
    last = final({USAGE_URI: {"inputTokens": 5, "outputTokens": 6}})
    assert tokens_of([first, last, final({})]) == Tokens(5, 6)
    assert tokens_of([final({}), {"artifactUpdate": {}}]) is None


def test_a_price_is_computed_in_decimals_to_a_millionth():
    price = AgentPrice(
        per_call=Decimal("0.01"),
        per_million_input_tokens=Decimal("2.5"),
        per_million_output_tokens=Decimal("10"),
    )
    assert cost_of(price, Tokens(1200, 300)) == Decimal("0.016000")
    assert cost_of(price, Tokens(1, 1)) == Decimal("0.010013")  # 0.0100125, rounded half up
    assert cost_of(price, None) == Decimal("0.01")
    assert cost_of(None, Tokens(10**6, 10**6)) == 0
    assert [money_text(Decimal(v)) for v in ("1.2", "0.0125", "3", "0.1234567")] == [
        "1.20",
        "0.0125",
        "3.00",
        "0.123457",
    ]


def test_bytes_are_each_message_and_artifact_as_compact_utf8_json_summed():
    import json

    from tasks_app.usage.records import _bytes

    def size(value):
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())

    asked = [
        {"messageId": "u1", "role": "ROLE_USER", "parts": [{"text": "héllo, wörld"}]},
        {"messageId": "u2", "role": "user", "parts": [{"text": "again"}]},
    ]
    said = {"messageId": "a1", "role": "ROLE_AGENT", "parts": [{"text": "“quoted” ✓"}]}
    status = {"messageId": "s1", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}
    artifact = {"artifactId": "x", "parts": [{"data": {"n": 1, "ü": [1, 2]}}]}
    snapshot = {
        "history": [asked[0], said, asked[1]],
        "status": {"state": "TASK_STATE_COMPLETED", "message": status},
        "artifacts": [artifact],
    }
    assert _bytes(snapshot) == (
        size(asked[0]) + size(asked[1]),
        size(said) + size(status) + size(artifact),
    )
    snapshot["status"]["message"] = said  # a status message in the history counts once
    assert _bytes(snapshot)[1] == size(said) + size(artifact)
    assert _bytes({"history": [], "status": {}}) == (0, 0)
