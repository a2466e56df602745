"""The registry's management commands, against real card servers on 127.0.0.1 where they
fetch cards."""

import pytest
from django.core.management import CommandError, call_command
from django.forms.models import model_to_dict
from rest_framework.exceptions import AuthenticationFailed

from registry.auth import api_key_from_header
from registry.models import Agent, ApiKey, AuditEntry, CardSnapshot
from registry.secrets import hash_api_key
from registry.services import api_key_create
from tests.cardservers import card_json, card_site, status
from tests.registry.test_cards import card_v1

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]


def test_create_api_key_prints_the_key_on_its_last_line_and_stores_only_its_hash(capsys):
    call_command("create_api_key", "ci bot", "--expires-in-days", "3")
    key = capsys.readouterr().out.strip().splitlines()[-1]
    stored = ApiKey.objects.get(name="ci bot")
    assert stored.key_hash == hash_api_key(key)
    assert key not in (stored.key_hash, stored.prefix)
    assert key.startswith(stored.prefix)
    assert stored.expires_at is not None and stored.is_usable


def test_register_agent_registers_by_url_with_an_id(capsys):
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (site, url):
        call_command("register_agent", url, "--id", "forecaster")
    assert "Registered forecaster" in capsys.readouterr().out
    assert Agent.objects.get(pk="forecaster").name == "Weather"


def test_register_agent_fails_with_the_reason_and_stores_nothing():
    with card_site({}) as (site, url), pytest.raises(CommandError, match="card_not_found"):
        call_command("register_agent", url)
    assert not Agent.objects.exists()


def test_sync_cards_refreshes_every_agent_and_reports_changes(capsys):
    document = card_v1()
    routes = {"/.well-known/agent-card.json": lambda request: card_json(document)(request)}
    with card_site(routes) as (site, url):
        call_command("register_agent", url)
        document["version"] = "2.0.0"
        call_command("sync_cards")
        call_command("sync_cards", "--agent", "weather")
    out = capsys.readouterr().out
    assert "weather: changed" in out and "weather: unchanged" in out
    assert CardSnapshot.objects.filter(agent_id="weather").count() == 2


def test_sync_cards_fails_when_a_card_cannot_be_fetched(capsys):
    routes = {"/.well-known/agent-card.json": card_json(card_v1())}
    with card_site(routes) as (site, url):
        call_command("register_agent", url)
        site.routes["/.well-known/agent-card.json"] = status(500)
        with pytest.raises(CommandError, match="1 card"):
            call_command("sync_cards")
    assert "weather: failed (upstream_error" in capsys.readouterr().out


def test_sync_cards_names_an_unknown_agent():
    with pytest.raises(CommandError, match="no agent with id 'ghost'"):
        call_command("sync_cards", "--agent", "ghost")


def test_revoke_api_key_revokes_the_key_with_that_prefix_and_audits_it(capsys):
    kept, kept_secret = api_key_create(name="kept")
    gone, gone_secret = api_key_create(name="leaked")
    assert api_key_from_header(f"Bearer {gone_secret}") == gone

    call_command("revoke_api_key", gone.prefix)

    assert f"Revoked leaked ({gone.prefix}" in capsys.readouterr().out
    gone.refresh_from_db()
    assert gone.revoked_at is not None
    with pytest.raises(AuthenticationFailed):
        api_key_from_header(f"Bearer {gone_secret}")
    assert api_key_from_header(f"Bearer {kept_secret}") == kept
    entry = AuditEntry.objects.get(action=AuditEntry.Action.REVOKE)
    assert (entry.object_id, entry.actor) == (gone.prefix, "system")
    assert gone_secret not in str(model_to_dict(entry))

    call_command("revoke_api_key", gone.prefix)  # again: nothing more happens
    assert "already revoked" in capsys.readouterr().out
    assert AuditEntry.objects.filter(action=AuditEntry.Action.REVOKE).count() == 1


def test_revoke_api_key_refuses_an_unknown_prefix_and_lists_keys_without_one(capsys):
    api_key, _ = api_key_create(name="ci bot")
    with pytest.raises(CommandError, match="no API key with the prefix 'br_nothing'"):
        call_command("revoke_api_key", "br_nothing")
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at is None

    call_command("revoke_api_key")

    listed = capsys.readouterr().out
    assert api_key.prefix in listed and "usable" in listed and "ci bot" in listed
