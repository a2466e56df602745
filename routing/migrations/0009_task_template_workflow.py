import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0008_team_workflow_members"),
    ]

    operations = [
        migrations.AddField(
            model_name="tasktemplate",
            name="workflow",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="routing.workflow",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="tasktemplate",
            name="task_template_one_target",
        ),
        migrations.AddConstraint(
            model_name="tasktemplate",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("agent__isnull", False), ("team__isnull", True), ("workflow__isnull", True)
                    ),
                    models.Q(
                        ("agent__isnull", True), ("team__isnull", False), ("workflow__isnull", True)
                    ),
                    models.Q(
                        ("agent__isnull", True), ("team__isnull", True), ("workflow__isnull", False)
                    ),
                    _connector="OR",
                ),
                name="task_template_one_target",
            ),
        ),
    ]
