"""Two index entries fewer on every task's INSERT. No query looks a task up by its agent and
the agent's task id, so ``task_agent_upstream`` goes (as migration 0009 dropped the others no
query used); ``task_parent`` keeps only tasks that have a parent, the only ones a lookup by
parent finds (SQLite and PostgreSQL both use a partial index for ``parent_id = ...`` and
``IN``). In the embedded profile each entry was a page more in the call's commit."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0021_quota_workflow"),
        ("tasks_app", "0014_usage_workflow"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="task",
            name="task_agent_upstream",
        ),
        migrations.RemoveIndex(
            model_name="task",
            name="task_parent",
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("parent__isnull", False)),
                fields=["parent"],
                name="task_parent",
            ),
        ),
    ]
