from django.apps import AppConfig


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "A2A tasks"

    def ready(self) -> None:
        # Registers the "relay" target kind: the relay's own endpoint.
        from tasks_app import relay_endpoint  # noqa: F401
