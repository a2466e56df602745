"""The gateway benchmark's figures and verdicts: the names of its targets, the targets each
figure is held to, the figures of one target at one level (plain values), and the verdicts on
them, judged per level from that level's figures alone, never pooled. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LEVELS = (1, 8, 32, 64)
STREAM_CHUNKS = 50
PACE_MS = 2
REDIS_ROUND_TRIPS_PER_CALL = 1
"""A SendMessage's API-key lookup and rate-limit count: one Lua script
(``ratelimit.cached_and_counted``)."""
POSTGRES_ROUND_TRIPS_PER_CALL = 2
"""A SendMessage's task INSERT, before the agent is called, and its end, recorded before the
answer: one statement each (``tasks_app.services``)."""

DIRECT, PROXY, EMBEDDED, PRODUCTION = "direct", "proxy", "embedded", "production"
GRPC = "grpc"
"""The production relay's gRPC server (``manage.py run_grpc``, same database and Redis): the
same SendMessage as A2A 1.0 over gRPC, to the echo agent it calls over JSON-RPC, for
information (no verdict)."""
GRPC_AGENT = "grpc-agent"
"""The echo agent served over gRPC by a2a-sdk (its own ``grpc.aio`` server), called directly:
the baseline of the relay's gRPC rows."""
GRPC_RELAY = "grpc-relay"
"""The production relay's gRPC server in front of ``GRPC_AGENT`` (tenant ``agents/echo-grpc``,
which the relay calls over gRPC): the same workload as ``GRPC_AGENT``, through the relay."""
GRPC_ROWS = (GRPC, GRPC_RELAY)
AIOHTTP_PROXY = "aio-proxy"
"""The same bare proxy with aiohttp as its client, as the relay's calls to agents have: the
relay's figures against it are printed for information (the verdicts stay against PROXY)."""
KEYED = "keyed"
"""The production relay, each call with an Idempotency-Key of its own (a fresh UUID): the cost
of a key per call, judged against the production row at KEYED_LEVEL."""
KEYED_CPU_RATIO_MAX = 1.05
KEYED_LEVEL = 8
TWIN = "twin"
"""A second production relay on the same database and Redis, with production's settings, that
serves this row only (with ``--tracing`` or ``--usage``): the baseline of `traced` and
`usage-off`, started and called as they are, so that the one setting is all they differ in. The
production relay is not: it registered the agents (and so loaded the embedding model) and also
serves `keyed`, `bearer` and `mcp`."""
TWIN_AGAIN = "twin-again"
"""A second twin, started and called as the twin is (with ``--tracing`` or ``--usage``): the
A/A pair. Two processes of the same code and settings differ by what a run cannot hold still
(where their memory lands, which core they run on, what else runs then); their per-round
ratio is that noise floor, printed next to the twin verdicts and judged: a floor above
TWIN_CPU_RATIO_MAX means those verdicts cannot tell a cost of that size from noise."""
TWIN_CPU_RATIO_MAX = 1.05
"""The A/A pair's ratio (CPU per request over the level's rounds), either way round."""
TRACED = "traced"
"""A second production relay on the same database and Redis with OpenTelemetry on (``--tracing``:
every span exported over OTLP/HTTP to a local sink): the cost of tracing, judged against the
twin row at TRACED_LEVEL."""
TRACED_CPU_RATIO_MAX = 1.05
TRACED_LEVEL = 8
BEARER = "bearer"
"""The production relay again, each call with a bearer JWT (RS256) of an issuer it trusts,
whose keys a local JWKS server serves (fetched once, then cached) instead of an API key: the
cost of the token check, judged against the production row at BEARER_LEVEL (printed at every
level)."""
BEARER_CPU_RATIO_MAX = 1.05
BEARER_LEVEL = 8
USAGE_OFF = "usage-off"
"""A second production relay on the same database and Redis with RELAY_USAGE_RECORDS off
(``--usage``): the twin row (usage records on, as shipped) is judged against it at
USAGE_LEVEL, the cost of a usage record per call."""
USAGE_CPU_RATIO_MAX = 1.05
USAGE_LEVEL = 8
EMBEDDED_TWIN = "emb-twin"
"""A second embedded relay on the same SQLite database, with the embedded profile's settings,
that serves this row only (with ``--usage``): the baseline of `emb-usage-off`, as `twin` is of
`usage-off`. On SQLite a usage record's values ride in the ORM's compare-and-set UPDATE
of the task, on PostgreSQL in the event's one statement: each profile's cost is judged."""
EMBEDDED_USAGE_OFF = "emb-usage-off"
"""A second embedded relay on the same SQLite database with RELAY_USAGE_RECORDS off
(``--usage``): `emb-twin` is judged against it at USAGE_LEVEL."""
MCP = "mcp"
"""The production relay's MCP server (``/mcp``, revision 2026-07-28, the official client's
request without a progress token): a ``tools/call`` of the echo agent's tool, judged per level
at MCP_LEVELS against the production row, the same echo called over A2A through the same
relay in the same rounds."""
MCP_CPU_RATIO_MAX = 1.5
MCP_LEVELS = (8, 32)
BASELINES = (DIRECT, PROXY)
PROFILES = (EMBEDDED, PRODUCTION)
FAST, PACED = "fast", "paced"

