"""The planner: which steps start next, resuming without repeating a finished step."""

from pathlib import Path

import pytest

from routing.workflows.definition import parse, parse_yaml
from routing.workflows.expressions import Message, StepOutput
from routing.workflows.planner import Failed, plan

SEED = parse_yaml(Path(__file__).with_name("customer-support.yml").read_text())
ASK = Message("my invoice is wrong")


def started(result) -> list[tuple[str, str]]:
    return [(start.key, start.input) for start in result.start]


def drive(workflow, answers, message=ASK):
    """Run the workflow to its end, each started step answering ``answers[target](input)``;
    returns the output and the order of the calls."""
    results, calls, seq = {}, [], 0
    for _ in range(100):
        result = plan(workflow, message=message, results=results)
        if result.finished:
            return result, calls
        for start in result.start:
            seq += 1
            calls.append(start.key)
            answer = answers[start.step.target](start.input)
            if isinstance(answer, Failed):
                results[start.key] = answer
            else:
                text, data = answer if isinstance(answer, tuple) else (answer, {})
                results[start.key] = StepOutput(text, data, seq=seq)
    raise AssertionError("no end")


SUPPORT = {
    "billing-agent": lambda text: f"refund for: {text}",
    "troubleshooting-agent": lambda text: ("try this", {"solution": "restart it"}),
    "resolution-validator": lambda text: f"validated: {text}",
    "summary-agent": lambda text: f"summary of {text}",
}


def test_the_seed_starts_with_the_classifier_on_the_original_message():
    assert started(plan(SEED, message=ASK, results={})) == [("classify", "my invoice is wrong")]


def test_the_seed_takes_the_billing_branch():
    result, calls = drive(SEED, {**SUPPORT, "intent-classifier": lambda text: "billing"})
    assert calls == ["classify", "billing", "summarize"]
    assert result.output.text == "summary of refund for: my invoice is wrong"


def test_the_seed_takes_the_technical_branch_and_reads_a_data_field():
    classifier = {"intent-classifier": lambda text: ("", {"intent": "Technical"})}
    result, calls = drive(SEED, {**SUPPORT, **classifier})
    assert calls == ["classify", "troubleshooting", "resolution-validator", "summarize"]
    assert result.output.text == "summary of validated: restart it"


def test_a_value_with_no_branch_fails_naming_the_value_and_the_branches():
    result, _ = drive(SEED, {**SUPPORT, "intent-classifier": lambda text: "sales"})
    assert result.error == "step 'route' condition: 'sales' matches no branch (billing, technical)"


def test_the_default_branch_takes_what_no_other_branch_names():
    workflow = parse(
        {
            "name": "w",
            "steps": [
                {"agent": "a"},
                {
                    "id": "r",
                    "condition": "{{.a}}",
                    "branches": {"x": [{"agent": "x"}], "default": [{"agent": "d"}]},
                },
            ],
        }
    )
    result, calls = drive(workflow, {"a": lambda t: "zzz", "x": str, "d": lambda t: "dd"})
    assert calls == ["a", "d"]
    assert result.output.text == "dd"


def test_a_resumed_run_starts_the_first_unfinished_step_and_no_finished_one():
    results = {
        "classify": StepOutput("technical", seq=1),
        "troubleshooting": StepOutput("", {"solution": "s"}, seq=2),
    }
    assert started(plan(SEED, message=ASK, results=results)) == [("resolution-validator", "s")]


def test_a_running_step_is_not_started_again():
    result = plan(SEED, message=ASK, results={}, running={"classify"})
    assert (result.start, result.finished) == ((), False)


def test_a_failed_step_fails_the_run_naming_it():
    result = plan(SEED, message=ASK, results={"classify": Failed("agent unreachable")})
    assert result.error == "step 'classify' failed: agent unreachable"


def test_a_missing_variable_at_run_time_fails_naming_it():
    workflow = parse(
        {
            "name": "w",
            "steps": [
                {
                    "id": "r",
                    "condition": "{{.originalMessage}}",
                    "branches": {"a": [{"agent": "a"}], "b": [{"agent": "b"}]},
                },
                {"agent": "c", "input": "{{.b.x}}"},
            ],
        }
    )
    result = plan(workflow, message=Message("a"), results={"a": StepOutput("A", seq=1)})
    assert result.error == "step 'c' input: {{.b.x}}: step 'b' has not run before this one"


