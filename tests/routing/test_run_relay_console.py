"""``make up``'s console stays readable: the first run shows the admin password and the API key
once and keeps them in ``var/credentials.txt`` (mode 0600); the processes' logs go to files
under ``var/log/``; a short live status replaces them; a second run shows no secret and says
how to get a new password and a new key, with commands that work as printed."""

from __future__ import annotations

import re
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing

import httpx
from django.contrib.auth.hashers import check_password

from tests.live import free_port, relay_env
from tests.routing.console_runs import ROOT, ConsoleRun
from tests.routing.test_run_relay_health import free_run

# A logging line of any of the processes: "2026-01-01 12:00:00,123 INFO name: ..." (Django's
# and daphne's), "[2026-01-01 12:00:00,123: INFO/MainProcess] ..." (Celery's own) or Celery's
# start banner.
LOG_LINE = re.compile(
    r"^\[?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+|celery@|health_sweep|"
    r"Warm shutdown|SecurityWarning",
    re.MULTILINE,
)


def run_relay(env: dict[str, str], port: int, agents_port: int, *extra: str) -> ConsoleRun:
    return ConsoleRun(
        [
            sys.executable,
            "manage.py",
            "run_relay",
            "--port",
            str(port),
            "--agents-port",
            str(agents_port),
            *extra,
        ],
        env=env,
    )


def shell(line: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    """``line`` in a fresh, non-interactive shell in the checkout (no terminal: Django's
    password prompt then reads standard input)."""
    return subprocess.run(
        ["bash", "-c", line],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )


def printed_command(console: str, label: str) -> str:
    return re.search(rf"^\s*{label}\s+(.+)$", console, re.MULTILINE).group(1).strip()


def saved_values(var) -> dict[str, str]:
    text = (var / "credentials.txt").read_text()
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


def password_works(var, user: str, password: str) -> bool:
    """Checks the password against the hash in the run's database (read directly: starting
    Django once more costs seconds)."""
    with closing(sqlite3.connect(var / "relay.sqlite3")) as database:
        (encoded,) = database.execute(
            "SELECT password FROM auth_user WHERE username = ?", (user,)
        ).fetchone()
    return check_password(password, encoded)


def test_credentials_are_shown_once_kept_in_a_private_file_and_logs_go_to_files(tmp_path):
    var = tmp_path / "var"
    env = relay_env(
        var,
        RELAY_LOG_LEVEL="INFO",
        RELAY_HEALTH_SWEEP_SECONDS="1",
        RELAY_HEALTH_INTERVAL_SECONDS="1",
    )
    port, agents_port = free_port(), free_run(4)
    relay = f"http://127.0.0.1:{port}"

    with run_relay(env, port, agents_port) as first:
        first.wait_for(r"^Ctrl-C stops everything")
        refreshed = httpx.post(
            f"{relay}/a2a/registry/echo/refresh",
            timeout=10,
            headers={"Authorization": f"Bearer {saved_values(var)['api_key']}"},
        )
        assert refreshed.status_code == 200, refreshed.text
        # The health sweep's change shows at once, with the request made before it.
        first.wait_for(r"agents healthy 4/4 \| [1-9]\d* requests? served")
    console = first.output

    saved = var / "credentials.txt"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    values = saved_values(var)
    assert values.keys() == {"admin_user", "admin_password", "api_key"}
    password, key = values["admin_password"], values["api_key"]
    assert values["admin_user"] == "admin" and key.startswith("br_")
    assert console.count(password) == 1 and console.count(key) == 1, console
    assert f"saved in {saved}" in console
    assert password_works(var, "admin", password)

    # The console: the banner and a status line per change, never a process's log.
    assert LOG_LINE.search(console) is None, console
    assert re.search(
        r"^\d\d:\d\d:\d\d  relay up \| worker up \| agents healthy 4/4", console, re.MULTILINE
    ), console
    assert f"Logs:      {var / 'log'}/ (daphne.log, celery.log, relay.log)" in console
    logs = {
        name: (var / "log" / f"{name}.log").read_text() for name in ("daphne", "celery", "relay")
    }
    assert "Listening on TCP address" in logs["daphne"]
    assert "POST /a2a/registry/echo/refresh" in logs["daphne"]
    assert "routing.health_sweep" in logs["celery"]
    assert "agent echo is now healthy" in logs["celery"]
    for name, text in logs.items():
        assert password not in text and key not in text, name

    port = free_port()
    with run_relay(env, port, agents_port, "--no-worker") as second:
        second.wait_for(r"agents healthy \d/4")
    again = second.output
    assert password not in again and key not in again, again
    assert saved.read_text().count(key) == 1 and stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert f"Credentials: saved in {saved} by an earlier run." in again
    assert "Try it" in again and "worker" not in again.split("Status:")[1]

    reset = printed_command(again, "New admin password:")
    assert (
        reset == f"{sys.executable} manage.py changepassword admin"
        or reset == ".venv/bin/python manage.py changepassword admin"
    ), reset
    changed = shell(reset, env, stdin="Another-pass-8214\nAnother-pass-8214\n")
    assert changed.returncode == 0, changed.stderr
    assert password_works(var, "admin", "Another-pass-8214")
    assert not password_works(var, "admin", password)

    new_key = shell(printed_command(again, "New API key:"), env)
    assert new_key.returncode == 0, new_key.stderr
    assert new_key.stdout.strip().splitlines()[-1].startswith("br_")
