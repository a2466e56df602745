"""@a2a-js/sdk, the JavaScript A2A SDK, installed from npm into ``var/node-a2a-js``.

Use the session fixture ``a2a_js_sdk`` of ``tests/conftest.py`` (it skips, saying why, when
node or npm is missing or npm cannot install the package):

    answer = a2a_js_sdk.client({"url": ..., "token": ..., "transport": "JSONRPC", "text": "hi"})

The client is ``tests/peers/js_client.mjs`` (its header says what it takes and answers); it is
copied beside the installed package on each run, since node resolves ES module imports from
the script's own directory.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "var" / "node-a2a-js"
PEERS = Path(__file__).resolve().parent / "peers"
PACKAGE = "@a2a-js/sdk@1.3.0"
INSTALL_SECONDS = 600.0
CALL_SECONDS = 60.0


class JsSdkUnavailable(RuntimeError):
    """node or npm is missing, or npm could not install the SDK."""


@dataclass(frozen=True)
class JsSdk:
    directory: Path
    node: str

    def client(self, request: dict[str, Any]) -> dict[str, Any]:
        """Runs the JS client with ``request``; returns its JSON answer."""
        script = self.directory / "js_client.mjs"
        shutil.copyfile(PEERS / "js_client.mjs", script)
        result = subprocess.run([self.node, str(script)], input=json.dumps(request),
                                capture_output=True, text=True, timeout=CALL_SECONDS,
                                cwd=self.directory)
        if not result.stdout.strip():
            raise RuntimeError(f"the JS client printed nothing:\n{result.stderr[-3000:]}")
        return json.loads(result.stdout)


def build(directory: Path = NODE_DIR) -> JsSdk:
    """The installed SDK, installing it with npm unless a ``complete`` file says an earlier
    install of the same package finished. Raises :class:`JsSdkUnavailable` saying why not."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise JsSdkUnavailable("node and npm are needed and are not on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / "complete"
    with open(directory.parent / f"{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == PACKAGE:
            return JsSdk(directory, node)
        (directory / "package.json").write_text(
            json.dumps({"name": "relay-tests-a2a-js", "private": True, "type": "module"}))
        try:
            result = subprocess.run([npm, "install", "--no-audit", "--no-fund", PACKAGE],
                                    cwd=directory, capture_output=True, text=True,
                                    timeout=INSTALL_SECONDS)
        except subprocess.TimeoutExpired as error:
            raise JsSdkUnavailable(f"npm took over {INSTALL_SECONDS:.0f} s") from error
        if result.returncode != 0:
            raise JsSdkUnavailable(f"npm install failed: {result.stderr.strip()[-500:]}")
        marker.write_text(PACKAGE)
        return JsSdk(directory, node)
