"""Writes of the health checks: the sweep (probe the agents that are due, store every result,
move health states), the circuit breaker's writes for real calls, and pruning old results.

State changes are compare-and-set on the agent row, so two sweeps (or a sweep and
``check_agents``) cannot both move the same agent; each change is a ``HealthEvent``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from registry.models import Agent
from registry.services import agent_card_store, upstream_auth_headers
from relay_project import outbound
from routing import health, probes, selectors
from routing.models import HealthEvent, ProbeResult

logger = logging.getLogger(__name__)

LEVELS = (probes.CARD, probes.TRANSPORT, probes.READINESS)
ID_BATCH = 500
"""Agents per statement when many rows are written at once (SQLite's variable limit)."""


def thresholds() -> health.Thresholds:
    return health.Thresholds(
        unhealthy_after=settings.RELAY_HEALTH_UNHEALTHY_AFTER,
        healthy_after=settings.RELAY_HEALTH_HEALTHY_AFTER,
    )


def breaker_settings() -> health.BreakerSettings:
    return health.BreakerSettings(
        open_after=settings.RELAY_BREAKER_FAILURES,
        cooldown=timedelta(seconds=settings.RELAY_BREAKER_COOLDOWN_SECONDS),
    )


@dataclass(frozen=True)
class AgentCheck:
    """One agent's round as the sweep stored it (``check_agents`` prints these)."""

    agent_id: str
    results: list[probes.LevelResult]
    state_before: str
    state_after: str
    card_changed: bool = False


# --- the sweep -------------------------------------------------------------------------------


def probe_target_of(agent: Agent) -> probes.ProbeTarget:
    """How the probes see an agent row (its credentials decrypted here, never logged)."""
    if agent.scale_to_zero:
        levels: tuple[str, ...] = (probes.CARD,)
    else:
        levels = (probes.CARD, probes.TRANSPORT)
        if agent.readiness_probe:
            levels += (probes.READINESS,)
    snapshot = agent.current_snapshot
    return probes.ProbeTarget(
        agent_id=agent.pk,
        card_url=agent.card_url,
        card_hash=snapshot.content_hash if snapshot else "",
        interfaces=tuple(agent.interfaces or ()),
        invocation_url=agent.invocation_url,
        headers=tuple(upstream_auth_headers(agent).items()),
        levels=levels,
        timeout=agent.probe_timeout_seconds or settings.RELAY_HEALTH_TIMEOUT_SECONDS,
        readiness_text=agent.readiness_message or settings.RELAY_HEALTH_READINESS_TEXT,
        max_card_bytes=settings.RELAY_CARD_MAX_BYTES,
        mcp_server=agent.mcp_server,
    )


def probes_claim(
    *, now: datetime, agent_ids: list[str] | None = None
) -> tuple[list[probes.ProbeTarget], dict[str, health.HealthCount]]:
    """Picks the agents to probe now and moves their next probe time one interval on, in one
    transaction that locks the rows it picks: a sweep running at the same time (two queued
    jobs, two workers) skips them, and the next one finds them not due. Returns their probe
    targets and the health counts they had."""
    with transaction.atomic():
        agents = selectors.agents_to_probe(now=now, agent_ids=agent_ids, claim=True)
        by_interval: dict[int, list[str]] = {}
        for agent in agents:
            interval = agent.probe_interval_seconds or settings.RELAY_HEALTH_INTERVAL_SECONDS
            by_interval.setdefault(interval, []).append(agent.pk)
        for interval, ids in by_interval.items():
            for start in range(0, len(ids), ID_BATCH):
                Agent.objects.filter(pk__in=ids[start : start + ID_BATCH]).update(
                    next_probe_at=now + timedelta(seconds=interval)
                )
    counts = {
        agent.pk: health.HealthCount(agent.health, agent.health_failures, agent.health_successes)
        for agent in agents
    }
    return [probe_target_of(agent) for agent in agents], counts


async def sweep(
    *, agent_ids: list[str] | None = None, concurrency: int | None = None
) -> list[AgentCheck]:
    """Probes every agent that is due (or those named), at most ``concurrency`` at a time,
    each level under the agent's own timeout, so a hanging agent holds one slot for its
    timeout and delays no one else. Stores every result and returns what it found."""
    now = timezone.now()
    targets, counts = await sync_to_async(probes_claim)(now=now, agent_ids=agent_ids)
    if not targets:
        return []
    concurrency = min(concurrency or settings.RELAY_HEALTH_CONCURRENCY, len(targets))
    pending = iter(targets)
    rounds: list[probes.AgentRound] = []
    tls = httpx.create_ssl_context()

    async def worker() -> None:
        # Each worker has its own small client (a connection per level): httpx's pool costs
        # grow with its size on every request, so fifty small pools are several times faster
        # than one pool of a hundred and fifty connections.
        async with outbound.async_client(
            limits=httpx.Limits(max_connections=len(LEVELS), max_keepalive_connections=len(LEVELS)),
            verify=tls,
        ) as client:
            for target in pending:
                rounds.append(await probes.probe_agent(target, client=client))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rounds.sort(key=lambda agent_round: agent_round.target.agent_id)
    return await sync_to_async(health_record_rounds)(rounds=rounds, counts=counts)


def sweep_now(*, agent_ids: list[str] | None = None) -> list[AgentCheck]:
    """``sweep`` for synchronous callers (Celery jobs, management commands)."""
    return asyncio.run(sweep(agent_ids=agent_ids))


def health_record_rounds(
    *, rounds: list[probes.AgentRound], counts: dict[str, health.HealthCount]
) -> list[AgentCheck]:
    """Stores a sweep's rounds: every level result, each agent's new health, an event for
    every state change, and changed cards as new snapshots.

    Each agent's health is a compare-and-set on the counts it had when the sweep picked it,
    written in batches (one prepared statement per batch); an agent another writer moved
    meanwhile is read again and moved from where it is."""
    rules = thresholds()
    moves: dict[str, tuple[health.HealthCount, health.HealthCount]] = {}
    with transaction.atomic():
        for start in range(0, len(rounds), ID_BATCH):
            batch = rounds[start : start + ID_BATCH]
            planned = {}
            for agent_round in batch:
                before = counts.get(agent_round.target.agent_id, health.HealthCount())
                planned[agent_round.target.agent_id] = (
                    before,
                    health.next_health(before, _verdict(agent_round), rules),
                )
            written = _health_compare_and_set(batch, planned)
            for agent_round in batch:
                agent_id = agent_round.target.agent_id
                if agent_id in written:
                    moves[agent_id] = planned[agent_id]
                    continue
                moved = _health_move(agent_round, rules)
                if moved is not None:  # else the agent was deleted meanwhile
                    moves[agent_id] = moved
        checks, events, results = [], [], []
        for agent_round in rounds:
            agent_id = agent_round.target.agent_id
            if agent_id not in moves:
                continue
            before, after = moves[agent_id]
            results += [
                ProbeResult(
                    agent_id=agent_id,
                    level=result.level,
                    ok=result.ok,
                    latency_ms=result.latency_ms,
                    category=result.category,
                    detail=result.detail,
                    checked_at=agent_round.checked_at,
                )
                for result in agent_round.results
            ]
            if after.state != before.state:
                reason = _detail(agent_round) or "every probe passes"
                events.append(
                    HealthEvent(
                        agent_id=agent_id,
                        kind="health",
                        from_state=before.state,
                        to_state=after.state,
                        reason=reason[:500],
                        at=agent_round.checked_at,
                    )
                )
                logger.info(
                    "agent %s is now %s (was %s): %s", agent_id, after.state, before.state, reason
                )
            checks.append(
                AgentCheck(
                    agent_id,
                    agent_round.results,
                    before.state,
                    after.state,
                    agent_round.changed_card is not None,
                )
            )
        ProbeResult.objects.bulk_create(results, batch_size=ID_BATCH)
        HealthEvent.objects.bulk_create(events, batch_size=ID_BATCH)
    for agent_round in rounds:
        if agent_round.changed_card is not None and agent_round.target.agent_id in moves:
            _store_card(agent_round)
    return checks


_SET = (
    "health",
    "health_failures",
    "health_successes",
    "health_checked_at",
    "health_latency_ms",
    "health_detail",
)
_WHERE = ("id", "health", "health_failures", "health_successes")


def _health_compare_and_set(
    batch: list[probes.AgentRound],
    planned: dict[str, tuple[health.HealthCount, health.HealthCount]],
) -> set[str]:
    """Writes each agent's planned health where the row still has the counts it had before,
    in one prepared statement for the batch. Returns the ids written."""
    columns = {
        field.name: connection.ops.quote_name(field.column) for field in Agent._meta.concrete_fields
    }
    table = connection.ops.quote_name(Agent._meta.db_table)
    sql = (
        f"UPDATE {table} SET "
        + ", ".join(f"{columns[name]} = %s" for name in _SET)
        + " WHERE "
        + " AND ".join(f"{columns[name]} = %s" for name in _WHERE)
    )
    params = []
    for agent_round in batch:
        agent_id = agent_round.target.agent_id
        before, after = planned[agent_id]
        params.append(
            (
                after.state,
                after.failures,
                after.successes,
                connection.ops.adapt_datetimefield_value(agent_round.checked_at),
                _deepest_latency(agent_round),
                _detail(agent_round)[:500],
                agent_id,
                before.state,
                before.failures,
                before.successes,
            )
        )
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
        written = cursor.rowcount
    ids = list(planned)
    if written == len(ids):
        return set(ids)
    # Some rows had moved: the ones that hold exactly what this batch wrote were written.
    checked_at_of = {r.target.agent_id: r.checked_at for r in batch}
    return {
        agent_id
        for agent_id, state, failures, successes, checked_at in Agent.objects.filter(
            pk__in=ids
        ).values_list("pk", "health", "health_failures", "health_successes", "health_checked_at")
        if (state, failures, successes)
        == tuple(getattr(planned[agent_id][1], name) for name in ("state", "failures", "successes"))
        and checked_at == checked_at_of[agent_id]
    }


def _verdict(agent_round: probes.AgentRound) -> health.Verdict:
    outcomes = {result.level: result.ok for result in agent_round.results}
    return health.verdict_of(outcomes, deepest=agent_round.target.deepest)


def _deepest_latency(agent_round: probes.AgentRound) -> float:
    return next(r.latency_ms for r in agent_round.results if r.level == agent_round.target.deepest)


def _health_move(
    agent_round: probes.AgentRound, rules: health.Thresholds
) -> tuple[health.HealthCount, health.HealthCount] | None:
    """Moves an agent another writer moved first: reads where it is now, then writes its next
    health with compare-and-set (again, should it move once more). Returns (before, after),
    or None when the agent is gone."""
    target = agent_round.target
    verdict = _verdict(agent_round)
    for _attempt in range(3):
        row = (
            Agent.objects.filter(pk=target.agent_id)
            .values_list("health", "health_failures", "health_successes")
            .first()
        )
        if row is None:
            return None
        before = health.HealthCount(*row)
        after = health.next_health(before, verdict, rules)
        moved = Agent.objects.filter(
            pk=target.agent_id,
            health=before.state,
            health_failures=before.failures,
            health_successes=before.successes,
        ).update(
            health=after.state,
            health_failures=after.failures,
            health_successes=after.successes,
            health_checked_at=agent_round.checked_at,
            health_latency_ms=_deepest_latency(agent_round),
            health_detail=_detail(agent_round)[:500],
        )
        if moved == 1:
            return before, after
    logger.warning("agent %s: health not recorded, other writers kept moving it", target.agent_id)
    return before, before


def _detail(agent_round: probes.AgentRound) -> str:
    return "; ".join(f"{r.level}: {r.detail}" for r in agent_round.results if not r.ok)


def _store_card(agent_round: probes.AgentRound) -> None:
    agent = Agent.objects.filter(pk=agent_round.target.agent_id).first()
    if agent is None:
        return
    if agent_card_store(agent=agent, fetched=agent_round.changed_card):
        logger.info("agent %s published a new card; stored as a new snapshot", agent.pk)


def probe_results_prune(*, now: datetime | None = None) -> int:
    """Deletes probe results older than RELAY_HEALTH_RETENTION_DAYS; returns how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.RELAY_HEALTH_RETENTION_DAYS)
    deleted, _ = ProbeResult.objects.filter(checked_at__lt=cutoff).delete()
    return deleted


# --- the circuit breaker (passive health) ------------------------------------------------------


BREAKER_FIELDS = ("breaker_state", "breaker_failures", "breaker_opened_at", "breaker_version")


def breaker_stored(agent_id: str) -> health.Breaker | None:
    row = Agent.objects.filter(pk=agent_id).values_list(*BREAKER_FIELDS).first()
    return health.Breaker(*row) if row else None


def _breaker_locked(agent_id: str) -> health.Breaker | None:
    """The agent's breaker, its row locked until the transaction ends (PostgreSQL: FOR
    UPDATE; SQLite: the write lock its IMMEDIATE transactions take at the start)."""
    row = Agent.objects.select_for_update().filter(pk=agent_id).values_list(*BREAKER_FIELDS)
    row = row.first()
    return health.Breaker(*row) if row else None


def _breaker_write(
    agent_id: str, before: health.Breaker, after: health.Breaker, *, reason: str, now
) -> health.Breaker:
    """Stores ``after`` over the locked ``before`` (one more version), with an event when the
    state changes."""
    after = replace(after, version=before.version + 1)
    Agent.objects.filter(pk=agent_id).update(
        breaker_state=after.state,
        breaker_failures=after.failures,
        breaker_opened_at=after.since,
        breaker_version=after.version,
    )
    if after.state != before.state:
        HealthEvent.objects.create(
            agent_id=agent_id,
            kind="breaker",
            from_state=before.state,
            to_state=after.state,
            reason=reason[:500],
            at=now,
        )
        logger.info(
            "agent %s: circuit breaker %s -> %s (%s)", agent_id, before.state, after.state, reason
        )
    return after


def breaker_record(
    *, agent_id: str, ok: bool, failed_call: probes.LevelResult | None = None
) -> health.Breaker | None:
    """Counts one call's outcome on the agent's breaker, on top of whatever other calls and
    processes counted before it: the row is locked, moved as ``health.breaker_after_call``
    says, and a failed call stored as a ``call`` result. Concurrent outcomes queue on the
    lock, so none is lost. Returns the breaker as stored after (None: the agent is gone)."""
    now = timezone.now()
    with transaction.atomic():
        before = _breaker_locked(agent_id)
        if before is None:
            return None
        after = health.breaker_after_call(before, ok=ok, now=now, settings=breaker_settings())
        if failed_call is not None:
            ProbeResult.objects.create(
                agent_id=agent_id,
                level=ProbeResult.Level.CALL,
                ok=False,
                latency_ms=failed_call.latency_ms,
                category=failed_call.category,
                detail=failed_call.detail[:500],
                checked_at=now,
            )
        if after == before:
            return before
        reason = (
            "a call succeeded"
            if ok
            else f"{after.failures} calls failed in a row, the last: "
            f"{failed_call.detail if failed_call else ''}"
        )
        return _breaker_write(agent_id, before, after, reason=reason, now=now)


def breaker_trial_take(*, agent_id: str) -> tuple[bool, health.Breaker | None]:
    """Whether a call may go through the agent's breaker as stored now, and the breaker after:
    a closed one lets it; an open one past its cool-down lets this one call through as its
    trial and becomes half-open (the lock makes this call the only one to take it)."""
    now = timezone.now()
    with transaction.atomic():
        before = _breaker_locked(agent_id)
        if before is None:
            return False, None
        admission = health.breaker_admit(before, now=now, settings=breaker_settings())
        if not admission.allowed or admission.breaker == before:
            return admission.allowed, before
        reason = "cool-down over: one trial call goes through"
        return True, _breaker_write(agent_id, before, admission.breaker, reason=reason, now=now)
