"""The workflow pages and the admin editing a workflow, in a real headless Chromium at 1280 px
(pytest-django's live server). The run shown is a real one: the seed workflow called through
the relay's ASGI application against real a2a-sdk agents on 127.0.0.1. Each test keeps a
full-page screenshot under var/screenshots/ and checks that the page is no wider than the
window."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from registry.services import agent_register
from routing.models import WorkflowStepRun
from routing.workflows.services import workflow_import
from tests.browser import chromium_page, needs_chromium, overflow, screenshot
from tests.routing.test_team_pages_browser import log_in
from tests.routing.workflows import workflow_agents as wa
from tests.servers import running_many

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    needs_chromium,
    pytest.mark.usefixtures("allow_private_urls"),
]

SEED = Path(__file__).with_name("customer-support.yml").read_text()
AGENTS = {
    slug: wa.answering(slug, wa.classify if slug == "intent-classifier" else None)
    for slug in wa.SUPPORT
}
SHAPES = """
name: Research digest
description: Asks three sources at once, keeps the first two answers, then polishes the
  summary until the reviewer is happy.
steps:
  - id: gather
    parallel:
      - agent: billing-agent
      - agent: troubleshooting-agent
      - agent: resolution-validator
    join: quorum
    quorum: 2
  - id: polish
    loop:
      - agent: summary-agent
        input: "{{.gather}}"
    max_iterations: 3
    until: "{{.summary}} == 'ok'"
"""


@pytest.fixture(scope="module")
def agent_urls():
    with running_many(AGENTS) as urls:
        yield urls


async def _call(api_key: str, workflow_id: str, text: str) -> dict:
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key}", "A2A-Version": "1.0"},
        timeout=20,
    ) as client:
        response = await client.post(
            f"/a2a/workflows/{workflow_id}/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": f"m-{uuid.uuid4().hex[:10]}",
                        "role": "ROLE_USER",
                        "parts": [{"text": text}],
                    }
                },
            },
        )
    assert response.status_code == 200, response.text
    return response.json()["result"]["task"]


@pytest.fixture
def completed_run(agent_urls, api_key):
    """The seed workflow, run once through its technical branch (before the browser starts:
    the run needs an event loop of its own)."""
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)
    workflow = workflow_import(text=SEED)
    workflow_import(text=SHAPES)
    task = asyncio.run(_call(api_key[1], workflow.pk, "The app crashes when I log in"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return workflow, task["id"]


@pytest.fixture
def page(completed_run, monkeypatch):
    with chromium_page(monkeypatch) as opened:
        yield opened


def test_the_workflow_page_and_a_completed_run(page, live_server, completed_run):
    workflow, task_id = completed_run
    log_in(page, live_server)

    page.goto(live_server.url + "/workflows/")
    assert page.locator("li.workflow").count() == 2
    page.click(f"#workflow-{workflow.pk} h2 a")
    page.wait_for_url(f"**/workflows/{workflow.pk}/")
    assert page.locator("h1").inner_text() == "Customer Support Pipeline"
    assert page.locator("svg.flow g.flow-box").count() == 9  # start, 6 steps, join, end
    assert page.locator("#call-url").inner_text() == (
        live_server.url + f"/a2a/workflows/{workflow.pk}/"
    )
    assert page.locator("#runs tbody tr").count() == 1
    assert overflow(page) == 0
    screenshot(page, "relay-workflow")

    page.click(f"#run-{task_id} a")
    page.wait_for_url(f"**/workflows/{workflow.pk}/runs/{task_id}/")
    rows = page.locator("table.run-timeline tbody tr")
    assert rows.count() == WorkflowStepRun.objects.filter(run_id=task_id).count() == 4
    assert [rows.nth(n).locator("code").first.inner_text() for n in range(4)] == [
        "classify",
        "troubleshooting",
        "resolution-validator",
        "summarize",
    ]
    assert page.locator("#step-summarize .task-state").text_content() == "completed"
    assert page.locator("#run-answer").inner_text().startswith("summary-agent: ")
    assert page.locator("svg.sequence g.seq-arrow").count() == 6  # message, 4 steps, reply
    assert overflow(page) == 0
    screenshot(page, "relay-workflow-run")

    page.click("#step-classify a")
    page.wait_for_url("**/tasks/*/")


def test_a_parallel_step_and_a_loop_drawn(page, live_server, completed_run):
    page.goto(live_server.url + "/workflows/research-digest/")  # the registry is public
    assert page.locator("svg.flow .flow-frame").count() == 1
    assert page.locator("svg.flow .flow-back").count() == 1
    assert overflow(page) == 0
    screenshot(page, "relay-workflow-shapes")


def test_the_admin_editing_a_workflow_with_its_inline_steps(page, live_server, completed_run):
    workflow, _ = completed_run
    log_in(page, live_server)

    page.goto(live_server.url + f"/admin/routing/workflow/{workflow.pk}/change/")

    assert page.locator("textarea[name$='-source']").count() >= 3
    assert page.locator("textarea[name='steps-1-source']").input_value().startswith("id: route")
    assert overflow(page) == 0
    screenshot(page, "admin-workflow")
