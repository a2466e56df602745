"""The ASGI router in front of Django: it sends A2A protocol calls to the Channels consumer and
everything else to Django.

A2A calls are JSON-RPC at a target's base URL (``/a2a/agents/{id}/``, ``/a2a/teams/{id}/``,
``/a2a/relay/``) and HTTP+JSON under it, plus the task API's ``POST /a2a/tasks/sendSubscribe``
stream (and task templates' ``POST /a2a/tasks/template/sendSubscribe``); the consumer answers them, unary and streaming alike, without Django's per-request
thread and middleware. The cards under those URLs (``.well-known/agent-card.json``), the
registry, team and task APIs, the pages and the admin stay with Django, and so does any
request whose Host Django would refuse, so it is refused the same way. Django's URL conf no
longer names the A2A endpoints, so the router answers their slash-less spellings with a
redirect to the slashed URL (308 for a POST, so the call is repeated as it was). AG-UI runs
(``/agui/{agents|teams|workflows}/{id}``) go to the AG-UI consumer (``tasks_app.agui``).
"""

from __future__ import annotations

import re

from django.conf import settings
from django.http.request import split_domain_port, validate_host

# Target ids are slugs, as the URL patterns of the cards and APIs spell them.
A2A_BASE = re.compile(
    r"^/a2a/(?:(?P<kind>agents|teams|workflows)/(?P<target_id>[-a-zA-Z0-9_]+)|(?P<relay>relay))/"
    r"(?P<rest>.*)$"
)
# /a2a/teams/{id} and /a2a/workflows/{id} (no slash) are REST resources, not redirects.
A2A_BASE_WITHOUT_SLASH = re.compile(r"^/a2a/(?:agents/[-a-zA-Z0-9_]+|relay)$")
TASK_API_STREAM = "/a2a/tasks/sendSubscribe"
TEMPLATE_STREAM = "/a2a/tasks/template/sendSubscribe"
"""A task template sent as a stream: kind "task-api-template" (``routing.template_api``)."""
CARD = ".well-known/agent-card.json"
# An agent's, a team's or a workflow's metrics (GET /a2a/{agents,teams,workflows}/{id}/metrics)
# are registry reads, not A2A paths.
AGENT_METRICS = "metrics"
KINDS = {"agents": "agent", "teams": "team", "workflows": "workflow", None: "relay"}
# The AG-UI endpoints (tasks_app.agui): a run of an agent, team or workflow, slash or not.
AGUI_RUN = re.compile(r"^/agui/(?P<kind>agents|teams|workflows)/(?P<target_id>[-a-zA-Z0-9_]+)/?$")
AGUI_KINDS = {"agents": "agent", "teams": "team", "workflows": "workflow"}


def security_headers() -> list[tuple[bytes, bytes]]:
    """The headers Django's SecurityMiddleware and XFrameOptionsMiddleware add to responses,
    from the same settings, for the responses sent without Django."""
    headers = []
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        value = policy if isinstance(policy, str) else ",".join(policy)
        headers.append((b"referrer-policy", value.encode()))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(
            (b"cross-origin-opener-policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode())
        )
    headers.append((b"x-frame-options", settings.X_FRAME_OPTIONS.upper().encode()))
    return headers


def host_allowed(scope) -> bool:
    """Whether Django would accept the request's Host (ALLOWED_HOSTS, as HttpRequest.get_host
    checks it)."""
    host = next(
        (value.decode("latin-1") for name, value in scope.get("headers", ()) if name == b"host"),
        None,
    )
    if host is None:
        server = scope.get("server") or ("", None)
        host = server[0] if server[1] in (None, 80, 443) else f"{server[0]}:{server[1]}"
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def a2a_route(scope) -> dict[str, str] | None:
    """The consumer's route kwargs (kind, target_id, rest) of an A2A call; None for anything
    else."""
    path = scope["path"]
    if path == TASK_API_STREAM and scope["method"] == "POST":
        return {"kind": "task-api", "target_id": "", "rest": ""}
    if path == TEMPLATE_STREAM and scope["method"] == "POST":
        return {"kind": "task-api-template", "target_id": "", "rest": ""}
    match = A2A_BASE.match(path)
    if match is None or match["rest"] == CARD:
        return None
    if match["kind"] in ("agents", "teams", "workflows") and match["rest"] == AGENT_METRICS:
        return None
    return {
        "kind": KINDS[match["kind"]],
        "target_id": match["target_id"] or "default",
        "rest": match["rest"],
    }


def agui_route(scope) -> dict[str, str] | None:
    """The AG-UI consumer's route kwargs (kind, target_id) of an AG-UI run; None otherwise."""
    match = AGUI_RUN.match(scope["path"])
    if match is None:
        return None
    return {"kind": AGUI_KINDS[match["kind"]], "target_id": match["target_id"]}


class A2ARouter:
    def __init__(self, django_app, a2a_app, agui_app=None) -> None:
        self.django_app = django_app
        self.a2a_app = a2a_app
        self.agui_app = agui_app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            if (
                settings.APPEND_SLASH
                and A2A_BASE_WITHOUT_SLASH.match(scope["path"])
                and host_allowed(scope)
            ):
                return await _redirect_with_slash(scope, send)
            route = a2a_route(scope)
            if route is not None and host_allowed(scope):
                scope = dict(scope, url_route={"args": (), "kwargs": route})
                return await self.a2a_app(scope, receive, send)
            route = agui_route(scope) if self.agui_app is not None else None
            if route is not None and host_allowed(scope):
                scope = dict(scope, url_route={"args": (), "kwargs": route})
                return await self.agui_app(scope, receive, send)
        return await self.django_app(scope, receive, send)


async def _redirect_with_slash(scope, send) -> None:
    """A redirect to the path with its slash, as CommonMiddleware answers (Django's security
    headers apply; the middleware after CommonMiddleware, X-Frame-Options among it, never
    runs): 308 for a POST (or any method but GET and HEAD), which clients repeat with its
    method and body, where a 301 turns it into a GET; 301 for GET and HEAD, as Django."""
    location = scope.get("root_path", "") + scope["path"] + "/"
    if scope.get("query_string"):
        location += "?" + scope["query_string"].decode("latin-1")
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"location", location.encode("latin-1")),
        (b"content-length", b"0"),
        *[header for header in security_headers() if header[0] != b"x-frame-options"],
    ]
    status = 301 if scope["method"] in ("GET", "HEAD") else 308
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
