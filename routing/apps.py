from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Teams, routing and health"

    def ready(self) -> None:
        # Teams answer A2A calls as gateway targets of kind "team".
        from routing.execution import team_target
        from tasks_app import gateway

        gateway.register_target_kind("team", team_target)

        # Passive health: real calls to agents drive their circuit breakers.
        from routing.breaker import BreakerGuard

        gateway.register_call_guard(BreakerGuard())

        # Health: the beat schedules exist once the tables do.
        from django.db.models.signals import post_migrate

        from routing.schedules import ensure_after_migrate

        post_migrate.connect(ensure_after_migrate, sender=self,
                             dispatch_uid="routing.beat_schedules")
