"""The official A2A JavaScript SDK (``@a2a-js/sdk``, installed in ``tests/js`` by
``scripts/ensure-js``) as an agent and as a client, for interop tests. No Django, no pytest.

    if (reason := js_missing()) is not None:            # node, or the npm modules, are absent
        pytest.skip(reason)
    with js_agent() as agent:                           # tests/js/agent.js on a free port
        run = run_js_client(agent.url, "JSONRPC", [send("echo hi"), get(ref(0, "result.task.id"))])
        run.ops[0].result["task"]["status"]["state"]    # "TASK_STATE_COMPLETED"

The agent's behaviour is chosen by the first word of the message (echo, stream, working, ask,
message, never: see tests/js/agent.js). The client runs a list of operations in one process and
reports what the SDK returned, as A2A 1.0 JSON (see tests/js/client.js). ``observable`` reduces
an outcome to what a caller can compare across two runs (ids and timestamps made neutral), so a
differential test can assert that the relay changes nothing a client sees.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.live import stop_process

JS_DIR = Path(__file__).resolve().parent / "js"
SDK_PACKAGE = JS_DIR / "node_modules" / "@a2a-js" / "sdk" / "package.json"
NODE_MAJOR_NEEDED = 20
START_SECONDS = 20.0
CLIENT_SECONDS = 60.0
CALL_SECONDS = 20.0

JS_CHUNKS = ("Once ", "upon ", "a ", "time.")
"""The artifact chunks the JS agent streams for "stream" (CHUNKS in tests/js/agent.js)."""

JS_QUESTION = "What name should I greet?"
"""The JS agent's input-required question for "ask"."""


def js_missing() -> str | None:
    """Why the JS interop pieces cannot run here (a sentence for pytest.skip), or None."""
    node = shutil.which("node")
    if node is None:
        return "node is not installed, so @a2a-js/sdk cannot run (install Node.js 20 and npm)"
    try:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"node does not run: {error}"
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < NODE_MAJOR_NEEDED:
        return f"@a2a-js/sdk needs Node.js {NODE_MAJOR_NEEDED} or newer; this node is {version}"
    if not SDK_PACKAGE.is_file():
        return "@a2a-js/sdk is not installed in tests/js (run: bash scripts/ensure-js; needs npm)"
    return None


# --- the JS agent ------------------------------------------------------------------------


@dataclass
class JsAgent:
    """A running tests/js/agent.js: ``url`` is its base URL (card at ``card_url``)."""

    url: str
    card_url: str
    process: subprocess.Popen
    log: list[str] = field(default_factory=list)

    def requests(self) -> list[dict[str, Any]]:
        """Every A2A request the agent received so far: method, path, headers, body (JSON)."""
        response = httpx.get(f"{self.url}/_test/requests", timeout=CALL_SECONDS)
        response.raise_for_status()
        return response.json()

    def card(self, version: str = "1.0") -> dict[str, Any]:
        """The agent's card as a client of ``version`` asks for it (the SDK serves a 0.3-shaped
        card when no A2A-Version header is sent)."""
        response = httpx.get(self.card_url, headers={"A2A-Version": version}, timeout=CALL_SECONDS)
        response.raise_for_status()
        return response.json()


class JsAgentFailedError(RuntimeError):
    """The JS agent exited or did not say it was ready in time; the message has its output."""


def _pump(stream, lines: queue.Queue, log: list[str]) -> None:
    for line in stream:
        log.append(line.rstrip("\n"))
        lines.put(line)
    lines.put(None)


