"""Task templates, the pure part: declarations, rendering, and errors naming the variable."""

import pytest

from routing.task_templates import VariableError, check, render, used, variables

DECLARED = [
    {"name": "customer", "description": "Who asks"},
    {"name": "count", "type": "integer", "default": 3},
    {"name": "urgent", "type": "boolean", "default": False},
    {"name": "budget", "type": "number"},
]
TEXT = "Write {{count}} replies to {{ customer }} (urgent: {{urgent}}, budget {{budget}})."


def error_of(call, *args) -> tuple[str, str]:
    with pytest.raises(VariableError) as caught:
        call(*args)
    return caught.value.name, caught.value.message


def test_a_template_renders_values_and_defaults():
    text = render(TEXT, DECLARED, {"customer": "Ada", "budget": 12.5})
    assert text == "Write 3 replies to Ada (urgent: false, budget 12.5)."


def test_given_values_override_defaults():
    text = render(TEXT, DECLARED, {"customer": "Ada", "budget": 1, "count": 7, "urgent": True})
    assert text == "Write 7 replies to Ada (urgent: true, budget 1)."


def test_a_missing_variable_is_named_with_its_type():
    assert error_of(render, TEXT, DECLARED, {"budget": 1}) == (
        "customer",
        "missing (a string, no default)",
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"customer": 5, "budget": 1}, ("customer", "must be a string, not 5")),
        ({"customer": "a", "budget": "1"}, ("budget", 'must be a number, not "1"')),
        ({"customer": "a", "budget": True}, ("budget", "must be a number, not true")),
        ({"customer": "a", "budget": 1, "count": 1.5}, ("count", "must be an integer, not 1.5")),
        (
            {"customer": "a", "budget": 1, "urgent": "yes"},
            ("urgent", 'must be a boolean, not "yes"'),
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_named(values, expected):
    assert error_of(render, TEXT, DECLARED, values) == expected


def test_an_unknown_variable_is_named():
    name, message = error_of(render, TEXT, DECLARED, {"customer": "a", "budget": 1, "cutsomer": 1})
    assert (name, message) == (
        "cutsomer",
        "is not a variable of this template (it has: customer, count, urgent, budget)",
    )


def test_variables_must_be_an_object():
    assert error_of(render, TEXT, DECLARED, ["Ada"]) == (
        "variables",
        "must be an object of name: value",
    )


def test_a_text_using_an_undeclared_variable_is_refused():
    assert error_of(check, "Hi {{who}}", []) == ("text", "{{who}} is not declared in variables")
    assert error_of(used, "Hi {{ who are }}") == (
        "text",
        "'{{ who are }}' is not a variable: write {{name}}",
    )


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("x", ("variables", "must be a list of {name, type, default, description}")),
        ([1], ("variables[0]", "must be an object with a name")),
        (
            [{"name": "1x"}],
            ("variables[0]", "name must be letters, digits and _, not starting with a digit"),
        ),
        ([{"name": "a"}, {"name": "a"}], ("variables[1]", "'a' is declared twice")),
        (
            [{"name": "a", "type": "date"}],
            ("variables[0]", "type must be one of string, integer, number, boolean, not 'date'"),
        ),
        ([{"name": "a", "type": "integer", "default": "3"}], ("a", 'must be an integer, not "3"')),
        ([{"name": "a", "kind": "x"}], ("variables[0]", "unknown field 'kind'")),
    ],
)
def test_bad_declarations_are_named(declared, expected):
    assert error_of(variables, declared) == expected


def test_declarations_as_json_keep_defaults_and_descriptions():
    assert [variable.as_json() for variable in variables(DECLARED)][:2] == [
        {"name": "customer", "type": "string", "description": "Who asks"},
        {"name": "count", "type": "integer", "default": 3},
    ]
