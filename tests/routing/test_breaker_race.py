"""Concurrent outcomes of calls to one agent all count on its circuit breaker, on the embedded
database and on PostgreSQL, and a process's copy of the breaker never goes back to an older one.

Regression: the guard moved the breaker by compare-and-set, retried three times, and dropped a
failure whose retries all collided (8 concurrent HTTP 500s of one agent counted as 2); a copy
read before another process's write could replace a newer one.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from registry.models import Agent
from routing import breaker, health
from routing.breaker import BreakerGuard, breaker_of
from routing.models import HealthEvent
from tasks_app.gateway.agent_targets import AgentTarget
from tests.factories import make_agent
from tests.live import ServiceMissingError, manage, production_services, relay_env
from tests.routing.breaker_race import RACERS, race

THRESHOLD = 5


def assert_every_failure_counted_once(outcome: dict, racers: int = RACERS) -> None:
    assert outcome["stored"] == ["open", racers, racers]
    assert outcome["calls"] == racers
    # Each report moved the breaker once, on top of all those before it: versions 1..N, and
    # the breaker opened at the report that made the THRESHOLD-th failure, not before or after.
    assert [copy[2] for copy in outcome["copies"]] == list(range(1, racers + 1))
    for state, failures, version in outcome["copies"]:
        assert failures == version
        assert state == ("open" if failures >= THRESHOLD else "closed")
    assert outcome["events"] == [
        ["closed", "open", f"{THRESHOLD} calls failed in a row, the last: HTTP 500"]
    ]


@pytest.mark.django_db(transaction=True)
def test_concurrent_failures_all_count_on_the_embedded_database(settings):
    settings.RELAY_BREAKER_FAILURES = THRESHOLD
    agent = make_agent()

    assert_every_failure_counted_once(race(agent.pk))


def test_concurrent_failures_all_count_on_postgresql(tmp_path):
    try:
        with production_services() as services:
            env = relay_env(tmp_path, **services, RELAY_BREAKER_FAILURES=str(THRESHOLD))
            printed = manage(
                env, "shell", "-c", "from tests.routing.breaker_race import main; main()"
            )
    except ServiceMissingError as missing:
        pytest.skip(str(missing))

    assert_every_failure_counted_once(json.loads(printed.strip().splitlines()[-1]))


async def loaded(agent_id: str) -> AgentTarget:
    """The agent as a fresh target, as a process that loads it now has it."""
    return await sync_to_async(lambda: AgentTarget(Agent.objects.get(pk=agent_id)))()


class Recording(dict):
    """A target's ``extra`` that keeps every breaker copy set on it."""

    def __init__(self) -> None:
        super().__init__()
        self.breakers: list[health.Breaker] = []

    def __setitem__(self, key, value) -> None:
        if key == "breaker":
            self.breakers.append(value)
        super().__setitem__(key, value)


@pytest.mark.django_db(transaction=True)
async def test_the_copy_of_the_breaker_only_moves_forward_while_failures_pile_up(settings):
    settings.RELAY_BREAKER_FAILURES = THRESHOLD
    agent = await asyncio.to_thread(make_agent)
    target = await loaded(agent.pk)
    target.extra = Recording()
    guard = BreakerGuard()

    await asyncio.gather(
        *(
            guard.report(target, ok=False, category="http_status", detail="HTTP 500")
            for _ in "x" * 8
        )
    )

    versions = [copy.version for copy in target.extra.breakers]
    assert versions == sorted(versions)
    assert breaker_of(target) == health.Breaker("open", 8, breaker_of(target).since)
    assert breaker_of(target).version == 8
    events = [e.to_state async for e in HealthEvent.objects.filter(agent_id=agent.pk)]
    assert events == ["open"]


@pytest.mark.django_db(transaction=True)
async def test_a_row_read_before_a_newer_write_does_not_replace_the_copy(settings):
    """A team call reads its members' rows when it starts; by the time it remembers them, a
    report of this process may have moved the breaker further."""
    settings.RELAY_BREAKER_FAILURES = THRESHOLD
    agent = await asyncio.to_thread(make_agent)
    target = await loaded(agent.pk)
    read_at_start = ("closed", 0, None, 0)
    for _ in range(THRESHOLD):
        await BreakerGuard().report(target, ok=False, category="http_status", detail="HTTP 500")

    breaker.remember(target, read_at_start)

    assert breaker_of(target).state == "open"
    assert breaker_of(target).version == THRESHOLD
    assert breaker.blocks(target)
    # A newer row (another process's trial call closed it) is learned.
    breaker.remember(target, ("closed", 0, None, THRESHOLD + 2))
    assert not breaker.blocks(target)


@pytest.mark.django_db(transaction=True)
async def test_only_one_of_the_processes_past_the_cooldown_takes_the_trial_call(settings):
    settings.RELAY_BREAKER_FAILURES = THRESHOLD
    settings.RELAY_BREAKER_COOLDOWN_SECONDS = 1
    agent = await asyncio.to_thread(make_agent)
    opened = timezone.now() - timedelta(seconds=5)
    await Agent.objects.filter(pk=agent.pk).aupdate(
        breaker_state="open", breaker_failures=THRESHOLD, breaker_opened_at=opened
    )
    # Each target is another process's copy, all of them past the cool-down.
    targets = [await loaded(agent.pk) for _ in range(4)]
    outcomes = await asyncio.gather(
        *(BreakerGuard().admit(target) for target in targets), return_exceptions=True
    )

    assert sum(outcome is None for outcome in outcomes) == 1
    assert all("circuit breaker is open" in str(o) for o in outcomes if o is not None)
    assert {breaker_of(target).state for target in targets} == {"half_open"}
    stored = await Agent.objects.aget(pk=agent.pk)
    assert (stored.breaker_state, stored.breaker_version) == ("half_open", 1)
