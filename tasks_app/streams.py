"""Task events through the channel layer, so every subscriber of a task, in any relay process,
gets the same events in the same order.

Each recorded event is sent to the group ``relay.task.<id>`` with its sequence number. A
subscriber joins the group *before* reading the task from the database, then drops events
whose sequence is not above the snapshot's: nothing is missed and nothing is sent twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from channels.layers import get_channel_layer

KEEPALIVE = object()


def group_name(task_id: str) -> str:
    return f"relay.task.{task_id}"


async def publish(task_id: str, sequence: int, event: dict[str, Any], *, final: bool) -> None:
    layer = get_channel_layer()
    await layer.group_send(group_name(task_id), {
        "type": "task.event", "sequence": sequence, "event": event, "final": final,
    })


class Subscription:
    def __init__(self, layer, channel: str) -> None:
        self._layer = layer
        self._channel = channel

    async def events(self, *, after: int, keepalive: float) -> AsyncIterator[Any]:
        """Yields (event, final) in order for sequences above ``after``, and KEEPALIVE when
        nothing arrived for ``keepalive`` seconds. Ends after a final event."""
        last = after
        while True:
            try:
                message = await asyncio.wait_for(self._layer.receive(self._channel), keepalive)
            except TimeoutError:
                yield KEEPALIVE
                continue
            if message.get("sequence", 0) <= last:
                continue
            last = message["sequence"]
            yield message["event"], message["final"]
            if message["final"]:
                return


@asynccontextmanager
async def subscription(task_id: str):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(task_id), channel)
    try:
        yield Subscription(layer, channel)
    finally:
        await layer.group_discard(group_name(task_id), channel)
