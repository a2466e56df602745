"""Who drives each task: relay processes, their leases, and taking over the tasks of a
process that is gone.

Every process that drives exchanges with agents has a ``RelayProcess`` row whose lease it
renews by heartbeat (``renew``, every third of RELAY_EXCHANGE_LEASE_SECONDS). A task the
process works on names it as its ``owner`` from the moment it is opened (or a follow-up
message reopens it) until it ends or waits on the client. When a lease runs out, the process
is taken for dead: any other process claims its open tasks (``claim_orphans``, one
compare-and-set per task, so two claimants never both win) and resumes them. The lease is the
process's, not each task's: a heartbeat is one UPDATE however many tasks the process drives.

A process whose own lease ran out (paused too long, cut off from the database) learns it at
its next heartbeat: it takes a new lease, and stops driving the tasks that others claimed
meanwhile (``claimed_by_others``). Synchronous: call through the database thread.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from tasks_app.lifecycle import TaskState
from tasks_app.models import RelayProcess, Task

DRIVEN_STATES = (TaskState.SUBMITTED.value, TaskState.WORKING.value)
"""The states of a task someone works on with the agent (the others ended, or wait on the
client)."""
INTERRUPTED_STATES = (TaskState.INPUT_REQUIRED.value, TaskState.AUTH_REQUIRED.value)
_DRIVEN = Q(state__in=DRIVEN_STATES) | (Q(state__in=INTERRUPTED_STATES) & ~Q(owner=""))
"""Tasks someone drives: those the agent works on, and interrupted ones whose client's answer
is on its way to the agent (a task that waits on its client has no owner; the answer's process
owns it until the agent's first event makes it work again)."""


def being_driven(task: Task) -> bool:
    """Whether a relay process drives the task (as ``_DRIVEN`` selects them), from its row."""
    return task.state in DRIVEN_STATES or (task.state in INTERRUPTED_STATES and bool(task.owner))


FORGET_DEAD_AFTER = timedelta(days=1)


@dataclass
class _Identity:
    pid: int
    process_id: str
    lease_until: float = 0.0  # monotonic: this process's own view of its lease


_identity: _Identity | None = None


def lease_seconds() -> float:
    return settings.RELAY_EXCHANGE_LEASE_SECONDS


def process_id() -> str:
    """This process's id, ``<host>:<pid>:<random>``, registered with a lease at first use.
    A forked child (a Celery worker) gets its own."""
    global _identity
    pid = os.getpid()
    if _identity is None or _identity.pid != pid:
        host = socket.gethostname()[:40]
        _identity = _Identity(pid, f"{host}:{pid}:{secrets.token_hex(3)}")
    if _identity.lease_until <= time.monotonic():
        _register(_identity)
    return _identity.process_id


def forget_lease() -> None:
    """Forgets that this process holds a lease: the next ``process_id`` registers it again
    (for tests, whose database rows do not outlive them)."""
    global _live
    if _identity is not None:
        _identity.lease_until = 0.0
    _live = (0.0, [])


def _register(identity: _Identity) -> None:
    now = timezone.now()
    lease = lease_seconds()
    RelayProcess.objects.update_or_create(
        pk=identity.process_id,
        defaults={"lease_expires_at": now + timedelta(seconds=lease)},
        create_defaults={
            "host": identity.process_id.split(":")[0],
            "pid": identity.pid,
            "started_at": now,
            "lease_expires_at": now + timedelta(seconds=lease),
        },
    )
    # Renewed well before it runs out: a third of the lease is the heartbeat.
    identity.lease_until = time.monotonic() + lease * 2 / 3


def renew() -> bool:
    """The heartbeat: extends this process's lease. Returns False when the lease had already
    run out (other processes may have claimed its tasks); a new lease is taken then."""
    me = process_id()
    now = timezone.now()
    lease = lease_seconds()
    renewed = RelayProcess.objects.filter(pk=me, lease_expires_at__gt=now).update(
        lease_expires_at=now + timedelta(seconds=lease)
    )
    if renewed:
        _identity.lease_until = time.monotonic() + lease * 2 / 3
        return True
    _register(_identity)
    return False


def claimed_by_others(task_ids: list[str]) -> list[str]:
    """Those of ``task_ids`` (tasks this process drives) another process owns now."""
    me = process_id()
    return list(
        Task.objects.filter(pk__in=task_ids)
        .exclude(owner=me)
        .exclude(owner="")
        .values_list("pk", flat=True)
    )


def live_processes() -> list[str]:
    """The ids of the processes whose lease has not run out, as read at most a third of a
    lease ago (one query then)."""
    global _live
    if _live[0] <= time.monotonic():
        ids = list(
            RelayProcess.objects.filter(lease_expires_at__gt=timezone.now()).values_list(
                "pk", flat=True
            )
        )
        _live = (time.monotonic() + lease_seconds() / 3, ids)
    return _live[1]


_live: tuple[float, list[str]] = (0.0, [])


def known_process_id() -> str:
    """This process's id if it has one already ("" otherwise); never queries."""
    return _identity.process_id if _identity is not None and _identity.pid == os.getpid() else ""


def claim_orphans(*, limit: int = 50) -> list[Task]:
    """Claims for this process the driven tasks (``_DRIVEN``: an interrupted task whose
    client's answer was on its way counts) whose owner's lease ran out (or whose owner is
    unknown), at most ``limit``: a compare-and-set on the owner each, so of two claimants one
    wins. Returns the tasks claimed (with their caller loaded, and the dead owner as
    ``previous_owner``)."""
    me = process_id()
    now = timezone.now()
    live = RelayProcess.objects.filter(lease_expires_at__gt=now).values("pk")
    orphans = list(
        Task.objects.filter(_DRIVEN)
        .exclude(owner="")
        .exclude(owner=me)
        .exclude(owner__in=live)
        .values_list("pk", "owner")[:limit]
    )
    claimed = {}
    for pk, owner in orphans:
        if Task.objects.filter(_DRIVEN, pk=pk, owner=owner).update(owner=me):
            claimed[pk] = owner
    tasks = list(Task.objects.filter(pk__in=claimed, owner=me).select_related("caller"))
    for task in tasks:
        task.previous_owner = claimed[task.pk]
    return tasks


def forget_dead() -> int:
    """Removes the rows of processes dead for a day that own no task; returns how many."""
    before = timezone.now() - FORGET_DEAD_AFTER
    owning = Task.objects.exclude(owner="").values("owner")
    deleted, _ = RelayProcess.objects.filter(
        Q(lease_expires_at__lt=before) & ~Q(pk__in=owning)
    ).delete()
    return deleted


RELEASED = "released"
"""The owner of a task its process gave up (``give_up``): no process holds a lease by that
name, so the next takeover scan claims the task."""


def give_up(task_id: str) -> None:
    """Hands a task this process drives over to takeover: its exchange could not be recorded
    (the database was away longer than RELAY_DATABASE_OUTAGE_SECONDS). The process that claims
    it asks the agent where the task stands."""
    Task.objects.filter(_DRIVEN, pk=task_id, owner=process_id()).update(owner=RELEASED)


def release_if_not_driven(task_id: str) -> None:
    """Gives up this process's hold on a task it drove that neither works nor is worked on
    now: a task taken over whose agent turned out still to wait on the client (the client's
    answer never reached it) keeps no owner, like any task that waits on its client."""
    Task.objects.filter(pk=task_id, owner=process_id()).exclude(state__in=DRIVEN_STATES).update(
        owner=""
    )
