"""Every command the README and the documentation site show, and every command ``make up``
prints, works pasted into a fresh shell in the checkout.

The commands are read from the files themselves (``README.md`` and ``docs/**/*.md``): every line of a ``sh`` block, the lines of
a block without a language that start like a command (the rest is what they print), and the
inline code that starts with ``.venv/bin/`` or ``make``. ``PLAN`` says how each is checked, so
a new command in the README fails here until it is given a way to be checked:

- ``RUN``: runs in ``bash -c`` in the checkout and exits 0;
- ``SERVER``: starts, answers (HTTP, or its "ready" line), and stops on Ctrl-C;
- anything else: the reason it cannot run inside a test, and the lighter check made instead.

They run against a throwaway relay: ``make up`` on a var directory of the test's own (the
embedded profile). The production page's block (``PRODUCTION_PAGE``, ``PAGE`` in the plan) runs
whole, as one script, on a fresh PostgreSQL database and a private ``redis-server``. The only
changes made to a printed line are those addresses: the relay's port, the var directory's
``var/credentials.txt``, the production block's database, Redis and ports.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.live import ServiceMissingError, free_port, postgres_database, relay_env, wait_for
from tests.routing.console_runs import ROOT, ConsoleRun
from tests.routing.test_run_relay_health import free_run

COMMAND_START = re.compile(r"^(\.venv/bin/|make |python3? |curl |daphne |uvicorn |celery )")
CODE_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"(?<!`)`((?:\.venv/bin/|make )[^`]+)`")

RUN, SERVER, PAGE = "run", "server", "the production page's block, run whole"
PRODUCTION_PAGE = ROOT / "docs" / "production" / "index.md"
NEW_PASSWORD = "Printed-command-2841"

PLAN: dict[str, str | tuple[str, str]] = {
    "make up": (
        "checked as `make up RELAY_PORT=... RELAY_AGENTS_PORT=...`, the same target: the "
        "default ports 8000 and 9301-9304 may be taken on a shared machine",
        "the port form",
    ),
    "make up RELAY_PORT=8010 RELAY_AGENTS_PORT=9401": SERVER,
    "make test": ("runs this very suite (minutes, and itself again)", "make -n test"),
    "make test-fast": ("runs most of this very suite (minutes)", "make -n test-fast"),
    "make bench": ("a benchmark of several minutes", "make -n bench"),
    ".venv/bin/pytest -m chaos tests/chaos": (
        "the chaos suite: 2.5 minutes with relays, Redis and PostgreSQL of its own; the suite "
        "runs it",
        "--collect-only -q",
    ),
    '.venv/bin/pytest -m "not chaos"': (
        "runs this very suite (minutes, and itself again)",
        "--collect-only -q tests/test_project_text.py",
    ),
    '.venv/bin/python manage.py ask_team demo "please research the weather and write a report" '
    "--url http://127.0.0.1:8000 "
    "--key \"$(sed -n 's/^api_key=//p' var/credentials.txt)\"": RUN,
    ".venv/bin/python manage.py changepassword admin": RUN,
    ".venv/bin/python manage.py create_api_key my-key --admin": RUN,
    ".venv/bin/python manage.py create_api_key NAME": RUN,
    ".venv/bin/python manage.py check_agents [--agent ID]": RUN,
    "make docs": RUN,
    'curl -s http://127.0.0.1:8000/a2a/agents/echo/ -H "Authorization: Bearer '
    "$(sed -n 's/^api_key=//p' var/credentials.txt)\" -H 'Content-Type: application/json' "
    '-H \'A2A-Version: 1.0\' -d \'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", '
    '"params": {"message": {"messageId": "m1", "role": "ROLE_USER", '
    '"parts": [{"text": "hello"}]}}}\'': RUN,
    "curl -s 'http://127.0.0.1:8000/a2a/skills?q=will+I+need+an+umbrella+tomorrow'": RUN,
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=relay-eu-1 "
    ".venv/bin/python manage.py run_relay": (
        "starts the whole relay, a server, with tracing on (tests/routing/test_team_traces.py "
        "checks what the variables do); here the command sets tracing up and prints its help",
        "--help",
    ),
    "make diagram": (
        "renders docs/architecture.svg in the checkout again (tests/test_docs.py checks the "
        "committed picture against its source instead)",
        "make -n diagram",
    ),
}


def production_block() -> list[str]:
    """The lines of the production page's first ``sh`` block."""
    language, body = CODE_BLOCK.findall(PRODUCTION_PAGE.read_text())[0]
    assert language == "sh"
    return [line.strip() for line in body.splitlines() if line.strip()]


PLAN.update(dict.fromkeys(production_block(), PAGE))


def readme_commands() -> list[str]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        found += page_commands(page.read_text())
    return list(dict.fromkeys(found))