# The targets: each is printed next to its figure.
CPU_RATIO_MAX = 2.5
CPU_LEVELS = (8, 32)
ONE_AT_A_TIME_RATIO_MAX = 3.0
"""At one call at a time, CPU per request and added p50 against the proxy's: reported, and
held to this looser bound (the targets are judged at 8 and 32)."""
ADDED_P50_LEVEL = 1
THROUGHPUT_RATIO_MIN = 0.60
THROUGHPUT_LEVEL = 8
ERROR_FREE_LEVELS = (32, 64)
FAST_STREAM_RATIO_MAX = {EMBEDDED: 1.5, PRODUCTION: 2.0}
PACED_STREAM_RATIO_MAX = 1.1
PRODUCTION_CPU_RATIO_MAX = 1.3
REDIS_OPENED_MAX = 0


# --- figures: plain values, what the verdicts and the report read ----------------------------


@dataclass(frozen=True)
class LoadFigures:
    """One target at one level. Milliseconds; CPU is per request."""

    requests: int
    errors: int
    per_second: float
    p50_ms: float
    p99_ms: float
    added_p50_ms: float
    added_p99_ms: float
    cpu_ms: float
    agent_cpu_ms: float
    backing_cpu_ms: float | None = None
    redis_opened: int | None = None
    redis_clients: dict[str, int] | None = None
    redis_round_trip_ms: float | None = None
    """Production only: a median round trip to its Redis, measured after the level."""
    postgres_round_trip_ms: float | None = None
    cut_short: bool = False
    first_error: str = ""
    round_cpu_ms: tuple[float, ...] = ()
    """CPU per request of each round's turn, in round order: a round takes every target in
    turn, so the same index of two targets is the same stretch of the run."""


@dataclass(frozen=True)
class StreamFigures:
    """One target, one kind of stream: time to the last event (p50) and CPU per stream."""

    streams: int
    errors: int
    fewest_events: int
    most_events: int
    last_event_ms: float
    cpu_ms: float
    first_error: str = ""


def services_ms(figures: dict[str, LoadFigures]) -> float | None:
    """The time a production call spends on Redis and PostgreSQL (a bare proxy spends none):
    its round trips, at those measured after the level, and the services' CPU per call; None
    without those figures."""
    production = figures.get(PRODUCTION)
    if production is None or None in (
        production.redis_round_trip_ms,
        production.postgres_round_trip_ms,
        production.backing_cpu_ms,
    ):
        return None
    return (
        REDIS_ROUND_TRIPS_PER_CALL * production.redis_round_trip_ms
        + POSTGRES_ROUND_TRIPS_PER_CALL * production.postgres_round_trip_ms
        + production.backing_cpu_ms
    )


