"""After a database outage every process's lease ran out, the live ones' too: a scanner that
itself failed to reach the database takes nothing over until the live processes had time to
renew, so a process that is alive keeps its tasks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks_app.gateway import ownership, supervisor
from tasks_app.models import RelayProcess
from tests.factories import make_agent, make_task

pytestmark = pytest.mark.django_db


def test_a_scanner_that_never_lost_the_database_may_take_over_at_once():
    assert supervisor.Supervisor().may_take_over(1000.0)


def test_after_its_own_database_failure_a_scanner_waits_a_lease_and_a_half(settings):
    settings.RELAY_EXCHANGE_LEASE_SECONDS = 10.0
    scanner = supervisor.Supervisor()
    scanner._database_failed_at = 1000.0
    assert not scanner.may_take_over(1000.0 + 14.9)
    assert scanner.may_take_over(1000.0 + 15.0)


def owned_by_a_process_whose_lease_ran_out_during_the_outage():
    from tasks_app.models import Task

    RelayProcess.objects.create(
        pk="alive-elsewhere",
        host="elsewhere",
        pid=1,
        lease_expires_at=timezone.now() - timedelta(seconds=20),
    )
    task = make_task(make_agent(), state="working")
    Task.objects.filter(pk=task.pk).update(owner="alive-elsewhere")
    return task


def scan(scanner: supervisor.Supervisor, now: float) -> list:
    """What one pass of the scan claims at ``now`` (the scan's gate, then the claim)."""
    return ownership.claim_orphans() if scanner.may_take_over(now) else []


def test_a_live_owner_that_renews_within_the_grace_keeps_its_task(settings):
    settings.RELAY_EXCHANGE_LEASE_SECONDS = 10.0
    task = owned_by_a_process_whose_lease_ran_out_during_the_outage()
    scanner = supervisor.Supervisor()
    scanner._database_failed_at = 100.0  # the database came back just after
    assert scan(scanner, 105.0) == []  # the owner has not renewed yet: left alone
    RelayProcess.objects.filter(pk="alive-elsewhere").update(
        lease_expires_at=timezone.now() + timedelta(seconds=10)
    )  # it renews (every third of the lease)
    assert scan(scanner, 116.0) == []
    task.refresh_from_db()
    assert task.owner == "alive-elsewhere"


def test_an_owner_that_did_not_renew_by_the_end_of_the_grace_is_taken_over(settings):
    settings.RELAY_EXCHANGE_LEASE_SECONDS = 10.0
    task = owned_by_a_process_whose_lease_ran_out_during_the_outage()
    scanner = supervisor.Supervisor()
    scanner._database_failed_at = 100.0
    assert scan(scanner, 105.0) == []
    assert [claimed.pk for claimed in scan(scanner, 116.0)] == [task.pk]
