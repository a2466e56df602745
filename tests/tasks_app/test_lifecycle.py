"""The task state table: which moves are allowed, and the wire spellings of states."""

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2 as pb2_v10

from tasks_app.lifecycle import (
    INTERRUPTED,
    TERMINAL,
    TRANSITIONS,
    InvalidTransition,
    TaskState,
    can_transition,
    check_transition,
    from_wire,
    to_wire_v03,
    to_wire_v03_rest,
    to_wire_v1,
)

S = TaskState


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.SUBMITTED, S.WORKING),
        (S.SUBMITTED, S.SUBMITTED),
        (S.SUBMITTED, S.INPUT_REQUIRED),
        (S.SUBMITTED, S.REJECTED),
        (S.WORKING, S.WORKING),
        (S.WORKING, S.INPUT_REQUIRED),
        (S.WORKING, S.AUTH_REQUIRED),
        (S.WORKING, S.COMPLETED),
        (S.WORKING, S.REJECTED),
        (S.INPUT_REQUIRED, S.WORKING),
        (S.INPUT_REQUIRED, S.SUBMITTED),
        (S.INPUT_REQUIRED, S.AUTH_REQUIRED),
        (S.INPUT_REQUIRED, S.CANCELED),
        (S.AUTH_REQUIRED, S.WORKING),
        (S.AUTH_REQUIRED, S.FAILED),
    ],
)
def test_allowed_transitions_pass_the_check(old, new):
    check_transition(old, new)
    assert can_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [(S.WORKING, S.SUBMITTED)] + [(t, s) for t in sorted(TERMINAL) for s in TaskState],
)
def test_refused_transitions_raise_invalid_transition(old, new):
    assert not can_transition(old, new)
    with pytest.raises(InvalidTransition) as caught:
        check_transition(old, new)
    assert (caught.value.old, caught.value.new) == (old, new)


def test_a_terminal_state_is_final_even_towards_itself():
    for state in TERMINAL:
        assert TRANSITIONS[state] == frozenset()
        assert not can_transition(state, state)


def test_every_non_terminal_state_may_repeat_for_status_updates_with_new_messages():
    for state in set(TaskState) - TERMINAL:
        assert can_transition(state, state)


def test_every_non_terminal_state_may_end_in_any_terminal_state():
    for state in set(TaskState) - TERMINAL:
        assert TRANSITIONS[state] >= TERMINAL


def test_the_table_covers_every_state_and_cannot_be_changed():
    assert set(TRANSITIONS) == set(TaskState)
    with pytest.raises(TypeError):
        TRANSITIONS[S.COMPLETED] = frozenset({S.WORKING})  # type: ignore[index]
    assert all(isinstance(targets, frozenset) for targets in TRANSITIONS.values())


def test_invalid_transition_message_names_both_states_and_the_reason():
    with pytest.raises(
        InvalidTransition, match="'completed' to 'working': 'completed' is terminal"
    ):
        check_transition("completed", "working")
    with pytest.raises(InvalidTransition, match="from 'working' a task may only move to: .*failed"):
        check_transition("working", "submitted")


def test_check_transition_accepts_database_strings_and_refuses_unknown_states():
    check_transition("input-required", "working")
    with pytest.raises(ValueError, match="paused"):
        check_transition("working", "paused")


def test_interrupted_and_terminal_sets_are_disjoint_and_as_documented():
    assert {S.INPUT_REQUIRED, S.AUTH_REQUIRED} == INTERRUPTED
    assert {S.COMPLETED, S.CANCELED, S.FAILED, S.REJECTED} == TERMINAL
    assert not INTERRUPTED & TERMINAL


@pytest.mark.parametrize(
    ("state", "v1", "v03", "v03_rest"),
    [
        (S.SUBMITTED, "TASK_STATE_SUBMITTED", "submitted", "TASK_STATE_SUBMITTED"),
        (S.WORKING, "TASK_STATE_WORKING", "working", "TASK_STATE_WORKING"),
        (
            S.INPUT_REQUIRED,
            "TASK_STATE_INPUT_REQUIRED",
            "input-required",
            "TASK_STATE_INPUT_REQUIRED",
        ),
        (S.AUTH_REQUIRED, "TASK_STATE_AUTH_REQUIRED", "auth-required", "TASK_STATE_AUTH_REQUIRED"),
        (S.COMPLETED, "TASK_STATE_COMPLETED", "completed", "TASK_STATE_COMPLETED"),
        (S.CANCELED, "TASK_STATE_CANCELED", "canceled", "TASK_STATE_CANCELLED"),
        (S.FAILED, "TASK_STATE_FAILED", "failed", "TASK_STATE_FAILED"),
        (S.REJECTED, "TASK_STATE_REJECTED", "rejected", "TASK_STATE_REJECTED"),
    ],
)
def test_states_have_one_spelling_per_wire_and_read_back_from_each(state, v1, v03, v03_rest):
    assert (to_wire_v1(state), to_wire_v03(state), to_wire_v03_rest(state)) == (v1, v03, v03_rest)
    assert from_wire(v1) is from_wire(v03) is from_wire(v03_rest) is state


def test_wire_names_are_the_sdk_enum_names_of_each_version():
    for state in TaskState:
        # Value() raises for a name the enum does not have; 0 would be UNSPECIFIED.
        assert pb2_v10.TaskState.Value(to_wire_v1(state)) > 0
        assert pb2_v03.TaskState.Value(to_wire_v03_rest(state)) > 0
        assert types_v03.TaskState(to_wire_v03(state)) != types_v03.TaskState.unknown


@pytest.mark.parametrize("name", ["unknown", "TASK_STATE_UNSPECIFIED"])
def test_an_unknown_state_reads_as_none_so_callers_keep_what_they_have(name):
    assert from_wire(name) is None


@pytest.mark.parametrize("name", ["", "WORKING", "task_state_working", "paused"])
def test_a_name_that_is_no_state_is_refused(name):
    with pytest.raises(ValueError, match="not an A2A task state"):
        from_wire(name)
