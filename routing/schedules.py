"""The beat schedules of the relay's periodic jobs, as django-celery-beat rows (so admins can
change or pause them under *Periodic tasks*). Created once with the values of the settings;
an existing row is left as the admin set it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

PREFIX = "Brass Relay: "


@dataclass(frozen=True)
class Schedule:
    name: str
    task: str
    every_seconds: int
    description: str

    @property
    def expires_seconds(self) -> int:
        # Runs a busy worker could not start for a while are dropped rather than piling up;
        # the margin covers the broker's delivery (the filesystem transport polls each second).
        return max(2 * self.every_seconds, 60)


def schedules() -> list[Schedule]:
    return [
        Schedule(
            PREFIX + "health sweep",
            "routing.health_sweep",
            settings.RELAY_HEALTH_SWEEP_SECONDS,
            "Probes the agents whose probe interval has passed.",
        ),
        Schedule(
            PREFIX + "prune probe results",
            "routing.prune_probe_results",
            3600,
            "Deletes probe results older than RELAY_HEALTH_RETENTION_DAYS.",
        ),
        Schedule(
            PREFIX + "card re-sync",
            "registry.refresh_all_cards",
            settings.RELAY_CARD_SYNC_SECONDS,
            "Fetches every agent's card again; a changed card becomes a new snapshot.",
        ),
        Schedule(
            PREFIX + "peer relay sync",
            "registry.sync_peers",
            settings.RELAY_PEER_SYNC_SECONDS,
            "Mirrors what changed in the registries of the peer relays this relay follows.",
        ),
        Schedule(
            PREFIX + "skill embeddings",
            "registry.reindex_skill_embeddings",
            settings.RELAY_EMBEDDING_REINDEX_SECONDS,
            "Computes the skill embeddings search by meaning lacks (cards stored while the "
            "model was unavailable, or made by another model).",
        ),
        Schedule(
            PREFIX + "usage roll-up",
            "tasks_app.roll_up_usage",
            3600,
            "Sums the usage records of the last hours per caller, target, agent and team, "
            "for fast usage reports.",
        ),
    ]


def beat_schedules_ensure() -> list[str]:
    """Creates the periodic tasks that do not exist yet; returns the names created.

    One query finds the existing rows and one insert writes the missing ones, as this runs
    after every migrate and every flush (each transactional test). The insert bypasses
    ``PeriodicTask.save``, so beat is told of the change once here, as that save would."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    wanted = schedules()
    names = [schedule.name for schedule in wanted]
    existing = set(PeriodicTask.objects.filter(name__in=names).values_list("name", flat=True))
    missing = [schedule for schedule in wanted if schedule.name not in existing]
    if not missing:
        return []
    intervals = {}
    for every in {schedule.every_seconds for schedule in missing}:
        intervals[every], _ = IntervalSchedule.objects.get_or_create(
            every=every, period=IntervalSchedule.SECONDS
        )
    PeriodicTask.objects.bulk_create(
        PeriodicTask(
            name=schedule.name,
            task=schedule.task,
            interval=intervals[schedule.every_seconds],
            args=json.dumps([]),
            expire_seconds=schedule.expires_seconds,
            description=schedule.description,
        )
        for schedule in missing
    )
    PeriodicTasks.update_changed()
    return [schedule.name for schedule in missing]


def ensure_after_migrate(sender, using="default", **kwargs) -> None:
    """post_migrate receiver: the schedules exist as soon as the tables do."""
    from django.db import connections

    if "django_celery_beat_periodictask" in connections[using].introspection.table_names():
        beat_schedules_ensure()
