from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0019_agent_prices_and_quotas"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="mcp_server",
            field=models.BooleanField(default=False, help_text="An MCP server, not an A2A agent."),
        ),
    ]