def ratio(value: float, baseline: float) -> float:
    """value / baseline; NaN when the baseline is not a positive number (no ratio to judge)."""
    if not (baseline > 0 and math.isfinite(baseline)) or not math.isfinite(value):
        return math.nan
    return value / baseline


def round_ratios(mine: LoadFigures, base: LoadFigures) -> list[float]:
    """``mine`` / ``base`` CPU per request in each round (the two turns side by side in time)."""
    return [ratio(a, b) for a, b in zip(mine.round_cpu_ms, base.round_cpu_ms, strict=True)]


def spread(mine: LoadFigures, base: LoadFigures) -> str:
    """``mine`` / ``base`` CPU per request over all rounds, with the range of the per-round
    ratios: how far one round alone could have strayed."""
    ratios = [value for value in round_ratios(mine, base) if math.isfinite(value)]
    pooled = ratio(mine.cpu_ms, base.cpu_ms)
    if not ratios:
        return f"{pooled:.3f}x"
    return f"{pooled:.3f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)"


def grpc_versus_agent(figures: dict[str, LoadFigures]) -> dict[str, dict[str, float]]:
    """The relay's gRPC rows against the gRPC agent called directly, at one level: throughput,
    p50, p99 and CPU per request as ratios, and the latency the relay adds (ms). Empty when
    the level has no gRPC baseline."""
    base = figures.get(GRPC_AGENT)
    if base is None:
        return {}
    return {
        name: {
            "throughput_ratio": ratio(mine.per_second, base.per_second),
            "p50_ratio": ratio(mine.p50_ms, base.p50_ms),
            "p99_ratio": ratio(mine.p99_ms, base.p99_ms),
            "added_p50_ms": mine.p50_ms - base.p50_ms,
            "added_p99_ms": mine.p99_ms - base.p99_ms,
            "cpu_ratio": ratio(mine.cpu_ms, base.cpu_ms),
        }
        for name, mine in figures.items()
        if name in GRPC_ROWS
    }


def per_event_overhead_ms(streams: dict[str, StreamFigures], target: str) -> float:
    """(relay's time to last event - the proxy's) / STREAM_CHUNKS."""
    return (streams[target].last_event_ms - streams[PROXY].last_event_ms) / STREAM_CHUNKS


# --- verdicts: pure, per level, never pooled -------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    level: int | None
    """The concurrency level judged; None for a stream."""
    target: str
    label: str
    figure: str
    passed: bool


FLOAT_SLACK = 1e-9
"""Relative: CPU comes in whole /proc ticks, so a ratio can tie its limit exactly, and the
float arithmetic on the way must not turn 2.5 into 2.500000000000001 and a tie into a miss."""


def at_most(value: float, limit: float) -> bool:
    """NaN never passes: a figure that could not be measured is a miss, not a pass."""
    return math.isfinite(value) and value <= limit * (1 + FLOAT_SLACK)


def at_least(value: float, limit: float) -> bool:
    return math.isfinite(value) and value >= limit * (1 - FLOAT_SLACK)


