from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Teams, routing and health"

    def ready(self) -> None:
        # Teams answer A2A calls as gateway targets of kind "team".
        from routing.execution import team_target
        from tasks_app import gateway

        gateway.register_target_kind("team", team_target)
