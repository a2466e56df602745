"""``manage.py`` commands for the live tests, each in a process of its own, forked from a server
that has already imported the third-party packages every Django start of the relay imports.

A relay process spends about five CPU-seconds starting, nine tenths of it importing packages
that do not depend on its settings (the MCP and A2A SDKs, pydantic models, psycopg, redis,
numpy...). The live tests run a hundred commands; each paid the full start. Here Python's own
``multiprocessing`` forkserver imports those packages once per test process, and each command
is a child forked from it: a fresh process with its own environment, which sets Django up from
its settings as ``python manage.py`` does, so what a command does is unchanged.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELOADED = [
    # Packages only: nothing of the relay (its settings come from each command's environment)
    # and nothing that starts a thread or an event loop, or installs a reactor, when imported.
    "OpenSSL",
    "a2a.client",
    "a2a.types",
    "aiohttp",
    "autobahn.websocket",
    "celery",
    "celpy",
    "click",
    "cryptography.x509",
    "dateutil",
    "django.db.models",
    "django.http",
    "httpcore",
    "httpx",
    "jinja2",
    "joserfc",
    "kombu",
    "lark",
    "markdown",
    "mcp",
    "numpy",
    "pendulum",
    "prometheus_client",
    "psycopg",
    "pydantic",
    "redis",
    "requests",
    "rich",
    "twisted.internet.asyncioreactor",
    "urllib3",
    "yaml",
    "zope.interface",
]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOADED)


class CommandTimeoutError(RuntimeError):
    """A command did not finish in time (it was killed)."""


def _main(env: dict[str, str], args: tuple[str, ...], stdout: str, stderr: str) -> None:
    """In the forked child: the environment, directory, output and argv of
    ``python manage.py <args>``, then manage.py's own main."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    for path, stream in ((stdout, sys.stdout), (stderr, sys.stderr)):
        stream.flush()
        with open(path, "wb") as sink:
            os.dup2(sink.fileno(), stream.fileno())
    sys.argv = ["manage.py", *args]
    sys.path.insert(0, str(ROOT))
    import manage

    manage.main()


def run(env: dict[str, str], args: tuple[str, ...], *, timeout: float) -> tuple[int, str, str]:
    """Runs ``manage.py <args>`` with ``env``; returns (exit code, stdout, stderr). Raises
    CommandTimeoutError when it runs longer than ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="manage-") as directory:
        stdout, stderr = Path(directory, "stdout"), Path(directory, "stderr")
        child = _context.Process(target=_main, args=(env, args, str(stdout), str(stderr)))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise CommandTimeoutError(f"manage.py {' '.join(args)} ran over {timeout} s")
        return child.exitcode, _read(stdout), _read(stderr)


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
