"""Where the delegated token goes on each upstream binding: an agent in pass or exchange mode
gets it in place of its stored credential (which is then not sent at all), in the HTTP headers
of JSON-RPC and HTTP+JSON and in the gRPC metadata."""

from __future__ import annotations

import pytest

from registry.models import Agent
from registry.services import Credentials, agent_update
from tasks_app import upstream
from tasks_app.gateway import agent_target, forget_agent_targets
from tasks_app.grpc.upstream import metadata_for
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

STORED = ("X-Api-Key", "stored-secret")


def agent_with_credential(mode: str) -> Agent:
    agent = make_agent(agent_id=f"agent-{mode}")
    agent_update(
        agent=agent,
        fields={"credentials": Credentials(STORED[0], STORED[1], "header")},
    )
    Agent.objects.filter(pk=agent.pk).update(delegation_mode=mode)
    forget_agent_targets(agent.pk)
    return agent


@pytest.mark.parametrize("mode", ["pass", "exchange"])
def test_a_delegating_agent_gets_the_token_and_never_its_stored_credential(mode):
    target = agent_target(agent_with_credential(mode).pk)
    assert target.endpoint.headers == ()
    delegated = {"Authorization": "Bearer delegated"}
    for binding in ("JSONRPC", "HTTP+JSON"):
        endpoint = upstream.Endpoint("a", "http://agent.test/", binding, "1.0")
        headers = upstream._headers(endpoint, (), delegated)
        assert headers["Authorization"] == "Bearer delegated"
        assert "X-Api-Key" not in headers
    metadata = dict(metadata_for(target.endpoint.headers, (), delegated))
    assert metadata["authorization"] == "Bearer delegated"
    assert "x-api-key" not in metadata


def test_an_agent_in_mode_none_keeps_its_stored_credential():
    target = agent_target(agent_with_credential("none").pk)
    assert target.endpoint.headers == (STORED,)
    assert not target.delegation.delegates
