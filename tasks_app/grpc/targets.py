"""Addressing over gRPC: one server, one address, for every target.

The a2a-sdk client hands the ``GRPC`` interface's URL to the caller's channel factory and puts
the interface's ``tenant`` into every request's ``tenant`` field. So the relay's cards name the
gRPC server's address as the URL and the target as the tenant, spelled as the target's path
under ``/a2a/`` in the HTTP bindings:

- ``agents/<id>``: a registered agent (``/a2a/agents/<id>/``);
- ``teams/<id>``: a team (``/a2a/teams/<id>/``);
- ``workflows/<id>``: a workflow (``/a2a/workflows/<id>/``);
- ``relay`` or no tenant: the relay's own endpoint (``/a2a/relay/``), which forwards to its
  default target.

The interface is listed only when the gRPC server is configured (``RELAY_GRPC_PORT``). Its
address is ``RELAY_GRPC_PUBLIC_ADDRESS`` when set (a proxy or load balancer in front), else the
card's own host with ``RELAY_GRPC_PORT``, always written as an absolute URL
(``http://127.0.0.1:8001``), never a bare ``host:port``: the spec's own card example gives its
gRPC interface an ``https://`` URL, the conformance suite's gRPC client reads the target from
the URL's host and port (``http``/``grpc`` plaintext, ``https``/``grpcs`` TLS), and Google
ADK's ``RemoteA2aAgent`` refuses a card with any interface URL that is not ``https`` (or
``http`` on a loopback host) on the card's own origin. A channel factory passes
``urlsplit(url).netloc`` to gRPC (which reads ``http://`` as a name to resolve).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.conf import settings

from tasks_app.protocol.errors import FieldViolation, InvalidParams

GRPC = "GRPC"
RELAY_TENANT = "relay"
_TENANT = re.compile(r"(?P<kind>agents|teams|workflows)/(?P<target_id>[-a-zA-Z0-9_]+)")
_KINDS = {"agents": "agent", "teams": "team", "workflows": "workflow"}


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
                    "tenant",
                    "must name a target: agents/<id>, teams/<id>, workflows/<id> or relay "
                    "(or be empty)",
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


def public_url(base_url: str) -> str:
    """Where clients reach the gRPC server, as a card gives it: ``RELAY_GRPC_PUBLIC_ADDRESS``
    as set when it is a URL, with the scheme of ``base_url`` when it is a bare ``host:port``
    (the proxy in front of the relay serves both); else ``http://`` (the server speaks
    plaintext) on the host of ``base_url`` with RELAY_GRPC_PORT."""
    public = settings.RELAY_GRPC_PUBLIC_ADDRESS
    if public:
        return public if "://" in public else f"{urlsplit(base_url).scheme or 'http'}://{public}"
    host = urlsplit(base_url).hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.RELAY_GRPC_PORT}"


def grpc_interface(base_url: str) -> dict[str, str] | None:
    """The ``GRPC`` 1.0 interface of the target served at ``base_url``, or None when the
    relay serves no gRPC."""
    if not enabled():
        return None
    return {
        "url": public_url(base_url),
        "protocolBinding": GRPC,
        "protocolVersion": "1.0",
        "tenant": tenant_of_base(base_url),
    }
