"""Starts the whole relay on this machine: daphne, a Celery worker with beat, and (by default)
the demo agents, registered and ready. Stops everything on Ctrl-C.

The console keeps the banner readable: the processes' logs go to files under ``var/log/``
(``daphne.log``, ``celery.log``, and ``relay.log`` for this process), the first run's
credentials to ``var/credentials.txt``, and below the banner a short live status replaces the
scrolling logs."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from registry.models import Agent
from routing.console.credentials import Credentials, credentials_ensure
from routing.console.status import Status, StatusBoard, requests_served
from routing.demo.setup import DEMO_QUESTION, DEMO_TEAM

STATUS_SECONDS = 2.0
"""How often the live status is read (the relay's /metrics and one query)."""

LOG_TAIL_LINES = 15
"""Lines of a process's log shown when it fails."""

LISTEN_SECONDS = 120
"""How long daphne may take to listen. A daphne that exits is reported at once; this bounds
only one that hangs, and is generous because a first start on a busy machine (migrations
checked, modules compiled) has taken over 30 s."""


def as_typed(path: str | Path) -> str:
    """A path as one would type it in the checkout: relative to the current directory when it
    lies under it (``.venv/bin/python``, ``var/credentials.txt`` under ``make up``), else
    absolute."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def this_python() -> str:
    """The interpreter running this command, as one would type it (see ``as_typed``)."""
    return as_typed(sys.executable)


class Command(BaseCommand):
    help = "Starts the relay, a Celery worker with beat, and the demo agents."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--agents-port", type=int, default=9301, help="First port of the demo agents."
        )
        parser.add_argument("--no-demo", action="store_true", help="Start without demo agents.")
        parser.add_argument("--no-worker", action="store_true", help="Start without Celery.")
        parser.add_argument(
            "--grpc-port",
            type=int,
            default=settings.RELAY_GRPC_PORT,
            help="Port of the gRPC A2A server (manage.py run_grpc; make up: 8001). Default: "
            "RELAY_GRPC_PORT; 0 starts none.",
        )

    def handle(self, *args, host, port, agents_port, no_demo, no_worker, grpc_port, **options):
        environment = dict(os.environ)
        # Every process knows the gRPC port: daphne lists it on the cards.
        settings.RELAY_GRPC_PORT = grpc_port
        environment["RELAY_GRPC_PORT"] = str(grpc_port)
        environment.setdefault("RELAY_GRPC_BIND", host)
        if not no_demo:
            # The demo agents listen on 127.0.0.1, which the relay refuses by default.
            settings.RELAY_ALLOW_PRIVATE_URLS = True
            environment["RELAY_ALLOW_PRIVATE_URLS"] = "true"
        self.log_dir = Path(settings.VAR_DIR) / "log"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        children: dict[str, subprocess.Popen] = {}
        demo = None
        stop = threading.Event()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signal_number, lambda *_: stop.set())
        restore_logging = self._log_to_file(self.log_dir / "relay.log")
        try:
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write(f"Database ready ({settings.DATABASES['default']['ENGINE']}).")
            children["daphne"] = self._start(
                "daphne",
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    host,
                    "-p",
                    str(port),
                    "relay_project.asgi:application",
                ],
                environment,
            )
            if grpc_port:
                # The gRPC process has no HTTP request to read the relay's address from; the
                # extended cards it answers name daphne's.
                web_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
                web_host = f"[{web_host}]" if ":" in web_host else web_host
                grpc_environment = {"RELAY_PUBLIC_URL": f"http://{web_host}:{port}", **environment}
                children["grpc"] = self._start(
                    "grpc",
                    [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "run_grpc"],
                    grpc_environment,
                )
            if not no_worker:
                children["celery"] = self._start(
                    "celery",
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "relay_project",
                        "worker",
                        "--beat",
                        "--loglevel=INFO",
                        "--concurrency=2",
                    ],
                    environment,
                )
            self._wait_for_port(host, port, children["daphne"])
            relay = f"http://{host}:{port}"
            if not no_demo:
                demo = self._start_demo(agents_port)
            credentials = credentials_ensure(var_dir=Path(settings.VAR_DIR), with_key=not no_demo)
            self._print_summary(relay, credentials)
            if grpc_port:
                self.stdout.write(
                    f"  gRPC:      {host}:{grpc_port} (A2A over gRPC, gRPC log grpc.log)"
                )
            board = StatusBoard(
                write=lambda text: self.stdout.write(text, ending=""),
                flush=self.stdout.flush,
                interactive=self.stdout.isatty(),
            )
            if demo is not None:
                threading.Thread(
                    target=self._demo_controls,
                    args=(demo, board),
                    daemon=True,
                    name="demo-controls",
                ).start()
            with httpx.Client(timeout=2) as client:
                while True:
                    for name, child in children.items():
                        if child.poll() is not None:
                            raise CommandError(
                                f"{name} stopped with code {child.returncode}{self._log_tail(name)}"
                            )
                    board.show(self._status(client, relay, children, credentials.key))
                    if stop.wait(STATUS_SECONDS):
                        break
            self.stdout.write("")
        finally:
            for child in children.values():
                child.terminate()
            for child in children.values():
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
            if demo is not None:
                demo.stop()
            restore_logging()
            self.stdout.write("Stopped.")

    def _log_to_file(self, path: Path):
        """Sends this process's logs, warnings and stray stderr (the demo agents' uvicorn
        servers, thread tracebacks) to ``path`` instead of the console; returns the function
        that puts them back. The command's own messages and errors still reach the console."""
        log_file = path.open("a", buffering=1)
        log_file.write(f"--- run_relay started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        console, sys.stderr = sys.stderr, log_file
        moved = [
            handler
            for handler in logging.getLogger().handlers
            if type(handler) is logging.StreamHandler and handler.stream is console
        ]
        for handler in moved:
            handler.setStream(log_file)

        def restore() -> None:
            sys.stderr = console
            for handler in moved:
                handler.setStream(console)
            log_file.close()

        return restore

    def _start(
        self, name: str, command: list[str], environment: dict[str, str]
    ) -> subprocess.Popen:
        """Starts a child process whose output goes to ``var/log/{name}.log``."""
        with (self.log_dir / f"{name}.log").open("a") as log_file:
            log_file.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(command)}\n")
            log_file.flush()
            return subprocess.Popen(
                command,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )

    def _log_tail(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        try:
            lines = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        except OSError:
            return ""
        return f"; the end of {as_typed(path)}:\n" + "\n".join(lines)

    def _wait_for_port(self, host: str, port: int, process: subprocess.Popen) -> None:
        deadline = time.monotonic() + LISTEN_SECONDS
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(
                    f"daphne exited with code {process.returncode}{self._log_tail('daphne')}"
                )
            with socket.socket() as probe:
                probe.settimeout(0.5)
                if probe.connect_ex((host, port)) == 0:
                    return
            time.sleep(0.2)
        raise CommandError(
            f"daphne did not listen on {host}:{port} within {LISTEN_SECONDS} s"
            f"{self._log_tail('daphne')}"
        )

    def _start_demo(self, agents_port: int):
        from routing.demo.agents import serve_demo_agents
        from routing.demo.setup import (
            demo_agents_register,
            demo_team_ensure,
            demo_workflow_ensure,
        )

        group = serve_demo_agents(host="127.0.0.1", first_port=agents_port)
        for line in demo_agents_register(group.urls):
            self.stdout.write(line)
        self.stdout.write(demo_team_ensure())
        self.stdout.write(demo_workflow_ensure())
        return group

    def _demo_controls(self, demo, board: StatusBoard) -> None:
        """Reads "stop NAME" and "start NAME" lines on stdin: a demo agent goes away and comes
        back on its port, so its health can be watched turning unhealthy and healthy again."""
        for line in sys.stdin:
            board.say(demo_control(demo, line))

    def _status(
        self,
        client: httpx.Client,
        relay: str,
        children: dict[str, subprocess.Popen],
        key: str | None,
    ) -> Status:
        """The processes from here, the agents' health from the database, the requests from
        the relay's ``/metrics`` (with the admin key where the metrics are not public)."""
        healths = list(Agent.objects.values_list("health", flat=True))
        requests, relay_up = None, True
        try:
            response = client.get(f"{relay}/metrics")
            if response.status_code in (401, 403) and key:
                response = client.get(
                    f"{relay}/metrics", headers={"Authorization": f"Bearer {key}"}
                )
            if response.status_code == 200:
                requests = requests_served(response.text)
        except httpx.HTTPError:
            relay_up = False
        worker = children.get("celery")
        return Status(
            relay_up=relay_up,
            worker_up=None if worker is None else worker.poll() is None,
            agents=len(healths),
            healthy=sum(health == Agent.Health.HEALTHY for health in healths),
            requests=requests,
        )

    def _print_summary(self, relay: str, credentials: Credentials) -> None:
        """The banner. Its commands work pasted into a fresh shell in the checkout: they name
        the interpreter this command runs in (the project's virtualenv under ``make up``),
        where a bare ``python`` may be another one, without Django, or none at all, and they
        read the API key from the credentials file, so no secret is printed twice."""
        python = this_python()
        saved = as_typed(credentials.path)
        # check_agents probes in the shell it is pasted in, not in the relay's processes: it
        # needs the relay's permission for the demo agents on 127.0.0.1, or it would find them
        # "unsafe" and mark them degraded for everyone.
        private = "RELAY_ALLOW_PRIVATE_URLS=true " if settings.RELAY_ALLOW_PRIVATE_URLS else ""
        check_agents = f"{private}{python} manage.py check_agents"
        lines = [
            "",
            f"Brass Relay is running at {relay}",
            f"  Registry:  {relay}/",
            f"  API docs:  {relay}/api/docs",
            f"  Admin:     {relay}/admin/  (user {credentials.admin_user})",
        ]
        if credentials.new_password:
            lines.append(f"  Password:  {credentials.new_password}")
        if credentials.new_key:
            lines.append(f"  API key:   {credentials.new_key}  (an admin key)")
        if credentials.new_password or credentials.new_key:
            lines.append(f"  Shown this once; saved in {saved} (only you can read it).")
        elif credentials.saved:
            lines.append(f"  Credentials: saved in {saved} by an earlier run.")
        if not credentials.new_password:
            lines.append(
                f"  New admin password:  {python} manage.py changepassword "
                f"{shlex.quote(credentials.admin_user)}"
            )
        if not credentials.new_key:
            lines.append(f"  New API key:         {python} manage.py create_api_key my-key --admin")
        lines.append(f"  Logs:      {as_typed(self.log_dir)}/ (daphne.log, celery.log, relay.log)")
        if credentials.key:
            key = f"$(sed -n 's/^api_key=//p' {shlex.quote(saved)})"
            lines += [
                "",
                "Try it (the commands read the API key from the credentials file):",
                f"  curl -s '{relay}/a2a/registry?q=research' | python3 -m json.tool",
                f"  curl -s '{relay}/a2a/skills?q=writing' | python3 -m json.tool",
                f'  curl -s -X POST -H "Authorization: Bearer {key}" '
                f"{relay}/a2a/registry/echo/refresh | python3 -m json.tool",
                "",
                "Ask the demo team (each hop is printed as it happens, then the answer):",
                f'  {python} manage.py ask_team {DEMO_TEAM} "{DEMO_QUESTION}" '
                f'--url {relay} --key "{key}"',
                "",
                f"Health: the worker probes every agent every "
                f"{settings.RELAY_HEALTH_INTERVAL_SECONDS} s (badges on the registry page; "
                f"`{check_agents}` probes now).",
                "Type 'stop echo' here to watch it turn unhealthy, 'start echo' to bring it back.",
            ]
        lines += ["", "Ctrl-C stops everything. Status:", ""]
        self.stdout.write("\n".join(lines))


def demo_control(demo, line: str) -> str:
    """Carries out one control line on the running demo agents; returns what happened."""
    from routing.demo.agents import DEMO_AGENTS, app_factory
    from routing.demo.serve import serve

    words = line.split()
    specs = {spec.slug: spec for spec in DEMO_AGENTS}
    if len(words) != 2 or words[0] not in ("stop", "start") or words[1] not in specs:
        return (
            f"Type 'stop NAME' or 'start NAME' (NAME: {', '.join(specs)}); the registry "
            "page shows the agent's health change."
        )
    action, name = words
    server = demo.servers[name]
    running = server.running
    if action == "stop":
        if not running:
            return f"{name} is already stopped."
        server.stop()
        return f"Stopped {name}; the health checks will find it unhealthy."
    if running:
        return f"{name} is already running."
    demo.servers[name] = serve(app_factory(specs[name]), host="127.0.0.1", port=server.port)
    return f"Started {name} again at {demo.servers[name].url}."
