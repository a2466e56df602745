from django.core.management.base import BaseCommand, CommandError

from registry.models import PeerRelay
from registry.peers import PeerError, peer_follow, peer_sync


class Command(BaseCommand):
    help = (
        "Follows a peer relay: its registry is mirrored here (on the peer sync schedule, "
        "RELAY_PEER_SYNC_SECONDS), its agents marked with their origin and read-only here."
    )

    def add_arguments(self, parser):
        parser.add_argument("url", help="The peer relay's base URL.")
        parser.add_argument("--key", default="", help="An API key of the peer relay.")
        parser.add_argument("--name", default="", help="A short name (default: from the URL).")
        parser.add_argument(
            "--mode",
            choices=PeerRelay.Mode.values,
            default=PeerRelay.Mode.VIA_ORIGIN,
            help="Call mirrored agents through the peer relay (via_origin, the default) or "
            "directly at their own card URL (direct).",
        )
        parser.add_argument(
            "--sync", action="store_true", help="Mirror the peer's registry now, once."
        )

    def handle(self, *args, url, key, name, mode, sync, **options):
        try:
            peer = peer_follow(url=url, api_key=key, name=name, mode=mode)
        except PeerError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"Following {peer.name} at {peer.url} ({peer.get_mode_display()})")
        if sync:
            try:
                report = peer_sync(peer=peer)
            except PeerError as error:
                raise CommandError(f"sync failed: {error}") from error
            self.stdout.write(f"{peer.name}: {report.summary()}")
