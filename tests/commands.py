"""The live tests' Python processes (``manage.py`` commands, daphne, uvicorn, Celery, the gRPC
server), each a process of its own, forked from a server that has already imported the
third-party packages every Django start of the relay imports.

A relay process spends about five CPU-seconds starting, nine tenths of it importing packages
that do not depend on its settings (the MCP and A2A SDKs, pydantic models, psycopg, redis,
numpy...). The live tests start a hundred commands and servers; each paid the full start. Here
Python's own ``multiprocessing`` forkserver imports those packages once per test process, and
each process is a child forked from it: a fresh process with its own environment, which runs
``python <arguments>`` (``runpy``, as the interpreter does) and sets Django up from its
settings, so what it does is unchanged. It is a real process: its pid can be killed (``kill
-9`` in the chaos tests), and its output goes to a file the test reads.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

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


@atexit.register
def _kill_leftovers() -> None:
    """Kills any process a test left running when the test process exits: multiprocessing
    would otherwise wait for it at exit (this runs first: atexit calls run last in, first
    out), and the suite would hang instead of failing."""
    for child in multiprocessing.active_children():
        child.kill()
        child.join(5)


class CommandTimeoutError(RuntimeError):
    """A command did not finish in time (it was killed)."""


def _main(env: dict[str, str], arguments: tuple[str, ...], stdout: str, stderr: str) -> None:
    """In the forked child: the environment, directory and output of ``python <arguments>``
    (``-m <module> ...`` or ``<script> ...``), then the module or script as ``__main__``."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    for path, stream in ((stdout, sys.stdout), (stderr, sys.stderr)):
        stream.flush()
        with open(path, "ab") as sink:
            os.dup2(sink.fileno(), stream.fileno())
        # What the tests read of a log, they read while the process runs (the relay's
        # environment sets PYTHONUNBUFFERED, which a forked interpreter no longer reads).
        stream.reconfigure(line_buffering=True)
    sys.path.insert(0, str(ROOT))
    if arguments[0] == "-m":
        sys.argv = [arguments[1], *arguments[2:]]
        runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(arguments)
        runpy.run_path(arguments[0], run_name="__main__")


class Child:
    """A process started by ``start``: the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, process: multiprocessing.process.BaseProcess, arguments: tuple[str, ...]):
        self._process = process
        self.arguments = arguments
        self.stderr: IO[str] | None = None
        """The file its stderr goes to, open for reading, where its starter keeps one."""

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code, minus the signal's number when a signal ended it; None while it
        runs."""
        return self._process.exitcode

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Waits for the end; raises subprocess.TimeoutExpired after ``timeout`` seconds."""
        self._process.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["python", *self.arguments], timeout)
        return self.returncode

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()


def start(env: dict[str, str], arguments: tuple[str, ...], *, stdout: Path, stderr: Path) -> Child:
    """Starts ``python <arguments>`` with ``env``, its stdout and stderr appended to the files
    ``stdout`` and ``stderr`` (they may be one file); returns at once."""
    child = _context.Process(target=_main, args=(env, arguments, str(stdout), str(stderr)))
    child.start()
    return Child(child, arguments)


def run(env: dict[str, str], args: tuple[str, ...], *, timeout: float) -> tuple[int, str, str]:
    """Runs ``manage.py <args>`` with ``env``; returns (exit code, stdout, stderr). Raises
    CommandTimeoutError when it runs longer than ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="manage-") as directory:
        stdout, stderr = Path(directory, "stdout"), Path(directory, "stderr")
        child = start(env, ("manage.py", *args), stdout=stdout, stderr=stderr)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise CommandTimeoutError(f"manage.py {' '.join(args)} ran over {timeout} s") from None
        return code, _read(stdout), _read(stderr)


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