def judge_level(level: int, figures: dict[str, LoadFigures]) -> list[Verdict]:
    """The verdicts of one concurrency level, from that level's figures alone."""
    proxy = figures[PROXY]
    verdicts = []

    def add(target: str, label: str, figure: str, passed: bool) -> None:
        verdicts.append(Verdict(level, target, label, figure, passed))

    for name in BASELINES:
        # The ratios mean nothing when a baseline failed: the bench itself is broken.
        errors = figures[name].errors
        add(name, "zero errors (a sound baseline)", f"{errors} errors", errors == 0)
    for name in PROFILES:
        if name not in figures:
            continue
        mine = figures[name]
        if level in CPU_LEVELS or level == ADDED_P50_LEVEL:
            limit = CPU_RATIO_MAX if level in CPU_LEVELS else ONE_AT_A_TIME_RATIO_MAX
            cpu = ratio(mine.cpu_ms, proxy.cpu_ms)
            add(
                name,
                f"CPU per request <= {limit}x proxy's",
                f"{cpu:.2f}x ({mine.cpu_ms:.2f} vs {proxy.cpu_ms:.2f} ms)",
                at_most(cpu, limit),
            )
        if level == ADDED_P50_LEVEL:
            added = ratio(mine.added_p50_ms, proxy.added_p50_ms)
            add(
                name,
                f"added p50 <= {ONE_AT_A_TIME_RATIO_MAX}x proxy's",
                f"{added:.2f}x ({mine.added_p50_ms:.2f} vs {proxy.added_p50_ms:.2f} ms)",
                at_most(added, ONE_AT_A_TIME_RATIO_MAX),
            )
        if level == THROUGHPUT_LEVEL:
            share = ratio(mine.per_second, proxy.per_second)
            add(
                name,
                f"throughput >= {THROUGHPUT_RATIO_MIN:.0%} of proxy's",
                f"{share:.0%} ({mine.per_second:.0f} vs {proxy.per_second:.0f}/s)",
                at_least(share, THROUGHPUT_RATIO_MIN),
            )
        if level in ERROR_FREE_LEVELS:
            add(name, "zero errors", f"{mine.errors} errors", mine.errors == 0)
    verdicts += judge_pairs(level, figures)
    if PRODUCTION in figures and EMBEDDED in figures:
        production, embedded = figures[PRODUCTION], figures[EMBEDDED]
        cpu = ratio(production.cpu_ms, embedded.cpu_ms)
        add(
            PRODUCTION,
            f"CPU per request <= {PRODUCTION_CPU_RATIO_MAX}x embedded's",
            f"{cpu:.2f}x ({production.cpu_ms:.2f} vs {embedded.cpu_ms:.2f} ms)",
            at_most(cpu, PRODUCTION_CPU_RATIO_MAX),
        )
        opened = production.redis_opened
        add(
            PRODUCTION,
            "no new Redis connection under steady load",
            f"{opened} opened in {production.requests} calls",
            opened is not None and opened <= REDIS_OPENED_MAX,
        )
    return verdicts


PAIRS = (
    (
        KEYED,
        PRODUCTION,
        (KEYED_LEVEL,),
        KEYED_CPU_RATIO_MAX,
        "CPU per request <= {limit}x production's (a key per call)",
    ),
    (
        BEARER,
        PRODUCTION,
        (BEARER_LEVEL,),
        BEARER_CPU_RATIO_MAX,
        "CPU per request <= {limit}x production's (a JWT, not an API key)",
    ),
    (
        MCP,
        PRODUCTION,
        MCP_LEVELS,
        MCP_CPU_RATIO_MAX,
        "MCP tools/call CPU per request <= {limit}x production's A2A call",
    ),
    (
        TRACED,
        TWIN,
        (TRACED_LEVEL,),
        TRACED_CPU_RATIO_MAX,
        "CPU per request <= {limit}x twin's (tracing on)",
    ),
    (
        TWIN,
        USAGE_OFF,
        (USAGE_LEVEL,),
        USAGE_CPU_RATIO_MAX,
        "usage: CPU per request <= {limit}x usage-off's (records on vs off)",
    ),
    (
        EMBEDDED_TWIN,
        EMBEDDED_USAGE_OFF,
        (USAGE_LEVEL,),
        USAGE_CPU_RATIO_MAX,
        "usage on SQLite: CPU per request <= {limit}x emb-usage-off's (records on vs off)",
    ),
)
"""Rows judged on CPU per request over all the level's rounds against another row, each at its
levels: (row judged, baseline, levels, ratio limit, the verdict's label)."""


