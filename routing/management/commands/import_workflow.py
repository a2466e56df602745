import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from registry.services import RegistryError
from routing.workflows.services import WorkflowRejected, workflow_import


class Command(BaseCommand):
    help = (
        "Imports a workflow from its YAML file (the document POST /a2a/workflows takes). Its "
        "agent and team names must be registered. Prints the workflow's id, or every problem "
        "of the file."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="The YAML file ('-' reads standard input).")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Replace the workflow with the same id instead of refusing it.",
        )

    def handle(self, *args, file: str, replace: bool = False, **options):
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {file}: {error}") from error
        try:
            workflow = workflow_import(text=text, replace=replace)
        except WorkflowRejected as rejected:
            lines = "\n".join(f"  {problem}" for problem in rejected.problems)
            raise CommandError(f"{file} is not a workflow this relay can save:\n{lines}") from None
        except RegistryError as error:
            raise CommandError(f"{error.message} (--replace replaces it)") from error
        steps = workflow.steps.count()
        self.stdout.write(
            f"Imported workflow {workflow.pk} ({workflow.name} {workflow.version}, "
            f"{steps} top-level steps)"
        )
