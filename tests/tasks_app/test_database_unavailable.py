"""A database that cannot be reached (restarting, or refusing connections: "too many clients")
refuses calls with a retryable error in every binding, never an internal error, and stores
nothing."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from rest_framework.test import APIClient

from tasks_app.api import admission
from tasks_app.models import Task
from tests.tasks_app.a2a_http import JSONRPC_1, REST_1, call, relay_client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

TOO_MANY = "connection failed: FATAL:  sorry, too many clients already"


@pytest.fixture
def database_refusing(monkeypatch):
    """Admission's first read fails as psycopg fails when the server refuses connections."""

    def refuse(*args, **kwargs):
        raise OperationalError(TOO_MANY)

    monkeypatch.setattr(admission, "api_key_lookup", refuse)


async def test_a_json_rpc_call_is_refused_as_unavailable_with_a_message_saying_why(
    echo, api_key, database_refusing
):
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    error = response.json()["error"]
    assert error["code"] == -31503
    assert "database is unavailable" in error["message"]
    assert await Task.objects.acount() == 0


async def test_an_http_json_call_is_refused_with_503_and_retry_after(
    echo, api_key, database_refusing
):
    async with relay_client() as client:
        response = await call(client, echo, REST_1.send(), REST_1.headers(api_key[1]))
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert "database is unavailable" in response.text
    assert await Task.objects.acount() == 0


def test_a_registry_api_call_is_refused_with_503_and_retry_after(api_key, monkeypatch):
    from registry.api import views

    def refuse(*args, **kwargs):
        raise OperationalError(TOO_MANY)

    monkeypatch.setattr(views.RegistryView, "filter_queryset", refuse)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    response = client.get("/a2a/registry")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "unavailable"


def test_a_page_is_answered_503_with_retry_after_when_the_database_refuses(client, monkeypatch):
    from registry import views

    def refuse(*args, **kwargs):
        raise OperationalError(TOO_MANY)

    monkeypatch.setattr(views.skill_search, "SkillFilters", refuse)
    client.raise_request_exception = False
    response = client.get("/skills/")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert b"database is unavailable" in response.content


def test_any_other_failure_of_a_page_is_still_a_500(client, monkeypatch):
    from registry import views

    def fail(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(views.skill_search, "SkillFilters", fail)
    client.raise_request_exception = False
    assert client.get("/skills/").status_code == 500
