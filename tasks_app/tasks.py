"""Celery jobs of the gateway: the expiry of tasks that never end. Push notifications are
delivered by ``tasks_app.push_delivery`` (imported by the worker through ``CELERY_IMPORTS``)."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="tasks_app.expire_tasks", ignore_result=True)
def expire_tasks() -> int:
    """Ends every open task past its expiry ``failed`` with a timeout error (beat runs it
    every minute: the "Expire overdue tasks" schedule). Returns how many it ended."""
    from tasks_app import gateway

    ended = async_to_sync(gateway.expire_overdue)()
    if ended:
        logger.info("expired %s overdue task(s)", ended)
    return ended
