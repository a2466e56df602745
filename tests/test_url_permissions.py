"""Every URL of the project has an explicit permission: a new endpoint without one fails here.

The table is every pattern of ``relay_project.urls`` (walked recursively), plus the A2A paths
the Channels consumer serves (``relay_project.routing.a2a_route``), which are no URL patterns.

- A DRF view must name its ``permission_classes`` itself (on the view or a project base class
  such as TaskApiView), not inherit DRF's default.
- Every URL is called without credentials (the registry set to private) and must refuse: 401
  with ``WWW-Authenticate`` for the APIs and A2A, a redirect to the admin login for pages and
  the admin. Only the entries of ``PUBLIC``, each with its reason, may answer anyone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from relay_project.routing import a2a_route, agui_route
from tests.tasks_app.a2a_http import relay_client

PUBLIC = {
    "admin:login": "the admin's login form: where everyone else is sent",
    "admin:logout": "logging out ends the session the request carries, if any; nothing to guard",
    "relay-card": "the relay's own Agent Card: A2A cards are served unauthenticated",
    "relay-card-0.2": "the relay's card for A2A 0.2 clients, public like every card",
    "a2a/relay/.well-known/agent-card.json": "the relay's card under its endpoint",
    "agent-relay-card": "an agent's card at the relay, public like every Agent Card; it "
    "declares the bearer scheme callers need",
    "team-relay-card": "a team's card, public like every Agent Card",
    "workflow-agent-card": "a workflow's card, public like every Agent Card",
    "relay-jwks": "the public key that verifies the relay's card signatures, public like the "
    "cards it verifies",
    "api-schema": "the OpenAPI schema describes the API, not its data",
    "api-docs": "the interactive docs page for the same schema",
}
"""Patterns (by name, or by route when unnamed) that anyone may call, and why."""

SAMPLE_VALUES = {"content_type_id": "1", "object_id": "1", "id": "1"}

A2A_CALLS = [
    ("POST", "/a2a/agents/some-agent/"),
    ("POST", "/a2a/agents/some-agent/message:send"),
    ("GET", "/a2a/agents/some-agent/tasks/t-1"),
    ("GET", "/a2a/agents/some-agent/v1/tasks/t-1"),
    ("POST", "/a2a/agents/some-agent/v1/message:send"),
    ("GET", "/a2a/agents/some-agent/extendedAgentCard"),
    ("POST", "/a2a/teams/some-team/"),
    ("POST", "/a2a/teams/some-team/message:stream"),
    ("POST", "/a2a/workflows/some-workflow/"),
    ("POST", "/a2a/workflows/some-workflow/message:send"),
    ("POST", "/a2a/relay/"),
    ("GET", "/a2a/relay/tasks"),
    ("POST", "/a2a/tasks/sendSubscribe"),
]
AGUI_RUNS = ["/agui/agents/some-agent", "/agui/teams/some-team/", "/agui/workflows/some-flow"]
"""The AG-UI endpoints (``relay_project.routing.agui_route``): no URL patterns either."""
"""The consumer's A2A calls: JSON-RPC at each base URL, HTTP+JSON (1.0 and 0.3) under it,
and the task API's stream."""


@dataclass(frozen=True)
class Endpoint:
    route: str
    pattern: URLPattern
    namespace: str | None

    @property
    def key(self) -> str:
        if self.pattern.name:
            return f"{self.namespace}:{self.pattern.name}" if self.namespace else self.pattern.name
        return self.route

    @property
    def view_class(self):
        return getattr(self.pattern.callback, "cls", None)

    @property
    def is_drf(self) -> bool:
        return isinstance(self.view_class, type) and issubclass(self.view_class, APIView)

    def sample_path(self) -> str:
        """The route with a sample value for each parameter."""
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLE_VALUES.get(m[1], "x1"), self.route)
        path = re.sub(
            r"\(\?P<\w+>([^)]*)\)", lambda m: m[1].split("|")[0] if "|" in m[1] else "x1", path
        )
        return "/" + path.replace("^", "").replace("$", "")

    def __str__(self) -> str:
        return self.key


