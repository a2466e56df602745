"""a2a-sdk 0.3.26, the 0.3 SDK most deployed clients and agents use, in a virtualenv of its own.

The relay's own environment has a2a-sdk 1.x, which cannot be installed beside 0.3.x, so the
0.3.26 client and agent run as subprocesses of ``var/venv-a2a03`` (built once with uv, reused
while it says it is complete). Use the session fixture ``a2a_sdk_03`` of ``tests/conftest.py``,
which skips, saying why, when uv cannot install the SDK:

    def test_something(a2a_sdk_03):
        answer = a2a_sdk_03.client({"parse_card": card})           # tests/peers/sdk03_client.py
        with a2a_sdk_03.agent(transports="HTTP+JSON") as url:        # tests/peers/sdk03_agent.py
            ...

The scripts under ``tests/peers/`` import only the 0.3.26 SDK; their docstrings say what they
take and answer.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import select
import subprocess
import sys
import tempfile
import threading
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from uv import find_uv_bin

from tests.live import free_port, stop_process, wait_for

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "var" / "venv-a2a03"
PEERS = Path(__file__).resolve().parent / "peers"
REQUIREMENTS = ("a2a-sdk[http-server]==0.3.26", "uvicorn")
INSTALL_SECONDS = 600.0
CALL_SECONDS = 60.0
START_SECONDS = 30.0


_clients: dict[Path, tuple[subprocess.Popen, Any]] = {}
"""The one ``--serve`` client process of each virtualenv in this test process, and its log."""
_client_lock = threading.Lock()


@atexit.register
def _stop_clients() -> None:
    for process, _ in _clients.values():
        stop_process(process)


class Sdk03Unavailable(RuntimeError):
    """The 0.3.26 virtualenv could not be built (no network to the registry, uv failed)."""


@dataclass(frozen=True)
class Sdk03:
    """The built virtualenv: run its client script, or serve its agent."""

    python: Path

    def client(self, request: dict[str, Any]) -> dict[str, Any]:
        """Runs ``request`` through ``tests/peers/sdk03_client.py``; returns its JSON answer
        (``{"error": ...}`` when the SDK raised). One client process (``--serve``) answers
        every call of this test process, one at a time: a start of Python and the SDK costs
        seconds on a loaded machine."""
        with _client_lock:
            process, log = _clients.get(self.python, (None, None))
            if process is None or process.poll() is not None:
                # The log lives as long as the process: closed with the test process.
                log = tempfile.TemporaryFile()  # noqa: SIM115
                process = subprocess.Popen(
                    [str(self.python), str(PEERS / "sdk03_client.py"), "--serve"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
                _clients[self.python] = (process, log)
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], CALL_SECONDS)
            line = process.stdout.readline() if ready else ""
            if not line.strip():
                stop_process(process)
                log.seek(0)
                said = log.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"the 0.3.26 client answered nothing:\n{said}")
            return json.loads(line)

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
    """The virtualenv at ``path``, built with uv (a dev dependency: seconds where pip takes
    most of a minute) unless an earlier build completed (a ``complete`` file names what it
    installed). Several processes may call this at once: a lock file makes one build and the
    others wait. Raises :class:`Sdk03Unavailable` with uv's last words when the install
    fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = path / "complete"
    python = path / "bin" / "python"
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == "\n".join(REQUIREMENTS) and python.exists():
            return Sdk03(python)
        venv.EnvBuilder(clear=True).create(path)
        try:
            result = subprocess.run(
                [
                    find_uv_bin(),
                    "pip",
                    "install",
                    "--quiet",
                    "--python",
                    str(python),
                    *REQUIREMENTS,
                ],
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
            )
        except subprocess.TimeoutExpired as error:
            raise Sdk03Unavailable(f"uv took over {INSTALL_SECONDS:.0f} s") from error
        if result.returncode != 0:
            raise Sdk03Unavailable(f"uv pip install failed: {result.stderr.strip()[-500:]}")
        marker.write_text("\n".join(REQUIREMENTS))
        return Sdk03(python)


if __name__ == "__main__":  # python -m tests.sdk03: build it ahead of a test run
    print(build().python, file=sys.stdout)
