"""What the docs page's "Try it out" does, for every operation: take the schema the relay
serves, send each operation's request example (path parameters from their examples) with a
bearer API key to a live relay, and check the answer is one the schema documents, and not a
refusal of the example or of the key. Then the relay refusing to register itself, live."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.agents import v1_only_agent
from tests.cardservers import card_site, redirect
from tests.live import CALL_SECONDS, live_relay, manage

pytestmark = pytest.mark.django_db(transaction=True)

# The order "Try it out" is used in: what is created first, deleted last.
ORDER = [
    "agents_list",
    "agents_register",
    "agent_get",
    "agent_update",
    "agent_refresh",
    "agent_history",
    "agent_card",
    "registry_import",
    "registry_removed",
    "ai_catalog",
    "ard_catalog",
    "skills_search",
    "agents_select",
    "agent_metrics",
    "teams_create",
    "teams_list",
    "team_get",
    "team_update",
    "quota_create",
    "quota_list",
    "quota_read",
    "quota_update",
    "workflows_create",
    "workflows_list",
    "workflow_get",
    "workflow_replace",
    "workflow_metrics",
    "templates_list",
    "tasks_send",
    "tasks_send_subscribe",
    "tasks_send_batch",
    "tasks_send_template",
    "tasks_send_template_subscribe",
    "tasks_get",
    "tasks_trace",
    "tasks_cancel",
    "metrics",
    "team_metrics",
    "usage",
    "quota_delete",
    "team_delete",
    "workflow_delete",
    "agent_delete",
]
# Answers the examples are expected to get besides 2xx, with a word of the answer, and why.
FINISHED = "is completed"  # the early examples all use task id note-1, done by the first send
EXPECTED_REFUSALS = {
    "agents_register": (409, "already exists"),  # the example's id, weather, is taken
    "tasks_send_subscribe": (400, FINISHED),
    "tasks_send_batch": (400, FINISHED),
    "tasks_cancel": (400, "TASK_NOT_CANCELABLE"),  # note-1 has finished
    "tasks_trace": (404, "NOT_FOUND"),  # note-1 went to one agent, not a team: no trace
    # The example's template, weekly-report, is made in the admin; this relay has none.
    "tasks_send_template": (404, "no template 'weekly-report'"),
    "tasks_send_template_subscribe": (404, "no template 'weekly-report'"),
    # The example imports another host's catalog, which a test reaching only 127.0.0.1 cannot.
    "registry_import": (422, "cannot reach"),
}


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with live_relay(tmp_path_factory.mktemp("try-it-out")) as relay:
        relay.serve_agent("weather", v1_only_agent)
        relay.serve_agent("writer", v1_only_agent)
        yield relay


@pytest.fixture(scope="module")
def admin_key(relay):
    return manage(relay.env, "create_api_key", "--admin", "docs").strip().splitlines()[-1]


def served_operations(schema):
    for path, item in schema["paths"].items():
        for method in ("get", "post", "put", "patch", "delete"):
            if method in item:
                yield item[method]["operationId"], path, method, item[method]


def request_examples(operation):
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    return [example["value"] for example in content.get("examples", {}).values()] or [None]


def filled_path(path, operation):
    values = {
        parameter["name"]: next(iter(parameter["examples"].values()))["value"]
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "path"
    }
    return re.sub(r"\{(\w+)\}", lambda match: str(values[match.group(1)]), path)


def query_examples(operation):
    return {
        parameter["name"]: next(iter(parameter["examples"].values()))["value"]
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query" and parameter.get("examples")
    }


def test_try_it_out_works_for_every_operation(relay, admin_key):
    schema = httpx.get(
        f"{relay.url}/api/schema", headers={"Accept": "application/json"}, timeout=CALL_SECONDS
    ).json()
    served = {
        operation_id: (path, method, operation)
        for operation_id, path, method, operation in served_operations(schema)
    }
    assert sorted(served) == sorted(ORDER)

    answers = []
    with httpx.Client(
        base_url=relay.url, timeout=CALL_SECONDS, headers={"Authorization": f"Bearer {admin_key}"}
    ) as client:
        for operation_id in ORDER:
            path, method, operation = served[operation_id]
            documented = {int(code) for code in operation["responses"]}
            for body in request_examples(operation):
                request = client.build_request(
                    method.upper(),
                    filled_path(path, operation),
                    params=query_examples(operation),
                    json=body,
                )
                response = client.send(request, stream=True)
                try:
                    response.read()
                finally:
                    response.close()
                answers.append((operation_id, response.status_code))
                assert response.status_code in documented, (
                    operation_id,
                    response.status_code,
                    response.text[:500],
                )
                if not response.is_success:
                    refusal = EXPECTED_REFUSALS.get(operation_id, (None, ""))
                    assert response.status_code == refusal[0], (
                        operation_id,
                        response.status_code,
                        response.text[:500],
                    )
                    assert refusal[1] in response.text, (operation_id, response.text[:500])
                assert "WWW-Authenticate" not in response.headers
    assert len(answers) >= len(ORDER)
    succeeded = {operation_id for operation_id, status in answers if status < 300}
    assert set(ORDER) - succeeded == {
        "agents_register",
        "tasks_cancel",
        "tasks_trace",
        "tasks_send_template",
        "tasks_send_template_subscribe",
        "registry_import",
    }


def test_the_live_relay_cannot_register_itself(relay):
    port = relay.url.rsplit(":", 1)[1]
    for url in (
        f"http://127.0.0.1:{port}/admin/",
        f"http://localhost:{port}/",
        f"{relay.url}/a2a/agents/writer/",
    ):
        response = httpx.post(
            f"{relay.url}/a2a/registry",
            json={"url": url},
            headers=relay.auth(),
            timeout=CALL_SECONDS,
        )
        assert response.status_code == 400, (url, response.text)
        error = response.json()["error"]
        assert error["code"] == "relay_itself"
        assert f"is this relay itself ({url.split('/')[2]}), not an agent" in error["message"]


def test_a_card_url_that_redirects_to_the_relay_is_refused(relay):
    target = f"{relay.url}/.well-known/agent-card.json"
    with card_site({"/.well-known/agent-card.json": redirect(target)}) as (site, url):
        response = httpx.post(
            f"{relay.url}/a2a/registry",
            json={"url": url, "id": "loop"},
            headers=relay.auth(),
            timeout=CALL_SECONDS,
        )

    assert site.hits
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "relay_itself"
    assert httpx.get(f"{relay.url}/a2a/registry/loop", timeout=CALL_SECONDS).status_code == 404
