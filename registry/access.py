"""The access rules of the admin, checked on calls and hand-offs (``registry.policy``
evaluates them), and every refusal written to the audit log.

The enabled rules are read once and kept in memory for RELAY_TARGET_CACHE_SECONDS (at once in
the process that changed them), so a call costs no query for them.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.utils import timezone

from registry import policy, services
from registry.identity_models import AccessRule
from registry.models import ApiKey

logger = logging.getLogger(__name__)

_RULES: dict[str, tuple[float, tuple[policy.Rule, ...]]] = {}


def cached_rules(kind: str) -> tuple[policy.Rule, ...] | None:
    """The rules of ``kind`` while the last read of them is fresh, else None (no database):
    an event loop asks this first and goes to the database thread only when it must."""
    cached = _RULES.get(kind)
    if cached is not None and time.monotonic() - cached[0] < settings.RELAY_TARGET_CACHE_SECONDS:
        return cached[1]
    return None


def rules(kind: str) -> tuple[policy.Rule, ...]:
    """The enabled rules of ``kind``, in the order they are tried."""
    now = time.monotonic()
    cached = cached_rules(kind)
    if cached is not None:
        return cached
    compiled = []
    for row in AccessRule.objects.filter(kind=kind, enabled=True).order_by("position", "name"):
        try:
            compiled.append(row.compiled())
        except policy.RuleError as error:
            # Saved past the admin's check (a migration, the shell): it refuses what it can.
            logger.error("access rule %s cannot be used: %s", row.name, error)
            compiled.append(_refusing(row, str(error)))
    found = tuple(compiled)
    _RULES[kind] = (now, found)
    return found


def _refusing(row: AccessRule, error: str) -> policy.Rule:
    return policy.compile_rule(
        name=row.name,
        kind=row.kind,
        effect=policy.DENY,
        condition="true",
        message=f"the rule is broken ({error[:200]})",
    )


def rules_changed(**kwargs) -> None:
    """An AccessRule was saved or deleted: read the rules again."""
    _RULES.clear()


def principal_of(caller: ApiKey | None) -> dict:
    """The ``principal`` the rules see for a caller (a key, or a token's principal)."""
    if caller is None:
        return policy.principal_facts(kind="none", id="")
    return policy.principal_facts(
        kind="token" if caller.token_issuer else "key",
        id=caller.prefix,
        name=caller.name,
        subject=caller.token_subject,
        issuer=caller.token_issuer,
        scopes=tuple(getattr(caller, "token_scopes", ())),
        claims=getattr(caller, "token_claims", None),
        admin=caller.is_admin,
    )


def call_verdict(
    caller: ApiKey | None, *, target_kind: str, target_id: str, skill: str = ""
) -> policy.Verdict:
    """Whether the call rules let ``caller`` call the target, recording nothing (for a list
    of what a caller may call)."""
    call_rules = rules(policy.CALL)
    if not call_rules:
        return policy.ALLOWED
    facts = policy.call_facts(
        principal=principal_of(caller),
        target_kind=target_kind,
        target_id=target_id,
        skill=skill,
        now=timezone.now(),
    )
    return policy.decide(call_rules, facts, refused="this call")


def check_call(
    caller: ApiKey | None, *, target_kind: str, target_id: str, skill: str = ""
) -> policy.Verdict:
    """Whether the call rules let ``caller`` call the target; a refusal is in the audit log."""
    verdict = call_verdict(caller, target_kind=target_kind, target_id=target_id, skill=skill)
    if not verdict.allowed:
        audit_refusal(
            caller,
            verdict,
            object_type=target_kind,
            object_id=target_id,
            details={"skill": skill} if skill else {},
        )
    return verdict


class HandoffCheck:
    """The hand-off rules of a team's call for its caller: ``check(from, to)`` gives the
    refusal's reason, or None when the hop may go on. The rules are read beforehand
    (``rules(HANDOFF)``): the check runs on the event loop. Refusals are kept in ``refused``
    until ``audit`` writes them."""

    def __init__(self, caller: ApiKey | None, team_id: str, handoff_rules) -> None:
        self.caller = caller
        self.team_id = team_id
        self.rules = tuple(handoff_rules)
        self.principal = principal_of(caller) if self.rules else {}
        self.refused: list[tuple[str, str, policy.Verdict]] = []

    def __call__(self, sender: str, recipient: str) -> str | None:
        if not self.rules:
            return None
        facts = policy.handoff_facts(
            principal=self.principal,
            team=self.team_id,
            sender=sender,
            recipient=recipient,
            now=timezone.now(),
        )
        verdict = policy.decide(self.rules, facts, refused=f"{sender!r} handing to {recipient!r}")
        if verdict.allowed:
            return None
        self.refused.append((sender, recipient, verdict))
        return verdict.reason

    def audit(self) -> None:
        """Writes the refusals kept since the last ``audit``, then forgets them."""
        for sender, recipient, verdict in self.refused:
            audit_refusal(
                self.caller,
                verdict,
                object_type="handoff",
                object_id=f"{self.team_id}:{sender}>{recipient}",
                details={"team": self.team_id, "from": sender, "to": recipient},
            )
        self.refused.clear()


def audit_refusal(
    caller: ApiKey | None,
    verdict: policy.Verdict,
    *,
    object_type: str,
    object_id: str,
    details: dict,
) -> None:
    services.audit_record(
        actor=services.actor_of(key=caller),
        action="deny",
        object_type=object_type,
        object_id=object_id,
        changes={"rule": verdict.rule, "reason": verdict.reason, **details},
    )
