"""Who is calling: API keys for machines, bearer tokens of trusted issuers, Django sessions for
people, and the permissions every endpoint names explicitly. The MCP and AG-UI endpoints learn
their caller through the gateway's own lookup (``api_key_lookup``), as A2A calls do."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from registry import principals, tokens
from registry.models import ApiKey
from registry.secrets import api_key_prefix, hash_api_key
from relay_project import ratelimit

# last_used_at is written at most this often per key, so a busy key does not write on every call.
LAST_USED_RESOLUTION = timedelta(minutes=1)
REVOKED = "revoked"
"""What the lookup cache holds for a key revoked lately, so no lookup that read the key just
before the revocation can put it back."""
REALM = 'Bearer realm="brass-relay"'
"""``WWW-Authenticate`` of a 401 for a request that sent no key."""
REALM_INVALID_TOKEN = 'Bearer realm="brass-relay", error="invalid_token"'
"""``WWW-Authenticate`` of a 401 for a key that is unknown, revoked or expired (RFC 6750)."""


def api_key_from_header(header: str | None) -> ApiKey | None:
    """Resolves ``Bearer <key>`` to a usable ApiKey.

    Returns None when there is no bearer header; raises AuthenticationFailed when there is one
    but the key is unknown, revoked or expired (all three read the same to the caller).
    Usable keys are kept in Django's cache for RELAY_API_KEY_CACHE_SECONDS (``api_key_revoke``
    replaces the entry at once); expiry is checked on every call. A bearer JWT of a trusted
    issuer resolves to its principal (``registry.principals``); one that fails a check raises
    AuthenticationFailed saying which.
    """
    key = _bearer_key(header)
    if key is None:
        return None
    if principals.is_issued_token(key):
        verified = _verified(key)
        key_hash = principals.principal_hash(verified.issuer.issuer, verified.subject)
        cached = cache.get(_cache_key(key_hash))
        return _usable(key_hash, cached, None, count=False, verified=verified, token=key)[0]
    key_hash = hash_api_key(key)
    return _usable(key_hash, cache.get(_cache_key(key_hash)), None, count=False)[0]


def _verified(token: str) -> tokens.Verified:
    try:
        return principals.verify_bearer(token)
    except tokens.TokenRefused as error:
        raise exceptions.AuthenticationFailed(str(error)) from None


@dataclass(frozen=True)
class KeyLookup:
    """A call's key as the lookup cache had it: the key's hash (None when the call sent no
    bearer key), the cache's entry (an ApiKey, REVOKED, or None when it held none), and the
    call counted against the key's rate limit when the entry was there. ``refusal``: the
    bearer token was empty, or a JWT that failed a check. ``verified``: the call's JWT, when
    it sent one (``key_hash`` is then its principal's)."""

    key_hash: str | None
    cached: Any = None
    counted: ratelimit.Counted | None = None
    refusal: str | None = None
    verified: tokens.Verified | None = None
    token: str = field(default="", repr=False)
    """The call's JWT itself, for agents that take the caller's token (never stored)."""


def api_key_lookup(header: str | None) -> KeyLookup:
    """The lookup of a call's ``Bearer <key>`` in the lookup cache, with the call counted
    against the key's rate limit (``ratelimit.hit_key``): on Redis one round trip.
    ``api_key_counted`` makes the caller's key of it."""
    try:
        key = _bearer_key(header)
    except exceptions.AuthenticationFailed as error:
        return KeyLookup(None, refusal=str(error.detail))
    if key is None:
        return KeyLookup(None)
    if principals.is_issued_token(key):
        try:
            verified = _verified(key)
        except exceptions.AuthenticationFailed as error:
            return KeyLookup(None, refusal=str(error.detail))
        key_hash = principals.principal_hash(verified.issuer.issuer, verified.subject)
        prefix = principals.principal_prefix(key_hash)
        cached_and_counted = ratelimit.cached_and_counted(_cache_key(key_hash), "key", prefix)
        return KeyLookup(key_hash, *cached_and_counted, verified=verified, token=key)
    key_hash = hash_api_key(key)
    # A cached key was cached under its own hash, so its prefix is this key's.
    return KeyLookup(
        key_hash, *ratelimit.cached_and_counted(_cache_key(key_hash), "key", api_key_prefix(key))
    )


def api_key_counted(lookup: KeyLookup) -> tuple[ApiKey | None, ratelimit.Refusal | None]:
    """The caller's usable key (None when it sent none) and the Refusal when the call is over
    the key's rate limit. Raises AuthenticationFailed as ``api_key_from_header`` does. Reads
    the database for a key the cache did not hold, and records a key's last use at most once
    a minute (``LAST_USED_RESOLUTION``): in memory otherwise."""
    if lookup.refusal is not None:
        raise exceptions.AuthenticationFailed(lookup.refusal)
    if lookup.key_hash is None:
        return None, None
    return _usable(
        lookup.key_hash,
        lookup.cached,
        lookup.counted,
        count=True,
        verified=lookup.verified,
        token=lookup.token,
    )


def _bearer_key(header: str | None) -> str | None:
    """The key of a ``Bearer`` header; None for no header or another scheme. Raises
    AuthenticationFailed for an empty bearer token."""
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    key = key.strip()
    if not key:
        raise exceptions.AuthenticationFailed("empty bearer token")
    return key


def _usable(
    key_hash: str,
    api_key,
    counted: ratelimit.Counted | None,
    *,
    count: bool,
    verified: tokens.Verified | None = None,
    token: str = "",
) -> tuple[ApiKey, ratelimit.Refusal | None]:
    """The key as found in the lookup cache (``api_key``, None when it was not there, with
    the call's count when it was), read from the database when it was not cached, checked,
    and the call's refusal when ``count``. For a ``verified`` token, its principal (made at
    its first call) with the rights its scopes grant."""
    cache_key = _cache_key(key_hash)
    if api_key is None:
        api_key = _stored_key(key_hash)
        if api_key is None and verified is not None:
            principals.principal_ensure(verified)
            api_key = _stored_key(key_hash)
        if api_key is not None and api_key.is_usable and _cache_seconds():
            cache.add(cache_key, api_key, _cache_seconds())
    if not isinstance(api_key, ApiKey) or not api_key.is_usable:
        raise exceptions.AuthenticationFailed(
            "this token's principal is revoked"
            if verified is not None
            else "invalid, revoked or expired API key"
        )
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
        # The next call reads the row again (and caches it with its new last_used_at).
        cache.delete(cache_key)
    if verified is not None:
        api_key = principals.granted(api_key, verified, token=token)
    if not count:
        return api_key, None
    if counted is None:
        return api_key, ratelimit.hit_key(api_key)
    return api_key, counted.refusal(ratelimit.key_limit(api_key))


def api_key_forget(api_key: ApiKey) -> None:
    """Marks the key revoked in the lookup cache once the current transaction commits: at
    once for this process and, with Redis, for every process."""
    cache_key = _cache_key(api_key.key_hash)
    transaction.on_commit(lambda: cache.set(cache_key, REVOKED, max(_cache_seconds(), 1)))


def _stored_key(key_hash: str) -> ApiKey | None:
    """The key with its agent and team scopes loaded (they are cached with it: a key's scopes
    are set when it is made and never change)."""
    try:
        api_key = ApiKey.objects.get(key_hash=key_hash)
    except ApiKey.DoesNotExist:
        return None
    api_key.scope_agent_ids = frozenset(api_key.agents.values_list("pk", flat=True))
    api_key.scope_team_ids = frozenset(api_key.teams.values_list("pk", flat=True))
    return api_key


def key_may_call(api_key: ApiKey | None, kind: str, target_id: str) -> bool:
    """Whether the key may call this agent, team or workflow. A key without ``can_call`` may
    call nothing; a key that names no agent and no team may call every one (and every
    workflow); a key that names some may call only those (and no workflow). A refusal must read like an unknown target to the caller (the
    gateway answers "not found")."""
    if api_key is None or not api_key.can_call or kind not in ("agent", "team", "workflow"):
        return False
    agents = _scope(api_key, "scope_agent_ids", "agents")
    teams = _scope(api_key, "scope_team_ids", "teams")
    if not agents and not teams:
        return True
    if kind == "workflow":
        return False
    return target_id in (agents if kind == "agent" else teams)


def _scope(api_key: ApiKey, attribute: str, relation: str) -> frozenset[str]:
    scope = getattr(api_key, attribute, None)
    if scope is None:
        # A key not loaded by api_key_from_header (a test, a management command).
        scope = frozenset(getattr(api_key, relation).values_list("pk", flat=True))
        setattr(api_key, attribute, scope)
    return scope


def _cache_key(key_hash: str) -> str:
    return f"relay:api-key:{key_hash}"


def _cache_seconds() -> float:
    return settings.RELAY_API_KEY_CACHE_SECONDS


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <key>``. ``request.user`` becomes the ApiKey."""

    def authenticate(self, request):
        try:
            api_key = api_key_from_header(request.META.get("HTTP_AUTHORIZATION"))
        except exceptions.AuthenticationFailed:
            # The 401 then says error="invalid_token" (authenticate_header reads this).
            request.invalid_api_key = True
            raise
        if api_key is None:
            return None
        return api_key, api_key

    def authenticate_header(self, request) -> str:
        return REALM_INVALID_TOKEN if getattr(request, "invalid_api_key", False) else REALM


def caller_key(request) -> ApiKey | None:
    return request.auth if isinstance(request.auth, ApiKey) else None


class HasApiKey(permissions.BasePermission):
    """A valid API key: what every A2A call needs."""

    message = "an API key is required: send Authorization: Bearer <key>"

    def has_permission(self, request, view) -> bool:
        return caller_key(request) is not None


class IsApiKeyOrStaff(permissions.BasePermission):
    """A valid API key, or a logged-in staff user (the admin and the web pages)."""

    message = "an API key is required: send Authorization: Bearer <key>"

    def has_permission(self, request, view) -> bool:
        if caller_key(request) is not None:
            return True
        user = request.user
        return bool(user and getattr(user, "is_staff", False) and user.is_authenticated)


def _is_staff(request) -> bool:
    user = request.user
    return bool(user and getattr(user, "is_staff", False) and user.is_authenticated)


class RegistryReadPermission(permissions.BasePermission):
    """Registry reads are public unless RELAY_REGISTRY_PUBLIC is off; then a staff user or a
    key that may read the registry (``can_read_registry``, or an admin key)."""

    message = "this API key may not read the registry"

    def has_permission(self, request, view) -> bool:
        if settings.RELAY_REGISTRY_PUBLIC or _is_staff(request):
            return True
        key = caller_key(request)
        if key is None:
            # No key: DRF answers 401 (NotAuthenticated) with WWW-Authenticate.
            self.message = IsApiKeyOrStaff.message
            return False
        return key.can_read_registry or key.is_admin


def _may_read(permission: permissions.BasePermission, request, view) -> bool:
    """A read, allowed as RegistryReadPermission allows it, refused with its message."""
    reading = RegistryReadPermission()
    allowed = reading.has_permission(request, view)
    permission.message = reading.message
    return allowed


class RegistryPermission(permissions.BasePermission):
    """Reads as RegistryReadPermission. Writes need a staff user or a key; registering (POST
    on a view with ``registers_agents``) needs a key that may register (``can_register``, or
    an admin key). Which agent a key may change is the view's to check (the key that
    registered it, or an admin key)."""

    message = IsApiKeyOrStaff.message
    admin_writes = False
    """Writes need an admin key (AdminWritePermission)."""
    admin_writes_message = "only an admin key may change teams"

    def has_permission(self, request, view) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return _may_read(self, request, view)
        if _is_staff(request):
            return True
        key = caller_key(request)
        if key is None:
            return False
        if self.admin_writes:
            self.message = self.admin_writes_message
            return key.is_admin
        if request.method == "POST" and getattr(view, "registers_agents", False):
            self.message = "this API key may not register agents"
            return key.can_register or key.is_admin
        return True


class AdminWritePermission(RegistryPermission):
    """Reads as RegistryReadPermission; writes need a staff user or an admin key (teams)."""

    admin_writes = True
