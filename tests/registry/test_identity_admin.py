"""The admin pages of access rules and token issuers: a condition that does not parse and an
issuer without a key source are refused with the reason; every save is audited."""

from __future__ import annotations

from django.urls import reverse

from registry.identity_models import AccessRule, TokenIssuer
from registry.models import AuditEntry

RULE = {
    "name": "no-echo",
    "kind": "call",
    "effect": "deny",
    "message": "",
    "position": 100,
    "enabled": "on",
}


def test_a_rule_whose_condition_does_not_parse_is_not_saved(admin_client):
    response = admin_client.post(
        reverse("admin:registry_accessrule_add"), {**RULE, "condition": 'target.id == "echo'}
    )
    assert response.status_code == 200
    assert "the condition is not a CEL expression" in response.content.decode()
    assert not AccessRule.objects.exists()


def test_a_saved_rule_is_audited(admin_client):
    response = admin_client.post(
        reverse("admin:registry_accessrule_add"), {**RULE, "condition": 'target.id == "echo"'}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditEntry.objects.get(object_type="accessrule")
    assert entry.action == "create" and entry.actor.startswith("user:")
    assert entry.changes["condition"] == 'target.id == "echo"'


def test_an_issuer_without_a_key_source_is_not_saved(admin_client):
    response = admin_client.post(
        reverse("admin:registry_tokenissuer_add"),
        {
            "issuer": "https://id.example",
            "audience": "brass-relay",
            "algorithms": "RS256",
            "leeway": 30,
            "subject_claim": "sub",
            "scopes_claim": "scope",
            "enabled": "on",
        },
    )
    assert response.status_code == 200
    assert "needs one of" in response.content.decode()
    assert not TokenIssuer.objects.exists()