def page_commands(text: str) -> list[str]:
    """The commands of one Markdown page."""
    found = []
    for language, body in CODE_BLOCK.findall(text):
        if language not in ("", "sh", "bash", "shell"):
            continue
        for line in re.sub(r"\\\n\s*", "", body).splitlines():  # continued lines joined
            command = re.sub(r"\s+#.*$", "", line).strip()  # a trailing comment
            if command.startswith("#"):
                continue
            if command and (language or COMMAND_START.match(command)):
                found.append(command)
    found += [" ".join(span.split()) for span in INLINE_CODE.findall(CODE_BLOCK.sub("", text))]
    return found


def banner_commands(banner: str) -> list[str]:
    """The command lines ``make up`` printed: the indented ``curl`` and ``manage.py`` lines and
    the commands in backquotes."""
    commands = [
        line.strip()
        for line in banner.splitlines()
        if re.match(r"^\s+(curl |\S*python\S* manage\.py )", line)
    ]
    return commands + re.findall(r"`([^`]*manage\.py[^`]*)`", banner)


def without_optional_parts(command: str) -> str:
    """``command`` without its ``[--option ...]`` parts (a JSON array is not one)."""
    return " ".join(re.sub(r"\[--[^\]]*\]", "", command).split())


def shell(command: str, env: dict[str, str], stdin: str = "") -> str:
    """Runs ``command`` in a fresh shell in the checkout; returns its output, failing the test
    with it when the command does not exit 0."""
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
    return result.stdout


@pytest.fixture
def checkout_venv() -> Iterator[str]:
    """The README's ``.venv`` of the checkout. Where the tests run from another virtualenv (a
    second work tree sharing one), ``.venv`` is that one, linked for the test and removed after.
    Yields the extra ``make`` option: ``-o .venv/.installed`` when the install stamp is older
    than pyproject.toml, since installing packages is not for a test to do."""
    venv = ROOT / ".venv"
    linked = not venv.exists()
    if linked:
        venv.symlink_to(Path(sys.prefix))
    try:
        fresh = (
            subprocess.run(
                ["make", "-q", ".venv/.installed"], cwd=ROOT, capture_output=True
            ).returncode
            == 0
        )
        yield "" if fresh else "-o .venv/.installed "
    finally:
        if linked:
            venv.unlink()


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """A private redis-server on a free port (nothing else's queues in it)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceMissingError("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_readme_shows_only_commands_this_test_knows_how_to_check():
    assert readme_commands() == list(dict.fromkeys(readme_commands()))
    assert sorted(readme_commands()) == sorted(PLAN), (
        "a command of the README or the docs is not in PLAN (or PLAN names one they no longer show)"
    )


def test_every_command_the_readme_and_make_up_print_works(tmp_path, checkout_venv):
    var = tmp_path / "var"
    port, agents_port = free_port(), free_run(4)
    relay = f"http://127.0.0.1:{port}"
    env = relay_env(var, RELAY_HEALTH_SWEEP_SECONDS="1", RELAY_HEALTH_INTERVAL_SECONDS="1")
    make = f"make {checkout_venv}"

    def as_here(command: str) -> str:
        """The printed line with this test's relay and var directory."""
        command = command.replace("http://127.0.0.1:8000", relay)
        command = command.replace("var/credentials.txt", str(var / "credentials.txt"))
        command = command.replace("RELAY_PORT=8010", f"RELAY_PORT={port}")
        command = command.replace("RELAY_AGENTS_PORT=9401", f"RELAY_AGENTS_PORT={agents_port}")
        return command.replace("make ", make, 1) if command.startswith("make ") else command

    checked = set()
    up = "make up RELAY_PORT=8010 RELAY_AGENTS_PORT=9401"
    with ConsoleRun(as_here(up), env=env) as running:
        banner = running.wait_for(r"(?s)Brass Relay is running.*?^Ctrl-C stops everything")
        running.wait_for(r"agents healthy 4/4")
        assert answers(f"{relay}/")
        checked |= {up, "make up"}

        printed = banner_commands(banner.group())
        assert len(printed) == 5, banner.group()
        for command in printed:
            output = shell(command, env)
            assert output.strip() and '"error"' not in output, (command, output)
            if "ask_team" in command:
                assert "replied -> user" in output, output

        for command, how in PLAN.items():
            if how != RUN:
                continue
            stdin = f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n" if "changepassword" in command else ""
            output = shell(as_here(without_optional_parts(command)), env, stdin)
            if "ask_team" in command:
                assert "replied -> user" in output, output
            if command.startswith("curl "):
                assert output.strip() and '"error"' not in output, (command, output)
            if "create_api_key" in command:
                assert output.strip().splitlines()[-1].startswith("br_"), output
            checked.add(command)
    assert "Stopped." in running.output
    assert checked == {
        command for command, how in PLAN.items() if how in (RUN, SERVER) or command == "make up"
    }


