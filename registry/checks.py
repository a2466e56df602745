"""System checks for misconfiguration, with stable ids, so it shows at start-up rather than at
the first request."""

from django.conf import settings
from django.core.checks import Error, Warning, register

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


@register("security")
def check_card_signing_key(app_configs, **kwargs):
    """RELAY_CARD_SIGNING_KEY, when set, must hold a usable private key: otherwise every card
    request would fail."""
    if not settings.RELAY_CARD_SIGNING_KEY:
        return []
    from registry.jwks import SigningKeyError, _load

    try:
        _load(settings.RELAY_CARD_SIGNING_KEY)
    except SigningKeyError as error:
        return [
            Error(
                str(error),
                hint="Give the path of a PEM file (or the PEM text) of an unencrypted EC, RSA "
                "or Ed25519 private key, e.g. made with 'openssl ecparam -name prime256v1 "
                "-genkey -noout | openssl pkcs8 -topk8 -nocrypt', or leave it empty to serve "
                "cards unsigned.",
                id="relay.E010",
            )
        ]
    return []


@register("security")
def check_jwt_issuers(app_configs, **kwargs):
    """RELAY_JWT_ISSUERS, when set, must be a list of complete issuers: otherwise no token of
    any of them would be accepted."""
    if not settings.RELAY_JWT_ISSUERS:
        return []
    from registry.tokens import issuers_from_setting

    try:
        issuers_from_setting(settings.RELAY_JWT_ISSUERS)
    except ValueError as error:
        return [
            Error(
                str(error),
                hint='A JSON list such as [{"issuer": "https://id.example.com/realms/agents", '
                '"discovery": "https://id.example.com/realms/agents/.well-known/'
                'openid-configuration", "audience": "brass-relay"}].',
                id="relay.E011",
            )
        ]
    return []
