"""The workflow pages: the list, a workflow's page (its drawing, how to call it, its runs for
staff) and a run's page (its steps with their input and output, and its sequence), who may see
them, and how many queries they cost."""

from __future__ import annotations

import html
import itertools
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from routing.models import WorkflowStepRun
from routing.workflows.services import workflow_import
from tasks_app import services as task_services
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

SEED = Path(__file__).with_name("customer-support.yml").read_text()
SUPPORT = (
    "intent-classifier",
    "billing-agent",
    "troubleshooting-agent",
    "resolution-validator",
    "summary-agent",
)
_numbers = itertools.count(1)


@pytest.fixture
def support():
    for agent_id in SUPPORT:
        make_agent(agent_id=agent_id, name=agent_id)
    return workflow_import(text=SEED)


def text(response) -> str:
    return html.unescape(response.content.decode())


def message(words: str) -> dict:
    return {"messageId": f"m-{next(_numbers)}", "role": "ROLE_USER", "parts": [{"text": words}]}


def open_task(*, kind: str, target: str, words: str, parent=None, answer: str = ""):
    task = task_services.task_open(
        caller=None,
        target_kind=kind,
        target_id=target,
        agent_id=target if kind == "agent" else None,
        message=message(words),
        client_version="1.0",
        parent_id=parent.pk if parent else None,
    )
    if answer:
        task_services.task_record(
            task=task, event=task_services.status_event(task, "completed", answer)
        )
    return task


def a_run(workflow_id: str, steps: int, *, agent: str = "billing-agent"):
    """A finished run of ``workflow_id`` with ``steps`` step rows, each a finished child."""
    run = open_task(kind="workflow", target=workflow_id, words="My invoice is wrong")
    for number in range(steps):
        child = open_task(
            kind="agent",
            target=agent,
            words=f"input {number}",
            parent=run,
            answer=f"output {number}",
        )
        WorkflowStepRun.objects.create(run=run, key=f"step-{number}", child=child)
    task_services.task_record(
        task=run, event=task_services.status_event(run, "completed", "all done")
    )
    return run


@pytest.fixture
def public(settings):
    settings.RELAY_REGISTRY_PUBLIC = True


def test_the_list_names_each_workflow_and_links_its_page(client, support, public):
    response = client.get(reverse("workflow-list-page"))

    assert response.status_code == 200
    page = text(response)
    assert "Customer Support Pipeline" in page
    assert f'href="{reverse("workflow-page", args=[support.pk])}"' in page
    assert 'href="/workflows/"' in page  # in the navigation


def test_the_workflow_page_draws_every_step_and_branch_and_shows_how_to_call_it(
    client, support, public
):
    response = client.get(reverse("workflow-page", args=[support.pk]))

    assert response.status_code == 200
    page = text(response)
    assert "<h1>Customer Support Pipeline</h1>" in page
    assert "version 1.0.0" in page
    assert '<svg class="flow"' in page
    for box in (
        "classify",
        "route",
        "billing",
        "troubleshooting",
        "resolution-validator",
        "summarize",
    ):
        assert f'text-anchor="middle">{box}</text>' in page, box
    assert "agent: summary-agent" in page
    assert "if {{.classify.intent}}" in page
    # The branches' lines are labelled with the condition's values.
    assert ">billing</text>" in page and ">technical</text>" in page
    url = f"http://testserver/a2a/workflows/{support.pk}/"
    assert f'id="call-url">{url}</code>' in page
    assert 'supported_protocol_bindings=["GRPC"]' in page
    assert f"http://testserver/agui/workflows/{support.pk}" in page
    # Runs are for staff.
    assert 'id="runs"' not in page


def test_a_loop_and_a_parallel_step_read_at_a_glance(client, public):
    for agent_id in ("fast", "slow", "counter"):
        make_agent(agent_id=agent_id, name=agent_id)
    workflow = workflow_import(
        text="""
name: Shapes
steps:
  - id: fan
    parallel:
      - agent: fast
      - agent: slow
    join: quorum
    quorum: 1
  - id: again
    loop:
      - agent: counter
    max_iterations: 4
    until: "{{.counter}} == 'done'"
"""
    )
    page = text(client.get(reverse("workflow-page", args=[workflow.pk])))

    assert "parallel · join quorum (1)" in page
    assert ">join quorum (1)</text>" in page
    assert "again: loop, at most 4×, until {{.counter}} == 'done'" in page
    assert 'class="flow-line flow-back"' in page


