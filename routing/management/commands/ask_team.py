"""Sends one message to a team at a running relay and prints the routed conversation as it
happens (one line per hop, from the task's trace as each hop is done), then the team's
answer and its artifacts.

    python manage.py ask_team demo "please research the weather and write a report" \\
        --url http://127.0.0.1:8000 --key <api key>

It speaks A2A over HTTP like any client (JSON-RPC ``SendStreamingMessage`` to
``{url}/a2a/teams/{team}/``, A2A 1.0), so it works against any relay, not only this database.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from django.core.management.base import BaseCommand, CommandError
from httpx_sse import aconnect_sse

from registry.extensions import CLIENT_ROUTING_URI
from tasks_app import snapshots
from tasks_app.protocol import events as a2a_events

FINAL_STATES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
}


class Command(BaseCommand):
    help = "Sends a message to a team and prints each routing hop as it happens, then the answer."

    def add_arguments(self, parser):
        parser.add_argument("team", help="The team's id.")
        parser.add_argument("text", help="The message to send.")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="The relay.")
        parser.add_argument("--key", required=True, help="An API key of the relay.")
        parser.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            help="Seconds to wait for the whole conversation.",
        )

    def handle(self, *args, team, text, url, key, timeout, **options):
        async def run() -> dict[str, Any]:
            async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout) as client:
                return await asyncio.wait_for(
                    ask_team(client, team=team, text=text, key=key, write=self.stdout.write),
                    timeout,
                )

        try:
            task = asyncio.run(run())
        except (httpx.HTTPError, TimeoutError) as error:
            raise CommandError(f"could not reach the relay at {url}: {error!r}") from error
        except AskError as error:
            raise CommandError(str(error)) from error
        base = url.rstrip("/")
        self.stdout.write(
            f"\nThe conversation as a picture (staff login): {base}/tasks/{task['id']}/"
        )
        self.stdout.write(
            f"Its trace as JSON: curl -s -H 'Authorization: Bearer {key}' "
            f"{base}/a2a/tasks/{task['id']}/trace"
        )


class AskError(Exception):
    """The relay refused the message or broke the stream."""


async def ask_team(
    client: httpx.AsyncClient, *, team: str, text: str, key: str, write: Callable[[str], Any]
) -> dict[str, Any]:
    """Streams one message to the team, writing a line per hop as each is done (the team's
    events name their hop; the trace has what it did), then the final state, answer and
    artifacts. Returns the final task (its ``id`` and ``status``)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": a2a_events.message(
                message_id=f"ask-{uuid.uuid4().hex[:12]}",
                role=a2a_events.ROLE_USER,
                parts=a2a_events.text_parts(text),
            )
        },
    }
    headers = {
        "Authorization": f"Bearer {key}",
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
    }
    write(f'Asking team {team}: "{text}"')
    task: dict[str, Any] = {}
    printed: set[int] = set()
    async with aconnect_sse(
        client, "POST", f"/a2a/teams/{team}/", headers=headers, content=json.dumps(body)
    ) as source:
        if "text/event-stream" not in source.response.headers.get("content-type", ""):
            await source.response.aread()
            raise AskError(
                f"the relay refused the message: HTTP {source.response.status_code} "
                f"{source.response.text[:500]}"
            )
        async for event in source.aiter_sse():
            if not event.data:
                continue
            frame = json.loads(event.data)
            if "error" in frame:
                raise AskError(f"the relay answered an error: {frame['error'].get('message')}")
            result = frame.get("result", {})
            if not {"task", "statusUpdate", "artifactUpdate"} & result.keys():
                raise AskError("the team answered with a message, not a task")
            task = snapshots.apply_event(task, result)
            status = task["status"]
            # Each member event names its hop: one naming a later hop means the earlier are
            # done, and the task's trace has them.
            hop = _hop_of(next(iter(result.values())))
            if hop and any(order not in printed for order in range(1, hop)):
                await _write_hops(client, task["id"], headers, printed, write, before=hop)
            if "artifactUpdate" in result or status["state"] not in FINAL_STATES:
                continue
            await _write_hops(client, task["id"], headers, printed, write)
            _write_answer(task, write)
            return task
    raise AskError("the stream ended before the conversation did")


def _hop_of(body: dict[str, Any]) -> int | None:
    """The hop a team's event comes from (its ``metadata[URI].hop``), when it says."""
    hop = ((body.get("metadata") or {}).get(CLIENT_ROUTING_URI) or {}).get("hop")
    return hop if isinstance(hop, int) else None


async def _write_hops(
    client: httpx.AsyncClient,
    task_id: str,
    headers: dict[str, str],
    printed: set[int],
    write,
    *,
    before: int | None = None,
) -> None:
    """Writes a line for each hop of the task's trace not written yet (those before hop
    ``before`` only, when given)."""
    response = await client.get(
        f"/a2a/tasks/{task_id}/trace",
        headers={"Authorization": headers["Authorization"]},
    )
    if response.status_code != 200:
        return
    for hop in response.json().get("hops", []):
        if hop["order"] in printed or (before is not None and hop["order"] >= before):
            continue
        printed.add(hop["order"])
        note = f"{hop['from']} -> {hop['to']}"
        if hop.get("reason"):
            note += f": {hop['reason']}"
        if hop.get("routingError"):
            note += f" (routing error: {hop['routingError']})"
        then = f"{hop['outcome']} -> {hop['next']}" if hop["next"] else hop["outcome"]
        latency = f"{hop['latencyMs']:.0f} ms" if hop.get("latencyMs") is not None else ""
        write(f"  {hop['order']:>2}. {note:<58} [{then}, {latency}]")


def _write_answer(task: dict[str, Any], write) -> None:
    status = task["status"]
    state = status["state"].removeprefix("TASK_STATE_").lower().replace("_", "-")
    write(f"\nTeam task {task.get('id', '?')}: {state}")
    for part in (status.get("message") or {}).get("parts", []):
        if "text" in part:
            write(part["text"])
    for artifact in task.get("artifacts", []):
        write(f"\n[artifact {artifact.get('name') or artifact.get('artifactId')}]")
        for part in artifact.get("parts", []):
            if "text" in part:
                write(part["text"])
