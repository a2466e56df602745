"""Task templates that target a workflow: stored beside agent and team templates, sent with
POST /a2a/tasks/template through a two-step workflow of real a2a-sdk agents on 127.0.0.1,
listed in the API and on the workflow's page."""

from __future__ import annotations

import html
import json

import pytest
from django.db import IntegrityError, transaction

from registry.services import agent_register
from routing.models import TaskTemplate
from routing.workflows.services import workflow_import
from tests.routing.workflows import workflow_agents as wa
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

TWO_STEPS = """
name: Two steps
slug: two-steps
steps:
  - id: draft
    agent: billing-agent
    input: "{{.originalMessage}}"
  - id: summarize
    agent: summary-agent
    input: "{{.draft.result}}"
    output: final_response
"""


@pytest.fixture
def workflow_template():
    agents = {slug: wa.answering(slug) for slug in ("billing-agent", "summary-agent")}
    with running_many(agents) as urls:
        wa.CALLS.clear()
        for agent_id, url in urls.items():
            agent_register(url=url, agent_id=agent_id)
        workflow = workflow_import(text=TWO_STEPS)
        TaskTemplate.objects.create(
            id="refund",
            name="Refund",
            text="Refund order {{order}} for {{amount}} EUR",
            variables=[
                {"name": "order", "type": "string", "description": "The order id"},
                {"name": "amount", "type": "number", "default": 10},
            ],
            workflow=workflow,
        )
        yield workflow


def answer_text(answer: dict) -> str:
    task = answer["task"]
    parts = task["status"].get("message", {}).get("parts", [])
    return "\n".join(part["text"] for part in parts if "text" in part)


async def test_a_workflow_template_reaches_the_first_step_and_answers_with_the_output(
    workflow_template, asgi_relay
):
    body = {"templateId": "refund", "variables": {"order": "A-17"}}
    response = await asgi_relay.post("/a2a/tasks/template", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
    assert wa.CALLS.received["billing-agent"] == ["Refund order A-17 for 10 EUR"]
    expected = "summary-agent: billing-agent: Refund order A-17 for 10 EUR"
    assert answer_text(answer) == expected
    output = [a for a in answer["task"]["artifacts"] if a["name"] == "final_response"]
    assert output[0]["parts"][0]["text"] == expected


async def test_a_missing_variable_is_a_400_naming_it_and_runs_no_step(
    workflow_template, asgi_relay
):
    response = await asgi_relay.post("/a2a/tasks/template", json={"templateId": "refund"})
    assert response.status_code == 400, response.text
    assert "variables.order" in response.text
    assert wa.CALLS.received == {}


async def test_the_list_gives_the_workflow_target(workflow_template, asgi_relay):
    response = await asgi_relay.get("/a2a/templates")
    assert response.status_code == 200, response.text
    (listed,) = response.json()["templates"]
    assert listed["target"] == {"kind": "workflow", "id": "two-steps"}
    assert [variable["name"] for variable in listed["variables"]] == ["order", "amount"]


def test_the_workflow_page_lists_its_templates(workflow_template, client):
    page = html.unescape(client.get("/workflows/two-steps/").content.decode())
    assert 'id="template-refund"' in page
    assert "Refund order {{order}} for {{amount}} EUR" in page
    assert "<code>order</code> string, required: The order id" in page


def test_a_template_names_exactly_one_target(workflow_template):
    agent_id = "billing-agent"
    with pytest.raises(IntegrityError), transaction.atomic():
        TaskTemplate.objects.create(
            id="two", name="Two", text="x", agent_id=agent_id, workflow=workflow_template
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        TaskTemplate.objects.create(id="none", name="None", text="x")


def test_the_admin_saves_a_workflow_template(workflow_template, admin_client):
    response = admin_client.post(
        "/admin/routing/tasktemplate/add/",
        {
            "id": "w",
            "name": "W",
            "text": "Hello {{who}}",
            "variables": '[{"name": "who", "type": "string"}]',
            "workflow": "two-steps",
            "configuration": "{}",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert TaskTemplate.objects.get(pk="w").target == ("workflow", "two-steps")
    both = admin_client.post(
        "/admin/routing/tasktemplate/add/",
        {
            "id": "w2",
            "name": "W2",
            "text": "Hi",
            "variables": "[]",
            "agent": "billing-agent",
            "workflow": "two-steps",
            "configuration": "{}",
        },
    )
    assert "Choose one target" in both.content.decode()
    assert not TaskTemplate.objects.filter(pk="w2").exists()


def data_frames(text: str) -> list[dict]:
    return [
        json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")
    ]


async def test_a_workflow_template_streams_its_events_to_completion(workflow_template, asgi_relay):
    body = {"templateId": "refund", "variables": {"order": "B-2", "amount": 4.5}}
    response = await asgi_relay.post("/a2a/tasks/template/sendSubscribe", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = data_frames(response.text)
    assert list(events[0]) == ["task"]
    assert len(events) > 2
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert wa.CALLS.received["billing-agent"] == ["Refund order B-2 for 4.5 EUR"]
    assert wa.CALLS.received["summary-agent"] == ["billing-agent: Refund order B-2 for 4.5 EUR"]


async def test_a_streamed_template_missing_a_variable_is_the_same_400(
    workflow_template, asgi_relay
):
    body = {"templateId": "refund", "variables": {"amount": 3}}
    streamed = await asgi_relay.post("/a2a/tasks/template/sendSubscribe", json=body)
    sent = await asgi_relay.post("/a2a/tasks/template", json=body)
    assert streamed.status_code == sent.status_code == 400, streamed.text
    assert "variables.order" in streamed.text
    assert streamed.json() == sent.json()
    unknown = await asgi_relay.post(
        "/a2a/tasks/template/sendSubscribe", json={"templateId": "nope"}
    )
    assert unknown.status_code == 404, unknown.text
    assert wa.CALLS.received == {}


async def test_a_streamed_template_needs_a_key_before_anything_else(workflow_template, asgi_relay):
    response = await asgi_relay.post(
        "/a2a/tasks/template/sendSubscribe",
        json={"templateId": "nope"},
        headers={"Authorization": ""},
    )
    assert response.status_code == 401, response.text
