"""The pure core of health: states from consecutive rounds, and the circuit breaker."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from routing.health import (
    CLOSED,
    DEGRADED,
    HALF_OPEN,
    HEALTHY,
    OPEN,
    UNHEALTHY,
    Breaker,
    BreakerSettings,
    HealthCount,
    Thresholds,
    Verdict,
    breaker_admit,
    breaker_after_call,
    breaker_blocks,
    next_health,
    verdict_of,
)

OK, PARTIAL, DOWN = Verdict.OK, Verdict.PARTIAL, Verdict.DOWN
RULES = Thresholds(unhealthy_after=3, healthy_after=2)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BREAKER = BreakerSettings(open_after=3, cooldown=timedelta(seconds=30))


@pytest.mark.parametrize(
    ("levels", "deepest", "verdict"),
    [
        ({"card": True, "transport": True}, "transport", OK),
        ({"card": False, "transport": True}, "transport", PARTIAL),
        ({"card": True, "transport": False}, "transport", DOWN),
        ({"card": False, "transport": False}, "transport", DOWN),
        ({"card": True, "transport": True, "readiness": False}, "transport", PARTIAL),
        ({"card": True}, "card", OK),
        ({"card": False}, "card", DOWN),
    ],
)
def test_a_round_is_down_when_its_deepest_level_fails_and_partial_when_another_does(
    levels, deepest, verdict
):
    assert verdict_of(levels, deepest=deepest) is verdict


@pytest.mark.parametrize(
    ("start", "verdicts", "end"),
    [
        # A new agent is healthy after its first good round.
        (HealthCount(), [OK], HealthCount(HEALTHY, 0, 1)),
        # Failures below the threshold degrade it; the threshold makes it unhealthy.
        (HealthCount(HEALTHY, 0, 5), [DOWN], HealthCount(DEGRADED, 1, 0)),
        (HealthCount(HEALTHY, 0, 5), [DOWN, DOWN], HealthCount(DEGRADED, 2, 0)),
        (HealthCount(HEALTHY, 0, 5), [DOWN, DOWN, DOWN], HealthCount(UNHEALTHY, 3, 0)),
        (HealthCount(), [DOWN, DOWN, DOWN, DOWN], HealthCount(UNHEALTHY, 4, 0)),
        # One good round between failures resets the count.
        (HealthCount(HEALTHY), [DOWN, DOWN, OK, DOWN, DOWN], HealthCount(DEGRADED, 2, 0)),
        # Coming back takes healthy_after good rounds; it is degraded in between.
        (HealthCount(UNHEALTHY, 3, 0), [OK], HealthCount(DEGRADED, 0, 1)),
        (HealthCount(UNHEALTHY, 3, 0), [OK, OK], HealthCount(HEALTHY, 0, 2)),
        # A partial round degrades at once and counts neither way.
        (HealthCount(HEALTHY, 0, 9), [PARTIAL], HealthCount(DEGRADED, 0, 0)),
        (HealthCount(UNHEALTHY, 5, 0), [PARTIAL], HealthCount(DEGRADED, 0, 0)),
    ],
)
def test_health_state_follows_consecutive_rounds(start, verdicts, end):
    state = start
    for verdict in verdicts:
        state = next_health(state, verdict, RULES)
    assert state == end


def test_thresholds_of_one_make_every_round_decide():
    rules = Thresholds(unhealthy_after=1, healthy_after=1)
    assert next_health(HealthCount(HEALTHY), DOWN, rules).state == UNHEALTHY
    assert next_health(HealthCount(UNHEALTHY, 1), OK, rules).state == HEALTHY


def test_thresholds_below_one_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        Thresholds(unhealthy_after=0)
    with pytest.raises(ValueError, match="at least one"):
        BreakerSettings(open_after=0)


def test_breaker_opens_after_consecutive_failures_only():
    breaker = Breaker()
    for _ in range(2):
        breaker = breaker_after_call(breaker, ok=False, now=T0, settings=BREAKER)
    assert (breaker.state, breaker.failures) == (CLOSED, 2)
    breaker = breaker_after_call(breaker, ok=True, now=T0, settings=BREAKER)
    assert breaker == Breaker()
    for _ in range(3):
        breaker = breaker_after_call(breaker, ok=False, now=T0, settings=BREAKER)
    assert breaker == Breaker(OPEN, 3, T0)


def test_open_breaker_refuses_until_the_cooldown_then_lets_one_trial_through():
    opened = Breaker(OPEN, 3, T0)
    early = breaker_admit(opened, now=T0 + timedelta(seconds=29), settings=BREAKER)
    assert not early.allowed
    assert early.retry_at == T0 + timedelta(seconds=30)
    assert breaker_blocks(opened, now=T0 + timedelta(seconds=29), settings=BREAKER)

    later = T0 + timedelta(seconds=30)
    trial = breaker_admit(opened, now=later, settings=BREAKER)
    assert trial.allowed
    assert trial.breaker == Breaker(HALF_OPEN, 3, later)
    # While the trial runs, others are refused.
    assert not breaker_admit(
        trial.breaker, now=later + timedelta(seconds=1), settings=BREAKER
    ).allowed


def test_half_open_trial_success_closes_and_failure_opens_again():
    now = T0 + timedelta(seconds=40)
    trial = Breaker(HALF_OPEN, 3, T0 + timedelta(seconds=30))
    assert breaker_after_call(trial, ok=True, now=now, settings=BREAKER) == Breaker()
    assert breaker_after_call(trial, ok=False, now=now, settings=BREAKER) == Breaker(OPEN, 4, now)


def test_a_failure_reported_while_open_keeps_the_open_time():
    opened = Breaker(OPEN, 3, T0)
    after = breaker_after_call(opened, ok=False, now=T0 + timedelta(seconds=5), settings=BREAKER)
    assert after == Breaker(OPEN, 4, T0)


def test_a_trial_that_never_reports_is_retried_after_another_cooldown():
    trial = Breaker(HALF_OPEN, 3, T0)
    assert breaker_admit(trial, now=T0 + timedelta(seconds=31), settings=BREAKER).allowed


PROBE = """
import json, sys
before = set(sys.modules)
import routing.health
loaded = {name.partition(".")[0] for name in set(sys.modules) - before}
print(json.dumps({"django": "django" in sys.modules,
                  "outside_stdlib": sorted(loaded - set(sys.stdlib_module_names) - {"routing"})}))
"""


def test_the_health_core_imports_no_django_and_no_package():
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(result.stdout) == {"django": False, "outside_stdlib": []}
