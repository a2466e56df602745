"""A task opened in the test database as the gateway opens one for an A2A message, for the
tests of what recording its events writes."""

from __future__ import annotations

from registry.services import api_key_create
from tasks_app import services
from tasks_app.models import Task


def open_task(name: str = "recorder", *, owner: str = "") -> Task:
    """A new task in ``submitted`` with one message, owned by the relay process ``owner``, for a
    new API key named ``name``."""
    caller, _ = api_key_create(name=name)
    return services.task_open(
        caller=caller,
        target_kind="agent",
        target_id="x",
        agent_id=None,
        message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        client_version="1.0",
        owner=owner,
    )
