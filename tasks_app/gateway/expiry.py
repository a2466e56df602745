"""Expiry: open tasks past their expiry end ``failed`` with a timeout error (the Celery job
``tasks_app.expire_tasks`` runs ``expire_overdue``)."""

from __future__ import annotations

import asyncio
import logging

from django.utils import timezone

from relay_project.database import database_sync_to_async
from tasks_app import selectors, services, streams, upstream
from tasks_app.gateway import driving
from tasks_app.gateway.operations import target_of
from tasks_app.gateway.targets import CallContext
from tasks_app.models import Task
from tasks_app.protocol.errors import A2AError

logger = logging.getLogger(__name__)

EXPIRY_BATCH = 200
UPSTREAM_CANCEL_SECONDS = 10.0


async def expire_overdue(*, now=None, batch: int = EXPIRY_BATCH) -> int:
    """Ends every open task past its expiry ``failed`` with a timeout error, ``batch`` tasks
    at a time; returns how many it ended. Each ended task's event is published as final, so
    its open streams get it and close; a producer following it in this process is stopped,
    and the agent (or a team's members) is asked to cancel its work. Whatever that work
    sends later is ignored: the task is terminal. A task that ends otherwise meanwhile keeps
    that end (compare-and-set) and is not counted."""
    now = now or timezone.now()
    ended = 0
    while True:
        overdue = await database_sync_to_async(selectors.tasks_overdue)(now=now, limit=batch)
        ended_now = 0
        for task in overdue:
            try:
                ended_now += await _expire(task)
            except services.StaleTaskError:
                logger.warning("task %s changed too often to expire; the next run retries", task.pk)
        ended += ended_now
        # A full batch of which none ended would come back the same: the next run retries.
        if len(overdue) < batch or not ended_now:
            return ended


async def _expire(task: Task) -> bool:
    recorded = await database_sync_to_async(services.task_expire)(task=task)
    if recorded.event is None:
        return False
    await streams.publish(task.id, recorded.sequence, recorded.event, final=True)
    driving.stop(task.id)  # a job of another process hears of it from the database
    owner = await database_sync_to_async(target_of)(task)
    if owner is not None:
        try:
            async with asyncio.timeout(UPSTREAM_CANCEL_SECONDS):
                await owner.cancel_upstream(task, CallContext(caller=task.caller))
        except (A2AError, upstream.UpstreamError, TimeoutError) as error:
            logger.info("expired task %s: the agent could not be told to stop: %s", task.pk, error)
    return True
