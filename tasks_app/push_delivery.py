"""Push-notification delivery: each config's events reach its webhook in the order they
happened, one at a time, with retries; different configs are delivered side by side.

A delivery job takes the config's lease (a compare-and-set on
``PushNotificationConfig.delivering_until``, so it works the same on SQLite and PostgreSQL and
holds no transaction while it waits on the webhook), then sends the config's pending deliveries
oldest first. A job that finds the lease taken leaves its delivery to the holder, which looks
for new deliveries again after it lets the lease go. A delivery that fails waits for its retry
(exponential backoff) and holds back the config's later events until it is delivered or given
up (after ``MAX_ATTEMPTS``, or at once when the URL is refused); then the rest follow.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from celery import shared_task
from django.db.models import Q
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from registry import secrets
from relay_project import outbound, tracing
from tasks_app.models import PushDelivery, PushNotificationConfig
from tasks_app.protocol.convert import stream_response_from_v1
from tasks_app.protocol.versions import Dialect

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
PUSH_TIMEOUT = 15.0
# How long a job holds a config's lease without renewing it (it renews before each POST); a
# job that died lets the next one in after this.
LEASE_SECONDS = 2 * PUSH_TIMEOUT + 30

PENDING = PushDelivery.Outcome.PENDING


def backoff_seconds(attempt: int) -> int:
    """2, 4, 8, 16, 32 seconds between attempts."""
    return 2**attempt


@shared_task(
    bind=True, name="tasks_app.deliver_push", ignore_result=True, acks_late=True, max_retries=None
)
def deliver_push(self, delivery_id: int, traceparent: str = "") -> str:
    """Delivers the pending events of the config ``delivery_id`` belongs to, in order, and
    returns what became of this one: ``delivered``, ``failed`` (given up), ``refused`` (the
    SSRF guard), ``skipped`` (already done, or gone) or ``queued`` (another job delivers it,
    or an earlier event waits for its retry). A failed attempt schedules the retry of that
    delivery (``Retry`` is raised); the job counts attempts itself, Celery's count is unused.

    With tracing on, the job is a ``push.deliver`` span in the trace ``traceparent`` names
    (the call the event came from), and each webhook gets the job's ``traceparent``."""
    if not tracing.enabled():
        return _deliver(self, delivery_id, "")
    span = tracing.start(
        "push.deliver",
        kind=SpanKind.CONSUMER,
        parent=tracing.incoming([("traceparent", traceparent)]),
        attributes={"a2a.push.delivery_id": delivery_id},
    )
    try:
        with trace.use_span(span, end_on_exit=False):
            outcome = _deliver(self, delivery_id, traceparent)
        span.set_attribute("a2a.push.outcome", outcome)
        return outcome
    finally:
        span.end()
        tracing.flush()


def _deliver(self, delivery_id: int, traceparent: str) -> str:
    config_id = (
        PushDelivery.objects.filter(pk=delivery_id, outcome=PENDING)
        .values_list("config_id", flat=True)
        .first()
    )
    if config_id is None:
        return "skipped"
    outcomes: dict[int, str] = {}
    lease = Lease(config_id)
    while lease.take():
        try:
            waiting = _drain(lease, own=delivery_id, outcomes=outcomes)
        finally:
            lease.release()
        if waiting is not None:
            args = (waiting.pk, traceparent) if traceparent else (waiting.pk,)
            raise self.retry(args=args, countdown=backoff_seconds(waiting.attempts), exc=None)
        # A delivery queued while the lease was held found it taken and left it to us.
        if not _untried_head(config_id):
            break
    return outcomes.get(delivery_id, "queued")


def _drain(lease: Lease, *, own: int, outcomes: dict[int, str]) -> PushDelivery | None:
    """Sends the config's pending deliveries oldest first until none is left, one waits for
    its retry (left to that retry's job, unless it is this job's own delivery), or the lease
    is lost. Returns the delivery that just failed and must be retried, if any."""
    while True:
        head = (
            PushDelivery.objects.select_related("config__task")
            .filter(config_id=lease.config_id, outcome=PENDING)
            .order_by("pk")
            .first()
        )
        if head is None or (head.attempts and head.pk != own) or not lease.renew():
            return None
        outcomes[head.pk] = _attempt(head)
        if outcomes[head.pk] == "retry":
            head.attempts += 1
            return head


def _untried_head(config_id: int) -> bool:
    head = PushDelivery.objects.filter(config_id=config_id, outcome=PENDING).order_by("pk")
    return head.values_list("attempts", flat=True).first() == 0


@dataclass
class Lease:
    """A config's delivery lease: ``until`` is when the held lease ends (None: not held). The
    end is also the holder's token: renewing and releasing compare it, so a job whose lease ran
    out and was taken cannot release or extend the new holder's."""

    config_id: int
    until: datetime | None = None

    def take(self) -> bool:
        now = timezone.now()
        until = now + timedelta(seconds=LEASE_SECONDS)
        free = Q(delivering_until__isnull=True) | Q(delivering_until__lt=now)
        configs = PushNotificationConfig.objects.filter(free, pk=self.config_id)
        self.until = until if configs.update(delivering_until=until) else None
        return self.until is not None

    def renew(self) -> bool:
        """False when the lease was lost (it ran out and another job took it)."""
        until = timezone.now() + timedelta(seconds=LEASE_SECONDS)
        configs = PushNotificationConfig.objects.filter(
            pk=self.config_id, delivering_until=self.until
        )
        self.until = until if configs.update(delivering_until=until) else None
        return self.until is not None

    def release(self) -> None:
        if self.until is not None:
            PushNotificationConfig.objects.filter(
                pk=self.config_id, delivering_until=self.until
            ).update(delivering_until=None)
            self.until = None


def _attempt(delivery: PushDelivery) -> str:
    """POSTs one task update to its webhook once and records the outcome: ``delivered``,
    ``refused`` (the URL failed the SSRF check, made at every delivery by the outbound
    guard), ``failed`` (the last attempt failed) or ``retry``."""
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
    if tracing.enabled():
        headers = tracing.outgoing(headers, None)  # the job's span is the current one
    token = secrets.decrypt(config.token)
    if token:
        headers["X-A2A-Notification-Token"] = token
    attempt = delivery.attempts + 1
    rows = PushDelivery.objects.filter(pk=delivery.pk)
    try:
        with outbound.client(outbound.OutboundPolicy.from_settings()) as client:
            response = client.post(
                config.url, content=json.dumps(payload), headers=headers, timeout=PUSH_TIMEOUT
            )
        if response.is_success:
            rows.update(
                outcome=PushDelivery.Outcome.DELIVERED,
                attempts=attempt,
                delivered_at=timezone.now(),
                last_error="",
            )
            return "delivered"
        error = f"the webhook answered HTTP {response.status_code}"
    except outbound.UnsafeURLError as unsafe:
        rows.update(
            outcome=PushDelivery.Outcome.FAILED, attempts=attempt, last_error=str(unsafe)[:500]
        )
        return "refused"
    except httpx.HTTPError as failure:
        error = f"{type(failure).__name__}: {failure}"[:500]
    final = attempt >= MAX_ATTEMPTS
    rows.update(
        attempts=attempt,
        last_error=error,
        outcome=PushDelivery.Outcome.FAILED if final else PENDING,
    )
    if final:
        logger.warning(
            "push delivery %s gave up after %s attempts: %s", delivery.pk, attempt, error
        )
        return "failed"
    return "retry"
