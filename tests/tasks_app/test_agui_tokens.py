"""Bearer JWTs of a trusted issuer call the AG-UI endpoints as they call the A2A ones (the run
goes through the same admission); a token that fails a check is refused before the stream
opens, with the same 401. In process (the relay's ASGI app), the issuer a real authorization
server on 127.0.0.1."""

from __future__ import annotations

import time

import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from tests.tasks_app.a2a_http import relay_client
from tests.tasks_app.test_bearer_tokens import issuer, trusted  # noqa: F401  (fixtures)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

EVENTS = TypeAdapter(Event)
RUN = {
    "threadId": "t-token",
    "runId": "r-token",
    "messages": [{"id": "u-1", "role": "user", "content": "Hello"}],
}


async def test_a_valid_token_runs_an_agent(trusted, echo):  # noqa: F811
    token = trusted.token(sub="alice-agui")
    async with relay_client() as client:
        response = await client.post(
            f"/agui/agents/{echo}", json=RUN, headers={"Authorization": f"Bearer {token}"}
        )

    assert response.status_code == 200, response.text
    events = [
        EVENTS.validate_json(line[6:])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events[0].type == EventType.RUN_STARTED
    assert events[-1].type == EventType.RUN_FINISHED
    content = [e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT]
    assert content == ["Hello"]


async def test_an_expired_token_is_refused_before_the_stream(trusted, echo):  # noqa: F811
    token = trusted.token(exp=int(time.time()) - 600)
    async with relay_client() as client:
        response = await client.post(
            f"/agui/agents/{echo}", json=RUN, headers={"Authorization": f"Bearer {token}"}
        )

    assert response.status_code == 401
    assert "expired" in response.text
