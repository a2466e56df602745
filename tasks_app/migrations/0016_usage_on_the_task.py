"""Usage records move onto their tasks' rows. A call's record was an INSERT of its own at the
task's end; its values now ride in the UPDATE that end makes anyway (on SQLite 18% of a call's
CPU at c=8 before, docs/benchmarks.md). ``UsageRecord`` becomes a view of the tasks that kept
one, with the old table's columns, so what reads records reads on as before; its indexes move
to the task, partial on a kept record. Reversed, it brings the table back empty: the records
kept until then go with the task columns it drops."""

import django.db.models.deletion
from django.db import migrations, models

_OWN = {
    "usage_team_id": "team_id",
    "usage_workflow_id": "workflow_id",
    "usage_skill": "skill",
    "usage_error": "error",
    "usage_latency_ms": "latency_ms",
    "usage_bytes_in": "bytes_in",
    "usage_bytes_out": "bytes_out",
    "usage_input_tokens": "input_tokens",
    "usage_output_tokens": "output_tokens",
    "usage_model": "model",
    "usage_cost": "cost",
}
COPY = (
    "UPDATE tasks_app_task SET "
    + ", ".join(
        f"{task_column} = (SELECT u.{column} FROM tasks_app_usagerecord u "
        "WHERE u.task_id = tasks_app_task.id)"
        for task_column, column in _OWN.items()
    )
    + " WHERE id IN (SELECT task_id FROM tasks_app_usagerecord)"
)
VIEW = """
CREATE VIEW tasks_app_usagerecord AS
SELECT id AS task_id, completed_at AS "at", caller_id, target_kind, target_id, agent_id,
    usage_team_id AS team_id, usage_workflow_id AS workflow_id,
    COALESCE(parent_id, '') AS parent_task_id, usage_skill AS skill, state,
    usage_error AS error, usage_latency_ms AS latency_ms, usage_bytes_in AS bytes_in,
    usage_bytes_out AS bytes_out, usage_input_tokens AS input_tokens,
    usage_output_tokens AS output_tokens, usage_model AS model, usage_cost AS cost
FROM tasks_app_task WHERE usage_latency_ms IS NOT NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0021_quota_workflow"),
        ("tasks_app", "0015_task_indexes_written_less"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="usage_bytes_in",
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_bytes_out",
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_cost",
            field=models.DecimalField(
                blank=True, decimal_places=6, editable=False, max_digits=18, null=True
            ),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_error",
            field=models.CharField(blank=True, default="", editable=False, max_length=500),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_input_tokens",
            field=models.PositiveBigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_latency_ms",
            field=models.PositiveBigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_model",
            field=models.CharField(blank=True, default="", editable=False, max_length=200),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_output_tokens",
            field=models.PositiveBigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_skill",
            field=models.CharField(blank=True, default="", editable=False, max_length=200),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_team_id",
            field=models.CharField(blank=True, default="", editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name="task",
            name="usage_workflow_id",
            field=models.CharField(blank=True, default="", editable=False, max_length=64),
        ),
        # Each record's own values onto its task (the rest it shares with the task already).
        migrations.RunSQL(COPY, reverse_sql=migrations.RunSQL.noop),
        migrations.DeleteModel(name="UsageRecord"),
        migrations.CreateModel(
            name="UsageRecord",
            fields=[
                (
                    "task",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="usage",
                        serialize=False,
                        to="tasks_app.task",
                    ),
                ),
                ("at", models.DateTimeField(help_text="When the task ended.")),
                ("target_kind", models.CharField(max_length=10)),
                ("target_id", models.CharField(max_length=64)),
                ("team_id", models.CharField(max_length=64)),
                (
                    "workflow_id",
                    models.CharField(help_text="A workflow's run and its steps.", max_length=64),
                ),
                (
                    "parent_task_id",
                    models.CharField(
                        help_text="For a team hop: the task of the team call.", max_length=64
                    ),
                ),
                ("skill", models.CharField(max_length=200)),
                ("state", models.CharField(max_length=20)),
                ("error", models.CharField(max_length=500)),
                ("latency_ms", models.PositiveBigIntegerField()),
                ("bytes_in", models.PositiveBigIntegerField()),
                ("bytes_out", models.PositiveBigIntegerField()),
                ("input_tokens", models.PositiveBigIntegerField(null=True)),
                ("output_tokens", models.PositiveBigIntegerField(null=True)),
                ("model", models.CharField(max_length=200)),
                ("cost", models.DecimalField(decimal_places=6, max_digits=18, null=True)),
                (
                    "agent",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        to="registry.agent",
                    ),
                ),
                (
                    "caller",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        to="registry.apikey",
                    ),
                ),
            ],
            options={
                "db_table": "tasks_app_usagerecord",
                "ordering": ["-at"],
                "managed": False,
            },
        ),
        migrations.RunSQL(VIEW, reverse_sql="DROP VIEW tasks_app_usagerecord"),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("usage_latency_ms__isnull", False)),
                fields=["caller", "-completed_at"],
                name="usage_caller_at",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("usage_latency_ms__isnull", False)),
                fields=["agent", "-completed_at"],
                name="usage_agent_at",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("usage_latency_ms__isnull", False)),
                fields=["target_kind", "target_id", "-completed_at"],
                name="usage_target_at",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("usage_team_id", ""), _negated=True),
                fields=["usage_team_id", "-completed_at"],
                name="usage_team_at",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("usage_workflow_id", ""), _negated=True),
                fields=["usage_workflow_id", "-completed_at"],
                name="usage_workflow_at",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("usage_latency_ms__isnull", False)),
                fields=["completed_at"],
                name="usage_at",
            ),
        ),
    ]
