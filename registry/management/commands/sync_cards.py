from django.core.management.base import BaseCommand, CommandError

from registry.models import Agent
from registry.services import RegistryError, agent_card_refresh


class Command(BaseCommand):
    help = "Fetches agent cards again and records a new snapshot for each card that changed."

    def add_arguments(self, parser):
        parser.add_argument("--agent", dest="agent_id", default=None, help="Only this agent.")

    def handle(self, *args, agent_id, **options):
        agents = Agent.objects.callable().order_by("id")
        if agent_id:
            agents = Agent.objects.filter(pk=agent_id)
            if not agents.exists():
                raise CommandError(f"no agent with id {agent_id!r}")
        failures = 0
        for agent in agents:
            try:
                changed = agent_card_refresh(agent=agent)
            except RegistryError as error:
                failures += 1
                self.stdout.write(f"{agent.id}: failed ({error.code}: {error.message})")
                continue
            self.stdout.write(f"{agent.id}: {'changed' if changed else 'unchanged'}")
        if failures:
            raise CommandError(f"{failures} card(s) could not be fetched")
