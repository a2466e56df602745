from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Teams, routing and health"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_migrate, post_save

        from registry.models import Agent, Team, TeamMembership
        from routing.breaker import BreakerGuard
        from routing.schedules import ensure_after_migrate
        from routing.team_loading import team_changed, team_target
        from tasks_app import gateway

        # Teams answer A2A calls as gateway targets of kind "team". A loaded team is dropped
        # (in this process) when anything it is made of changes. Skills and extensions change
        # only with a new card, which saves the Agent row in the same transaction: receivers
        # on them would cost every card refresh a query per deleted row.
        gateway.register_target_kind("team", team_target)

        # Workflows answer A2A calls as gateway targets of kind "workflow".
        from routing.models import Workflow
        from routing.workflows.loading import workflow_changed, workflow_target

        gateway.register_target_kind("workflow", workflow_target)
        post_save.connect(workflow_changed, sender=Workflow, dispatch_uid="workflow-cache-saved")
        post_delete.connect(
            workflow_changed, sender=Workflow, dispatch_uid="workflow-cache-deleted"
        )
        from routing.models import TeamWorkflowMember

        for model in (Team, TeamMembership, Agent, TeamWorkflowMember, Workflow):
            name = model.__name__
            post_save.connect(team_changed, sender=model, dispatch_uid=f"team-cache-{name}-saved")
            post_delete.connect(
                team_changed, sender=model, dispatch_uid=f"team-cache-{name}-deleted"
            )

        # Task templates stream as the task API's sendSubscribe does.
        from routing.template_api import stream_body
        from tasks_app.api import parsing

        parsing.register_task_api_body("task-api-template", stream_body)

        # Passive health: real calls to agents drive their circuit breakers.
        gateway.register_call_guard(BreakerGuard())

        # Health: the beat schedules exist once the tables do.
        post_migrate.connect(
            ensure_after_migrate, sender=self, dispatch_uid="routing.beat_schedules"
        )
