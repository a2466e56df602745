"""The banner ``make up`` prints: its commands work pasted into a fresh shell in the
checkout."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest

from routing.console.credentials import Credentials
from routing.demo.agents import ECHO, app_factory
from routing.demo.serve import serve
from routing.management.commands.run_relay import Command
from tests.live import manage, relay_env

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.django_db
def test_the_printed_manage_py_lines_name_an_interpreter_that_has_django(monkeypatch):
    """Regression: the banner said ``python manage.py ask_team ...``, which a fresh shell runs
    with a Python without Django (ModuleNotFoundError), or no ``python`` at all."""
    monkeypatch.chdir(ROOT)
    command = Command(stdout=io.StringIO())
    command.log_dir = ROOT / "var" / "log"
    command._print_summary(
        "http://127.0.0.1:8000",
        Credentials(
            path=ROOT / "var" / "credentials.txt",
            admin_user="admin",
            new_password=None,
            key="br_demo-key",
            new_key=None,
        ),
    )
    banner = command.stdout.getvalue()
    lines = [line for line in banner.splitlines() if "manage.py" in line]
    assert any("ask_team" in line for line in lines) and any(
        "check_agents" in line for line in lines
    ), banner
    for line in lines:
        interpreter = re.search(r"`?(\S+) manage\.py", line).group(1).lstrip("`")
        assert interpreter != "python", line
        found = subprocess.run(
            [interpreter, "-c", "import django"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert found.returncode == 0, (line, found.stderr)
    for line in banner.splitlines():
        assert "| python -m" not in line, line  # a fresh shell may have only python3


@pytest.mark.django_db
def test_the_printed_check_agents_run_from_another_shell_does_not_mark_the_demo_agents_unsafe(
    monkeypatch, settings, tmp_path
):
    """Regression: the banner printed ``manage.py check_agents`` bare; pasted into a second
    shell, without the private-URL setting ``run_relay`` gives its own processes, it found the
    demo agents on 127.0.0.1 "unsafe" and marked them degraded."""
    monkeypatch.chdir(ROOT)
    settings.RELAY_ALLOW_PRIVATE_URLS = True  # as run_relay sets it for its run
    command = Command(stdout=io.StringIO())
    command.log_dir = tmp_path / "log"
    command._print_summary(
        "http://127.0.0.1:8000",
        Credentials(
            path=tmp_path / "credentials.txt",
            admin_user="admin",
            new_password=None,
            key="br_demo-key",
            new_key=None,
        ),
    )
    printed = re.search(r"`([^`]*manage\.py check_agents[^`]*)`", command.stdout.getvalue())
    relay = relay_env(tmp_path / "var")
    manage(relay, "migrate", "--verbosity", "0")
    with serve(app_factory(ECHO)) as agent:
        manage(relay, "register_agent", agent.url)
        second_shell = {k: v for k, v in relay.items() if k != "RELAY_ALLOW_PRIVATE_URLS"}
        probed = subprocess.run(
            ["bash", "-c", printed.group(1)],
            cwd=ROOT,
            env=second_shell,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert probed.returncode == 0, probed.stderr
    assert "unsafe_url" not in probed.stdout, probed.stdout
    assert "0 unhealthy" in probed.stdout and "degraded" not in probed.stdout, probed.stdout