def test_the_production_page_runs_as_written(tmp_path, checkout_venv):
    """The production page's block, run whole in one shell on a fresh PostgreSQL database and a
    private Redis, with no relay setting in the environment but the block's own: both uvicorn
    processes answer and take their lease, the worker, beat and gRPC server start, the
    superuser it made logs in to the admin, and an agent on 127.0.0.1 registered through one
    process with the key it printed is called through the other."""
    from routing.demo.agents import serve_demo_agents

    with ExitStack() as stack:
        try:
            _, database_url = stack.enter_context(postgres_database("relay_docs"))
            redis_url = stack.enter_context(redis_server(tmp_path))
        except ServiceMissingError as error:
            pytest.skip(f"the production page's block needs PostgreSQL and Redis: {error}")
        env = relay_env(tmp_path / "production", RELAY_LOG_LEVEL="INFO")
        del env["RELAY_ALLOW_PRIVATE_URLS"]  # the block must set it itself
        ports = {printed: str(free_port()) for printed in ("8011", "8012", "8101")}
        script = "\n".join(production_block())
        script = script.replace("postgres://postgres@127.0.0.1:5432/relay", database_url)
        script = script.replace("redis://127.0.0.1:6379/0", redis_url)
        for printed, port in ports.items():
            script = script.replace(printed, port)
        run = ConsoleRun(f"set -e\n{script}\nwait", env=env)
        stack.callback(stop_group, run)

        key = run.wait_for(r"^(br_\S+)$", seconds=180).group(1)
        first, second = (f"http://127.0.0.1:{ports[p]}" for p in ("8011", "8012"))
        for url in (first, second):
            wait_for(
                lambda url=url: answers(f"{url}/a2a/registry") or run.process.poll() is not None,
                f"{url} answering",
                timeout=120,
            )
            assert answers(f"{url}/a2a/registry"), run.output[-3000:]
        run.wait_for(r"celery@\S+ ready\.")
        run.wait_for(r"beat: Starting\.\.\.")
        run.wait_for(r"gRPC A2A server on \S+")
        wait_for(
            lambda: len(process_tree(run.process.pid) & leased_pids(database_url)) >= 2,
            "a lease for each uvicorn process",
            timeout=60,
        )

        with httpx.Client(base_url=first, timeout=30) as browser:
            form = browser.get("/admin/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
            login = browser.post(
                "/admin/login/?next=/admin/",
                data={
                    "csrfmiddlewaretoken": token,
                    "username": "admin",
                    "password": "choose-a-long-password",
                },
                headers={"Referer": f"{first}/admin/login/"},
            )
            assert login.status_code == 302 and login.headers["location"] == "/admin/", login.text

        agents = stack.enter_context(serve_demo_agents())
        bearer = {"Authorization": f"Bearer {key}"}
        registered = httpx.post(
            f"{first}/a2a/registry",
            headers=bearer,
            json={"url": agents["echo"].url, "id": "echo"},
            timeout=30,
        )
        assert registered.status_code == 201, registered.text
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            },
        }
        answer = httpx.post(
            f"{second}/a2a/agents/echo/",
            headers={**bearer, "A2A-Version": "1.0"},
            json=call,
            timeout=30,
        )
        assert answer.status_code == 200 and "hi" in answer.text, answer.text
        assert "error" not in answer.json(), answer.text


def stop_group(run: ConsoleRun) -> None:
    """SIGTERM to the block's whole process group (its ``&`` jobs ignore Ctrl-C, as a
    non-interactive shell's background jobs do), SIGKILL for what outlives 20 seconds."""
    try:
        os.killpg(run.process.pid, signal.SIGTERM)
        run.process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(run.process.pid, signal.SIGKILL)
        run.process.wait(10)
    except ProcessLookupError:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.process.pid, signal.SIGKILL)  # the jobs bash left behind


def leased_pids(database_url: str) -> set[int]:
    """The process ids of the relay processes that hold a lease in the database."""
    import psycopg

    with psycopg.connect(database_url) as connection:
        query = "SELECT pid FROM tasks_app_relayprocess WHERE lease_expires_at > now()"
        return {pid for (pid,) in connection.execute(query)}


def process_tree(pid: int) -> set[int]:
    """``pid`` and its descendants (``bash -c`` may or may not exec the command it runs)."""
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo += [int(child) for child in children]
    return found


def test_the_commands_a_test_cannot_run_whole_pass_a_lighter_check(tmp_path, checkout_venv):
    """Each with the check PLAN names: ``make`` targets dry-run (``make -n``: every line they
    would run, expanded), pytest selections collected."""
    make = f"make {checkout_venv}"
    checked = set()
    env = relay_env(tmp_path / "collect")
    for command, how in PLAN.items():
        if not isinstance(how, tuple) or how[1] == "the port form":
            continue
        if how[1].startswith("make -n"):
            dry = shell(how[1].replace("make ", make, 1), env)
            assert ".venv/bin/" in dry, dry
        elif how[1] == "--help":
            helped = shell(f"{command} {how[1]}", env)
            assert "usage: manage.py" in helped, helped[-500:]
        else:
            collected = shell(f"{command} {how[1]}", env)
            assert re.search(r"^\d+(/\d+)? tests? collected", collected, re.MULTILINE), collected[
                -500:
            ]
        checked.add(command)
    assert checked == {
        command
        for command, how in PLAN.items()
        if isinstance(how, tuple) and how[1] != "the port form"
    }
