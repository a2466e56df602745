"""Addressing over gRPC: one server, one ``host:port``, for every target.

The a2a-sdk client opens a channel to the ``GRPC`` interface's URL as it is (``host:port``)
and puts the interface's ``tenant`` into every request's ``tenant`` field. So the relay's
cards name the gRPC server's address as the URL and the target as the tenant, spelled as the
target's path under ``/a2a/`` in the HTTP bindings:

- ``agents/<id>``: a registered agent (``/a2a/agents/<id>/``);
- ``teams/<id>``: a team (``/a2a/teams/<id>/``);
- ``relay`` or no tenant: the relay's own endpoint (``/a2a/relay/``), which forwards to its
  default target.

The interface is listed only when the gRPC server is configured (``RELAY_GRPC_PORT``). Its
address is ``RELAY_GRPC_PUBLIC_ADDRESS`` when set (a proxy or load balancer in front), else the
card's own host with ``RELAY_GRPC_PORT``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.conf import settings

from tasks_app.protocol.errors import FieldViolation, InvalidParams

GRPC = "GRPC"
RELAY_TENANT = "relay"
_TENANT = re.compile(r"(?P<kind>agents|teams)/(?P<target_id>[-a-zA-Z0-9_]+)")
_KINDS = {"agents": "agent", "teams": "team"}


def target_of_tenant(tenant: str) -> tuple[str, str]:
    """(kind, id) of the target a request's ``tenant`` names. Raises InvalidParams for a
    tenant that names none."""
    tenant = tenant.strip("/")
    if tenant in ("", RELAY_TENANT):
        return "relay", "default"
    match = _TENANT.fullmatch(tenant)
    if match is None:
        raise InvalidParams(
            field_violations=[
                FieldViolation(
                    "tenant", "must name a target: agents/<id>, teams/<id> or relay (or be empty)"
                )
            ]
        )
    return _KINDS[match["kind"]], match["target_id"]


def tenant_of_base(base_url: str) -> str:
    """The tenant of the target served at an HTTP base URL: its path after ``/a2a/``."""
    path = urlsplit(base_url).path
    _, found, rest = path.rpartition("/a2a/")
    return rest.strip("/") if found else RELAY_TENANT


def enabled() -> bool:
    return bool(settings.RELAY_GRPC_PORT)


def public_address(base_url: str) -> str:
    """Where clients reach the gRPC server, as a card gives it (``host:port``)."""
    if settings.RELAY_GRPC_PUBLIC_ADDRESS:
        return settings.RELAY_GRPC_PUBLIC_ADDRESS
    host = urlsplit(base_url).hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{settings.RELAY_GRPC_PORT}"


def grpc_interface(base_url: str) -> dict[str, str] | None:
    """The ``GRPC`` 1.0 interface of the target served at ``base_url``, or None when the
    relay serves no gRPC."""
    if not enabled():
        return None
    return {
        "url": public_address(base_url),
        "protocolBinding": GRPC,
        "protocolVersion": "1.0",
        "tenant": tenant_of_base(base_url),
    }
