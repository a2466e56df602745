from django.core.management.base import BaseCommand, CommandError

from registry.services import RegistryError, agent_register


class Command(BaseCommand):
    help = "Registers an agent by its base URL or card URL."

    def add_arguments(self, parser):
        parser.add_argument("url")
        parser.add_argument("--id", dest="agent_id", default=None, help="The agent's slug id.")
        parser.add_argument(
            "--invocation-url",
            default="",
            help="Call the agent here instead of where its card says.",
        )

    def handle(self, *args, url, agent_id, invocation_url, **options):
        try:
            agent = agent_register(url=url, agent_id=agent_id, invocation_url=invocation_url)
        except RegistryError as error:
            raise CommandError(f"{error.code}: {error.message}") from error
        versions = ", ".join(agent.protocol_versions) or "?"
        self.stdout.write(
            f"Registered {agent.id} ({agent.name}, A2A {versions}) from {agent.card_url}"
        )
