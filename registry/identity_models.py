"""The identity providers whose bearer tokens the relay accepts (beside the settings'
RELAY_JWT_ISSUERS), set in the admin."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from registry import secrets, tokens
from relay_project import outbound


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.replace(",", " ").split())


class TokenIssuer(models.Model):
    """An OAuth2 / OpenID Connect issuer whose signed JWTs are accepted as callers, and how
    a token's claims map to a principal (its subject, its scopes, what each scope allows)."""

    issuer = models.CharField(
        max_length=500, unique=True, help_text="The tokens' iss, exactly as the issuer writes it."
    )
    discovery_url = models.URLField(
        max_length=2048,
        blank=True,
        help_text="The OpenID Connect discovery document (…/.well-known/openid-configuration); "
        "its jwks_uri gives the keys. Give this or the JWKS URL.",
    )
    jwks_url = models.URLField(max_length=2048, blank=True, help_text="The issuer's JWKS.")
    audience = models.CharField(
        max_length=500, help_text="The accepted aud values, separated by spaces."
    )
    algorithms = models.CharField(
        max_length=200,
        default=" ".join(tokens.DEFAULT_ALGORITHMS),
        help_text="Accepted signature algorithms, separated by spaces (asymmetric only).",
    )
    leeway = models.PositiveIntegerField(
        default=30, help_text="Clock skew allowed on exp and nbf, in seconds."
    )
    subject_claim = models.CharField(
        max_length=100, default="sub", help_text="The claim that names the principal."
    )
    scopes_claim = models.CharField(
        max_length=100,
        default="scope",
        help_text="The claim holding the scopes: a space-separated string or a list; a dotted "
        "path reaches into objects (realm_access.roles).",
    )
    call_scope = models.CharField(
        max_length=100, blank=True, help_text="Needed to call agents and teams (empty: none)."
    )
    read_scope = models.CharField(
        max_length=100, blank=True, help_text="Needed to read the registry (empty: none)."
    )
    register_scope = models.CharField(
        max_length=100, blank=True, help_text="Needed to register agents (empty: no token may)."
    )
    admin_scope = models.CharField(
        max_length=100, blank=True, help_text="Makes the caller an admin (empty: no token does)."
    )
    token_url = models.URLField(
        max_length=2048,
        blank=True,
        help_text="The token endpoint, shown in the cards' oauth2 scheme when there is no "
        "discovery document.",
    )
    exchange_url = models.URLField(
        max_length=2048,
        blank=True,
        help_text="The token-exchange endpoint (RFC 8693) that gives agents in exchange mode a "
        "token of their own for this issuer's callers (empty: none).",
    )
    introspection_url = models.URLField(
        max_length=2048,
        blank=True,
        help_text="The introspection endpoint (RFC 7662) that checks this issuer's opaque "
        "tokens (empty: JWTs only).",
    )
    client_id = models.CharField(
        max_length=200, blank=True, help_text="The relay's client id at the introspection endpoint."
    )
    client_secret_encrypted = models.TextField(
        blank=True, editable=False, help_text="The client's secret, encrypted; never shown."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["issuer"]

    def __str__(self) -> str:
        return self.issuer

    def as_issuer(self) -> tokens.Issuer:
        """The issuer as ``tokens.verify`` takes it. Raises ValueError when it is incomplete."""
        return tokens.Issuer(
            issuer=self.issuer,
            audience=_words(self.audience),
            jwks_url=self.jwks_url,
            discovery_url=self.discovery_url,
            algorithms=_words(self.algorithms),
            leeway=self.leeway,
            subject_claim=self.subject_claim,
            scopes_claim=self.scopes_claim,
            call_scope=self.call_scope,
            read_scope=self.read_scope,
            register_scope=self.register_scope,
            admin_scope=self.admin_scope,
            token_url=self.token_url,
            exchange_url=self.exchange_url,
            introspection_url=self.introspection_url,
            client_id=self.client_id,
            client_secret=secrets.decrypt(self.client_secret_encrypted),
        )

    def set_client_secret(self, secret: str) -> None:
        """Stores the introspection client's secret, encrypted (empty: none)."""
        self.client_secret_encrypted = secrets.encrypt(secret)

    def clean(self) -> None:
        try:
            self.as_issuer()
        except ValueError as error:
            raise ValidationError(str(error)) from error
        for name in ("discovery_url", "jwks_url", "token_url", "exchange_url", "introspection_url"):
            url = getattr(self, name)
            if url:
                try:
                    outbound.check_url_shape(url)
                except outbound.UnsafeURLError as error:
                    raise ValidationError({name: str(error)}) from error


class AccessRule(models.Model):
    """A rule of who may call which agent, team or skill, or which team member may hand to
    which: a CEL expression over the call's facts (registry.policy says which) and what
    happens when it holds. Rules of a kind are tried by position; the first that holds
    decides; when none holds, the call goes on as it would without rules."""

    class Kind(models.TextChoices):
        CALL = "call", "a call (agent, team, skill)"
        HANDOFF = "handoff", "a hand-off between team members"

    class Effect(models.TextChoices):
        DENY = "deny"
        ALLOW = "allow"

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.CALL)
    effect = models.CharField(max_length=5, choices=Effect.choices, default=Effect.DENY)
    condition = models.TextField(
        help_text='A CEL expression, e.g. principal.subject == "alice" && skill == "translate" '
        'or handoff.team == "support" && handoff.from == "triage" && handoff.to == "billing".'
    )
    message = models.CharField(
        max_length=300, blank=True, help_text="Said to the caller when the rule refuses."
    )
    position = models.PositiveIntegerField(default=100, help_text="Lower positions go first.")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["kind", "position", "name"]

    def __str__(self) -> str:
        return self.name

    def compiled(self):
        """The rule as registry.policy evaluates it. Raises policy.RuleError."""
        from registry import policy

        return policy.compile_rule(
            name=self.name,
            kind=self.kind,
            effect=self.effect,
            condition=self.condition,
            message=self.message,
        )

    def clean(self) -> None:
        from registry import policy

        try:
            self.compiled()
        except policy.RuleError as error:
            raise ValidationError({"condition": str(error)}) from error
