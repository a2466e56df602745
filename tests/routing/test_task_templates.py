"""Task templates end to end: stored, listed with their variables, edited in the admin, and
sent with POST /a2a/tasks/template to real agents and a team on 127.0.0.1."""

from __future__ import annotations

import html

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from registry.services import agent_register
from registry.teams import team_create
from routing.demo.agents import ECHO, WRITER, app_factory
from routing.models import TaskTemplate
from tasks_app.models import Task
from tests.servers import running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

VARIABLES = [
    {"name": "city", "type": "string", "description": "Where"},
    {"name": "days", "type": "integer", "default": 3},
]


@pytest.fixture
def agents():
    with running(app_factory(ECHO)) as echo_url, running(app_factory(WRITER)) as writer_url:
        agent_register(url=echo_url, agent_id="echo")
        agent_register(url=writer_url, agent_id="writer")
        team_create(team_id="desk", name="Desk", members=["echo"], default_agent="echo")
        TaskTemplate.objects.create(
            id="forecast",
            name="Forecast",
            text="Forecast for {{city}} over {{days}} days",
            variables=VARIABLES,
            agent_id="echo",
        )
        TaskTemplate.objects.create(
            id="desk-forecast",
            name="Desk forecast",
            text="Desk: {{city}}",
            variables=VARIABLES[:1],
            team_id="desk",
            configuration={"historyLength": 0},
        )
        yield


async def send(relay, body):
    return await relay.post("/a2a/tasks/template", json=body)


async def test_a_template_reaches_the_agent_with_the_rendered_text(agents, asgi_relay):
    response = await send(asgi_relay, {"templateId": "forecast", "variables": {"city": "Oslo"}})
    assert response.status_code == 200, response.text
    assert response.json()["message"]["parts"] == [{"text": "Forecast for Oslo over 3 days"}]


async def test_given_values_override_the_defaults(agents, asgi_relay):
    body = {"templateId": "forecast", "variables": {"city": "Rome", "days": 7}}
    response = await send(asgi_relay, body)
    assert response.json()["message"]["parts"] == [{"text": "Forecast for Rome over 7 days"}]


async def test_a_template_for_a_team_goes_through_the_team(agents, asgi_relay):
    body = {"templateId": "desk-forecast", "variables": {"city": "Lima"}}
    response = await send(asgi_relay, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    parts = answer.get("message", {}).get("parts") or answer["task"]["artifacts"][0]["parts"]
    assert parts == [{"text": "Desk: Lima"}]
    kinds = await sync_to_async(list)(Task.objects.values_list("target_kind", "target_id"))
    assert ("team", "desk") in kinds


async def test_a_missing_variable_is_a_400_naming_it_and_calls_nobody(agents, asgi_relay):
    response = await send(asgi_relay, {"templateId": "forecast", "variables": {"days": 1}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    violations = [
        detail for detail in error["details"] if detail.get("@type", "").endswith("BadRequest")
    ][0]["fieldViolations"]
    assert violations == [
        {"field": "variables.city", "description": "missing (a string, no default)"}
    ]
    assert await sync_to_async(Task.objects.count)() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"templateId": "forecast", "variables": {"city": 3}}, "variables.city"),
        ({"templateId": "forecast", "variables": {"city": "a", "dyas": 1}}, "variables.dyas"),
        ({"templateId": "forecast", "variables": ["Oslo"]}, "variables"),
        ({"variables": {}}, "templateId"),
        ({"templateId": "forecast", "extra": 1}, "extra"),
    ],
)
async def test_bad_template_calls_are_400s_naming_the_field(agents, asgi_relay, body, field):
    response = await send(asgi_relay, body)
    assert response.status_code == 400, response.text
    details = response.json()["error"]["details"]
    fields = [v["field"] for d in details for v in d.get("fieldViolations", [])]
    assert fields == [field]


async def test_an_unknown_template_id_is_a_404_naming_it(agents, asgi_relay):
    response = await send(asgi_relay, {"templateId": "nope", "variables": {}})
    assert response.status_code == 404, response.text
    assert "no template 'nope'" in response.json()["error"]["message"]
    assert await sync_to_async(Task.objects.count)() == 0


async def test_a_template_call_needs_an_api_key(agents, asgi_relay):
    response = await asgi_relay.post(
        "/a2a/tasks/template",
        json={"templateId": "forecast", "variables": {"city": "x"}},
        headers={"Authorization": ""},
    )
    assert response.status_code == 401


async def test_the_list_gives_each_template_with_its_variables(agents, asgi_relay):
    response = await asgi_relay.get("/a2a/templates")
    assert response.status_code == 200
    templates = {item["id"]: item for item in response.json()["templates"]}
    assert templates["forecast"]["variables"] == [
        {"name": "city", "type": "string", "description": "Where"},
        {"name": "days", "type": "integer", "default": 3},
    ]
    assert templates["forecast"]["target"] == {"kind": "agent", "id": "echo"}
    assert templates["desk-forecast"]["target"] == {"kind": "team", "id": "desk"}
    assert templates["desk-forecast"]["configuration"] == {"historyLength": 0}


def test_the_admin_refuses_an_undeclared_variable_and_a_missing_target(agents, admin_client):
    add = reverse("admin:routing_tasktemplate_add")
    data = {
        "id": "t",
        "name": "T",
        "text": "Hi {{who}}",
        "variables": "[]",
        "configuration": "{}",
        "agent": "echo",
    }
    response = admin_client.post(add, data)
    assert "text: {{who}} is not declared in variables" in html.unescape(response.content.decode())
    response = admin_client.post(add, {**data, "text": "Hi", "agent": ""})
    assert "Choose one target the template is sent to" in html.unescape(response.content.decode())
    response = admin_client.post(add, {**data, "variables": '[{"name": "who"}]'})
    assert response.status_code == 302
    assert TaskTemplate.objects.get(pk="t").target == ("agent", "echo")


def test_the_agent_and_team_pages_list_their_templates_with_variables(agents, client):
    page = html.unescape(client.get("/agents/echo/").content.decode())
    assert 'id="template-forecast"' in page
    assert "Forecast for {{city}} over {{days}} days" in page
    assert "<code>city</code> string, required: Where" in page
    assert "<code>days</code> integer, default <code>3</code>" in page
    assert "desk-forecast" not in page
    team_page = html.unescape(client.get("/teams/desk/").content.decode())
    assert 'id="template-desk-forecast"' in team_page
    writer = html.unescape(client.get("/agents/writer/").content.decode())
    assert 'id="task-templates"' not in writer
