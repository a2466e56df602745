"""The relay's own public address, for the URLs it hands out (cards, team endpoints).

Here, below every app, because the registry's API (a team's ``a2aUrl``) and the A2A layer's
cards both need it, and it depends only on one setting and the request.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def relay_base_url(request: HttpRequest, path: str) -> str:
    """Absolute URL of a relay path, from RELAY_PUBLIC_URL when set, else from the request."""
    if settings.RELAY_PUBLIC_URL:
        return settings.RELAY_PUBLIC_URL.rstrip("/") + path
    return request.build_absolute_uri(path)