def three(join, **extra):
    return parse(
        {
            "name": "w",
            "steps": [
                {
                    "id": "fan",
                    "parallel": [{"agent": "a"}, {"agent": "b"}, {"agent": "c"}],
                    "join": join,
                    **extra,
                },
                {"agent": "after", "input": "{{.fan}}"},
            ],
        }
    )


def test_a_parallel_step_starts_every_branch_at_once():
    assert [key for key, _ in started(plan(three("all"), message=ASK, results={}))] == [
        "a",
        "b",
        "c",
    ]


def test_join_all_waits_for_every_step_and_keeps_document_order():
    workflow = three("all")
    partial = {"c": StepOutput("C", seq=1), "a": StepOutput("A", {"n": 1}, seq=2)}
    assert plan(workflow, message=ASK, results=partial, running={"b"}).start == ()
    done = {**partial, "b": StepOutput("B", seq=3)}
    assert started(plan(workflow, message=ASK, results=done)) == [("after", "A\n\nB\n\nC")]


def test_join_all_fails_when_one_step_fails_and_cancels_the_others():
    result = plan(three("all"), message=ASK, results={"b": Failed("boom")}, running={"a", "c"})
    assert result.error == "step 'b' failed: boom"
    assert set(result.cancel) == {"a", "c"}


def test_join_first_takes_the_first_finisher_and_cancels_the_rest():
    workflow = three("first")
    result = plan(workflow, message=ASK, results={"b": StepOutput("B", seq=5)}, running={"a", "c"})
    assert started(result) == [("after", "B")]
    assert set(result.cancel) == {"a", "c"}


def test_join_first_never_changes_its_choice_when_a_slower_step_finishes():
    workflow = three("first")
    results = {"b": StepOutput("B", seq=5), "a": StepOutput("A", seq=9)}
    assert started(plan(workflow, message=ASK, results=results, running={"c"})) == [("after", "B")]


def test_join_first_survives_failures_until_every_step_failed():
    workflow = three("first")
    some = {"a": Failed("x"), "b": Failed("y")}
    assert plan(workflow, message=ASK, results=some, running={"c"}).finished is False
    result = plan(workflow, message=ASK, results={**some, "c": Failed("z")})
    assert result.error == "step 'a' failed: x"


def test_join_quorum_waits_for_n_and_counts_the_earliest():
    workflow = three("quorum", quorum=2)
    one = {"c": StepOutput("C", seq=1)}
    assert plan(workflow, message=ASK, results=one, running={"a", "b"}).start == ()
    two = {**one, "a": StepOutput("A", seq=2)}
    result = plan(workflow, message=ASK, results=two, running={"b"})
    assert started(result) == [("after", "A\n\nC")]
    assert result.cancel == ("b",)
    late = {**two, "b": StepOutput("B", seq=3)}
    assert started(plan(workflow, message=ASK, results=late)) == [("after", "A\n\nC")]


def test_join_quorum_fails_once_it_cannot_be_reached():
    workflow = three("quorum", quorum=2)
    result = plan(
        workflow, message=ASK, results={"a": Failed("x"), "b": Failed("y")}, running={"c"}
    )
    assert result.error == "step 'a' failed: x"
    assert result.cancel == ("c",)


def test_a_parallel_gives_its_steps_data_by_id():
    workflow = parse(
        {
            "name": "w",
            "steps": [
                {"id": "fan", "parallel": [{"agent": "a"}, {"agent": "b"}]},
                {"agent": "after", "input": "{{.fan.a.score}}|{{.fan.b.text}}|{{.a}}"},
            ],
        }
    )
    results = {"a": StepOutput("A", {"score": 3}, seq=1), "b": StepOutput("B", seq=2)}
    assert started(plan(workflow, message=ASK, results=results)) == [("after", "3|B|A")]


def test_finished_parallel_steps_stay_finished_on_resume():
    workflow = three("all")
    result = plan(workflow, message=ASK, results={"a": StepOutput("A", seq=1)})
    assert [key for key, _ in started(result)] == ["b", "c"]


