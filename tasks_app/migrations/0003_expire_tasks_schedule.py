"""The beat schedule of the task expiry job: "Expire overdue tasks", every 60 seconds."""

from django.db import migrations

NAME = "Expire overdue tasks"
TASK = "tasks_app.expire_tasks"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    every_minute = (IntervalSchedule.objects.filter(every=60, period="seconds").first()
                    or IntervalSchedule.objects.create(every=60, period="seconds"))
    # Idempotent: an existing schedule of this name (say, changed by an admin) is kept.
    _, created = PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": TASK, "interval": every_minute, "enabled": True,
                  "description": "Ends open tasks past their expiry failed with a timeout."},
    )
    if created:
        # Beat reloads its schedule when this marker changes (PeriodicTasks.changed()).
        from django.utils import timezone

        PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME, task=TASK).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("tasks_app", "0002_relay_endpoint"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
