"""The gateway benchmark's 503 storm: an agent that answers HTTP 503 to every message (nothing
started on it), with the echo agent as its one alternate, called through the production relay.
Per level (``STORM_LEVELS``; a fresh storm agent each, so each starts with a closed breaker):
the calls, how many succeeded on the alternate (the echo in the answer, and the task stored as
served by the alternate with ``relaySelection.failoverFrom`` naming the storm agent), the time
from the first call to the breaker opening against the breaker window
(``RELAY_BREAKER_COOLDOWN_SECONDS``), and the relay's CPU per call against the bare proxy's at
that level in the same run. Judged at ``STORM_JUDGED_LEVELS``: every call succeeds on the
alternate, and the breaker opens within one window.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import httpx

from bench.common import Process, cpu_spent
from bench.gateway_load import IDLE_SECONDS, REQUEST_TIMEOUT, Target, request_body, send_many
from bench.gateway_verdicts import PROXY, LoadFigures, Verdict, ratio

STORM = "storm"
STORM_LEVELS = (1, 8, 32)
STORM_JUDGED_LEVELS = (8, 32)
STORM_WINDOW_SECONDS = 30
"""The breaker window: the production relay's RELAY_BREAKER_COOLDOWN_SECONDS (set to this)."""
STORM_SECONDS = 60.0
"""A storm level stops early (and says so) when its calls take longer than this."""
ALTERNATE = "echo"


def storm_agent_id(level: int) -> str:
    return f"storm-c{level}"


def serve_storm_agent(port: int) -> None:
    """The storm agents, one per level under ``/storm-cN/``: a2a-sdk cards (so the relay can
    register them) and HTTP 503 for every message."""
    import uvicorn
    from a2a.server.routes import create_agent_card_routes
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from routing.demo.agents import CARD_PATH, ECHO, AgentSpec, build_agent_card

    async def overloaded(request):
        await request.body()
        return Response("overloaded", status_code=503)

    routes = []
    for level in STORM_LEVELS:
        slug = storm_agent_id(level)
        spec = AgentSpec(
            slug=slug,
            name=f"Storm c={level}",
            description="Answers 503 to every message.",
            skills=ECHO.skills,
            make_executor=ECHO.make_executor,
        )
        card = build_agent_card(spec, base_url=f"http://127.0.0.1:{port}/{slug}/")
        routes += create_agent_card_routes(card, card_url=f"/{slug}{CARD_PATH}")
        routes.append(Route(f"/{slug}/{{rest:path}}", overloaded, methods=["POST"]))
        routes.append(Route(f"/{slug}/", overloaded, methods=["POST"]))
    app = Starlette(routes=routes)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


ALTERNATES_SCRIPT = """
from registry.models import AgentAlternate
for agent_id in {ids!r}:
    AgentAlternate.objects.create(agent_id=agent_id, alternate_id={alternate!r}, order=0)
"""
"""Run in ``manage.py shell -c`` on the production database: the alternates are set in the
admin, not the registry API."""


@dataclass(frozen=True)
class StormFigures:
    calls: int
    answered: int
    """Calls answered with the echo (only the alternate can echo)."""
    on_alternate: int
    """Tasks stored as completed by the alternate, failed over from the storm agent."""
    opened_after_s: float
    """Seconds from the first call to the breaker opening (NaN: it never opened)."""
    window_s: float
    cpu_ms: float
    """The production relay's CPU per call."""
    proxy_cpu_ms: float
    """The bare proxy's CPU per request at the same level in this run (NaN: not measured)."""
    cut_short: bool = False
    first_error: str = ""


