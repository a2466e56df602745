"""Any data at all: reading a workflow either returns one or raises WorkflowInvalid, and a
planned run of what was read either moves or ends with an error naming why; nothing else."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routing.workflows.definition import WorkflowInvalid, parse, parse_yaml
from routing.workflows.expressions import Message, StepOutput
from routing.workflows.planner import plan

SCALARS = st.none() | st.booleans() | st.integers(-3, 200) | st.text(max_size=12)
KEYS = st.sampled_from(
    [
        "id",
        "agent",
        "team",
        "workflow",
        "input",
        "output",
        "condition",
        "branches",
        "parallel",
        "join",
        "quorum",
        "loop",
        "max_iterations",
        "until",
        "sequence",
        "name",
        "steps",
        "x",
    ]
)
TEXT = st.sampled_from(
    ["a", "b", "{{.a}}", "{{.originalMessage}}", "{{.b.x}}", "{{ x }}", "a ==", "all", "first"]
)
DATA = st.recursive(
    SCALARS | TEXT,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(KEYS | st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(DATA, max_size=4), name=SCALARS)
def test_any_document_is_read_or_refused_and_a_read_one_plans(steps, name):
    try:
        workflow = parse({"name": name, "steps": steps})
    except WorkflowInvalid as invalid:
        assert invalid.problems
        return
    results = {}
    for seq in range(1, 30):
        step_plan = plan(workflow, message=Message("m"), results=results)
        if step_plan.finished:
            assert step_plan.output is not None or step_plan.error
            return
        assert step_plan.start
        for start in step_plan.start:
            assert start.key not in results
            results[start.key] = StepOutput("a", {"x": seq}, seq=seq)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_read_or_refused(text):
    try:
        parse_yaml(text)
    except WorkflowInvalid as invalid:
        assert invalid.problems
