from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from registry.services import RegistryError, api_key_create


class Command(BaseCommand):
    help = (
        "Creates an API key and prints it on the last line. It is shown only this once. "
        "Without --agent or --team it may call every agent and team."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="What the key is for, e.g. the calling team or agent.")
        parser.add_argument(
            "--admin",
            action="store_true",
            help="May change and delete every agent, not only its own, and change teams.",
        )
        parser.add_argument(
            "--agent",
            action="append",
            default=[],
            dest="agents",
            metavar="ID",
            help="An agent the key may call (repeatable).",
        )
        parser.add_argument(
            "--team",
            action="append",
            default=[],
            dest="teams",
            metavar="ID",
            help="A team the key may call (repeatable).",
        )
        parser.add_argument(
            "--no-registry-read",
            action="store_true",
            help="May not read the registry when RELAY_REGISTRY_PUBLIC is off.",
        )
        parser.add_argument("--no-register", action="store_true", help="May not register agents.")
        parser.add_argument("--no-call", action="store_true", help="May not call agents or teams.")
        parser.add_argument(
            "--expires-in",
            "--expires-in-days",
            type=int,
            default=None,
            dest="expires_in",
            metavar="DAYS",
            help="The key stops working after this many days.",
        )

    def handle(
        self,
        *args,
        name,
        admin,
        agents,
        teams,
        no_registry_read,
        no_register,
        no_call,
        expires_in,
        **options,
    ):
        if expires_in is not None and expires_in < 1:
            raise CommandError("--expires-in must be at least 1 day")
        expires_at = timezone.now() + timedelta(days=expires_in) if expires_in else None
        try:
            api_key, key = api_key_create(
                name=name,
                is_admin=admin,
                expires_at=expires_at,
                can_read_registry=not no_registry_read,
                can_register=not no_register,
                can_call=not no_call,
                agents=agents,
                teams=teams,
            )
        except RegistryError as error:
            raise CommandError(error.message) from error
        self.stderr.write(f"Created API key {api_key} (store it now; it is not shown again):")
        self.stdout.write(key)
