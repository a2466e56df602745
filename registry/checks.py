"""System checks for misconfiguration, with stable ids, so it shows at start-up rather than at
the first request."""

from django.conf import settings
from django.core.checks import Warning, register

from relay_project.settings import DEVELOPMENT_SECRET_KEY


@register("security")
def check_production_secrets(app_configs, **kwargs):
    problems = []
    if (
        not settings.DEBUG
        and settings.SECRET_KEY == DEVELOPMENT_SECRET_KEY
        and (settings.PRODUCTION_DATABASE or settings.REDIS_URL)
    ):
        problems.append(
            Warning(
                "The production profile runs with the development SECRET_KEY.",
                hint="Set DJANGO_SECRET_KEY.",
                id="relay.W001",
            )
        )
    if not settings.RELAY_ENCRYPTION_KEY and (settings.PRODUCTION_DATABASE or settings.REDIS_URL):
        problems.append(
            Warning(
                "Upstream credentials are encrypted with a key derived from SECRET_KEY.",
                hint="Set RELAY_ENCRYPTION_KEY to a Fernet key "
                "(python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())').",
                id="relay.W002",
            )
        )
    if settings.RELAY_ALLOW_PRIVATE_URLS and (settings.PRODUCTION_DATABASE or settings.REDIS_URL):
        problems.append(
            Warning(
                "RELAY_ALLOW_PRIVATE_URLS is on: the relay will fetch loopback and private addresses.",
                hint="Turn it off unless every agent really lives on a private network.",
                id="relay.W003",
            )
        )
    return problems
