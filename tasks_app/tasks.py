"""Celery jobs of the gateway: the expiry of tasks that never end, the usage roll-ups. Push notifications are
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


@shared_task(name="tasks_app.roll_up_usage", ignore_result=True)
def roll_up_usage() -> int:
    """Recomputes the usage roll-ups of the last hours (beat runs it hourly: the "usage
    roll-up" schedule); returns how many roll-up rows it wrote."""
    from tasks_app.usage import rollups

    return rollups.usage_roll_up()
