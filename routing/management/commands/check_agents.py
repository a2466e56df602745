"""Probes agents now (every agent, or one) and prints what each level found."""

from django.core.management.base import BaseCommand, CommandError

from registry.models import Agent
from routing import health_services


class Command(BaseCommand):
    help = (
        "Runs a health sweep now over every agent (or one) and prints a table: agent, "
        "level, outcome, category, latency and the health state."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agent", dest="agent_id", default=None, help="Only this agent.")

    def handle(self, *args, agent_id, **options):
        if agent_id:
            agent = Agent.objects.filter(pk=agent_id).first()
            if agent is None:
                raise CommandError(f"no agent with id {agent_id!r}")
            if agent.status == Agent.Status.DISABLED:
                raise CommandError(
                    f"agent {agent_id!r} is disabled; disabled agents are not probed"
                )
            if agent.scale_to_zero and agent.scale_to_zero_probes == Agent.ScaleToZeroProbes.NONE:
                raise CommandError(f"agent {agent_id!r} scales to zero and is set not to be probed")
            agent_ids = [agent_id]
        else:
            agent_ids = list(Agent.objects.callable().values_list("pk", flat=True))
        checks = health_services.sweep_now(agent_ids=agent_ids)
        if not checks:
            self.stdout.write("No agents to probe.")
            return
        rows = [("AGENT", "LEVEL", "OUTCOME", "CATEGORY", "LATENCY", "STATE", "DETAIL")]
        for check in checks:
            state = (
                check.state_after
                if check.state_after == check.state_before
                else f"{check.state_before} -> {check.state_after}"
            )
            for index, result in enumerate(check.results):
                rows.append(
                    (
                        check.agent_id if index == 0 else "",
                        result.level,
                        "ok" if result.ok else "failed",
                        result.category or "-",
                        f"{result.latency_ms:.0f} ms",
                        state if index == 0 else "",
                        result.detail[:80],
                    )
                )
            if check.card_changed:
                rows.append(("", "", "", "", "", "", "the card changed: stored a new snapshot"))
        widths = [max(len(row[column]) for row in rows) for column in range(6)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row[:6], widths, strict=True)]
            self.stdout.write("  ".join([*cells, row[6]]).rstrip())
        unhealthy = sum(1 for check in checks if check.state_after == Agent.Health.UNHEALTHY)
        self.stdout.write(f"\n{len(checks)} agent(s) probed, {unhealthy} unhealthy.")
