"""Whether a URL points at the relay itself, so the registry can refuse to register the relay
as one of its own agents (a call to such an agent would come back to the relay, and the caller
would read the relay's own answers, a 401 among them, as the agent's).

The relay's addresses are its public URL, the host the request came to, every name in
ALLOWED_HOSTS, and the loopback names, each with the ports the relay answers on (the request's
and the server's). A URL matches when its host and port are one of them, or when its host is
an IP address that one of them resolves to, on the same port (every loopback address, and
0.0.0.0, counts as one). A URL's host name is not resolved here (the outbound guard resolves it
once, when the relay connects); the address a card fetch ends at is checked after the fetch.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_LOOPBACK = "loopback"


@dataclass(frozen=True)
class OwnAddresses:
    """The (host, port) pairs the relay answers on, host names lower-cased."""

    pairs: frozenset[tuple[str, int]]

    def match(self, url: str) -> str | None:
        """``host:port`` of the relay that ``url`` reaches, or None when it is not the relay.
        Never raises: a URL that cannot be parsed is not the relay."""
        target = _host_port(url)
        if target is None:
            return None
        host, port = target
        if (host, port) in self.pairs:
            return _shown(host, port)
        address = _literal(host)
        names = [name for name, own_port in self.pairs if own_port == port]
        if address is None or not names:
            return None
        if address in set().union(*(_addresses(name) for name in names)):
            return _shown(host, port)
        return None


def own_addresses(request: HttpRequest | None) -> OwnAddresses:
    """The relay's addresses as seen from ``request`` (None: from the settings alone)."""
    ports: set[int] = set()
    pairs: set[tuple[str, int]] = set()
    public = _host_port(settings.RELAY_PUBLIC_URL) if settings.RELAY_PUBLIC_URL else None
    if public:
        pairs.add(public)
    if request is not None:
        scheme = "https" if request.is_secure() else "http"
        seen = _host_port(f"{scheme}://{request.get_host()}")
        if seen:
            pairs.add(seen)
            ports.add(seen[1])
        server_port = str(request.META.get("SERVER_PORT", ""))
        if server_port.isdigit():
            ports.add(int(server_port))
    names = [
        *LOOPBACK_NAMES,
        *(
            host
            for host in settings.ALLOWED_HOSTS
            if host and "*" not in host and not host.startswith(".")
        ),
    ]
    pairs |= {(_bare(name), port) for name in names for port in ports}
    return OwnAddresses(frozenset(pairs))


def _bare(host: str) -> str:
    return host.strip("[]").lower().rstrip(".")


def _host_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.scheme not in ("http", "https"):
        return None
    return _bare(parts.hostname), port or (443 if parts.scheme == "https" else 80)


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _literal(host: str) -> str | None:
    """An IP literal host as :func:`_addresses` names it (loopback and 0.0.0.0, which reaches
    this machine, as "loopback"); None for a name."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    ip = getattr(ip, "ipv4_mapped", None) or ip
    return _LOOPBACK if ip.is_loopback or ip.is_unspecified else str(ip)


def _addresses(host: str) -> set[str]:
    """The addresses one of the relay's own names stands for (see :func:`_literal`). A name
    that does not resolve stands for nothing."""
    literal = _literal(host)
    if literal is not None:
        return {literal}
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return set()
    return {_literal(address) or address for address in found}
