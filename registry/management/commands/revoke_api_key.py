from django.core.management.base import BaseCommand, CommandError

from registry.models import ApiKey
from registry.services import api_key_revoke


class Command(BaseCommand):
    help = (
        "Revokes an API key, named by its prefix (the first characters, as the admin and the "
        "audit log show them). Calls with it are refused from then on; the key stays listed, "
        "revoked. Without a prefix, lists the keys."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "prefix", nargs="?", help="The key's prefix, e.g. br_AbCdEfGh (never the whole key)."
        )

    def handle(self, *args, prefix, **options):
        if not prefix:
            self._list()
            return
        api_key = ApiKey.objects.filter(prefix=prefix).first()
        if api_key is None:
            raise CommandError(
                f"no API key with the prefix {prefix!r} "
                "(run revoke_api_key without arguments to list them)"
            )
        if api_key.revoked_at is not None:
            self.stdout.write(
                f"{api_key} was already revoked ({api_key.revoked_at:%Y-%m-%d %H:%M})"
            )
            return
        api_key_revoke(api_key=api_key)
        self.stdout.write(f"Revoked {api_key}")

    def _list(self) -> None:
        for api_key in ApiKey.objects.order_by("created_at"):
            if api_key.revoked_at is not None:
                state = f"revoked {api_key.revoked_at:%Y-%m-%d %H:%M}"
            elif not api_key.is_usable:
                state = f"expired {api_key.expires_at:%Y-%m-%d %H:%M}"
            else:
                state = "usable"
            self.stdout.write(f"{api_key.prefix:<14} {state:<24} {api_key.name}")
