"""Access rules: who may call which agent, team or skill, and which team member may hand to
which. Plain Python: takes rules and facts, returns a verdict.

A rule is a CEL expression (Common Expression Language, through ``cel-python``; the language
agentgateway and Kubernetes write their policies in) with an effect. Rules of a kind are
tried in order; the first whose expression is true decides (``deny`` refuses, ``allow``
admits without trying the rest). When no rule matches the call is allowed, as it was before
there were rules. A rule that cannot be evaluated on a call (a field it names is missing, it
gives something other than true or false) refuses the call, naming the rule: an access check
fails closed.

Every expression sees the same names:

- ``principal``: ``kind`` ("key" or "token"), ``id`` (the key's prefix), ``name``,
  ``subject`` and ``issuer`` (a token's; "" for a key), ``scopes`` (a token's, a list),
  ``claims`` (a token's claims, a map; empty for a key), ``admin`` (bool);
- ``target``: ``kind`` ("agent" or "team") and ``id``: what is called, or the member handed
  to;
- ``skill``: the skill id a call addressed by skill was sent to ("" otherwise);
- ``handoff``: ``team``, ``from`` and ``to`` (member ids) for a hand-off; "" on a call;
- ``now``: the time of the check, a CEL timestamp (``now.getHours("Europe/Paris")``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import celpy
from celpy import celtypes

CALL = "call"
HANDOFF = "handoff"
KINDS = (CALL, HANDOFF)
ALLOW = "allow"
DENY = "deny"
EFFECTS = (ALLOW, DENY)

_ENVIRONMENT = celpy.Environment()


class RuleError(ValueError):
    """A rule that cannot be used: its expression does not parse, or a field is wrong."""


@dataclass(frozen=True)
class Rule:
    """A compiled rule (``compile_rule``)."""

    name: str
    kind: str
    effect: str
    condition: str
    message: str
    program: Any


def compile_rule(*, name: str, kind: str, effect: str, condition: str, message: str = "") -> Rule:
    """The rule, its expression parsed once. Raises RuleError saying what is wrong."""
    if kind not in KINDS:
        raise RuleError(f"a rule's kind is one of {', '.join(KINDS)}, not {kind!r}")
    if effect not in EFFECTS:
        raise RuleError(f"a rule's effect is one of {', '.join(EFFECTS)}, not {effect!r}")
    if not condition.strip():
        raise RuleError("a rule needs a condition (a CEL expression)")
    try:
        program = _ENVIRONMENT.program(_ENVIRONMENT.compile(condition))
    except celpy.CELParseError as error:
        raise RuleError(f"the condition is not a CEL expression: {error}") from None
    return Rule(name, kind, effect, condition, message, program)


@dataclass(frozen=True)
class Verdict:
    """Whether the call or hop may go on; ``rule`` the rule that decided (None: no rule
    matched), ``reason`` the explanation given on a refusal."""

    allowed: bool
    rule: str | None = None
    reason: str = ""


ALLOWED = Verdict(True)


def decide(rules: Sequence[Rule], facts: Mapping[str, Any], *, refused: str) -> Verdict:
    """The verdict of the first rule whose condition holds for ``facts`` (``call_facts``,
    ``handoff_facts``); ALLOWED when none does. ``refused`` says what a deny refuses ("this
    call", "'a' handing to 'b'")."""
    if not rules:
        return ALLOWED
    activation = _activation(facts)
    for rule in rules:
        try:
            result = rule.program.evaluate(activation)
        except celpy.CELEvalError as error:
            return Verdict(
                False,
                rule.name,
                f"access rule {rule.name!r} could not be evaluated ({error.args[0]}), "
                f"so {refused} is refused",
            )
        if not isinstance(result, celtypes.BoolType):
            return Verdict(
                False,
                rule.name,
                f"access rule {rule.name!r} gives {type(result).__name__}, not true or false, "
                f"so {refused} is refused",
            )
        if result:
            if rule.effect == ALLOW:
                return Verdict(True, rule.name)
            reason = f"access rule {rule.name!r} forbids {refused}"
            return Verdict(
                False, rule.name, f"{reason}: {rule.message}" if rule.message else reason
            )
    return ALLOWED


def principal_facts(
    *,
    kind: str,
    id: str,
    name: str = "",
    subject: str = "",
    issuer: str = "",
    scopes: Sequence[str] = (),
    claims: Mapping[str, Any] | None = None,
    admin: bool = False,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "id": id,
        "name": name,
        "subject": subject,
        "issuer": issuer,
        "scopes": sorted(scopes),
        "claims": dict(claims or {}),
        "admin": admin,
    }


def call_facts(
    *, principal: dict[str, Any], target_kind: str, target_id: str, skill: str, now: datetime
) -> dict[str, Any]:
    return {
        "principal": principal,
        "target": {"kind": target_kind, "id": target_id},
        "skill": skill,
        "handoff": {"team": "", "from": "", "to": ""},
        "now": now,
    }


def handoff_facts(
    *, principal: dict[str, Any], team: str, sender: str, recipient: str, now: datetime
) -> dict[str, Any]:
    return {
        "principal": principal,
        "target": {"kind": "agent", "id": recipient},
        "skill": "",
        "handoff": {"team": team, "from": sender, "to": recipient},
        "now": now,
    }


def _activation(facts: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: celtypes.TimestampType(value) if isinstance(value, datetime) else _cel(value)
        for name, value in facts.items()
    }


def _cel(value: Any) -> Any:
    return celpy.json_to_cel(value)
