"""Failed calls of one agent reported at the same moment from several threads, each thread with
its own database connection and its own copy of the agent target (as separate relay processes
have): the breaker race of tests/routing/test_breaker_race.py. Run in the test's process on the
embedded database, or in a ``manage.py shell`` on PostgreSQL (``main`` prints the outcome as
JSON).
"""

from __future__ import annotations

import json
import threading

from asgiref.sync import async_to_sync
from django.db import connection

RACERS = 8


def race(agent_id: str, racers: int = RACERS) -> dict:
    """Reports ``racers`` failed calls of the agent at once through the breaker guard. Returns
    each thread's copy of the breaker after its report (state, failures, version), the stored
    breaker and the breaker's health events (from, to, reason)."""
    from registry.models import Agent
    from routing.breaker import BreakerGuard, breaker_of
    from routing.models import HealthEvent, ProbeResult
    from tasks_app.gateway.agent_targets import AgentTarget

    barrier = threading.Barrier(racers)
    copies: list[tuple[str, int, int]] = []
    errors: list[BaseException] = []
    guard = BreakerGuard()

    def report() -> None:
        try:
            target = AgentTarget(Agent.objects.get(pk=agent_id))
            barrier.wait(timeout=20)
            # async_to_sync in this thread: the guard's database work runs here, on this
            # thread's own connection, truly at the same time as the other threads'.
            async_to_sync(guard.report)(
                target, ok=False, category="http_status", detail="HTTP 500", latency_ms=1.0
            )
            mine = breaker_of(target)
            copies.append((mine.state, mine.failures, mine.version))
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=report) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    stored = Agent.objects.get(pk=agent_id)
    return {
        "copies": sorted(copies, key=lambda copy: copy[2]),
        "stored": [stored.breaker_state, stored.breaker_failures, stored.breaker_version],
        "events": [
            [event.from_state, event.to_state, event.reason]
            for event in HealthEvent.objects.filter(agent_id=agent_id, kind="breaker")
        ],
        "calls": ProbeResult.objects.filter(agent_id=agent_id, level="call").count(),
    }


def main(racers: int = RACERS) -> None:
    """Migrates the database if it is not, registers an agent and prints ``race``'s outcome."""
    from django.core.management import call_command

    from tests.factories import make_agent

    call_command("migrate", verbosity=0)
    agent = make_agent()
    print(json.dumps(race(agent.pk, racers)))