def judge_pairs(level: int, figures: dict[str, LoadFigures]) -> list[Verdict]:
    """The rows of PAIRS measured at this level, each with the range of its per-round ratios.
    A row judged against a twin (a relay process of its own) has the A/A pair's ratio printed
    next to it, and the A/A pair is itself judged (``TWIN_AGAIN``)."""
    verdicts = []
    twin, again = figures.get(TWIN), figures.get(TWIN_AGAIN)
    floor = f"; A/A {TWIN_AGAIN}/{TWIN}: {spread(again, twin)}" if twin and again else ""
    twin_judged = False
    for row, baseline, at_levels, limit, what in PAIRS:
        if row in figures and baseline in figures and level in at_levels:
            mine, base = figures[row], figures[baseline]
            by_twin = TWIN in (row, baseline) or EMBEDDED_TWIN in (row, baseline)
            twin_judged = twin_judged or by_twin
            verdicts.append(
                Verdict(
                    level,
                    row,
                    what.format(limit=limit),
                    f"{spread(mine, base)}, {mine.cpu_ms:.2f} vs {base.cpu_ms:.2f} ms"
                    + (floor if by_twin else ""),
                    at_most(ratio(mine.cpu_ms, base.cpu_ms), limit) and mine.errors == 0,
                )
            )
    if twin_judged and twin and again:
        verdicts.append(
            Verdict(
                level,
                TWIN_AGAIN,
                f"A/A: two twins within {TWIN_CPU_RATIO_MAX}x of each other (the noise floor "
                "under the twin verdicts)",
                spread(again, twin),
                at_most(ratio(again.cpu_ms, twin.cpu_ms), TWIN_CPU_RATIO_MAX)
                and at_most(ratio(twin.cpu_ms, again.cpu_ms), TWIN_CPU_RATIO_MAX)
                and again.errors == 0,
            )
        )
    return verdicts


def judge_streams(streams: dict[str, dict[str, StreamFigures]]) -> list[Verdict]:
    """The stream verdicts: each profile's time to last event against the proxy's."""
    verdicts = []
    for kind, limits in (
        (FAST, FAST_STREAM_RATIO_MAX),
        (PACED, dict.fromkeys(PROFILES, PACED_STREAM_RATIO_MAX)),
    ):
        if kind not in streams:
            continue
        by_target = streams[kind]
        proxy = by_target[PROXY]
        for name in PROFILES:
            if name not in by_target:
                continue
            mine = by_target[name]
            share = ratio(mine.last_event_ms, proxy.last_event_ms)
            label = "fast 50-chunk stream" if kind == FAST else f"{PACE_MS} ms-paced stream"
            verdicts.append(
                Verdict(
                    None,
                    name,
                    f"{label}, last event <= {limits[name]}x proxy's",
                    f"{share:.2f}x ({mine.last_event_ms:.1f} vs {proxy.last_event_ms:.1f} ms)",
                    at_most(share, limits[name]) and mine.errors == 0,
                )
            )
    return verdicts


def judge(
    levels: dict[int, dict[str, LoadFigures]], streams: dict[str, dict[str, StreamFigures]]
) -> list[Verdict]:
    """Every verdict of a run: each level on its own figures, then the streams."""
    verdicts = []
    for level, figures in levels.items():
        verdicts += judge_level(level, figures)
    return verdicts + judge_streams(streams)


def not_judged(levels: list[int], *, streams: int = 1) -> list[str]:
    """Targets that need a level (or streams) this run did not measure: said, so silence is
    not a pass."""
    needed = {
        "CPU per request against the proxy": CPU_LEVELS,
        "added p50": (ADDED_P50_LEVEL,),
        "throughput": (THROUGHPUT_LEVEL,),
        "zero errors": ERROR_FREE_LEVELS,
        "MCP tools/call CPU against the A2A call": MCP_LEVELS,
    }
    missing = [
        f"{what} at c={level}"
        for what, wanted in needed.items()
        for level in wanted
        if level not in levels
    ]
    if streams <= 0:
        missing += ["fast 50-chunk streams", f"{PACE_MS} ms-paced streams"]
    return missing


def exit_status(verdicts: list[Verdict]) -> int:
    """1 when any verdict misses (or there is none to pass), else 0."""
    return 0 if verdicts and all(verdict.passed for verdict in verdicts) else 1
