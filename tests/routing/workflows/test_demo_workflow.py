"""The demo workflow that ``run_relay --demo`` (``make up``) sets up: imported over the demo
agents, it answers a question with the researcher's notes drafted by the writer."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import sync_to_async

from routing.demo.agents import DEMO_AGENTS, app_factory
from routing.demo.setup import DEMO_WORKFLOW, demo_agents_register, demo_workflow_ensure
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


@pytest.fixture(scope="module")
def demo_urls():
    with running_many({spec.slug: app_factory(spec) for spec in DEMO_AGENTS}) as urls:
        yield urls


async def test_the_demo_workflow_drafts_the_researchers_notes(demo_urls, api_key):
    from relay_project.asgi import application

    await sync_to_async(demo_agents_register)(demo_urls)
    line = await sync_to_async(demo_workflow_ensure)()
    assert line.startswith(f"workflow  {DEMO_WORKFLOW}"), line
    assert await sync_to_async(demo_workflow_ensure)() == line  # again: put back, no error
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=20,
    ) as relay:
        message = {"messageId": "m-demo", "role": "ROLE_USER", "parts": [{"text": "solar power"}]}
        response = await relay.post(
            f"/a2a/workflows/{DEMO_WORKFLOW}/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": message},
            },
        )
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    said = task["status"]["message"]["parts"][0]["text"]
    assert said.startswith("Draft ready."), said
    assert "solar" in said.lower()
    assert [artifact["name"] for artifact in task["artifacts"]][-1] == "report"
