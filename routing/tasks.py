"""Celery jobs of the health checks: load, call a service. Beat starts them on the schedules
in ``routing.schedules`` (rows of django-celery-beat, editable in the admin)."""

from __future__ import annotations

import logging

from celery import shared_task

from routing import health_services

logger = logging.getLogger(__name__)


@shared_task(name="routing.health_sweep", ignore_result=True)
def health_sweep() -> int:
    """Probes every agent that is due; returns how many were probed."""
    checks = health_services.sweep_now()
    moved = [check for check in checks if check.state_after != check.state_before]
    if checks:
        logger.info("health sweep: %s agents probed, %s changed state", len(checks), len(moved))
    return len(checks)


@shared_task(name="routing.prune_probe_results", ignore_result=True)
def prune_probe_results() -> int:
    """Deletes probe results past RELAY_HEALTH_RETENTION_DAYS; returns how many."""
    return health_services.probe_results_prune()