def test_staff_see_the_latest_runs_linked_to_their_pages(admin_client, support):
    run = a_run(support.pk, 2)

    page = text(admin_client.get(reverse("workflow-page", args=[support.pk])))

    assert f'href="{reverse("workflow-run-page", args=[support.pk, run.pk])}"' in page


def test_a_missing_workflow_is_a_404_page(admin_client):
    response = admin_client.get(reverse("workflow-page", args=["nothing-here"]))
    assert response.status_code == 404
    assert "No workflow “nothing-here”" in text(response)


def test_the_run_page_shows_each_step_with_its_input_output_and_child_task(admin_client, support):
    run = a_run(support.pk, 2)
    children = list(WorkflowStepRun.objects.filter(run=run).order_by("id"))

    response = admin_client.get(reverse("workflow-run-page", args=[support.pk, run.pk]))

    assert response.status_code == 200
    page = text(response)
    assert "My invoice is wrong" in page
    for number, row in enumerate(children):
        assert f'id="step-step-{number}"' in page
        assert f"<pre>input {number}</pre>" in page
        assert f"<pre>output {number}</pre>" in page
        assert f'href="{reverse("task-page", args=[row.child_id])}"' in page
    assert '<pre class="answer" id="run-answer">all done</pre>' in page
    # The sequence: the user, the workflow and the agent it called, and the answer back.
    assert '<svg class="sequence"' in page
    # Each lifeline is named in full in its tooltip, and shortened to fit its box.
    assert f"<title>{support.pk}</title>" in page and ">billing-agent</text>" in page
    assert ">customer-support-p…</text>" in page
    assert f"{support.pk} -&gt; user: reply" in response.content.decode()


def test_a_run_page_under_another_workflow_is_a_404(admin_client, support):
    run = a_run(support.pk, 1)
    response = admin_client.get(reverse("workflow-run-page", args=["other", run.pk]))
    assert response.status_code == 404


def test_an_agent_task_is_no_run(admin_client, support):
    child = open_task(kind="agent", target="billing-agent", words="hi")
    response = admin_client.get(reverse("workflow-run-page", args=[support.pk, child.pk]))
    assert response.status_code == 404


def test_a_run_page_is_for_staff_only(client, support, public):
    run = a_run(support.pk, 1)
    url = reverse("workflow-run-page", args=[support.pk, run.pk])

    assert client.get(url).status_code == 302
    get_user_model().objects.create_user("someone", password="not-staff-password-1")
    client.login(username="someone", password="not-staff-password-1")
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_the_workflow_pages_are_private_with_the_registry(client, support, settings):
    settings.RELAY_REGISTRY_PUBLIC = False
    for url in (reverse("workflow-list-page"), reverse("workflow-page", args=[support.pk])):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login"))


def queries(admin_client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert admin_client.get(url).status_code == 200
    return len(captured)


def test_the_run_page_costs_the_same_queries_for_2_and_10_steps(admin_client, support):
    small, large = a_run(support.pk, 2), a_run(support.pk, 10)

    assert queries(
        admin_client, reverse("workflow-run-page", args=[support.pk, small.pk])
    ) == queries(admin_client, reverse("workflow-run-page", args=[support.pk, large.pk]))


def test_the_workflow_page_costs_the_same_queries_for_2_and_10_runs(admin_client, support):
    for _ in range(2):
        a_run(support.pk, 1)
    url = reverse("workflow-page", args=[support.pk])
    few = queries(admin_client, url)
    for _ in range(8):
        a_run(support.pk, 1)
    assert queries(admin_client, url) == few


def test_the_admin_links_a_workflow_to_its_page(admin_client, support):
    response = admin_client.get(reverse("admin:routing_workflow_change", args=[support.pk]))
    assert response.status_code == 200
    assert "View on site" in text(response)
    assert support.get_absolute_url() == f"/workflows/{support.pk}/"


def test_a_workflow_tasks_trace_page_links_its_run_page(admin_client, support):
    run = a_run(support.pk, 1)
    response = admin_client.get(reverse("task-page", args=[run.pk]))
    assert f'href="{reverse("workflow-run-page", args=[support.pk, run.pk])}"' in text(response)
