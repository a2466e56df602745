"""Who is calling: API keys for machines, Django sessions for people, and the permissions
every endpoint names explicitly."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from registry.models import ApiKey
from registry.secrets import hash_api_key

# last_used_at is written at most this often per key, so a busy key does not write on every call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_key_from_header(header: str | None) -> ApiKey | None:
    """Resolves ``Bearer <key>`` to a usable ApiKey.

    Returns None when there is no bearer header; raises AuthenticationFailed when there is one
    but the key is unknown, revoked or expired (all three read the same to the caller).
    """
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    key = key.strip()
    if not key:
        raise exceptions.AuthenticationFailed("empty bearer token")
    api_key = ApiKey.objects.filter(key_hash=hash_api_key(key)).first()
    if api_key is None or not api_key.is_usable:
        raise exceptions.AuthenticationFailed("invalid, revoked or expired API key")
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <key>``. ``request.user`` becomes the ApiKey."""

    def authenticate(self, request):
        api_key = api_key_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if api_key is None:
            return None
        return api_key, api_key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="brass-relay"'


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


class RegistryReadPermission(permissions.BasePermission):
    """Registry reads are public unless RELAY_REGISTRY_PUBLIC is off; then a key or staff."""

    message = IsApiKeyOrStaff.message

    def has_permission(self, request, view) -> bool:
        if settings.RELAY_REGISTRY_PUBLIC:
            return True
        return IsApiKeyOrStaff().has_permission(request, view)


class RegistryPermission(permissions.BasePermission):
    """Reads as RegistryReadPermission; writes need an API key or a staff user."""

    message = IsApiKeyOrStaff.message

    def has_permission(self, request, view) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return RegistryReadPermission().has_permission(request, view)
        return IsApiKeyOrStaff().has_permission(request, view)
