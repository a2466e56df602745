"""Reading and checking workflow documents: the seed imports as written; every problem names
its step and field."""

from pathlib import Path

import pytest

from routing.workflows.definition import WorkflowInvalid, parse, parse_yaml

SEED = Path(__file__).with_name("customer-support.yml").read_text()


def problems(document) -> list[str]:
    with pytest.raises(WorkflowInvalid) as caught:
        parse_yaml(document) if isinstance(document, str) else parse(document)
    return [str(problem) for problem in caught.value.problems]


def workflow(*steps, **extra):
    return {"name": "w", "steps": list(steps), **extra}


def test_the_seed_imports_as_written():
    seed = parse_yaml(SEED)
    assert seed.name == "Customer Support Pipeline"
    assert seed.version == "1.0.0"
    assert [step.id for step in seed.walk()] == [
        "classify",
        "route",
        "billing",
        "troubleshooting",
        "resolution-validator",
        "summarize",
    ]
    route = seed.steps[1]
    assert [name for name, _ in route.branches] == ["billing", "technical"]
    assert seed.output_step.id == "summarize"
    assert seed.output_step.output == "final_response"
    assert [name for _, name in seed.targets("agent")] == [
        "intent-classifier",
        "billing-agent",
        "troubleshooting-agent",
        "resolution-validator",
        "summary-agent",
    ]


def test_a_call_without_an_id_is_named_after_its_target_less_agent():
    found = parse(workflow({"agent": "billing-agent"}, {"team": "support"}, {"workflow": "w-2"}))
    assert [step.id for step in found.steps] == ["billing", "support", "w-2"]


def test_a_target_whose_name_is_no_id_needs_an_explicit_id():
    assert problems(workflow({"agent": "Billing bot"})) == [
        "steps[0]: id: 'Billing bot' is no id (letters, digits, - or _): give the step an id"
    ]


def test_the_input_defaults_to_the_original_message_and_the_version_to_1():
    found = parse(workflow({"agent": "a"}))
    assert found.steps[0].input == "{{.originalMessage}}"
    assert found.version == "1"


def test_a_numeric_version_is_kept_as_text():
    assert parse(workflow({"agent": "a"}, version=2.5)).version == "2.5"


def test_the_last_step_gives_the_output_when_none_is_marked():
    assert parse(workflow({"agent": "a"}, {"agent": "b"})).output_step.id == "b"


def test_not_yaml_names_the_line():
    # The reason is libyaml's (or PyYAML's own words without it); the place is ours.
    (found,) = problems("name: w\nsteps: [unclosed\n")
    assert found.startswith("not YAML at line 3, column 1: ")
    assert "','" in found


@pytest.mark.parametrize("document", ["just text", ["a", "list"], None])
def test_a_document_that_is_not_a_mapping_is_refused(document):
    assert problems(document) == ["a workflow is a mapping with name and steps"]


def test_a_missing_name_and_missing_steps_are_both_named():
    assert problems({"version": "1"}) == [
        "name: is required (the workflow's name)",
        "steps: must be a non-empty list of steps",
    ]


def test_an_unknown_top_level_field_is_named():
    assert problems(workflow({"agent": "a"}, stepz=[])) == [
        "stepz: unknown field; use description, name, slug, steps, version"
    ]


def test_a_missing_agent_name_names_the_step():
    assert problems(workflow({"id": "first", "agent": None})) == [
        "steps[0] (first): agent: needs the name of the agent to call"
    ]


def test_a_step_of_no_kind_or_two_kinds_is_refused():
    assert problems(workflow({"id": "x", "input": "hi"})) == [
        "steps[0]: a step needs exactly one of agent, team, workflow, sequence, parallel, "
        "loop, or condition with branches (found none)"
    ]
    assert "found agent, team" in problems(workflow({"agent": "a", "team": "t"}))[0]


def test_an_unknown_step_field_names_the_step_and_field():
    assert problems(workflow({"agent": "a", "inptu": "x"})) == [
        "steps[0] (a): inptu: unknown field for agent steps"
    ]


