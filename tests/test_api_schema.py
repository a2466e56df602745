"""The OpenAPI schema: it validates with no drf-spectacular warning, declares the bearer API
key, and every operation has its own summary and description, examples, and its 4xx answers
with the error body; every example validates against its schema."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
from openapi_schema_validator import OAS30Validator

from tests.live import COMMAND_SECONDS

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("get", "post", "put", "patch", "delete")
ERROR_BODIES = {"#/components/schemas/Error", "#/components/schemas/StatusError"}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield f"{method.upper()} {path}", item[method]


def resolved(schema, node, *, closed: bool = True):
    """``node`` with every $ref replaced by what it names; with ``closed``, objects that list
    their properties refuse others, so an example with a misspelt field fails."""
    if isinstance(node, list):
        return [resolved(schema, item, closed=closed) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = schema
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return resolved(schema, target, closed=closed)
    result = {key: resolved(schema, value, closed=closed) for key, value in node.items()}
    if closed and "properties" in result and "additionalProperties" not in result:
        result["additionalProperties"] = False
    return result


def test_the_schema_validates_without_a_single_warning(tmp_path):
    finished = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "spectacular",
            "--validate",
            "--fail-on-warn",
            "--file",
            str(tmp_path / "schema.yaml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "Warning" not in finished.stderr


def test_the_schema_declares_the_bearer_api_key(schema):
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key of this relay (`manage.py create_api_key NAME` prints one), "
        "sent as `Authorization: Bearer <key>`.",
    }
    for name, operation in operations(schema):
        assert {"bearerAuth": []} in operation["security"], name


def test_every_operation_has_its_own_summary_and_description(schema):
    summaries, descriptions = {}, {}
    for name, operation in operations(schema):
        assert operation.get("summary"), name
        assert operation.get("description"), name
        # Regression: POST /a2a/registry showed the list's description, the task endpoints an
        # internal comment about how errors are rendered.
        assert "``" not in operation["description"], name
        summaries.setdefault(operation["summary"], []).append(name)
        descriptions.setdefault(operation["description"], []).append(name)
    assert [names for names in summaries.values() if len(names) > 1] == []
    assert [names for names in descriptions.values() if len(names) > 1] == []


def test_every_operation_has_examples(schema):
    for name, operation in operations(schema):
        body = operation.get("requestBody")
        if body is not None:
            assert all(media.get("examples") for media in body["content"].values()), name
        answers = [
            (code, answer)
            for code, answer in operation["responses"].items()
            if code.startswith("2") and code != "204"
        ]
        assert answers or "204" in operation["responses"], name
        for code, answer in answers:
            assert all(media.get("examples") for media in answer["content"].values()), (name, code)
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                assert parameter.get("examples"), (name, parameter["name"])


def test_every_operation_documents_its_4xx_answers_with_the_error_body(schema):
    for name, operation in operations(schema):
        errors = {
            code: answer for code, answer in operation["responses"].items() if code.startswith("4")
        }
        assert "401" in errors, name
        if operation.get("requestBody") or any(
            parameter["in"] == "query" for parameter in operation.get("parameters", [])
        ):
            assert "400" in errors, name
        if any(parameter["in"] == "path" for parameter in operation.get("parameters", [])):
            assert "404" in errors, name
        for code, answer in errors.items():
            media = answer["content"]["application/json"]
            assert media["schema"]["$ref"] in ERROR_BODIES, (name, code)
            assert media.get("examples"), (name, code)
            assert answer.get("description") and "Undocumented" not in answer["description"]


def _check(schema, value, shape, where):
    validator = OAS30Validator(resolved(schema, shape))
    problems = [error.message for error in validator.iter_errors(value)]
    assert problems == [], (where, problems)


def test_every_example_validates_against_its_schema(schema):
    checked = 0
    for name, operation in operations(schema):
        for media_type, media in operation.get("requestBody", {}).get("content", {}).items():
            for example_name, example in media.get("examples", {}).items():
                _check(
                    schema,
                    example["value"],
                    media["schema"],
                    (name, "request", media_type, example_name),
                )
                checked += 1
        for code, answer in operation["responses"].items():
            for media_type, media in answer.get("content", {}).items():
                for example_name, example in media.get("examples", {}).items():
                    _check(
                        schema,
                        example["value"],
                        media["schema"],
                        (name, code, media_type, example_name),
                    )
                    checked += 1
        for parameter in operation.get("parameters", []):
            for example_name, example in parameter.get("examples", {}).items():
                _check(
                    schema,
                    example["value"],
                    parameter["schema"],
                    (name, parameter["name"], example_name),
                )
                checked += 1
    assert checked > 100


def test_a_misspelt_field_in_an_example_would_fail(schema):
    """The check above is strict: a field the schema does not name is an error."""
    agent = schema["components"]["schemas"]["Agent"]
    good = copy.deepcopy(
        schema["paths"]["/a2a/registry/{agent_id}"]["get"]["responses"]["200"]["content"][
            "application/json"
        ]["examples"]["AnAgent"]["value"]
    )
    _check(schema, good, agent, "as documented")
    with pytest.raises(AssertionError):
        _check(schema, {**good, "invocationURL": ""}, agent, "misspelt")


def test_the_docs_page_keeps_the_key_given_to_authorize(django_db_blocker):
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        page = APIClient().get("/api/docs")
    assert page.status_code == 200
    assert b'"persistAuthorization": true' in page.content
