"""Celery jobs of the gateway: push-notification delivery with retries and backoff, and the
expiry of tasks that never end."""

from __future__ import annotations

import json
import logging

import httpx
from asgiref.sync import async_to_sync
from celery import shared_task
from django.utils import timezone

from registry import secrets
from relay_project import outbound
from tasks_app.models import PushDelivery
from tasks_app.protocol.convert import stream_response_from_v1
from tasks_app.protocol.versions import Dialect

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
PUSH_TIMEOUT = 15.0


def backoff_seconds(attempt: int) -> int:
    """2, 4, 8, 16, 32 seconds between attempts."""
    return 2**attempt


@shared_task(
    bind=True, name="tasks_app.deliver_push", ignore_result=True, max_retries=MAX_ATTEMPTS - 1
)
def deliver_push(self, delivery_id: int) -> str:
    """POSTs one task update to one webhook. The URL is checked against SSRF at delivery time
    (by the outbound guard); failures are retried with exponential backoff."""
    delivery = PushDelivery.objects.select_related("config__task").filter(pk=delivery_id).first()
    if delivery is None or delivery.outcome != PushDelivery.Outcome.PENDING:
        return "skipped"
    config = delivery.config
    payload = delivery.payload
    if config.task.client_version == "0.3":
        # 0.3 receivers expect the 0.3 shapes (kind-tagged objects).
        payload = stream_response_from_v1(payload, Dialect.V03_JSONRPC)
    headers = {"Content-Type": "application/a2a+json"}
    if config.auth_scheme:
        headers["Authorization"] = (
            f"{config.auth_scheme} {secrets.decrypt(config.auth_credentials)}".strip()
        )
    token = secrets.decrypt(config.token)
    if token:
        headers["X-A2A-Notification-Token"] = token
    attempt = delivery.attempts + 1
    error = ""
    try:
        with outbound.client(outbound.OutboundPolicy.from_settings()) as client:
            response = client.post(
                config.url, content=json.dumps(payload), headers=headers, timeout=PUSH_TIMEOUT
            )
        if response.is_success:
            PushDelivery.objects.filter(pk=delivery.pk).update(
                outcome=PushDelivery.Outcome.DELIVERED,
                attempts=attempt,
                delivered_at=timezone.now(),
                last_error="",
            )
            return "delivered"
        error = f"the webhook answered HTTP {response.status_code}"
    except outbound.UnsafeURLError as unsafe:
        PushDelivery.objects.filter(pk=delivery.pk).update(
            outcome=PushDelivery.Outcome.FAILED, attempts=attempt, last_error=str(unsafe)[:500]
        )
        return "refused"
    except httpx.HTTPError as failure:
        error = f"{type(failure).__name__}: {failure}"[:500]
    final = attempt >= MAX_ATTEMPTS
    PushDelivery.objects.filter(pk=delivery.pk).update(
        attempts=attempt,
        last_error=error,
        outcome=PushDelivery.Outcome.FAILED if final else PushDelivery.Outcome.PENDING,
    )
    if final:
        logger.warning(
            "push delivery %s gave up after %s attempts: %s", delivery.pk, attempt, error
        )
        return "failed"
    raise self.retry(countdown=backoff_seconds(attempt), exc=None)


@shared_task(name="tasks_app.expire_tasks", ignore_result=True)
def expire_tasks() -> int:
    """Ends every open task past its expiry ``failed`` with a timeout error (beat runs it
    every minute: the "Expire overdue tasks" schedule). Returns how many it ended."""
    from tasks_app import gateway

    ended = async_to_sync(gateway.expire_overdue)()
    if ended:
        logger.info("expired %s overdue task(s)", ended)
    return ended
