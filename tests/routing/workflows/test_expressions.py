"""Templates and conditions over the caller's message and finished steps."""

import subprocess
import sys
from pathlib import Path

import pytest

from routing.workflows.expressions import (
    Condition,
    ExpressionError,
    Message,
    MissingVariable,
    Scope,
    StepOutput,
    branch_key,
    references,
    render,
)

SCOPE = Scope(
    original=Message(
        "my bill is wrong",
        data={"account": {"id": 42}, "tags": ["a"]},
        metadata={"locale": "fr"},
    ),
    steps={
        "classify": StepOutput("billing"),
        "extract": StepOutput("see data", data={"intent": "refund", "amount": 12.5, "x-y": 1}),
    },
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{.originalMessage}}", "my bill is wrong"),
        ("Q: {{ .originalMessage }}!", "Q: my bill is wrong!"),
        ("{{.originalData.account.id}}", "42"),
        ("{{.originalData}}", '{"account": {"id": 42}, "tags": ["a"]}'),
        ("{{.metadata.locale}}", "fr"),
        ("{{.classify}}", "billing"),
        # A text-only answer: the field falls back to the step's text.
        ("{{.classify.intent}}", "billing"),
        ("{{.extract.intent}}", "refund"),
        ("{{.extract.amount}}", "12.5"),
        ("{{.extract.x-y}}", "1"),
        ("{{.extract.missing}}", "see data"),
        ("{{.extract}} / {{.classify}}", "see data / billing"),
        ("no variables", "no variables"),
    ],
)
def test_a_template_renders(template, expected):
    assert render(template, SCOPE) == expected


@pytest.mark.parametrize(
    ("template", "variable", "reason"),
    [
        ("{{.route.result}}", "{{.route.result}}", "step 'route' has not run before this one"),
        ("{{.metadata.user}}", "{{.metadata.user}}", "the caller's message has no metadata field"),
        (
            "{{ .originalData.nope }}",
            "{{ .originalData.nope }}",
            "the caller's message has no originalData field",
        ),
    ],
)
def test_a_missing_variable_is_named(template, variable, reason):
    with pytest.raises(MissingVariable) as caught:
        render(template, SCOPE)
    assert caught.value.variable == variable
    assert str(caught.value) == f"{variable}: {reason}"


@pytest.mark.parametrize("template", ["{{classify}}", "{{ .a b }}", "{{.a..b}}", "{{}}", "{{.1a}}"])
def test_a_malformed_variable_is_an_expression_error(template):
    with pytest.raises(ExpressionError, match="is not a variable"):
        references(template)


def test_references_list_roots_and_paths():
    found = references("{{.originalMessage}} {{.classify.intent.name}}")
    assert [(ref.root, ref.path, ref.step_id) for ref in found] == [
        ("originalMessage", (), None),
        ("classify", ("intent", "name"), "classify"),
    ]


def test_a_template_condition_gives_its_text():
    assert Condition.parse("{{.extract.intent}}").value(SCOPE) == "refund"


def test_a_jmespath_condition_reads_steps_and_the_message():
    assert Condition.parse("extract.amount > `10`").value(SCOPE) is True
    assert Condition.parse("classify.text").value(SCOPE) == "billing"
    assert Condition.parse("metadata.locale").value(SCOPE) == "fr"
    assert Condition.parse("originalData.account.id").value(SCOPE) == 42
    assert Condition.parse("route.result").value(SCOPE) is None


@pytest.mark.parametrize(
    ("source", "holds"),
    [
        ("extract.amount > `10`", True),
        ("extract.amount > `100`", False),
        ("extract.nothing", False),
        ("originalData.tags", True),
        ("`[]`", False),
        ("{{.classify}}", True),
        ("{{.metadata.locale}}", True),
        ("no{{.metadata.nope}}", None),
    ],
)
def test_a_condition_holds_as_documented(source, holds):
    condition = Condition.parse(source)
    if holds is None:
        with pytest.raises(MissingVariable):
            condition.holds(SCOPE)
    else:
        assert condition.holds(SCOPE) is holds


@pytest.mark.parametrize("text", ["false", " No ", "0", "", "null"])
def test_a_template_condition_with_a_false_word_does_not_hold(text):
    scope = Scope(Message("m"), {"s": StepOutput(text)})
    assert Condition.parse("{{.s}}").holds(scope) is False


@pytest.mark.parametrize("source", ["", "   ", 3, None, "a ==", "{{ nope }}"])
def test_a_bad_condition_is_refused(source):
    with pytest.raises(ExpressionError):
        Condition.parse(source)


@pytest.mark.parametrize(
    ("value", "key"),
    [(True, "true"), (False, "false"), (None, ""), (" billing\n", "billing"), (3, "3")],
)
def test_branch_keys(value, key):
    assert branch_key(value) == key


def test_the_workflow_core_imports_no_django():
    probe = (
        "import sys, routing.workflows.planner;"
        "print(any(name.partition('.')[0] == 'django' for name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "False"
