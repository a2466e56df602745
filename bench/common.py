"""What a benchmark needs around the code it measures: server processes with their CPU time
read from /proc, a relay's environment and set-up, a throwaway PostgreSQL database and a Redis
server of its own. Imports no Django, but for a benchmark that runs the relay's code in its own
process and asks for it (``setup_django``); the others run the relay in processes of its own.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STARTUP_SECONDS = 120.0
"""How long a server may take to answer after its start: a dozen processes start at once, on
a machine that may be shared."""
POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(samples: list[float], q: float) -> float:
    """The sample at quantile `q` (nearest rank); NaN without samples."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def load_average() -> str:
    """The machine's 1-minute load against its cores: other work there skews the figures."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def relay_settings(var_prefix: str = "relay-bench-") -> None:
    """Points Django at the relay's settings and a throwaway RELAY_VAR_DIR named
    ``<var_prefix>...``, unless the shell already sets them; imports nothing."""
    os.environ.setdefault("RELAY_VAR_DIR", tempfile.mkdtemp(prefix=var_prefix))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")


def setup_django(var_prefix: str = "relay-bench-") -> None:
    """``relay_settings``, then ``django.setup()``: for a benchmark that runs the relay's code
    in its own process. Call it before importing any model."""
    relay_settings(var_prefix)
    import django

    django.setup()


# --- CPU time from /proc ---------------------------------------------------------------------


def cpu_seconds_of(pid: int) -> float | None:
    """User + system CPU of one process (all its threads) so far; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (a server that forks workers counts as one)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending += [int(child) for child in (task / "children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
    return found


CpuSnapshot = dict[int, float]


def cpu_snapshot(pids: list[int]) -> CpuSnapshot:
    return {pid: seconds for pid in pids if (seconds := cpu_seconds_of(pid)) is not None}


def cpu_spent(before: CpuSnapshot, after: CpuSnapshot) -> float:
    """CPU seconds spent between two snapshots. A process that appeared in between counts
    from zero; one that ended in between loses its last share (it cannot be read any more)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def socket_owners(pids: list[int], remote_port: int) -> dict[int, int]:
    """Local port -> pid, for the TCP connections of `pids` to 127.0.0.1:`remote_port`."""
    inodes: dict[str, int] = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes[link[8:-1]] = pid
    owners = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if int(remote.split(":")[1], 16) == remote_port and inode in inodes:
            owners[int(local.split(":")[1], 16)] = inodes[inode]
    return owners


# --- processes -------------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    child: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.child.pid

    def pids(self) -> list[int]:
        return process_tree(self.pid)

    def cpu_snapshot(self) -> CpuSnapshot:
        return cpu_snapshot(self.pids())

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@contextmanager
def process(name: str, command: list[str], env: dict[str, str], logs: Path) -> Iterator[Process]:
    """Runs `command` (a full argv) with its output in `logs/<name>.log`; stops it on exit."""
    log = logs / f"{name}.log"
    with log.open("w") as sink:
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        yield Process(name, child, log)
    finally:
        child.terminate()
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)


def wait_until_answers(running: Process, url: str) -> None:
    """Returns once `url` answers anything; exits with the log's tail when it never does."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if running.child.poll() is not None:
            sys.exit(f"{running.name} exited while starting:\n{running.log_tail()}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    sys.exit(
        f"{running.name} did not answer at {url} within {STARTUP_SECONDS:.0f} s:\n"
        f"{running.log_tail()}"
    )


# --- the relay -------------------------------------------------------------------------------


def relay_env(var_dir: str, **profile: str) -> dict[str, str]:
    """The relay's environment: the embedded profile whatever this shell points at, unless
    `profile` names DATABASE_URL and REDIS_URL (the production profile)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_", "RELAY_"))
    }
    env.update(
        {"RELAY_VAR_DIR": var_dir, "RELAY_ALLOW_PRIVATE_URLS": "true", "PYTHONUNBUFFERED": "1"}
    )
    # Thousands of calls a minute from one key: a limit high enough never to refuse, so every
    # call still pays for being counted.
    env["RELAY_RATE_LIMIT_PER_KEY"] = str(10**9)
    env.update(profile)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def relay_command(server: str, port: int) -> list[str]:
    """The argv of one relay server process on 127.0.0.1:``port``: daphne, or uvicorn as the
    README's production section runs it (tests start their relays with it too)."""
    if server == "daphne":
        return [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "relay_project.asgi:application",
        ]
    # Lifespan on: the relay starts its background work (lease heartbeat, takeover) there.
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "relay_project.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        "on",
        "--timeout-graceful-shutdown",
        "10",
        "--timeout-keep-alive",
        "75",
        "--http",
        "relay_project.http_protocol:HeaderTimeoutProtocol",
        "--log-level",
        "warning",
        "--no-access-log",
    ]


def register(relay_url: str, key: str, agent_id: str, agent_url: str) -> None:
    answer = httpx.post(
        f"{relay_url}/a2a/registry",
        json={"url": f"{agent_url}/.well-known/agent-card.json", "id": agent_id},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    if answer.status_code != 201:
        sys.exit(
            f"registering {agent_id} at the relay failed: {answer.status_code} {answer.text[:500]}"
        )


# --- services of the production profile ------------------------------------------------------


@contextmanager
def postgres_database(prefix: str = "bench") -> Iterator[str]:
    """A fresh, empty database `<prefix>_<random>` on the local PostgreSQL; yields its URL and
    drops it (closing whatever still uses it) on exit."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def redis_server(logs: Path) -> Iterator[tuple[Process, str]]:
    """A Redis server of our own on a free port, nothing persisted: its connection counts are
    ours alone. Yields the process and its URL."""
    port = free_port()
    command = [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(logs),
    ]
    with process("redis", command, dict(os.environ), logs) as running:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if running.child.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"redis-server did not start:\n{running.log_tail()}")
            time.sleep(0.1)
        yield running, f"redis://127.0.0.1:{port}/0"


def served(role: str, port: int) -> subprocess.Popen:
    """One of gateway_servers.py's servers (``gateway_bench.py --serve``) in a process of its
    own on ``port``: the echo agent (``agent``) or the OTLP/HTTP sink (``otlp-sink``)."""
    extra = ["echo"] if role == "agent" else []
    return subprocess.Popen(
        [sys.executable, "bench/gateway_bench.py", "--serve", role, *extra, str(port)],
        cwd=ROOT,
    )


def waited(url: str) -> None:
    """Returns once ``url`` answers (any status); exits after ten seconds without."""
    for _ in range(100):
        try:
            httpx.get(url)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} never answered")


async def echo_registered(client: httpx.AsyncClient, key: str, port: int) -> dict[str, str]:
    """Registers the echo agent served on ``port`` as ``echo`` through ``client`` (the
    relay's app in this process, called with the API key ``key``); returns the key's
    Authorization header."""
    auth = {"Authorization": f"Bearer {key}"}
    card = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    waited(card)
    answer = await client.post("/a2a/registry", json={"url": card, "id": "echo"}, headers=auth)
    assert answer.status_code == 201, answer.text
    return auth
