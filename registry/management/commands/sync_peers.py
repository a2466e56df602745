from django.core.management.base import BaseCommand, CommandError

from registry.models import PeerRelay
from registry.peers import PeerError, peer_sync


class Command(BaseCommand):
    help = "Mirrors the registries of the peer relays this relay follows, once."

    def add_arguments(self, parser):
        parser.add_argument("--peer", default=None, help="Only the peer of this name.")

    def handle(self, *args, peer: str | None, **options):
        peers = PeerRelay.objects.filter(enabled=True)
        if peer:
            peers = PeerRelay.objects.filter(name=peer)
            if not peers.exists():
                raise CommandError(f"no peer relay named {peer!r}")
        failures = 0
        for relay in peers:
            try:
                report = peer_sync(peer=relay)
            except PeerError as error:
                failures += 1
                self.stdout.write(f"{relay.name}: failed ({error})")
                continue
            self.stdout.write(f"{relay.name}: {report.summary()}")
            for row in report.refused:
                self.stdout.write(f"  refused {row['id']}: {row['reason']}")
        if failures:
            raise CommandError(f"{failures} peer(s) could not be synced")
