"""The health jobs: Celery tasks and their beat schedules (django-celery-beat rows)."""

from __future__ import annotations

import pytest
from django_celery_beat.models import PeriodicTask

from registry.models import Agent
from routing import schedules, tasks
from routing.models import ProbeResult
from tests.agents import v1_only_agent
from tests.servers import running

pytestmark = pytest.mark.django_db(transaction=True)


def test_migrate_creates_the_beat_schedules_from_the_settings(settings):
    rows = {row.name: row for row in PeriodicTask.objects.select_related("interval")}
    sweep = rows["Brass Relay: health sweep"]
    assert sweep.task == "routing.health_sweep"
    assert sweep.interval.every == settings.RELAY_HEALTH_SWEEP_SECONDS
    assert sweep.interval.period == "seconds"
    assert sweep.enabled
    assert rows["Brass Relay: prune probe results"].task == "routing.prune_probe_results"
    resync = rows["Brass Relay: card re-sync"]
    assert (resync.task, resync.interval.every) == (
        "registry.refresh_all_cards",
        settings.RELAY_CARD_SYNC_SECONDS,
    )
    peers = rows["Brass Relay: peer relay sync"]
    assert (peers.task, peers.interval.every) == (
        "registry.sync_peers",
        settings.RELAY_PEER_SYNC_SECONDS,
    )
    embeddings = rows["Brass Relay: skill embeddings"]
    assert (embeddings.task, embeddings.interval.every) == (
        "registry.reindex_skill_embeddings",
        settings.RELAY_EMBEDDING_REINDEX_SECONDS,
    )
    usage = rows["Brass Relay: usage roll-up"]
    assert (usage.task, usage.interval.every) == ("tasks_app.roll_up_usage", 3600)


def test_ensuring_the_schedules_again_keeps_what_an_admin_changed():
    PeriodicTask.objects.filter(name="Brass Relay: health sweep").update(enabled=False)
    PeriodicTask.objects.filter(name="Brass Relay: card re-sync").delete()
    assert schedules.beat_schedules_ensure() == ["Brass Relay: card re-sync"]
    assert PeriodicTask.objects.get(name="Brass Relay: health sweep").enabled is False
    assert PeriodicTask.objects.filter(name__startswith="Brass Relay: ").count() == 6


def test_the_sweep_job_probes_the_agents_that_are_due(allow_private_urls):
    from registry.services import agent_register

    with running(v1_only_agent) as url:
        agent_register(url=url, agent_id="jobbed")
        assert tasks.health_sweep() == 1
        assert tasks.health_sweep() == 0
    assert Agent.objects.get(pk="jobbed").health == "healthy"
    assert ProbeResult.objects.filter(agent_id="jobbed").count() == 2


def test_the_prune_job_deletes_expired_results(settings):
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import make_agent

    agent = make_agent(agent_id="pruned")
    ProbeResult.objects.create(
        agent=agent, level="card", ok=True, checked_at=timezone.now() - timedelta(days=400)
    )
    ProbeResult.objects.create(agent=agent, level="card", ok=True)
    assert tasks.prune_probe_results() == 1
    assert ProbeResult.objects.count() == 1
