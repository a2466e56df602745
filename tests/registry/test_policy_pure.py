"""The access rule engine alone (registry.policy): plain values in, a verdict out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from registry import policy

NOON = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
ALICE = policy.principal_facts(kind="token", id="jwt_1", subject="alice", scopes=["a2a:call"])


def facts(**overrides):
    values = {"target_kind": "agent", "target_id": "echo", "skill": "", "now": NOON}
    values.update(overrides)
    return policy.call_facts(principal=ALICE, **values)


def rule(name, condition, effect="deny", message=""):
    return policy.compile_rule(
        name=name, kind="call", effect=effect, condition=condition, message=message
    )


def test_no_rules_allow_as_before():
    assert policy.decide([], facts(), refused="this call") == policy.ALLOWED


def test_no_rule_that_holds_allows():
    rules = [rule("other", 'principal.subject == "bob"')]
    assert policy.decide(rules, facts(), refused="this call").allowed


def test_the_first_rule_that_holds_decides_and_names_itself():
    rules = [
        rule("scoped", '"a2a:call" in principal.scopes && target.id == "echo"', message="no"),
        rule("allow-all", "true", effect="allow"),
    ]
    verdict = policy.decide(rules, facts(), refused="this call")
    assert verdict == policy.Verdict(False, "scoped", "access rule 'scoped' forbids this call: no")
    assert policy.decide(list(reversed(rules)), facts(), refused="x") == policy.Verdict(
        True, "allow-all"
    )


def test_rules_see_the_time_of_the_check():
    night = rule("office-hours", 'now.getHours("UTC") < 8 || now.getHours("UTC") >= 18')
    assert policy.decide([night], facts(), refused="x").allowed
    late = facts(now=datetime(2026, 1, 5, 22, 0, tzinfo=UTC))
    assert not policy.decide([night], late, refused="x").allowed


def test_a_hand_off_sees_its_team_and_members():
    handoff = policy.compile_rule(
        name="no-leak",
        kind="handoff",
        effect="deny",
        condition='handoff.team == "crew" && handoff.from == "worker" && handoff.to == "helper"',
    )
    seen = policy.handoff_facts(
        principal=ALICE, team="crew", sender="worker", recipient="helper", now=NOON
    )
    verdict = policy.decide([handoff], seen, refused="'worker' handing to 'helper'")
    assert verdict.reason == "access rule 'no-leak' forbids 'worker' handing to 'helper'"
    back = policy.handoff_facts(
        principal=ALICE, team="crew", sender="helper", recipient="worker", now=NOON
    )
    assert policy.decide([handoff], back, refused="x").allowed


@pytest.mark.parametrize(
    ("condition", "words"),
    [("principal.nope == 1", "could not be evaluated"), ('"text"', "not true or false")],
)
def test_a_rule_that_cannot_decide_refuses(condition, words):
    verdict = policy.decide([rule("broken", condition)], facts(), refused="this call")
    assert not verdict.allowed and verdict.rule == "broken"
    assert words in verdict.reason


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"condition": "principal.subject =="}, "not a CEL expression"),
        ({"condition": " "}, "needs a condition"),
        ({"effect": "maybe"}, "effect is one of"),
        ({"kind": "read"}, "kind is one of"),
    ],
)
def test_a_rule_that_cannot_be_used_is_refused_when_made(fields, words):
    values = {"name": "r", "kind": "call", "effect": "deny", "condition": "true", **fields}
    with pytest.raises(policy.RuleError, match=words):
        policy.compile_rule(**values)
