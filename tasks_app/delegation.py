"""The delegation headers with this relay's settings (RELAY_ID, RELAY_MAX_DELEGATION_DEPTH,
RELAY_DELEGATION_SECRET); the header logic itself is ``tasks_app.protocol.delegation``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from functools import lru_cache

from django.conf import settings

from tasks_app.protocol import delegation


def relay_id() -> str:
    """This relay's name in delegation chains: RELAY_ID, else one derived from SECRET_KEY
    (stable for a deployment, different between deployments, and revealing nothing)."""
    return settings.RELAY_ID or _derived_id(settings.SECRET_KEY)


@lru_cache(maxsize=4)
def _derived_id(secret_key: str) -> str:
    return "relay-" + hashlib.sha256(b"relay-id:" + secret_key.encode()).hexdigest()[:12]


def inbound(headers: Mapping[str, str] | Iterable[tuple[bytes, bytes]]) -> tuple[str, ...]:
    """The delegation entries of a call as it arrived (``relay:<id>`` per relay it passed),
    from its headers: raw ASGI pairs, or a case-insensitive mapping such as Django's
    ``request.headers``. Raises InvalidRequest for a malformed chain, a loop through this
    relay, or a chain at the depth limit."""
    if isinstance(headers, Mapping):
        value = headers.get(delegation.CHAIN_HEADER)
        values = [value] if value else []
    else:
        name = delegation.CHAIN_HEADER.lower().encode()
        values = [value.decode("latin-1") for key, value in headers if key.lower() == name]
    chain = delegation.parse_chain(values)
    delegation.check_chain(chain, own_id=relay_id(), max_depth=settings.RELAY_MAX_DELEGATION_DEPTH)
    return tuple(delegation.RELAY_ENTRY + entry for entry in chain)


def outbound_headers(caller, entries: Iterable[str]) -> dict[str, str]:
    """The headers a call to an agent carries for ``caller`` (an ApiKey; None for the relay's
    own calls, such as health probes) within the delegation ``entries`` of its task."""
    prefix = getattr(caller, "prefix", "") or "-"
    name = getattr(caller, "name", "") or ""
    return delegation.outbound_headers(
        key_prefix=prefix,
        key_name=name,
        relay_id=relay_id(),
        chain=delegation.relays_of(entries),
        secret=settings.RELAY_DELEGATION_SECRET,
    )
