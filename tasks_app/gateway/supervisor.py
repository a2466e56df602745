"""The background work of a relay process: the heartbeat that keeps its lease while it
drives tasks, and, in a server process, taking over the tasks of processes that died.

``ensure_running()`` starts the heartbeat (the driver calls it whenever it starts a job);
``ensure_running(takeover=True)`` also starts the takeover scan, which a server process runs
for as long as it lives (``relay_project.asgi`` starts it with the server). The scan looks for
orphans every quarter of RELAY_EXCHANGE_LEASE_SECONDS, claims them and resumes each with its
target (``Target.resume``), so a task whose process died ends within about the lease, plus
what the agent still has to do.

A database outage stops every process from renewing its lease, not only dead ones: after the
scanner itself failed to reach the database, it takes nothing over until one and a half lease
periods have passed, time enough for every live process to renew (each renews every third of
the lease). A process that was cut off alone (its own network) is taken over as if it died.
"""

from __future__ import annotations

import asyncio
import logging
import time

from relay_project.database import UNAVAILABLE, database_sync_to_async
from relay_project.per_loop import PerLoop
from tasks_app.gateway import driving, ownership
from tasks_app.gateway.targets import CallContext, resolve_target

logger = logging.getLogger(__name__)

FORGET_DEAD_EVERY_SECONDS = 3600.0


class Supervisor:
    def __init__(self) -> None:
        self._heartbeat: asyncio.Task | None = None
        self._takeover: asyncio.Task | None = None
        self._database_failed_at: float | None = None
        """When this process last failed to reach the database (``time.monotonic()``)."""

    def may_take_over(self, now: float) -> bool:
        """Whether the scan may claim orphans now: not within the grace after this process
        last failed to reach the database (see the module's docstring)."""
        failed = self._database_failed_at
        return failed is None or now - failed >= 1.5 * ownership.lease_seconds()

    def start(self, *, takeover: bool) -> None:
        loop = asyncio.get_running_loop()
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = loop.create_task(self._beat(), name="relay-heartbeat")
        if takeover and (self._takeover is None or self._takeover.done()):
            self._takeover = loop.create_task(self._scan(), name="relay-takeover")

    @property
    def _busy(self) -> bool:
        return bool(driving._running) or (self._takeover is not None and not self._takeover.done())

    async def _beat(self) -> None:
        """Renews the lease every third of it while the process drives anything (or scans
        for orphans); a lease found lost stops the jobs on tasks others claimed."""
        while self._busy:
            await asyncio.sleep(ownership.lease_seconds() / 3)
            try:
                if not await database_sync_to_async(ownership.renew)():
                    logger.warning("this relay process's lease had run out; taking a new one")
                    lost = await database_sync_to_async(ownership.claimed_by_others)(
                        list(driving._running)
                    )
                    for task_id in lost:
                        logger.warning(
                            "task %s was taken over by another process; stopping here", task_id
                        )
                        driving.stop(task_id)
            except Exception as error:
                self._database_failed_at = time.monotonic()
                _warn("could not renew this relay process's lease", error)

    async def _scan(self) -> None:
        forgot = time.monotonic()
        while True:
            try:
                if self.may_take_over(time.monotonic()):
                    await take_over_orphans()
                if time.monotonic() - forgot > FORGET_DEAD_EVERY_SECONDS:
                    forgot = time.monotonic()
                    await database_sync_to_async(ownership.forget_dead)()
            except Exception as error:
                self._database_failed_at = time.monotonic()
                _warn("could not look for tasks of dead relay processes", error)
            await asyncio.sleep(max(0.5, min(5.0, ownership.lease_seconds() / 4)))


async def take_over_orphans() -> int:
    """Claims the open tasks of dead processes and resumes each one here; returns how many."""
    claimed = await database_sync_to_async(_claim)()
    for task, target in claimed:
        logger.warning(
            "taking over task %s (%s %s) from relay process %s, which stopped",
            task.pk,
            task.target_kind,
            task.target_id,
            task.previous_owner,
        )
        if target is None:
            await driving._fail(
                task,
                f"the {task.target_kind} {task.target_id!r} this task "
                "was sent to is gone, and the relay process that ran it "
                "stopped",
            )
            continue
        ctx = CallContext(
            caller=task.caller,
            version=task.client_version or "1.0",
            delegation=tuple(task.delegation_chain or ()),
        )
        driving.start(target, task, target.resume(task, ctx), fresh=False, raise_errors=False)
    return len(claimed)


def _claim():
    claimed = []
    for task in ownership.claim_orphans():
        claimed.append((task, resolve_target(task.target_kind, task.target_id)))
    return claimed


_supervisors: PerLoop[Supervisor] = PerLoop(Supervisor)


def supervisor() -> Supervisor:
    """The running loop's supervisor."""
    return _supervisors.get()


def ensure_running(*, takeover: bool = False) -> None:
    """Starts this loop's heartbeat (and with ``takeover`` the orphan scan) unless running."""
    supervisor().start(takeover=takeover)


driving.before_each_job(ensure_running)


def _warn(what: str, error: Exception) -> None:
    """One line while the database is unavailable (expected during a restart, and repeated
    every round); the traceback of anything else."""
    if isinstance(error, UNAVAILABLE):
        logger.warning("%s (%s)", what, error)
    else:
        logger.warning(what, exc_info=error)