@contextmanager
def js_agent(*, versions: tuple[str, ...] = ("1.0", "0.3")) -> Iterator[JsAgent]:
    """Starts tests/js/agent.js on a free port of 127.0.0.1 speaking ``versions`` and yields it
    once it says it is ready; stops it when the block ends. Raises JsAgentFailedError (with its
    output) when it does not start within START_SECONDS."""
    process = subprocess.Popen(
        ["node", "agent.js", "--port", "0", "--versions", ",".join(versions)],
        cwd=JS_DIR,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    log: list[str] = []
    threading.Thread(target=_pump, args=(process.stdout, lines, log), daemon=True).start()
    try:
        ready = _wait_ready(lines, log)
        yield JsAgent(url=ready["url"], card_url=ready["card"], process=process, log=log)
    finally:
        stop_process(process)


def _wait_ready(lines: queue.Queue, log: list[str]) -> dict[str, Any]:
    while True:
        try:
            line = lines.get(timeout=START_SECONDS)
        except queue.Empty:
            raise JsAgentFailedError(
                f"the JS agent was not ready within {START_SECONDS} s:\n" + "\n".join(log)
            ) from None
        if line is None:
            raise JsAgentFailedError("the JS agent exited before it was ready:\n" + "\n".join(log))
        try:
            ready = json.loads(line)
        except ValueError:
            continue
        if isinstance(ready, dict) and ready.get("ready"):
            return ready


# --- the JS client -----------------------------------------------------------------------


def ref(index: int, path: str) -> dict[str, str]:
    """A value the client fills in from operation ``index``'s outcome, e.g.
    ``ref(0, "result.task.id")`` or ``ref(1, "events.0.task.id")``."""
    return {"$ref": f"{index}.{path}"}


def send(text: str, **fields: Any) -> dict[str, Any]:
    """A ``send`` operation of the text (``taskId``, ``contextId``, ``configuration``,
    ``metadata``, ``message``, ``headers`` as the client script takes them)."""
    return {"op": "send", "text": text, **fields}


def stream(text: str, **fields: Any) -> dict[str, Any]:
    """A ``stream`` operation, as ``send``."""
    return {"op": "stream", "text": text, **fields}


def get(task_id: Any, **fields: Any) -> dict[str, Any]:
    return {"op": "get", "id": task_id, **fields}


@dataclass
class JsOutcome:
    """What the JS client got from one operation: the events of a stream in order, a unary
    ``result``, or an ``error`` ({name, message, code, status, reason})."""

    events: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    error: dict[str, Any] | None = None
    ended: bool = False


@dataclass
class JsRun:
    """A whole run of the client: the interface it chose and each operation's outcome."""

    client: dict[str, Any]
    ops: list[JsOutcome]
    lines: list[dict[str, Any]]


class JsClientFailedError(RuntimeError):
    """The client could not be made (no such interface, no card) or the script failed."""


def _run_script(
    script: str,
    spec: dict[str, Any],
    timeout: float,
    what: str,
    complete: Callable[[list[dict[str, Any]]], bool],
) -> list[dict[str, Any]]:
    """Runs ``node <script>`` of tests/js with ``spec`` as its JSON input and returns the JSON
    lines it printed. Raises JsClientFailedError, with the script's output, when it exited
    with an error, printed nothing, or printed lines that ``complete`` does not accept."""
    completed = subprocess.run(
        ["node", script],
        cwd=JS_DIR,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not lines or not complete(lines):
        raise JsClientFailedError(
            f"{what} failed (exit {completed.returncode}):\n"
            f"{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
        )
    return lines


def _ended(lines: list[dict[str, Any]]) -> bool:
    """Whether a script's last line says how its run ended."""
    return lines[-1]["kind"] in ("done", "error")


def run_js_client(
    target: str,
    binding: str,
    operations: list[dict[str, Any]],
    *,
    version: str | None = None,
    headers: dict[str, str] | None = None,
    card_url: str | None = None,
    discover: bool = False,
    timeout: float = CLIENT_SECONDS,
) -> JsRun:
    """Runs tests/js/client.js against the agent at ``target`` (its base URL; or ``card_url``
    names the card) with one ``binding`` ("JSONRPC" or "HTTP+JSON") and, when given, one
    protocol ``version``. ``headers`` go with every request (e.g. the relay's Authorization).
    With ``discover`` the SDK makes the client from the card URL itself (``createFromUrl``,
    preferring ``binding``), as an application would. ``run.client["card"]`` is the card as
    the SDK read it. Raises JsClientFailedError when no client could be made or the script
    failed."""
    spec: dict[str, Any] = {
        "binding": binding,
        "operations": operations,
        "headers": headers or {},
        "timeout_ms": int(CALL_SECONDS * 1000),
        "discover": discover,
    }
    spec |= {"card_url": card_url} if card_url else {"agent_url": target}
    if version:
        spec["version"] = version
    lines = _run_script(
        "client.js", spec, timeout, "the JS client", lambda lines: lines[0].get("kind") == "client"
    )
    ops = [JsOutcome() for _ in operations]
    for line in lines[1:]:
        outcome = ops[line["op"]]
        if line["kind"] == "event":
            outcome.events.append(line["event"])
        elif line["kind"] == "result":
            outcome.result = line["result"]
        elif line["kind"] == "error":
            outcome.error = line["error"]
        elif line["kind"] == "end":
            outcome.ended = True
    return JsRun(client=lines[0], ops=ops, lines=lines)


# --- the official Python SDK's client's events, as the JS client prints them ------------


def sdk_events(events: list[Any]) -> list[dict[str, Any]]:
    """a2a-sdk StreamResponse objects as the same A2A 1.0 JSON the JS client prints."""
    from google.protobuf.json_format import MessageToDict

    return [MessageToDict(event) for event in events]


# --- comparing what two runs observed -------------------------------------------------------

NEUTRAL_KEYS = {"timestamp"}
ID_KINDS = {
    "id": "task",
    "taskId": "task",
    "contextId": "context",
    "messageId": "message",
    "artifactId": "artifact",
}
"""Keys holding ids, and the kind of id each holds (a task's "id" is its task id)."""


def observable(value: Any, ids: dict[tuple[str, str], str] | None = None) -> Any:
    """``value`` (A2A JSON: events, a task, a result) with what differs between two runs of the
    same exchange made neutral: timestamps dropped, and each distinct id replaced by its kind
    and order of first appearance ("task-1", "context-1", "message-2", ...), so that two events
    naming the same task still do after the change, whoever chose the id. Everything else is
    kept. Pass the same ``ids`` to several calls to number ids across them."""
    ids = {} if ids is None else ids
    if isinstance(value, list):
        return [observable(item, ids) for item in value]
    if not isinstance(value, dict):
        return value
    seen: dict[str, Any] = {}
    for key, item in value.items():
        if key in NEUTRAL_KEYS:
            continue
        if key in ID_KINDS and isinstance(item, str):
            kind = ID_KINDS[key]
            number = sum(1 for known in ids if known[0] == kind) + 1
            seen[key] = ids.setdefault((kind, item), f"{kind}-{number}")
        else:
            seen[key] = observable(item, ids)
    return seen


def event_kinds(events: list[dict[str, Any]]) -> list[str]:
    """The kind of each StreamResponse JSON ("task", "message", "statusUpdate",
    "artifactUpdate"), in order."""
    return [next(iter(event)) for event in events]


def states(events: list[dict[str, Any]]) -> list[str]:
    """The task state each event carries ("TASK_STATE_..."), in order; "" for events with none."""
    found = []
    for event in events:
        kind, body = next(iter(event.items()))
        found.append(
            body.get("status", {}).get("state", "") if kind in ("task", "statusUpdate") else ""
        )
    return found


# --- the AG-UI client ----------------------------------------------------------------------


@dataclass
class AgUiRun:
    """One run of tests/js/agui_client.js: each event with when it arrived (ms since the
    epoch), and how the run ended ("done" with the agent's messages, state and interrupts,
    or "error" with its message)."""

    events: list[dict[str, Any]]
    arrived: list[int]
    end: dict[str, Any]


def run_agui_client(url: str, text: str, **spec: Any) -> AgUiRun:
    """Runs one AG-UI run with @ag-ui/client's HttpAgent against ``url`` (``headers``,
    ``threadId``, ``resume``, ``state`` as the script takes them). Raises JsClientFailedError
    when the script itself failed."""
    lines = _run_script(
        "agui_client.js",
        {"url": url, "text": text, **spec},
        CLIENT_SECONDS,
        "the AG-UI client",
        _ended,
    )
    events = [line for line in lines if line["kind"] == "event"]
    return AgUiRun(
        events=[line["event"] for line in events],
        arrived=[line["at"] for line in events],
        end=lines[-1],
    )


# --- the MCP client ------------------------------------------------------------------------

MCP_SDK_PACKAGE = JS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def list_tools() -> dict[str, Any]:
    """An operation of tests/js/mcp_client.js: tools/list."""
    return {"op": "list"}


def call_tool(name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    """An operation of tests/js/mcp_client.js: tools/call, with the script's ``options``
    (``progress=True``, ``cancelAfterProgress=n``)."""
    return {"op": "call", "name": name, "arguments": arguments, **options}


def call_as_task(name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    """An operation of tests/js/mcp_client.js: tools/call as a 2025-11-25 task, with the
    script's ``options`` (``cancelAfterStatus=n``, ``answer=text``)."""
    return {"op": "task", "name": name, "arguments": arguments, **options}


def run_mcp_client(
    url: str, ops: list[dict[str, Any]], *, seconds: float = CLIENT_SECONDS, **spec: Any
) -> dict[str, Any]:
    """Connects @modelcontextprotocol/sdk's Client to ``url`` (streamable HTTP; ``headers``
    as the script takes them), runs ``ops`` in order and returns the script's last line:
    ``{"kind": "done", "protocolVersion", "server", "ops": [{"result"} or {"error"}]}`` or
    ``{"kind": "error", "code", "message"}``, within ``seconds``. Raises JsClientFailedError
    when the script failed."""
    return _run_script(
        "mcp_client.js", {"url": url, "ops": ops, **spec}, seconds, "the MCP client", _ended
    )[-1]