def test_duplicate_ids_name_both_places_and_hint_at_implicit_ids():
    assert problems(workflow({"agent": "a"}, {"agent": "a"})) == [
        "steps[1]: id: 'a' is also the id of steps[0] (a) (named after its target: give it an id)"
    ]


def test_reserved_and_malformed_ids_are_refused():
    assert problems(workflow({"id": "originalMessage", "agent": "a"})) == [
        "steps[0]: id: 'originalMessage' names the caller's message; pick another id"
    ]
    assert problems(workflow({"id": "9lives", "agent": "a"})) == [
        "steps[0]: id: must start with a letter and hold letters, digits, - or _"
    ]


def test_a_reference_to_an_unknown_step_names_the_step_and_field():
    assert problems(workflow({"id": "s", "agent": "a", "input": "{{.nowhere.text}}"})) == [
        "steps[0] (s): input: {{.nowhere.text}} names no step before this one"
    ]


def test_a_reference_to_a_later_step_is_refused():
    found = problems(workflow({"agent": "a", "input": "{{.b}}"}, {"agent": "b"}))
    assert found == ["steps[0] (a): input: {{.b}} names no step before this one"]


def test_a_step_cannot_read_a_sibling_running_beside_it():
    parallel = {"id": "fan", "parallel": [{"agent": "a"}, {"agent": "b", "input": "{{.a}}"}]}
    assert problems(workflow(parallel)) == [
        "steps[0] (fan).parallel[1] (b): input: {{.a}} names no step before this one"
    ]


def test_a_step_after_a_parallel_reads_its_steps_and_the_parallel():
    parallel = {"id": "fan", "parallel": [{"agent": "a"}, {"agent": "b"}]}
    parse(workflow(parallel, {"agent": "c", "input": "{{.fan}} {{.a.x}} {{.b}}"}))


def test_a_step_inside_a_branch_cannot_read_its_own_branch_step():
    branch = {
        "id": "route",
        "condition": "x",
        "branches": {"y": [{"agent": "a", "input": "{{.route}}"}]},
    }
    assert problems(workflow(branch)) == [
        "steps[0] (route).branches.y[0] (a): input: {{.route}} names no step before this one"
    ]


def test_a_malformed_template_names_the_step_and_field():
    assert problems(workflow({"agent": "a", "input": "{{ classify }}"})) == [
        "steps[0] (a): input: '{{ classify }}' is not a variable: write "
        "{{.originalMessage}}, {{.step}} or {{.step.field}}"
    ]
    assert (
        "originalMessage is text"
        in problems(workflow({"agent": "a", "input": "{{.originalMessage.x}}"}))[0]
    )


def test_a_branch_step_needs_an_id_a_condition_and_branches():
    assert problems(workflow({"branches": {"a": [{"agent": "a"}]}})) == [
        "steps[0]: id: a branch step needs an id",
        "steps[0]: condition: must be a template such as {{.step.field}} or a JMESPath",
    ]
    assert problems(workflow({"id": "r", "condition": "x", "branches": []})) == [
        "steps[0] (r): branches: must map each value to a list of steps"
    ]


def test_a_condition_that_is_not_jmespath_is_named():
    found = problems(
        workflow({"id": "r", "condition": "a ==", "branches": {"x": [{"agent": "a"}]}})
    )
    assert len(found) == 1
    assert found[0].startswith("steps[0] (r): condition: 'a ==' is not a JMESPath expression")