async def measure_storm(
    relay: Process, url: str, headers: dict[str, str], postgres, *, level: int, calls: int
) -> StormFigures:
    """``calls`` sends to the level's storm agent at ``level`` concurrency, with the figures
    read from the production database (``postgres``: a psycopg connection to it)."""
    agent_id = storm_agent_id(level)
    target = Target(STORM, f"{url}/a2a/agents/{agent_id}/", relay, headers)
    limits = httpx.Limits(
        max_connections=level, max_keepalive_connections=level, keepalive_expiry=IDLE_SECONDS
    )
    started_at = datetime.now(UTC)
    before = relay.cpu_snapshot()
    async with httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT) as client:
        latencies, _errors, first_error, cut_short = await send_many(
            client,
            target,
            request_body("1.0", streaming=False),
            count=calls,
            concurrency=level,
            deadline=time.monotonic() + STORM_SECONDS,
        )
    spent = cpu_spent(before, relay.cpu_snapshot())
    opened = postgres.execute(
        "SELECT min(at) FROM routing_healthevent WHERE agent_id = %s AND kind = 'breaker' "
        "AND to_state = 'open'",
        [agent_id],
    ).fetchone()[0]
    on_alternate = postgres.execute(
        "SELECT count(*) FROM tasks_app_task WHERE target_id = %s AND agent_id = %s "
        "AND state = 'completed' AND selection ->> 'failoverFrom' = %s",
        [agent_id, ALTERNATE, agent_id],
    ).fetchone()[0]
    return StormFigures(
        calls=calls,
        answered=len(latencies),
        on_alternate=on_alternate,
        opened_after_s=(opened - started_at).total_seconds() if opened else math.nan,
        window_s=float(STORM_WINDOW_SECONDS),
        cpu_ms=spent * 1000 / calls if calls else math.nan,
        proxy_cpu_ms=math.nan,
        cut_short=cut_short,
        first_error=first_error,
    )


def with_proxy(storm: StormFigures, figures: dict[str, LoadFigures] | None) -> StormFigures:
    """The storm's figures with the proxy's CPU per request of the same level, when measured."""
    proxy = (figures or {}).get(PROXY)
    return replace(storm, proxy_cpu_ms=proxy.cpu_ms if proxy else math.nan)


def succeeded(storm: StormFigures) -> bool:
    """Every call answered by the alternate and stored as failed over to it."""
    return storm.calls > 0 and storm.answered == storm.on_alternate == storm.calls


def opened_in_window(storm: StormFigures) -> bool:
    return math.isfinite(storm.opened_after_s) and storm.opened_after_s <= storm.window_s


def print_storm(level: int, storm: StormFigures) -> None:
    share = storm.on_alternate / storm.calls if storm.calls else math.nan
    cpu = ratio(storm.cpu_ms, storm.proxy_cpu_ms)
    print(
        f"  503 storm c={level}: {storm.calls} calls, {storm.on_alternate} succeeded on the "
        f"alternate ({share:.0%}; {storm.answered} answered with the echo); breaker opened "
        f"{storm.opened_after_s:.2f} s after the first call (window {storm.window_s:.0f} s); "
        f"CPU/call {storm.cpu_ms:.2f} ms, {cpu:.2f}x proxy's ({storm.proxy_cpu_ms:.2f} ms)"
        + ("  (cut short at the time limit)" if storm.cut_short else "")
    )
    if storm.first_error:
        print(f"             first error: {storm.first_error}")


def judge_storms(storms: dict[int, StormFigures]) -> list[Verdict]:
    """Per judged level: 100% of the calls succeed on the alternate, and the breaker opens
    within one window of the first call."""
    verdicts = []
    for level, storm in storms.items():
        if level not in STORM_JUDGED_LEVELS:
            continue
        verdicts.append(
            Verdict(
                level,
                STORM,
                "503 storm: 100% of calls succeed on the alternate",
                f"{storm.on_alternate} of {storm.calls} ({storm.answered} echoed)",
                succeeded(storm),
            )
        )
        verdicts.append(
            Verdict(
                level,
                STORM,
                "503 storm: the breaker opens within one window",
                f"{storm.opened_after_s:.2f} s (window {storm.window_s:.0f} s)",
                opened_in_window(storm),
            )
        )
    return verdicts