def walk(resolver: URLResolver, prefix: str = "", namespace: str | None = None):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from walk(entry, prefix + str(entry.pattern), entry.namespace or namespace)
        else:
            yield Endpoint(prefix + str(entry.pattern), entry, namespace)


ENDPOINTS = list(walk(get_resolver()))


def explicit_permissions(view_class: type) -> tuple | None:
    """The permission classes a DRF view names itself (it or a base class of this project),
    or None when they come from DRF's default."""
    for klass in view_class.__mro__:
        if "permission_classes" in vars(klass):
            module = klass.__module__
            if module.startswith(("rest_framework.", "adrf.")):
                return None
            return tuple(vars(klass)["permission_classes"])
    return None


def test_the_walk_finds_every_part_of_the_project():
    keys = {endpoint.key for endpoint in ENDPOINTS}
    assert {
        "registry",
        "team",
        "task-send",
        "task-trace",
        "registry-page",
        "task-page",
        "admin:index",
        "admin:registry_apikey_add",
        "api-schema",
    } <= keys
    assert len(ENDPOINTS) > 50


def test_every_public_entry_names_a_real_endpoint():
    keys = {endpoint.key for endpoint in ENDPOINTS}
    assert set(PUBLIC) <= keys, set(PUBLIC) - keys


def test_the_check_flags_a_view_that_names_no_permission():
    class Forgetful(APIView):
        def get(self, request):
            return None

    class Careful(APIView):
        permission_classes = [AllowAny]

    class Inherits(Careful):
        pass

    assert explicit_permissions(Forgetful) is None
    assert explicit_permissions(Careful) == (AllowAny,)
    assert explicit_permissions(Inherits) == (AllowAny,)


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e.is_drf], ids=str)
def test_each_api_view_names_its_permission(endpoint):
    permissions = explicit_permissions(endpoint.view_class)
    if endpoint.key in PUBLIC:
        # Third-party views (the schema) take theirs from their own settings.
        return
    assert permissions, f"{endpoint.view_class.__qualname__} names no permission_classes"
    assert AllowAny not in permissions, f"{endpoint.key} lets anyone in but is not in PUBLIC"


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_each_url_refuses_a_caller_without_credentials(endpoint, client, settings):
    settings.RELAY_REGISTRY_PUBLIC = False
    settings.RELAY_METRICS_PUBLIC = False
    path = endpoint.sample_path()
    for method in ("get", "post"):
        response = getattr(client, method)(path)
        if endpoint.key in PUBLIC:
            assert response.status_code < 500, (method, path, response.status_code)
            continue
        assert response.status_code != 500
        if endpoint.is_drf:
            assert response.status_code == 401, (method, path, response.status_code)
            assert response["WWW-Authenticate"].startswith('Bearer realm="brass-relay"')
            assert set(response.json()["error"]) >= {"code", "message"}
        else:
            assert response.status_code == 302, (method, path, response.status_code)
            assert response["Location"].startswith(reverse("admin:login")), response["Location"]


@pytest.mark.parametrize(("method", "path"), A2A_CALLS)
def test_each_a2a_path_goes_to_the_consumer(method, path):
    scope = {"type": "http", "method": method, "path": path}
    assert a2a_route(scope) is not None, f"{method} {path} is not an A2A call"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("method", "path"), A2A_CALLS)
async def test_each_a2a_path_refuses_a_caller_without_a_key(method, path):
    async with relay_client() as client:
        response = await client.request(
            method,
            path,
            content=b"{}",
            headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
        )
    assert response.status_code == 401, response.text
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="brass-relay"'


@pytest.mark.parametrize("path", AGUI_RUNS)
def test_each_agui_path_goes_to_the_agui_consumer(path):
    assert agui_route({"type": "http", "method": "POST", "path": path}) is not None, path


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", AGUI_RUNS)
async def test_each_agui_path_refuses_a_caller_without_a_key(path):
    async with relay_client() as client:
        response = await client.post(path, content=b"{}")
    assert response.status_code == 401, response.text
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="brass-relay"'