def test_boolean_branch_names_read_as_true_and_false():
    found = parse(
        workflow(
            {
                "id": "r",
                "condition": "a",
                "branches": {True: [{"agent": "a"}], False: [{"agent": "b"}]},
            }
        )
    )
    assert [name for name, _ in found.steps[0].branches] == ["true", "false"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"join": "most"}, "steps[0] (p): join: 'most' is not one of all, first, quorum"),
        ({"join": "quorum"}, "steps[0] (p): quorum: join: quorum needs quorum: N (a whole number)"),
        ({"join": "quorum", "quorum": 4}, "steps[0] (p): quorum: must be from 1 to 3, not 4"),
        ({"join": "quorum", "quorum": 0}, "steps[0] (p): quorum: must be from 1 to 3, not 0"),
        ({"join": "all", "quorum": 2}, "steps[0] (p): quorum: is only read with join: quorum"),
    ],
)
def test_a_bad_join_is_named(extra, expected):
    step = {"id": "p", "parallel": [{"agent": "a"}, {"agent": "b"}, {"agent": "c"}], **extra}
    assert problems(workflow(step)) == [expected]


def test_a_quorum_join_reads():
    step = {"id": "p", "parallel": [{"agent": "a"}, {"agent": "b"}], "join": "quorum", "quorum": 2}
    found = parse(workflow(step)).steps[0]
    assert (found.join, found.quorum, len(found.children)) == ("quorum", 2, 2)


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (None, "steps[0] (l): max_iterations: a loop needs a limit (1 to 100)"),
        ("3", "steps[0] (l): max_iterations: must be a whole number from 1 to 100"),
        (0, "steps[0] (l): max_iterations: must be from 1 to 100, not 0"),
        (101, "steps[0] (l): max_iterations: must be from 1 to 100, not 101"),
    ],
)
def test_a_loop_without_a_proper_limit_is_refused(limit, expected):
    step = {"id": "l", "loop": [{"agent": "a"}]}
    if limit is not None:
        step["max_iterations"] = limit
    assert problems(workflow(step)) == [expected]


def test_a_loop_until_may_read_its_body():
    step = {"id": "l", "loop": [{"agent": "a"}], "max_iterations": 3, "until": "{{.a.done}}"}
    assert parse(workflow(step)).steps[0].until.source == "{{.a.done}}"


def test_only_one_top_level_step_gives_the_output():
    assert problems(workflow({"agent": "a", "output": "x"}, {"agent": "b", "output": "y"})) == [
        "output: only one step may give the output (a, b)"
    ]
    nested = {"id": "s", "sequence": [{"agent": "a", "output": "x"}]}
    assert problems(workflow(nested)) == [
        "steps[0] (s).sequence[0] (a): output: only a top-level step may give the output"
    ]


def test_every_problem_is_listed_at_once():
    found = problems(
        workflow(
            {"id": "c", "agent": ""},
            {"id": "l", "loop": [{"agent": "x", "input": "{{.ghost}}"}]},
        )
    )
    assert found == [
        "steps[0] (c): agent: needs the name of the agent to call",
        "steps[1] (l): max_iterations: a loop needs a limit (1 to 100)",
        "steps[1] (l).loop[0] (x): input: {{.ghost}} names no step before this one",
    ]


def test_yaml_aliases_are_refused_so_a_short_document_cannot_explode():
    bomb = "name: w\nx: &a [{agent: a}]\nsteps: [*a, *a]\n"
    assert problems(bomb)[0].startswith("not YAML at line 3")
    assert "aliases (*name) are not read in a workflow" in problems(bomb)[0]


def test_a_document_nested_too_deep_is_a_problem_not_a_crash():
    deep = {"agent": "a"}
    for level in range(3000):
        deep = {"id": f"s{level}", "sequence": [deep]}
    # 3,000 levels hold 3,001 steps: whichever limit the reader meets first (the step count,
    # or Python's recursion limit, which depends on the caller's stack) refuses it cleanly.
    assert problems(workflow(deep)) in (
        ["the document is nested too deep"],
        ["steps: more than 500 steps"],
    )


def test_too_many_steps_are_refused():
    many = [{"agent": f"a{index}"} for index in range(501)]
    assert problems(workflow(*many)) == ["steps: more than 500 steps"]


def test_a_document_over_512_kib_is_refused_before_it_is_read():
    assert problems("name: x\nsteps:\n" + "  - agent: a\n" * 50000) == [
        "the document is larger than 512 KiB"
    ]
