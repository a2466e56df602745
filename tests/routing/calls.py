"""Set-up the team and workflow tests share: the relay in-process over ASGI, a caller's
message, test agents registered, polling the database, a dead relay process, and waiting
for the calls' work to settle (the query budgets)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import timedelta
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.utils import timezone

from registry.services import agent_register
from relay_project.database import database_sync_to_async
from tasks_app.models import RelayProcess, Task


@contextlib.asynccontextmanager
async def relay_client(api_key, *, timeout: float, version: str | None = "1.0"):
    """The relay's ASGI application in this process, called over httpx with the test key
    (and ``A2A-Version: version`` unless None)."""
    from relay_project.asgi import application

    headers = {"Authorization": f"Bearer {api_key[1]}"}
    if version is not None:
        headers["A2A-Version"] = version
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers=headers,
        timeout=timeout,
    ) as client:
        yield client


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    """A caller's message (JSON-RPC 1.0 spelling) saying ``text``."""
    return {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


async def until(check, what: str, seconds: float = 20.0):
    """Polls ``check`` (sync, run in the database thread) until it is truthy."""
    async with asyncio.timeout(seconds):
        while not (found := await sync_to_async(check)()):
            await asyncio.sleep(0.05)
    assert found, what
    return found


def dead_process() -> str:
    """A relay process whose lease ran out a minute ago."""
    return RelayProcess.objects.create(
        id="elsewhere:4242:dead",
        host="elsewhere",
        pid=4242,
        lease_expires_at=timezone.now() - timedelta(minutes=1),
    ).pk


def register_all(urls: dict[str, str]) -> None:
    """Registers each agent of ``urls`` (id -> its URL on 127.0.0.1)."""
    for agent_id, url in urls.items():
        agent_register(url=url, agent_id=agent_id)


async def settled() -> None:
    """Waits (5 s at most) until no task is open: the calls' work after their answers."""
    open_states = ["completed", "failed", "canceled"]
    for _ in range(100):
        if not await database_sync_to_async(Task.objects.exclude(state__in=open_states).exists)():
            return
        await asyncio.sleep(0.05)
