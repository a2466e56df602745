"""The README's main command for real: ``manage.py run_relay`` (daphne, a Celery worker with
beat on the embedded profile, the demo agents) probes the agents with nothing else installed;
a demo agent stopped from the console turns unhealthy within the thresholds and comes back
when started again, as the registry shows."""

from __future__ import annotations

import queue
import random
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.live import ROOT, START_SECONDS, free_port, relay_env

WAIT_SECONDS = 60
"""How long a probe may take to show (the thresholds are seconds; this is the bound of a
loaded machine)."""


def free_run(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    for _ in range(50):
        first = random.randint(20000, 40000)
        sockets = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no run of free ports")


@pytest.fixture
def run_relay(tmp_path):
    port, agents_port = free_port(), free_run(4)
    env = relay_env(
        tmp_path,
        RELAY_HEALTH_SWEEP_SECONDS="1",
        RELAY_HEALTH_INTERVAL_SECONDS="1",
        RELAY_HEALTH_UNHEALTHY_AFTER="2",
        RELAY_HEALTH_HEALTHY_AFTER="1",
        RELAY_HEALTH_TIMEOUT_SECONDS="2",
    )
    child = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "run_relay",
            "--port",
            str(port),
            "--agents-port",
            str(agents_port),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True).start()
    try:
        yield child, f"http://127.0.0.1:{port}", lines
    finally:
        child.terminate()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)


def wait_for(condition, what: str, child, lines, seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if child.poll() is not None:
            pytest.fail(f"run_relay exited: {''.join(drain(lines))[-3000:]}")
        if condition():
            return
        time.sleep(0.3)
    pytest.fail(f"{what} did not happen within {seconds} s: {''.join(drain(lines))[-3000:]}")


def drain(lines) -> list[str]:
    out = []
    while not lines.empty():
        out.append(lines.get_nowait())
    return out


def health_of(base: str, agent_id: str) -> str:
    try:
        response = httpx.get(f"{base}/a2a/registry/{agent_id}", timeout=2)
    except httpx.HTTPError:
        return ""
    return response.json()["health"]["state"] if response.status_code == 200 else ""


def test_run_relay_probes_the_demo_agents_and_follows_one_going_away_and_back(run_relay):
    child, base, lines = run_relay
    # The first wait includes run_relay's start: the database, the worker, the demo agents.
    wait_for(
        lambda: health_of(base, "echo") == "healthy",
        "echo healthy",
        child,
        lines,
        seconds=START_SECONDS + WAIT_SECONDS,
    )
    assert health_of(base, "triage") == "healthy"

    child.stdin.write("stop echo\n")
    child.stdin.flush()
    wait_for(lambda: health_of(base, "echo") == "unhealthy", "echo unhealthy", child, lines)
    detail = httpx.get(f"{base}/a2a/registry/echo").json()["health"]["detail"]
    assert "refused the connection" in detail
    listed = httpx.get(f"{base}/a2a/registry", params={"health": "unhealthy"}).json()
    assert [agent["id"] for agent in listed["agents"]] == ["echo"]
    page = httpx.get(f"{base}/", params={"health": "unhealthy"}).text
    assert 'href="/agents/echo/"' in page and 'href="/agents/triage/"' not in page
    assert 'class="health health-unhealthy"' in page

    child.stdin.write("start echo\n")
    child.stdin.flush()
    wait_for(lambda: health_of(base, "echo") == "healthy", "echo healthy again", child, lines)
    output = "".join(drain(lines))
    assert "Stopped echo" in output and "Started echo again" in output
