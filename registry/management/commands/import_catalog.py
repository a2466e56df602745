import json

from django.core.management.base import BaseCommand, CommandError

from registry.catalog import CatalogError, catalog_import
from registry.services import SYSTEM, Credentials


class Command(BaseCommand):
    help = (
        "Registers every A2A agent of another host's AI Catalog (URL of the catalog, or of the "
        "host whose /.well-known/ai-catalog.json is read). Prints what was added, updated, "
        "left unchanged and refused, and why."
    )

    def add_arguments(self, parser):
        parser.add_argument("url")
        parser.add_argument(
            "--key",
            default="",
            help="A bearer key sent for the catalog and stored for the agents it adds (e.g. "
            "the API key of the relay that publishes it).",
        )
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print the report as JSON."
        )

    def handle(self, *args, url, key, as_json: bool = False, **options):
        credentials = Credentials("", key, "bearer") if key else None
        try:
            report = catalog_import(url=url, actor=SYSTEM, credentials=credentials)
        except CatalogError as error:
            raise CommandError(f"{error.code}: {error.message}") from error
        if as_json:
            self.stdout.write(_dumps(report.as_dict()))
            return
        self.stdout.write(f"Catalog {report.catalog_url}")
        for label, rows in (
            ("added", report.added),
            ("updated", report.updated),
            ("unchanged", report.unchanged),
        ):
            for row in rows:
                self.stdout.write(f"  {label:9} {row['agentId']:30} {row['identifier']}")
        for row in report.refused:
            self.stdout.write(f"  refused   {row['identifier']}: {row['code']}: {row['reason']}")
        self.stdout.write(
            f"{len(report.added)} added, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.refused)} refused"
        )


def _dumps(value) -> str:
    return json.dumps(value, indent=2)
