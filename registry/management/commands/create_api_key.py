from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from registry.services import api_key_create


class Command(BaseCommand):
    help = "Creates an API key and prints it on the last line. It is shown only this once."

    def add_arguments(self, parser):
        parser.add_argument("name", help="What the key is for, e.g. the calling team or agent.")
        parser.add_argument("--admin", action="store_true",
                            help="May change and delete every agent, not only its own.")
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args, name, admin, expires_in_days, **options):
        expires_at = (timezone.now() + timedelta(days=expires_in_days)
                      if expires_in_days else None)
        api_key, key = api_key_create(name=name, is_admin=admin, expires_at=expires_at)
        self.stderr.write(f"Created API key {api_key} (store it now; it is not shown again):")
        self.stdout.write(key)
