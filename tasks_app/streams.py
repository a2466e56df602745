"""Task events through the channel layer, so every subscriber of a task, in any relay process,
gets the same events in the same order.

Each recorded event is sent to the group ``relay.task.<id>`` with its sequence number. A
subscriber joins the group *before* reading the task from the database, then drops events
whose sequence is not above the snapshot's: nothing is missed and nothing is sent twice.

An event recorded by a process whose channel layer does not reach the subscriber's (a Celery
worker expiring a task, with the embedded profile's in-memory layer) is read from the
database instead: a subscription given a ``catch_up`` asks it for stored events whenever it
has been idle for the keep-alive interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from channels.layers import get_channel_layer

KEEPALIVE = object()

CatchUp = Callable[[int], Awaitable[list[tuple[int, dict[str, Any], bool]]]]
"""Given the last sequence delivered, the (sequence, event, final) stored after it, in order."""


def group_name(task_id: str) -> str:
    return f"relay.task.{task_id}"


async def publish(task_id: str, sequence: int, event: dict[str, Any], *, final: bool) -> None:
    layer = get_channel_layer()
    await layer.group_send(group_name(task_id), {
        "type": "task.event", "sequence": sequence, "event": event, "final": final,
    })


class Subscription:
    def __init__(self, layer, channel: str, catch_up: CatchUp | None = None) -> None:
        self._layer = layer
        self._channel = channel
        self._catch_up = catch_up

    async def events(self, *, after: int, keepalive: float) -> AsyncIterator[Any]:
        """Yields (event, final) in order for sequences above ``after``, and KEEPALIVE when
        nothing arrived for ``keepalive`` seconds (after asking ``catch_up``, when given, for
        events stored meanwhile). Ends after a final event."""
        last = after
        while True:
            try:
                message = await asyncio.wait_for(self._layer.receive(self._channel), keepalive)
            except TimeoutError:
                missed = await self._catch_up(last) if self._catch_up is not None else []
                for sequence, event, final in missed:
                    last = sequence
                    yield event, final
                    if final:
                        return
                if not missed:
                    yield KEEPALIVE
                continue
            if message.get("sequence", 0) <= last:
                continue
            last = message["sequence"]
            yield message["event"], message["final"]
            if message["final"]:
                return


@asynccontextmanager
async def subscription(task_id: str, *, catch_up: CatchUp | None = None):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(task_id), channel)
    try:
        yield Subscription(layer, channel, catch_up)
    finally:
        await layer.group_discard(group_name(task_id), channel)
