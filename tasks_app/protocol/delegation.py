"""Delegation headers: who a relayed call is for, and which relays it went through. Pure.

On every call to an agent the relay sets (and overwrites whatever a client sent under the same
names, which it never forwards):

- ``X-Relay-Caller: key=<key prefix>; name=<key name, percent-encoded>; relay=<relay id>``:
  the API key the relay admitted the call with (its public prefix, never the secret).
- ``X-Relay-Chain: relay-a, relay-b``: the relays the call passed, oldest first, the sending
  relay last. A relay that receives a call reads the chain; a relay's agent may itself be a
  relay, and that one appends itself again.
- ``X-Relay-Signature: sha256=<hex>``: with a shared secret, the HMAC-SHA256 of
  ``"<caller>\\n<chain>"`` (the two header values as sent), so an agent can check the relay set
  them.

A call that arrives with a chain of ``max_depth`` relays or more, or with this relay's own id
in it (a loop), is an InvalidRequest.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from urllib.parse import quote

from tasks_app.protocol.errors import InvalidRequest

CALLER_HEADER = "X-Relay-Caller"
CHAIN_HEADER = "X-Relay-Chain"
SIGNATURE_HEADER = "X-Relay-Signature"
RELAY_ENTRY = "relay:"
"""How a relay of the inbound chain is named in a task's ``delegation_chain``."""

_RELAY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")


def parse_chain(values: Iterable[str]) -> tuple[str, ...]:
    """The relay ids of the ``X-Relay-Chain`` header values (repeated headers are joined, as
    HTTP allows). Raises InvalidRequest for an id that is not a plain name."""
    chain: list[str] = []
    for value in values:
        for entry in value.split(","):
            entry = entry.strip()
            if not entry:
                continue
            if not _RELAY_ID.match(entry):
                raise InvalidRequest(
                    f"{CHAIN_HEADER} holds {entry[:40]!r}, which is not a relay "
                    "id (letters, digits, '.', '_', ':', '-')"
                )
            chain.append(entry)
    return tuple(chain)


def check_chain(chain: tuple[str, ...], *, own_id: str, max_depth: int) -> None:
    """Refuses a call that already went through this relay or through too many relays."""
    if own_id in chain:
        raise InvalidRequest(
            f"this call already went through this relay ({own_id}): "
            f"{CHAIN_HEADER} is {', '.join(chain)}; refusing a loop"
        )
    if max_depth and len(chain) >= max_depth:
        raise InvalidRequest(
            f"this call already went through {len(chain)} relays "
            f"({', '.join(chain)}); the limit is {max_depth - 1} before this one"
        )


def caller_value(*, key_prefix: str, key_name: str, relay_id: str) -> str:
    return f"key={key_prefix}; name={quote(key_name, safe='')}; relay={relay_id}"


def outbound_headers(
    *, key_prefix: str, key_name: str, relay_id: str, chain: tuple[str, ...], secret: str = ""
) -> dict[str, str]:
    """The delegation headers of a call to an agent: ``chain`` is the inbound chain, this
    relay is appended. Signed when ``secret`` is set."""
    caller = caller_value(key_prefix=key_prefix, key_name=key_name, relay_id=relay_id)
    chain_value = ", ".join((*chain, relay_id))
    headers = {CALLER_HEADER: caller, CHAIN_HEADER: chain_value}
    if secret:
        headers[SIGNATURE_HEADER] = "sha256=" + signature(secret, caller, chain_value)
    return headers


def signature(secret: str, caller: str, chain: str) -> str:
    """The hex HMAC-SHA256 an agent recomputes to check the headers came from the relay."""
    message = f"{caller}\n{chain}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secret: str, headers: dict[str, str]) -> bool:
    """For agents (and tests): whether the delegation headers carry a valid signature."""
    lowered = {name.lower(): value for name, value in headers.items()}
    sent = lowered.get(SIGNATURE_HEADER.lower(), "")
    expected = "sha256=" + signature(
        secret, lowered.get(CALLER_HEADER.lower(), ""), lowered.get(CHAIN_HEADER.lower(), "")
    )
    return hmac.compare_digest(sent, expected)


def relays_of(delegation: Iterable[str]) -> tuple[str, ...]:
    """The relay ids among a task's delegation entries (``relay:<id>``; teams are
    ``team:<id>``)."""
    return tuple(entry[len(RELAY_ENTRY) :] for entry in delegation if entry.startswith(RELAY_ENTRY))
