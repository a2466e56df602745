"""The A2A task state machine: one pure table, no Django.

States are stored in our database as the 0.3 JSON-RPC spellings (``working``,
``input-required``...), which are also the values of :class:`TaskState`.

Kinds of state:

- active: ``submitted``, ``working``
- interrupted (the task waits on the client): ``input-required``, ``auth-required``
- terminal (final, nothing moves out, not even to the same state):
  ``completed``, ``canceled``, ``failed``, ``rejected``

Transitions (``TRANSITIONS``; anything not listed is refused):

==================  ==========================================================
from                to
==================  ==========================================================
submitted           submitted, working, input-required, auth-required, any terminal
working             working, input-required, auth-required, any terminal
input-required      submitted, working, input-required, auth-required, any terminal
auth-required       submitted, working, input-required, auth-required, any terminal
terminal            nothing
==================  ==========================================================

Why these:

- A non-terminal state may repeat itself: a status update that only carries a new
  message (progress text, a second question) keeps the state.
- ``working -> submitted`` is the one backwards step we refuse: once an agent has
  picked the task up it cannot be "queued" again.
- An interrupted task goes back to ``submitted`` or ``working`` when the client
  answers, may switch between the two interrupted states (input first, then auth),
  and may end in any terminal state (the client cancels, the agent gives up, times
  out or finishes without the answer).
- ``rejected`` is allowed from every non-terminal state: the 0.3 proto says an agent
  may reject "during initial task creation or later".
- A terminal state is final. A peer that re-sends the final snapshot is not making
  a transition; callers compare ``old == new`` before calling :func:`check_transition`
  if they want to ignore such repeats.

Wire names:

- 1.0 (ProtoJSON): ``TASK_STATE_WORKING``... (:func:`to_wire_v1`)
- 0.3 JSON-RPC: ``working``, ``input-required``... (:func:`to_wire_v03`)
- 0.3 REST / gRPC proto JSON: ``TASK_STATE_*`` with the British
  ``TASK_STATE_CANCELLED`` (:func:`to_wire_v03_rest`)

:func:`from_wire` reads all three. The 0.3 ``unknown`` state and 1.0
``TASK_STATE_UNSPECIFIED`` are read as ``None``: the peer says it does not know the
state, which is not a state of ours. Callers keep the state they already have, and
record a task they see for the first time as ``submitted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class TaskState(StrEnum):
    """A task state as stored in our database (0.3 JSON-RPC spelling)."""

    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    AUTH_REQUIRED = "auth-required"
    COMPLETED = "completed"
    CANCELED = "canceled"
    FAILED = "failed"
    REJECTED = "rejected"


TERMINAL: frozenset[TaskState] = frozenset(
    {TaskState.COMPLETED, TaskState.CANCELED, TaskState.FAILED, TaskState.REJECTED}
)
INTERRUPTED: frozenset[TaskState] = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
ACTIVE: frozenset[TaskState] = frozenset({TaskState.SUBMITTED, TaskState.WORKING})

TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = MappingProxyType(
    {
        TaskState.SUBMITTED: ACTIVE | INTERRUPTED | TERMINAL,
        TaskState.WORKING: frozenset({TaskState.WORKING}) | INTERRUPTED | TERMINAL,
        TaskState.INPUT_REQUIRED: ACTIVE | INTERRUPTED | TERMINAL,
        TaskState.AUTH_REQUIRED: ACTIVE | INTERRUPTED | TERMINAL,
        TaskState.COMPLETED: frozenset(),
        TaskState.CANCELED: frozenset(),
        TaskState.FAILED: frozenset(),
        TaskState.REJECTED: frozenset(),
    }
)


class InvalidTransition(ValueError):
    """A task may not move from ``old`` to ``new``."""

    def __init__(self, old: TaskState, new: TaskState) -> None:
        self.old = old
        self.new = new
        if old in TERMINAL:
            why = f"'{old}' is terminal"
        else:
            allowed = ", ".join(sorted(TRANSITIONS[old]))
            why = f"from '{old}' a task may only move to: {allowed}"
        super().__init__(f"task cannot move from '{old}' to '{new}': {why}")


def can_transition(old: TaskState | str, new: TaskState | str) -> bool:
    """Tell whether ``old -> new`` is allowed. Raises ValueError for an unknown state."""
    return TaskState(new) in TRANSITIONS[TaskState(old)]


def check_transition(old: TaskState | str, new: TaskState | str) -> None:
    """Return quietly when ``old -> new`` is allowed, else raise :class:`InvalidTransition`."""
    old_state, new_state = TaskState(old), TaskState(new)
    if new_state not in TRANSITIONS[old_state]:
        raise InvalidTransition(old_state, new_state)


_V1_NAMES: Mapping[TaskState, str] = MappingProxyType(
    {state: "TASK_STATE_" + state.name for state in TaskState}
)
_V03_REST_NAMES: Mapping[TaskState, str] = MappingProxyType(
    {**_V1_NAMES, TaskState.CANCELED: "TASK_STATE_CANCELLED"}
)
_UNKNOWN_NAMES = frozenset({"unknown", "TASK_STATE_UNSPECIFIED"})
_FROM_WIRE: Mapping[str, TaskState] = MappingProxyType(
    {
        **{state.value: state for state in TaskState},
        **{name: state for state, name in _V1_NAMES.items()},
        **{name: state for state, name in _V03_REST_NAMES.items()},
    }
)


def to_wire_v1(state: TaskState | str) -> str:
    """The 1.0 ProtoJSON name, e.g. ``TASK_STATE_INPUT_REQUIRED``."""
    return _V1_NAMES[TaskState(state)]


def to_wire_v03(state: TaskState | str) -> str:
    """The 0.3 JSON-RPC name, e.g. ``input-required``."""
    return TaskState(state).value


def to_wire_v03_rest(state: TaskState | str) -> str:
    """The 0.3 REST/gRPC proto JSON name, e.g. ``TASK_STATE_CANCELLED``."""
    return _V03_REST_NAMES[TaskState(state)]


def from_wire(name: str) -> TaskState | None:
    """Read a state in any of the three wire spellings.

    Returns None for 0.3 ``unknown`` and 1.0 ``TASK_STATE_UNSPECIFIED`` (see the module
    docstring). Raises ValueError for anything else that is not a state name.
    """
    state = _FROM_WIRE.get(name)
    if state is not None:
        return state
    if name in _UNKNOWN_NAMES:
        return None
    raise ValueError(f"not an A2A task state: {name!r}")
