"""Rate limits for the registry and team APIs: the same per-key count as the A2A endpoints
(``relay_project.ratelimit``), so a key has one budget of calls per minute wherever it calls.
Anonymous reads and staff sessions are not counted. Over the limit DRF answers 429 with
``Retry-After``, in the API's error body."""

from __future__ import annotations

from rest_framework.throttling import BaseThrottle

from registry.models import ApiKey
from relay_project import ratelimit


class ApiKeyRateThrottle(BaseThrottle):
    def __init__(self) -> None:
        self._refusal: ratelimit.Refusal | None = None

    def allow_request(self, request, view) -> bool:
        if not isinstance(request.auth, ApiKey):
            return True
        self._refusal = ratelimit.hit_key(request.auth)
        return self._refusal is None

    def wait(self) -> float | None:
        return None if self._refusal is None else self._refusal.retry_after
