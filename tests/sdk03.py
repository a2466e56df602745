"""a2a-sdk 0.3.26, the 0.3 SDK most deployed clients and agents use, in a virtualenv of its own.

The relay's own environment has a2a-sdk 1.x, which cannot be installed beside 0.3.x, so the
0.3.26 client and agent run as subprocesses of ``var/venv-a2a03`` (built once with pip, reused
while it says it is complete). Use the session fixture ``a2a_sdk_03`` of ``tests/conftest.py``,
which skips, saying why, when pip cannot install the SDK:

    def test_something(a2a_sdk_03):
        answer = a2a_sdk_03.client({"parse_card": card})           # tests/peers/sdk03_client.py
        with a2a_sdk_03.agent(transports="HTTP+JSON") as url:        # tests/peers/sdk03_agent.py
            ...

The scripts under ``tests/peers/`` import only the 0.3.26 SDK; their docstrings say what they
take and answer.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.live import free_port, stop_process, wait_for

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "var" / "venv-a2a03"
PEERS = Path(__file__).resolve().parent / "peers"
REQUIREMENTS = ("a2a-sdk[http-server]==0.3.26", "uvicorn")
INSTALL_SECONDS = 600.0
CALL_SECONDS = 60.0
START_SECONDS = 30.0


class Sdk03Unavailable(RuntimeError):
    """The 0.3.26 virtualenv could not be built (no network to the registry, pip failed)."""


@dataclass(frozen=True)
class Sdk03:
    """The built virtualenv: run its client script, or serve its agent."""

    python: Path

    def client(self, request: dict[str, Any]) -> dict[str, Any]:
        """Runs ``tests/peers/sdk03_client.py`` with ``request``; returns its JSON answer
        (``{"error": ...}`` when the SDK raised)."""
        result = subprocess.run(
            [str(self.python), str(PEERS / "sdk03_client.py")],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=CALL_SECONDS,
        )
        if not result.stdout.strip():
            raise RuntimeError(f"the 0.3.26 client printed nothing:\n{result.stderr[-3000:]}")
        return json.loads(result.stdout)

    @contextmanager
    def agent(self, *, transports: str = "HTTP+JSON") -> Iterator[str]:
        """Serves ``tests/peers/sdk03_agent.py`` on a free port of 127.0.0.1 for the block;
        yields its base URL (no trailing slash). ``transports`` is comma-separated, the
        preferred first. Its output is shown when it fails to start."""
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with tempfile.TemporaryFile(mode="w+") as log:
            process = subprocess.Popen(
                [
                    str(self.python),
                    str(PEERS / "sdk03_agent.py"),
                    str(port),
                    "--transports",
                    transports,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
            try:
                wait_for(
                    lambda: process.poll() is not None or _answers(url),
                    "the 0.3.26 agent's start",
                    timeout=START_SECONDS,
                )
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"the 0.3.26 agent exited: {log.read()[-3000:]}")
                yield url
            finally:
                stop_process(process)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/.well-known/agent-card.json", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def build(path: Path = VENV) -> Sdk03:
    """The virtualenv at ``path``, built with pip unless an earlier build completed (a
    ``complete`` file names what it installed). Several processes may call this at once: a
    lock file makes one build and the others wait. Raises :class:`Sdk03Unavailable` with
    pip's last words when the install fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = path / "complete"
    python = path / "bin" / "python"
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == "\n".join(REQUIREMENTS) and python.exists():
            return Sdk03(python)
        venv.EnvBuilder(clear=True, with_pip=True).create(path)
        try:
            result = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    *REQUIREMENTS,
                ],
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
            )
        except subprocess.TimeoutExpired as error:
            raise Sdk03Unavailable(f"pip took over {INSTALL_SECONDS:.0f} s") from error
        if result.returncode != 0:
            raise Sdk03Unavailable(f"pip install failed: {result.stderr.strip()[-500:]}")
        marker.write_text("\n".join(REQUIREMENTS))
        return Sdk03(python)


if __name__ == "__main__":  # python -m tests.sdk03: build it ahead of a test run
    print(build().python, file=sys.stdout)
