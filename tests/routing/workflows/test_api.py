"""Workflows stored: the /a2a/workflows API, import and export, name resolution, the
import_workflow command."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from registry.models import AuditEntry
from registry.services import RegistryError, api_key_create
from registry.teams import team_create
from routing.models import Workflow, WorkflowStep
from routing.workflows import services
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

SEED_FILE = Path(__file__).with_name("customer-support.yml")
SEED = SEED_FILE.read_text()
SEED_AGENTS = [
    "intent-classifier",
    "billing-agent",
    "troubleshooting-agent",
    "resolution-validator",
    "summary-agent",
]


@pytest.fixture
def seed_agents():
    return [make_agent(agent_id=agent_id, name=agent_id.title()) for agent_id in SEED_AGENTS]


def client(**key) -> APIClient:
    _, secret = api_key_create(name="caller", **key)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return api


@pytest.fixture
def admin_api():
    return client(is_admin=True)


def post_yaml(api: APIClient, text: str, path: str = "/a2a/workflows", method: str = "post"):
    return getattr(api, method)(path, data=text.encode(), content_type="application/yaml")


def test_the_seed_posted_as_yaml_is_a_201_with_the_workflow_and_its_id(admin_api, seed_agents):
    response = post_yaml(admin_api, SEED)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] == "customer-support-pipeline"
    assert body["name"] == "Customer Support Pipeline"
    assert body["version"] == "1.0.0"
    assert body["steps"] == [
        {"id": "classify", "kind": "agent", "target": "intent-classifier"},
        {"id": "route", "kind": "branch", "target": ""},
        {"id": "summarize", "kind": "agent", "target": "summary-agent"},
    ]
    assert body["targets"]["agent"]["billing-agent"] == "billing-agent"
    stored = Workflow.objects.get(pk="customer-support-pipeline")
    assert stored.source == SEED
    assert AuditEntry.objects.filter(object_type="workflow", action="create").count() == 1


def test_the_export_is_the_imported_yaml(admin_api, seed_agents):
    post_yaml(admin_api, SEED)
    response = admin_api.get(
        "/a2a/workflows/customer-support-pipeline", HTTP_ACCEPT="application/yaml"
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    assert response.content.decode() == SEED
    as_json = admin_api.get("/a2a/workflows/customer-support-pipeline")
    assert as_json.json()["id"] == "customer-support-pipeline"


def test_an_exported_workflow_imports_again_unchanged(admin_api, seed_agents):
    post_yaml(admin_api, SEED)
    exported = admin_api.get(
        "/a2a/workflows/customer-support-pipeline", HTTP_ACCEPT="application/yaml"
    ).content.decode()
    Workflow.objects.all().delete()
    assert post_yaml(admin_api, exported).status_code == 201
    assert yaml.safe_load(Workflow.objects.get().source) == yaml.safe_load(SEED)


def test_a_workflow_may_be_posted_as_json(admin_api, seed_agents):
    document = {"name": "Short", "slug": "short", "steps": [{"agent": "Summary-Agent"}]}
    response = admin_api.post("/a2a/workflows", document, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["targets"]["agent"] == {"Summary-Agent": "summary-agent"}
    assert yaml.safe_load(Workflow.objects.get(pk="short").source) == document


def test_an_unknown_agent_and_team_are_a_400_naming_the_steps(admin_api, seed_agents):
    text = "name: x\nsteps:\n  - agent: ghost\n  - team: nobody\n    input: '{{.ghost}}'\n"
    response = post_yaml(admin_api, text)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_workflow",
        "message": "steps[0] (ghost): agent: no registered agent has the id or name 'ghost'",
        "problems": [
            "steps[0] (ghost): agent: no registered agent has the id or name 'ghost'",
            "steps[1] (nobody): team: no registered team has the id or name 'nobody'",
        ],
    }
    assert not Workflow.objects.exists()


def test_two_agents_with_the_same_name_are_a_400_asking_for_the_id(admin_api, seed_agents):
    make_agent(agent_id="a1", name="Twin")
    make_agent(agent_id="a2", name="Twin")
    response = post_yaml(admin_api, "name: x\nsteps:\n  - id: s\n    agent: Twin\n")
    assert response.json()["error"]["problems"] == [
        "steps[0] (s): agent: 2 agents are named 'Twin' (a1, a2): use the id"
    ]


def test_a_team_resolves_by_id_or_name(admin_api, seed_agents):
    team_create(
        team_id="desk", name="Help Desk", members=["billing-agent"], default_agent="billing-agent"
    )
    text = "name: x\nsteps:\n  - id: a\n    team: desk\n  - id: b\n    team: Help Desk\n"
    response = post_yaml(admin_api, text)
    assert response.status_code == 201, response.content
    assert response.json()["targets"]["team"] == {"desk": "desk", "Help Desk": "desk"}


def test_an_invalid_document_is_a_400_listing_every_problem(admin_api):
    response = post_yaml(admin_api, "name: x\nsteps:\n  - id: l\n    loop: [{agent: a}]\n")
    assert response.status_code == 400
    assert response.json()["error"]["problems"] == [
        "steps[0] (l): max_iterations: a loop needs a limit (1 to 100)"
    ]


def test_yaml_that_is_not_yaml_is_a_400_not_a_500(admin_api):
    response = post_yaml(admin_api, "name: [oops\n")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("not YAML at line 2")


def test_a_body_that_is_not_utf8_is_a_400(admin_api):
    response = admin_api.post("/a2a/workflows", data=b"\xff\xfe", content_type="application/yaml")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "a YAML body must be UTF-8"


def test_the_same_id_twice_is_a_409_and_put_replaces(admin_api, seed_agents):
    post_yaml(admin_api, SEED)
    again = post_yaml(admin_api, SEED)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "duplicate"
    shorter = "name: Customer Support Pipeline\nversion: 2.0.0\nsteps:\n  - agent: summary-agent\n"
    path = "/a2a/workflows/customer-support-pipeline"
    replaced = post_yaml(admin_api, shorter, path=path, method="put")
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["version"] == "2.0.0"
    assert list(WorkflowStep.objects.values_list("step_id", flat=True)) == ["summary"]


def test_put_of_an_unknown_workflow_is_a_404(admin_api):
    response = post_yaml(admin_api, "name: x\nsteps: [{agent: a}]\n", "/a2a/workflows/nope", "put")
    assert response.status_code == 404


def test_a_workflow_step_resolves_other_workflows_and_refuses_cycles(admin_api, seed_agents):
    inner = "name: Inner\nsteps:\n  - agent: summary-agent\n"
    assert post_yaml(admin_api, inner).status_code == 201
    outer = "name: Outer\nsteps:\n  - workflow: inner\n"
    assert post_yaml(admin_api, outer).status_code == 201
    back = "name: Inner\nsteps:\n  - workflow: outer\n"
    response = post_yaml(admin_api, back, "/a2a/workflows/inner", "put")
    assert response.json()["error"]["problems"] == [
        "steps[0] (outer): workflow: 'outer' calls this workflow back"
    ]
    itself = post_yaml(admin_api, "name: Self\nsteps:\n  - workflow: self\n")
    assert itself.json()["error"]["problems"] == [
        "steps[0] (self): workflow: 'self' calls this workflow back"
    ]
    ghost = post_yaml(admin_api, "name: G\nsteps:\n  - workflow: ghost\n")
    assert ghost.json()["error"]["problems"] == [
        "steps[0] (ghost): workflow: no workflow has the id 'ghost'"
    ]


def test_the_list_pages_workflows_by_id(admin_api, seed_agents):
    for name in ("b", "a", "c"):
        post_yaml(admin_api, f"name: {name}\nsteps: [{{agent: summary-agent}}]\n")
    first = admin_api.get("/a2a/workflows?limit=2")
    assert first.status_code == 200
    assert [item["id"] for item in first.json()["workflows"]] == ["a", "b"]
    after = admin_api.get("/a2a/workflows", {"cursor": first.json()["nextCursor"]})
    assert [item["id"] for item in after.json()["workflows"]] == ["c"]


def test_an_ordinary_key_reads_but_may_not_write(seed_agents, admin_api):
    post_yaml(admin_api, SEED)
    plain = client()
    assert plain.get("/a2a/workflows").status_code == 200
    refused = post_yaml(plain, "name: x\nsteps: [{agent: summary-agent}]\n")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "only an admin key may change workflows"
    assert plain.delete("/a2a/workflows/customer-support-pipeline").status_code == 403


def test_no_key_is_a_401(settings):
    settings.RELAY_REGISTRY_PUBLIC = False
    assert APIClient().get("/a2a/workflows").status_code == 401
    assert post_yaml(APIClient(), SEED).status_code == 401


def test_delete_removes_the_workflow_and_its_steps(admin_api, seed_agents):
    post_yaml(admin_api, SEED)
    assert admin_api.delete("/a2a/workflows/customer-support-pipeline").status_code == 204
    assert not WorkflowStep.objects.exists()
    assert admin_api.get("/a2a/workflows/customer-support-pipeline").status_code == 404


def test_import_workflow_imports_the_seed_file(seed_agents, capsys):
    call_command("import_workflow", str(SEED_FILE))
    assert "Imported workflow customer-support-pipeline" in capsys.readouterr().out
    with pytest.raises(CommandError, match="already exists"):
        call_command("import_workflow", str(SEED_FILE))
    call_command("import_workflow", str(SEED_FILE), "--replace")
    assert Workflow.objects.count() == 1


def test_import_workflow_lists_every_problem(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("name: x\nsteps:\n  - agent: ghost\n")
    with pytest.raises(CommandError) as caught:
        call_command("import_workflow", str(path))
    assert "steps[0] (ghost): agent: no registered agent has the id or name 'ghost'" in str(
        caught.value
    )


def test_the_service_refuses_a_slug_that_is_not_the_id(seed_agents):
    services.workflow_import(text="name: A\nsteps: [{agent: summary-agent}]\n")
    with pytest.raises(services.WorkflowRejected, match="is not this workflow's id"):
        services.workflow_import(
            text="name: A\nslug: b\nsteps: [{agent: summary-agent}]\n",
            workflow_id="a",
            replace=True,
        )
    with pytest.raises(RegistryError):
        services.workflow_import(text="name: A\nsteps: [{agent: summary-agent}]\n")


def test_a_body_over_the_upload_limit_is_a_413(admin_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post_yaml(admin_api, "name: x\nsteps:\n" + "  - agent: a\n" * 200)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_a_document_of_too_many_steps_is_refused_quickly(admin_api):
    started = time.monotonic()
    response = post_yaml(admin_api, "name: x\nsteps:\n" + "  - agent: a\n" * 30000)
    assert response.json()["error"]["problems"] == ["steps: more than 500 steps"]
    assert time.monotonic() - started < 5
