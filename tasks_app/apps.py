from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "A2A tasks"

    def ready(self) -> None:
        from registry.models import Agent, AgentAlternate
        from registry.usage_models import AgentPrice, Quota
        from relay_project import ratelimit, tracing

        # relay_endpoint registers the "relay" target kind: the relay's own endpoint.
        from tasks_app import cards, gateway, relay_endpoint  # noqa: F401
        from tasks_app.gateway import ownership
        from tasks_app.grpc.targets import grpc_interface

        # OpenTelemetry traces, when the OTEL_* variables ask for them (off otherwise).
        tracing.configure()
        # Every card lists the gRPC interface when the gRPC server is configured.
        cards.register_interface(grpc_interface)

        # A key's stream slots count in the relay processes that are alive.
        ratelimit.register_stream_holders(
            current=ownership.known_process_id, live=ownership.live_processes
        )
        # A changed agent leaves the gateway's target cache at once.
        post_save.connect(gateway.agent_changed, sender=Agent, dispatch_uid="gateway-agent-saved")
        post_delete.connect(
            gateway.agent_changed, sender=Agent, dispatch_uid="gateway-agent-deleted"
        )
        # A changed price or quota applies at once in this process.
        from tasks_app.usage import quotas, records

        for signal, uid in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(records.forget_prices, sender=AgentPrice, dispatch_uid=f"price-{uid}")
            signal.connect(quotas.forget_quotas, sender=Quota, dispatch_uid=f"quota-{uid}")
        # So does one whose alternates changed.
        for signal, uid in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(
                _alternates_changed, sender=AgentAlternate, dispatch_uid=f"gateway-alt-{uid}"
            )


def _alternates_changed(sender, instance, **kwargs) -> None:
    from tasks_app import gateway

    gateway.forget_agent_targets(instance.agent_id)
