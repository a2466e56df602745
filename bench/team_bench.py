"""Team benchmark: what routing a conversation through a team costs next to calling its members
directly, measured in the same run.

Starts two scripted routing agents, "a" and "b" (a2a-sdk apps on uvicorn, each in a process of
its own), and a relay (daphne, embedded profile, a temporary RELAY_VAR_DIR) with both agents
registered and a team "bench" (members a and b, default a). The agents count down: a message
"left=N" is answered "left=N-1", naming the other agent as the recipient, or "user" once N-1
is 0. So a team conversation started with "left=k" is exactly k member calls, alternating
a, b, a, ...

For each k in 1, 3, 10 it times, one request at a time (keep-alive, after a warm-up), in
rounds of one of each (so the machine's slower and faster spells weigh on all alike):

- team:     one blocking ``SendMessage`` to ``/a2a/teams/bench/`` with "left=k" (k hops);
- direct k: the same k calls (a, b, a, ... with "left=k", "left=k-1", ...) made one after the
            other straight to the agents, as blocking ``SendMessage``: that is how a team
            called blocking calls its members (as an agent called blocking is called);
- relay 1 and direct 1: a single call to agent a through the relay (``/a2a/agents/a/``) and
            directly: their p50 difference is the gateway's overhead for one hop.

- workflow: one blocking ``SendMessage`` to ``/a2a/workflows/bench-flow-k/``, a workflow of k
            agent steps (a, b, a, ...), each step's input the step before's answer: the same
            k calls, each a child task of the workflow task.

It prints per k: team p50, direct k p50, the team's overhead (team - direct k), the hop
overhead, the p50 time from a team ``SendStreamingMessage`` to its first event (the team task,
streamed before any member answers), and whether the team's overhead is at most k * hop overhead + CONSTANT_MS. The
constant stands for what a team call does once, whatever k: opening the team task, reading its
members' health, recording its answer. Then a workflow row per k: the workflow's p50, its
overhead per step ((workflow - direct k) / k) next to the team's per hop ((team - direct
k) / k), and whether a step costs at most a team hop (WORKFLOW_SLACK_MS of noise allowed).

    python bench/team_bench.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port, process, wait_until_answers  # noqa: E402  (path above)

HOPS = (1, 3, 10)
CONSTANT_MS = 10.0
"""Allowed team overhead beyond k gateway hops (see the module docstring)."""
WORKFLOW_SLACK_MS = 1.0
"""Allowed noise when comparing a workflow step's overhead with a team hop's."""
WARMUP = 5
REQUEST_TIMEOUT = 30.0
TIME_BUDGET_SECONDS = 150.0
"""The measuring stops early (and says so) past this; the whole run stays under 3 minutes."""


# --- the agents, each run as `team_bench.py --serve SLUG PORT OTHER` ------------------------


def countdown_answer(other: str):
    """Answers "left=N" with "left=N-1" for `other`, or for "user" when nothing is left.
    Without routing metadata (a direct call): the same text, no metadata."""
    from routing.demo.agents import Answer

    def answer(text: str, routing):
        match = re.search(r"left=(\d+)", text)
        left = int(match.group(1)) - 1 if match else 0
        if routing is None:
            return Answer(f"left={left}")
        return Answer(
            f"left={left}", {"recipient": other if left > 0 else "user", "reason": f"{left} left"}
        )

    return answer


def serve_agent(slug: str, port: int, other: str) -> None:
    """Served by uvicorn on a port it binds itself (see bench/gateway_bench.py: a socket bound
    elsewhere keeps Nagle on and stalls keep-alive answers by about 40 ms)."""
    import uvicorn

    from routing.demo.agents import AgentSpec, AnsweringExecutor, Skill, build_agent_app

    spec = AgentSpec(
        slug=slug,
        name=f"Countdown {slug}",
        description="Counts down and passes on.",
        skills=(
            Skill(id="countdown", name="Countdown", description="Counts down.", tags=("bench",)),
        ),
        make_executor=lambda: AnsweringExecutor(countdown_answer(other)),
        client_routing=True,
    )
    app = build_agent_app(spec, base_url=f"http://127.0.0.1:{port}")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --- measuring -------------------------------------------------------------------------------


def rpc(text: str, method: str = "SendMessage") -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {
                "message": {
                    "messageId": f"bench-{time.monotonic_ns()}",
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }
            },
        }
    ).encode()


async def call(client: httpx.AsyncClient, url: str, text: str, headers: dict) -> dict:
    response = await client.post(url, content=rpc(text), headers=headers)
    response.raise_for_status()
    body = response.json()
    if "result" not in body:
        raise RuntimeError(f"{url} answered {body}")
    return body["result"]


async def timed_rounds(actions: dict[str, Any], runs: int, deadline: float) -> dict[str, float]:
    """The p50 of each action, in ms, measured in rounds (each action once per round, in
    turn), so that a slower or faster spell of the machine weighs on all of them alike."""
    for _ in range(WARMUP):
        for action in actions.values():
            await action()
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for done in range(runs):
        if time.monotonic() > deadline:
            print(f"  (time budget reached after {done} rounds)")
            break
        for name, action in actions.items():
            started = time.perf_counter()
            await action()
            samples[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


async def measure(relay_url: str, key: str, agents: dict[str, str], runs: int) -> None:
    deadline = time.monotonic() + TIME_BUDGET_SECONDS
    relay_headers = {
        "Authorization": f"Bearer {key}",
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
    }
    direct_headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as client:

        async def direct_one():
            await call(client, agents["a"], "left=1", direct_headers)

        async def relay_one():
            await call(client, f"{relay_url}/a2a/agents/a/", "left=1", relay_headers)

        print(
            f"{'k':>3} {'team p50':>10} {'direct k p50':>13} {'team overhead':>14} "
            f"{'hop overhead':>13} {'k*hop+' + str(int(CONSTANT_MS)):>10}  within? "
            f"{'first event':>12}"
        )
        workflow_rows = []
        for hops in HOPS:

            async def workflow(hops=hops):
                answer = await call(
                    client,
                    f"{relay_url}/a2a/workflows/bench-flow-{hops}/",
                    f"left={hops}",
                    relay_headers,
                )
                if answer["task"]["status"]["state"] != "TASK_STATE_COMPLETED":
                    raise RuntimeError(f"the workflow task ended {answer['task']['status']}")

            async def team(hops=hops):
                answer = await call(
                    client, f"{relay_url}/a2a/teams/bench/", f"left={hops}", relay_headers
                )
                # A single exchange answered with a Message is answered with that Message.
                if "message" in answer and hops == 1:
                    return
                if answer["task"]["status"]["state"] != "TASK_STATE_COMPLETED":
                    raise RuntimeError(f"the team task ended {answer['task']['status']}")

            async def direct_k(hops=hops):
                for left in range(hops, 0, -1):
                    agent = agents["a"] if (hops - left) % 2 == 0 else agents["b"]
                    await call(client, agent, f"left={left}", direct_headers)

            p50 = await timed_rounds(
                {
                    "team": team,
                    "workflow": workflow,
                    "direct k": direct_k,
                    "relay 1": relay_one,
                    "direct 1": direct_one,
                },
                runs,
                deadline,
            )
            overhead = p50["team"] - p50["direct k"]
            hop_overhead = p50["relay 1"] - p50["direct 1"]
            bound = hops * hop_overhead + CONSTANT_MS
            first = await first_event_p50(client, relay_url, hops, relay_headers, runs, deadline)
            print(
                f"{hops:>3} {p50['team']:>8.2f} ms {p50['direct k']:>10.2f} ms "
                f"{overhead:>11.2f} ms {hop_overhead:>10.2f} ms {bound:>7.2f} ms  "
                f"{'yes' if overhead <= bound else 'NO ':<7} {first:>9.2f} ms"
            )
            per_step = (p50["workflow"] - p50["direct k"]) / hops
            workflow_rows.append((hops, p50["workflow"], per_step, overhead / hops))
        print(
            f"\n{'k':>3} {'workflow p50':>13} {'per step':>10} {'team per hop':>13}  step <= hop?"
        )
        for hops, p50_workflow, per_step, per_hop in workflow_rows:
            within = per_step <= per_hop + WORKFLOW_SLACK_MS
            print(
                f"{hops:>3} {p50_workflow:>10.2f} ms {per_step:>7.2f} ms {per_hop:>10.2f} ms  "
                f"{'yes' if within else 'NO'}"
            )


async def first_event_p50(
    client: httpx.AsyncClient, relay_url: str, hops: int, headers: dict, runs: int, deadline: float
) -> float:
    """The p50, in ms, of the time from a team ``SendStreamingMessage`` ("left=k") to its
    first event (the team task), each stream then read to its end."""
    samples = []
    body_headers = {**headers, "Accept": "text/event-stream"}
    for done in range(max(runs // 2, 5)):
        if done >= 5 and time.monotonic() > deadline:
            break
        started = time.perf_counter()
        first = None
        async with client.stream(
            "POST",
            f"{relay_url}/a2a/teams/bench/",
            content=rpc(f"left={hops}", "SendStreamingMessage"),
            headers=body_headers,
        ) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data:") and first is None:
                    first = (time.perf_counter() - started) * 1000
        if first is None:
            raise RuntimeError("the team streamed nothing")
        samples.append(first)
    return statistics.median(samples)


# --- processes -------------------------------------------------------------------------------


def start_agent(stack: ExitStack, slug: str, other: str, logs: Path) -> str:
    """Starts agent `slug` (naming `other`) on a free port, its output in `logs`; its URL once
    it answers."""
    port = free_port()
    command = [sys.executable, __file__, "--serve", slug, str(port), other]
    agent = stack.enter_context(process(f"agent-{slug}", command, dict(os.environ), logs))
    url = f"http://127.0.0.1:{port}"
    wait_until_answers(agent, f"{url}/.well-known/agent-card.json")
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="Timed runs per measurement.")
    parser.add_argument(
        "--serve", nargs=3, metavar=("SLUG", "PORT", "OTHER"), help=argparse.SUPPRESS
    )
    options = parser.parse_args()
    if options.serve:
        slug, port, other = options.serve
        serve_agent(slug, int(port), other)
        return

    from tests.live import live_relay, manage

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as var_dir, ExitStack() as stack:
        agents = {
            slug: start_agent(stack, slug, other, Path(var_dir))
            for slug, other in (("a", "b"), ("b", "a"))
        }
        relay = stack.enter_context(live_relay(Path(var_dir)))
        for slug, url in agents.items():
            relay.register(url, slug)
        manage(
            relay.env,
            "shell",
            "-c",
            "from registry.teams import team_create; team_create(team_id='bench', "
            "name='Bench', members=['a', 'b'], default_agent='a')\n"
            "from routing.workflows.services import workflow_import\n"
            f"for k in {HOPS!r}:\n"
            "    steps = [{'id': f's{i}', 'agent': 'ab'[i % 2],\n"
            "              'input': '{{.originalMessage}}' if i == 0 else '{{.s%d}}' % (i - 1)}\n"
            "             for i in range(k)]\n"
            "    workflow_import(document={'name': f'Bench flow {k}', 'slug': f'bench-flow-{k}',\n"
            "                              'steps': steps})",
        )
        print(f"relay {relay.url}, agents {agents}, ready in {time.monotonic() - started:.1f} s\n")
        asyncio.run(measure(relay.url, relay.key, agents, options.runs))
    print(f"\ndone in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
