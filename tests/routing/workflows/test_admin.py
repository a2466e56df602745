"""Workflows in the admin: steps edited inline, every problem shown on its row."""

from __future__ import annotations

import html

import pytest
import yaml
from django.urls import reverse

from routing.models import Workflow, WorkflowStep
from routing.workflows import services
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

ADD = reverse("admin:routing_workflow_add")


@pytest.fixture
def agents():
    return [make_agent(agent_id=agent_id, name=agent_id) for agent_id in ("classifier", "summary")]


def add_data(*steps, **fields):
    data = {
        "id": "pipeline",
        "name": "Pipeline",
        "version": "1.2",
        "description": "Classifies, then summarizes.",
        "enabled": "on",
        "steps-TOTAL_FORMS": str(len(steps)),
        "steps-INITIAL_FORMS": "0",
        "steps-MIN_NUM_FORMS": "0",
        "steps-MAX_NUM_FORMS": "1000",
        **fields,
    }
    for index, (position, source) in enumerate(steps):
        data[f"steps-{index}-position"] = position
        data[f"steps-{index}-source"] = source
    return data


def page_text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_add_page_shows_the_step_inline(admin_client):
    response = admin_client.get(ADD)
    assert response.status_code == 200
    assert 'name="steps-0-source"' in response.content.decode()


def test_adding_a_workflow_with_inline_steps_stores_it_and_its_yaml(admin_client, agents):
    response = admin_client.post(
        ADD,
        add_data(
            ("1", 'agent: summary\ninput: "{{.classify}}"'),
            ("0", "id: classify\nagent: classifier"),
        ),
    )
    assert response.status_code == 302, page_text(response)
    workflow = Workflow.objects.get(pk="pipeline")
    assert (workflow.name, workflow.version, workflow.enabled) == ("Pipeline", "1.2", True)
    assert list(WorkflowStep.objects.values_list("position", "step_id", "kind", "target")) == [
        (0, "classify", "agent", "classifier"),
        (1, "summary", "agent", "summary"),
    ]
    assert yaml.safe_load(workflow.source) == {
        "name": "Pipeline",
        "slug": "pipeline",
        "version": "1.2",
        "description": "Classifies, then summarizes.",
        "steps": [
            {"id": "classify", "agent": "classifier"},
            {"agent": "summary", "input": "{{.classify}}"},
        ],
    }
    assert workflow.targets["agent"] == {"classifier": "classifier", "summary": "summary"}


def test_a_problem_shows_on_the_row_of_its_step_and_nothing_is_saved(admin_client, agents):
    response = admin_client.post(
        ADD,
        add_data(("0", "agent: classifier"), ("1", "agent: ghost"), ("2", "agent: nobody")),
    )
    assert response.status_code == 200
    forms = response.context["inline_admin_formsets"][0].formset.forms
    assert [form.errors.get("source") for form in forms] == [
        None,
        ["steps[1] (ghost): agent: no registered agent has the id or name 'ghost'"],
        ["steps[2] (nobody): agent: no registered agent has the id or name 'nobody'"],
    ]
    assert "no registered agent has the id or name 'ghost'" in page_text(response)
    assert not Workflow.objects.exists()


def test_a_reference_to_no_earlier_step_shows_on_its_row(admin_client, agents):
    response = admin_client.post(ADD, add_data(("0", 'agent: summary\ninput: "{{.nowhere}}"')))
    assert "steps[0] (summary): input: {{.nowhere}} names no step before this one" in page_text(
        response
    )
    assert not Workflow.objects.exists()


def test_a_step_that_is_not_yaml_is_named_on_its_row(admin_client, agents):
    response = admin_client.post(ADD, add_data(("0", "agent: [classifier")))
    assert response.status_code == 200
    assert "not YAML at line" in page_text(response)
    assert not Workflow.objects.exists()


def test_a_loop_without_a_limit_is_refused_on_its_row(admin_client, agents):
    response = admin_client.post(ADD, add_data(("0", "id: l\nloop:\n  - agent: summary")))
    assert "steps[0] (l): max_iterations: a loop needs a limit (1 to 100)" in page_text(response)


def test_a_workflow_without_steps_is_refused(admin_client, agents):
    response = admin_client.post(ADD, add_data())
    assert "A workflow needs at least one step." in page_text(response)


def test_editing_an_imported_workflow_keeps_its_steps_and_rewrites_its_yaml(admin_client, agents):
    services.workflow_import(
        text="name: Pipe\nslug: pipe\nsteps:\n  - agent: classifier\n  - agent: summary\n"
    )
    url = reverse("admin:routing_workflow_change", args=["pipe"])
    page = admin_client.get(url)
    assert page.status_code == 200
    steps = list(WorkflowStep.objects.order_by("position"))
    data = {
        "name": "Pipe",
        "version": "2",
        "description": "",
        "steps-TOTAL_FORMS": "2",
        "steps-INITIAL_FORMS": "2",
        "steps-MIN_NUM_FORMS": "0",
        "steps-MAX_NUM_FORMS": "1000",
    }
    for index, step in enumerate(steps):
        data[f"steps-{index}-id"] = str(step.pk)
        data[f"steps-{index}-workflow"] = "pipe"
        data[f"steps-{index}-position"] = str(step.position)
        data[f"steps-{index}-source"] = step.source
    data["steps-1-DELETE"] = "on"
    response = admin_client.post(url, data)
    assert response.status_code == 302, page_text(response)
    workflow = Workflow.objects.get(pk="pipe")
    assert workflow.version == "2"
    assert workflow.enabled is False
    assert yaml.safe_load(workflow.source)["steps"] == [{"agent": "classifier"}]
    assert list(WorkflowStep.objects.values_list("step_id", flat=True)) == ["classifier"]


def test_the_list_shows_workflows(admin_client, agents):
    services.workflow_import(text="name: Pipe\nsteps:\n  - agent: classifier\n")
    response = admin_client.get(reverse("admin:routing_workflow_changelist"))
    assert response.status_code == 200
    assert "Pipe" in page_text(response)
