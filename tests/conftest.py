"""Shared fixtures. Factories for data live in tests/factories.py; live agents in tests/agents.py."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_cached_targets():
    """Each test starts with no agent or team target cached: the rows of earlier tests were rolled
    back or flushed, which sends none of the signals that would drop them."""
    from routing import execution
    from tasks_app import gateway

    gateway.forget_agent_targets()
    execution.forget_team_targets()


@pytest.fixture
def allow_private_urls(settings):
    """Lets the relay reach agents served on 127.0.0.1 by the test."""
    settings.RELAY_ALLOW_PRIVATE_URLS = True
    return settings


@pytest.fixture
def api_key(db):
    """A fresh API key: (ApiKey row, the secret to send)."""
    from registry.services import api_key_create

    return api_key_create(name="test caller")


@pytest.fixture
def api(api_key):
    """An API client that sends the test key as a bearer token."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return client


@pytest.fixture
def anonymous():
    from rest_framework.test import APIClient

    return APIClient()
