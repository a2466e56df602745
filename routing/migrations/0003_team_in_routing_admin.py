"""Teams are shown in routing's admin section through a proxy model (no table of its own).
The admin's history of each team moves with it: log entries written while teams were the
registry's are given the proxy's content type, so a team's history page still lists them."""

from django.db import migrations


def _move_log_entries(apps, *, source: str, destination: str) -> None:
    content_types = apps.get_model("contenttypes", "ContentType")
    log_entries = apps.get_model("admin", "LogEntry")
    old = content_types.objects.filter(app_label=source, model="team").first()
    if old is None:
        return
    new, _ = content_types.objects.get_or_create(app_label=destination, model="team")
    log_entries.objects.filter(content_type=old).update(content_type=new)


def forwards(apps, schema_editor):
    _move_log_entries(apps, source="registry", destination="routing")


def backwards(apps, schema_editor):
    _move_log_entries(apps, source="routing", destination="registry")


class Migration(migrations.Migration):

    dependencies = [
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("registry", "0005_stream_idle_seconds"),
        ("routing", "0002_health"),
    ]

    operations = [
        migrations.CreateModel(
            name="Team",
            fields=[],
            options={
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("registry.team",),
        ),
        migrations.RunPython(forwards, backwards),
    ]
