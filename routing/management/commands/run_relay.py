"""Starts the whole relay on this machine: daphne, a Celery worker with beat, and (by default)
the demo agents, registered and ready. Stops everything on Ctrl-C."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from registry.models import ApiKey
from registry.services import api_key_create, api_key_revoke
from routing.demo.setup import DEMO_QUESTION, DEMO_TEAM

DEMO_KEY_NAME = "demo (run_relay)"


def this_python() -> str:
    """The interpreter running this command, as a path from the current directory when it
    lies under it (``.venv/bin/python`` under ``make up``), else its absolute path."""
    relative = os.path.relpath(sys.executable)
    return sys.executable if relative.startswith("..") else relative


class Command(BaseCommand):
    help = "Starts the relay, a Celery worker with beat, and the demo agents."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--agents-port", type=int, default=9301,
                            help="First port of the demo agents.")
        parser.add_argument("--no-demo", action="store_true", help="Start without demo agents.")
        parser.add_argument("--no-worker", action="store_true", help="Start without Celery.")

    def handle(self, *args, host, port, agents_port, no_demo, no_worker, **options):
        environment = dict(os.environ)
        if not no_demo:
            # The demo agents listen on 127.0.0.1, which the relay refuses by default.
            settings.RELAY_ALLOW_PRIVATE_URLS = True
            environment["RELAY_ALLOW_PRIVATE_URLS"] = "true"
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write(f"Database ready ({settings.DATABASES['default']['ENGINE']}).")

        children: list[subprocess.Popen] = []
        demo = None
        stop = threading.Event()
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signal_number, lambda *_: stop.set())
        try:
            children.append(self._start(
                [sys.executable, "-m", "daphne", "-b", host, "-p", str(port),
                 "relay_project.asgi:application"], environment))
            if not no_worker:
                children.append(self._start(
                    [sys.executable, "-m", "celery", "-A", "relay_project", "worker", "--beat",
                     "--loglevel=INFO", "--concurrency=2"], environment))
            self._wait_for_port(host, port, children[0])
            relay = f"http://{host}:{port}"
            if not no_demo:
                demo = self._start_demo(agents_port)
            self._print_summary(relay, demo_key=None if no_demo else self._demo_key())
            if demo is not None:
                threading.Thread(target=self._demo_controls, args=(demo,), daemon=True,
                                 name="demo-controls").start()
            while not stop.wait(1.0):
                exited = [child for child in children if child.poll() is not None]
                if exited:
                    raise CommandError(f"{exited[0].args[2]} stopped with code "
                                       f"{exited[0].returncode}")
        finally:
            for child in children:
                child.terminate()
            for child in children:
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
            if demo is not None:
                demo.stop()
            self.stdout.write("Stopped.")

    def _start(self, command: list[str], environment: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen(command, env=environment)

    def _wait_for_port(self, host: str, port: int, process: subprocess.Popen) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(f"daphne exited with code {process.returncode}")
            with socket.socket() as probe:
                probe.settimeout(0.5)
                if probe.connect_ex((host, port)) == 0:
                    return
            time.sleep(0.2)
        raise CommandError(f"daphne did not listen on {host}:{port} within 30 s")

    def _start_demo(self, agents_port: int):
        from routing.demo.agents import serve_demo_agents
        from routing.demo.setup import demo_agents_register, demo_team_ensure

        group = serve_demo_agents(host="127.0.0.1", first_port=agents_port)
        for line in demo_agents_register(group.urls):
            self.stdout.write(line)
        self.stdout.write(demo_team_ensure())
        return group

    def _demo_controls(self, demo) -> None:
        """Reads "stop NAME" and "start NAME" lines on stdin: a demo agent goes away and comes
        back on its port, so its health can be watched turning unhealthy and healthy again."""
        for line in sys.stdin:
            self.stdout.write(demo_control(demo, line))

    def _demo_key(self) -> str:
        """A fresh key for the printed examples; the previous run's demo key is revoked."""
        for old in ApiKey.objects.usable().filter(name=DEMO_KEY_NAME):
            api_key_revoke(api_key=old)
        return api_key_create(name=DEMO_KEY_NAME, is_admin=True)[1]

    def _admin_login(self) -> str:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return "log in with your superuser"
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "admin@localhost", password)
        return f"user admin, password {password} (shown once; change it in the admin)"

    def _print_summary(self, relay: str, demo_key: str | None) -> None:
        """The banner. Its commands work pasted into a fresh shell in the checkout: they name
        the interpreter this command runs in (the project's virtualenv under ``make up``),
        where a bare ``python`` may be another one, without Django, or none at all."""
        lines = [
            "",
            f"Brass Relay is running at {relay}",
            f"  Registry:  {relay}/",
            f"  API docs:  {relay}/api/docs",
            f"  Admin:     {relay}/admin/  ({self._admin_login()})",
        ]
        if demo_key:
            lines += [
                "",
                "Try it:",
                f"  curl -s '{relay}/a2a/registry?q=research' | python3 -m json.tool",
                f"  curl -s '{relay}/a2a/skills?q=writing' | python3 -m json.tool",
                f"  curl -s -X POST -H 'Authorization: Bearer {demo_key}' "
                f"{relay}/a2a/registry/echo/refresh | python3 -m json.tool",
                "",
                "Ask the demo team (each hop is printed as it happens, then the answer):",
                f"  {this_python()} manage.py ask_team {DEMO_TEAM} \"{DEMO_QUESTION}\" "
                f"--url {relay} "
                f"--key {demo_key}",
            ]
            lines += [
                "",
                f"Health: the worker probes every agent every "
                f"{settings.RELAY_HEALTH_INTERVAL_SECONDS} s (badges on the registry page; "
                f"`{this_python()} manage.py check_agents` probes now).",
                "Type 'stop echo' here to watch it turn unhealthy, 'start echo' to bring it back.",
            ]
        lines += ["", "Ctrl-C stops everything.", ""]
        self.stdout.write("\n".join(lines))


def demo_control(demo, line: str) -> str:
    """Carries out one control line on the running demo agents; returns what happened."""
    from routing.demo.agents import DEMO_AGENTS, app_factory
    from routing.demo.serve import serve

    words = line.split()
    specs = {spec.slug: spec for spec in DEMO_AGENTS}
    if len(words) != 2 or words[0] not in ("stop", "start") or words[1] not in specs:
        return (f"Type 'stop NAME' or 'start NAME' (NAME: {', '.join(specs)}); the registry "
                "page shows the agent's health change.")
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
