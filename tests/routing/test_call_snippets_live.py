"""The "how to call it" snippets of the agent and team pages, run as printed against a relay of
real processes: the page is fetched from the relay, each snippet is taken from its HTML, and
curl, the Python a2a-sdk client (over JSON-RPC and over gRPC, against the relay's ``run_grpc``)
and the JavaScript one must get the echo agent's answer back."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys

import httpx
import pytest

from routing.demo.agents import ECHO, WRITER, build_agent_app, draft_for
from tests.jsinterop import JS_DIR, js_missing
from tests.live import CALL_SECONDS, free_port, live_relay, manage

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with live_relay(
        tmp_path_factory.mktemp("snippet-relay"), RELAY_GRPC_PORT=str(free_port())
    ) as live:
        live.serve_agent("echo", lambda url: build_agent_app(ECHO, base_url=url))
        live.serve_agent("writer", lambda url: build_agent_app(WRITER, base_url=url))
        manage(
            live.env,
            "shell",
            "-c",
            "from registry.teams import team_create; team_create(team_id='echoes', "
            "name='Echoes', members=['echo'], default_agent='echo')",
        )
        with live.grpc_server():
            yield live


def snippets_of(relay, page: str) -> dict[str, str]:
    response = httpx.get(f"{relay.url}{page}", timeout=CALL_SECONDS)
    assert response.status_code == 200
    return {
        name: html.unescape(code)
        for name, code in re.findall(
            r'<pre class="code" id="snippet-(\w+)">(.*?)</pre>', response.text, re.S
        )
    }


def run(command: list[str], relay, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "RELAY_API_KEY": relay.key}
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=CALL_SECONDS * 2, **kwargs
    )


@pytest.mark.parametrize("page", ["/agents/echo/", "/teams/echoes/"])
def test_the_curl_snippet_gets_an_answer_as_printed(relay, page):
    curl = snippets_of(relay, page)["curl"]
    assert f"{relay.url}/a2a/" in curl

    result = run(["bash", "-c", curl], relay)

    assert result.returncode == 0, result.stderr
    answer = result.stdout
    assert '"jsonrpc":"2.0"' in answer and '"error"' not in answer
    assert '"parts":[{"text":"Hello"}]' in answer
    assert '"role":"ROLE_AGENT"' in answer


@pytest.mark.parametrize(
    ("page", "answer"),
    [
        ("/agents/echo/", "Hello"),
        ("/teams/echoes/", "Hello"),
        ("/agents/writer/", draft_for("Hello")),
    ],
)
def test_the_python_snippet_prints_the_answer_once_as_printed(relay, page, answer, tmp_path):
    """Regression: streaming, it printed an agent's artifact as it came and again with the
    final task (and a blank line for every event without text)."""
    script = tmp_path / "call.py"
    script.write_text(snippets_of(relay, page)["python"])

    result = run([sys.executable, str(script)], relay, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == answer + "\n"


@pytest.mark.parametrize("page", ["/agents/echo/", "/teams/echoes/"])
def test_the_grpc_snippet_gets_an_answer_from_the_relays_grpc_server(relay, page, tmp_path):
    """The snippet allows the gRPC binding only, so the answer came over gRPC."""
    script = tmp_path / "call_grpc.py"
    script.write_text(snippets_of(relay, page)["grpc"])

    result = run([sys.executable, str(script)], relay, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Hello"]


def test_the_curl_snippet_without_a_key_is_refused(relay):
    curl = snippets_of(relay, "/agents/echo/")["curl"]
    env = {key: value for key, value in os.environ.items() if key != "RELAY_API_KEY"}

    result = subprocess.run(
        ["bash", "-c", curl + " -w '%{http_code}'"],
        env=env,
        capture_output=True,
        text=True,
        timeout=CALL_SECONDS,
    )

    assert result.stdout.endswith("401")


@pytest.mark.skipif(bool(js_missing()), reason=js_missing() or "")
@pytest.mark.parametrize("page", ["/agents/echo/", "/teams/echoes/"])
def test_the_javascript_snippet_gets_an_answer_as_printed(relay, page, tmp_path):
    # An ES module finds its packages from where it lies, so it goes beside node_modules.
    script = os.path.join(JS_DIR, f"relay-snippet-{os.getpid()}.mjs")
    with open(script, "w") as file:
        file.write(snippets_of(relay, page)["javascript"])
    try:
        result = run(["node", script], relay)
    finally:
        os.unlink(script)

    assert result.returncode == 0, result.stderr
    assert '"value": "Hello"' in result.stdout


@pytest.mark.skipif(bool(js_missing()), reason=js_missing() or "")
@pytest.mark.parametrize("page", ["/agents/echo/", "/teams/echoes/"])
def test_the_agui_snippet_gets_an_answer_as_printed(relay, page, tmp_path):
    snippets = snippets_of(relay, page)
    kind, target = page.strip("/").split("/")
    assert f'"{relay.url}/agui/{kind}/{target}"' in snippets["agui"]
    script = os.path.join(JS_DIR, f"relay-agui-snippet-{os.getpid()}.mjs")
    with open(script, "w") as file:
        file.write(snippets["agui"])
    try:
        result = run(["node", script], relay)
    finally:
        os.unlink(script)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello\n"
    assert result.stderr.split() == [
        "RUN_STARTED",
        *(["STATE_SNAPSHOT", "STEP_STARTED"] if kind == "teams" else []),
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        *(["STEP_FINISHED", "STATE_SNAPSHOT"] if kind == "teams" else []),
        "RUN_FINISHED",
    ]