def looped(until=None, limit=3):
    step = {
        "id": "refine",
        "loop": [{"agent": "draft"}, {"agent": "review", "input": "{{.draft}}"}],
        "max_iterations": limit,
    }
    if until:
        step["until"] = until
    return parse({"name": "w", "steps": [step, {"agent": "end", "input": "{{.refine}}"}]})


def test_a_loop_stops_at_its_limit():
    result, calls = drive(
        looped(), {"draft": lambda t: "d", "review": lambda t: "no", "end": lambda t: f"end {t}"}
    )
    assert calls == [
        "refine[0]/draft",
        "refine[0]/review",
        "refine[1]/draft",
        "refine[1]/review",
        "refine[2]/draft",
        "refine[2]/review",
        "end",
    ]
    assert result.output.text == "end no"


def test_a_loop_stops_at_its_exit_condition():
    answers = iter(["no", "no", "yes"])
    result, calls = drive(
        looped("review.text == 'yes'", limit=10),
        {"draft": lambda t: "d", "review": lambda t: next(answers), "end": lambda t: t},
    )
    assert calls[-2:] == ["refine[2]/review", "end"]
    assert len(calls) == 7
    assert result.output.text == "yes"


def test_a_loop_with_a_template_exit_condition():
    result, calls = drive(
        looped("{{.review.approved}}", limit=5),
        {"draft": lambda t: "d", "review": lambda t: ("", {"approved": True}), "end": str},
    )
    assert calls == ["refine[0]/draft", "refine[0]/review", "end"]


def test_a_resumed_loop_continues_in_its_iteration():
    results = {
        "refine[0]/draft": StepOutput("d0", seq=1),
        "refine[0]/review": StepOutput("no", seq=2),
        "refine[1]/draft": StepOutput("d1", seq=3),
    }
    assert started(plan(looped(), message=ASK, results=results)) == [("refine[1]/review", "d1")]


def test_team_and_workflow_steps_are_calls_too():
    workflow = parse(
        {
            "name": "w",
            "steps": [{"team": "support"}, {"workflow": "inner", "input": "{{.support}}"}],
        }
    )
    result, calls = drive(workflow, {"support": lambda t: "S", "inner": lambda t: f"I({t})"})
    assert calls == ["support", "inner"]
    assert result.output.text == "I(S)"


def test_a_sequence_gives_its_last_steps_output():
    workflow = parse(
        {
            "name": "w",
            "steps": [
                {"id": "s", "sequence": [{"agent": "a"}, {"agent": "b", "input": "{{.a}}!"}]},
                {"agent": "c", "input": "{{.s}}?"},
            ],
        }
    )
    result, _ = drive(workflow, {"a": lambda t: "A", "b": str, "c": str})
    assert result.output.text == "A!?"


def test_the_marked_output_step_is_the_answer_even_when_not_last():
    workflow = parse({"name": "w", "steps": [{"agent": "a", "output": "final"}, {"agent": "b"}]})
    result, _ = drive(workflow, {"a": lambda t: "A", "b": lambda t: "B"})
    assert result.output.text == "A"


@pytest.mark.parametrize("crash_after", range(4))
def test_a_run_taken_over_at_any_point_calls_each_step_once(crash_after):
    classifier = {"intent-classifier": lambda text: ("", {"intent": "technical"})}
    answers = {**SUPPORT, **classifier}
    _, calls = drive(SEED, answers)
    # Another process: the results the database holds after `crash_after` steps.
    results, seq = {}, 0
    for key in calls[:crash_after]:
        seq += 1
        step = next(step for step in SEED.walk() if step.id == key)
        results[key] = StepOutput(*_as_pair(answers[step.target]("x")), seq=seq)
    remaining = []
    while True:
        result = plan(SEED, message=ASK, results=results)
        if result.finished:
            break
        for start in result.start:
            assert start.key not in results
            remaining.append(start.key)
            seq += 1
            results[start.key] = StepOutput(
                *_as_pair(answers[start.step.target](start.input)), seq=seq
            )
    assert calls[:crash_after] + remaining == calls


def _as_pair(answer):
    return answer if isinstance(answer, tuple) else (answer, {})
