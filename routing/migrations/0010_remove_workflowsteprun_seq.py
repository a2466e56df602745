from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0009_task_template_workflow"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="workflowsteprun",
            name="seq",
        ),
    ]
