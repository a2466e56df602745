from django.core.management.base import BaseCommand, CommandError

from registry import embeddings, semantic


class Command(BaseCommand):
    help = (
        "Computes the skill embeddings for search by meaning that are missing (cards stored "
        "while the model was down) or were made by another model; every one with --all."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", dest="everything", action="store_true", help="Every skill.")

    def handle(self, *args, everything, **options):
        embeddings.reset()  # a model that failed to load in this process gets another try
        try:
            written = semantic.skill_embeddings_refresh(everything=everything)
        except embeddings.EmbeddingsUnavailable as error:
            raise CommandError(f"search by meaning is unavailable: {error}") from error
        self.stdout.write(f"{written} skill embedding(s) written")
