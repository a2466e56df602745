"""What a workflow run does next, from what has happened so far. Plain Python, no state.

:func:`plan` takes the workflow, the caller's message, the results of the call steps that
finished and the keys of those still running, and returns the call steps to start now (their
inputs rendered), the running ones to cancel (the losers of a ``join: first`` or ``quorum``),
and, once the run is over, its output or its error. A runner calls it after each step
finishes; a process that takes a run over calls it with what the database holds, so it starts
the first unfinished steps and never a finished one again.

Each call step run is named by its key: its id, inside a loop prefixed by the iteration, e.g.
``refine[1]/draft`` (ids are unique in a workflow, so no other prefix is needed).

The output of a composite step: a sequence and a branch give their last step's; a loop its
last iteration's; a parallel with ``join: first`` the output of its step that finished first,
with ``all`` or ``quorum`` the text of every counted step (in the document's order, one blank
line apart) and the data ``{step: {"text": ..., <data>}}``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from routing.workflows.definition import BRANCH, DEFAULT_BRANCH, LOOP, PARALLEL, Step, Workflow
from routing.workflows.expressions import (
    Message,
    MissingVariable,
    Scope,
    StepOutput,
    branch_key,
    render,
)

COMPLETED, FAILED = "completed", "failed"


@dataclass(frozen=True)
class Failed:
    """A call step that ended without an answer (failed, rejected, canceled)."""

    error: str
    seq: int = 0


@dataclass(frozen=True)
class Start:
    """A call step to start: its key, the step, the rendered input."""

    key: str
    step: Step
    input: str


@dataclass(frozen=True)
class Plan:
    start: tuple[Start, ...] = ()
    cancel: tuple[str, ...] = ()
    output: StepOutput | None = None
    """Set once the workflow finished: the output step's output."""
    error: str = ""
    """Set once the workflow failed: which step, and why."""

    @property
    def finished(self) -> bool:
        return self.output is not None or bool(self.error)


@dataclass
class _Outcome:
    state: str  # "done", "pending" or "failed"
    output: StepOutput | None = None
    start: list[Start] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    error: str = ""


def plan(
    workflow: Workflow,
    *,
    message: Message,
    results: Mapping[str, StepOutput | Failed],
    running: Collection[str] = (),
) -> Plan:
    """The next move of a run (see the module's docstring)."""
    run = _Run(results=results, running=set(running), scope={}, message=message)
    outcome = run.sequence(workflow.steps, "")
    cancel = tuple(dict.fromkeys(run.cancel))
    if outcome.state == "failed":
        return Plan(cancel=tuple(dict.fromkeys([*cancel, *outcome.waiting])), error=outcome.error)
    if outcome.state == "pending":
        return Plan(start=tuple(outcome.start), cancel=cancel)
    return Plan(cancel=cancel, output=run.scope[workflow.output_step.id])


@dataclass
class _Run:
    results: Mapping[str, StepOutput | Failed]
    running: set[str]
    scope: dict[str, StepOutput]
    message: Message
    cancel: list[str] = field(default_factory=list)

    def view(self) -> Scope:
        return Scope(original=self.message, steps=self.scope)

    def sequence(self, steps: tuple[Step, ...], prefix: str) -> _Outcome:
        outcome = _Outcome("done")
        for step in steps:
            outcome = self.step(step, prefix)
            if outcome.state != "done":
                return outcome
        return outcome

    def step(self, step: Step, prefix: str) -> _Outcome:
        if step.is_call:
            outcome = self.call(step, prefix)
        elif step.kind == BRANCH:
            outcome = self.branch(step, prefix)
        elif step.kind == PARALLEL:
            outcome = self.parallel(step, prefix)
        elif step.kind == LOOP:
            outcome = self.loop(step, prefix)
        else:
            outcome = self.sequence(step.children, prefix)
        if outcome.state == "done":
            self.scope[step.id] = outcome.output
        return outcome

    def call(self, step: Step, prefix: str) -> _Outcome:
        key = prefix + step.id
        result = self.results.get(key)
        if isinstance(result, Failed):
            return _Outcome("failed", error=f"step {key!r} failed: {result.error}")
        if result is not None:
            return _Outcome("done", output=result)
        if key in self.running:
            return _Outcome("pending", waiting=[key])
        try:
            text = render(step.input, self.view())
        except MissingVariable as missing:
            return _Outcome("failed", error=f"step {key!r} input: {missing}")
        return _Outcome("pending", start=[Start(key=key, step=step, input=text)])

    def branch(self, step: Step, prefix: str) -> _Outcome:
        try:
            value = branch_key(step.condition.value(self.view()))
        except MissingVariable as missing:
            return _Outcome("failed", error=f"step {step.id!r} condition: {missing}")
        names = dict(step.branches)
        chosen = names.get(value)
        if chosen is None:
            folded = {name.casefold(): steps for name, steps in step.branches}
            chosen = folded.get(value.casefold(), names.get(DEFAULT_BRANCH))
        if chosen is None:
            listed = ", ".join(names)
            return _Outcome(
                "failed",
                error=f"step {step.id!r} condition: {value!r} matches no branch ({listed})",
            )
        return self.sequence(chosen, prefix)

    def parallel(self, step: Step, prefix: str) -> _Outcome:
        outcomes = [(child, self.step(child, prefix)) for child in step.children]
        done = [(child, out) for child, out in outcomes if out.state == "done"]
        failed = [out for _, out in outcomes if out.state == "failed"]
        waiting = [key for _, out in outcomes for key in out.waiting]
        needed = {"all": len(outcomes), "first": 1}.get(step.join, step.quorum)
        if len(failed) > len(outcomes) - needed:
            return _Outcome("failed", error=failed[0].error, waiting=waiting)
        if len(done) < needed:
            start = [start for _, out in outcomes for start in out.start]
            return _Outcome("pending", start=start, waiting=waiting)
        # The earliest finishers count; later ones never change a decided join.
        order = {id(child): index for index, child in enumerate(step.children)}
        counted = sorted(done, key=lambda pair: (pair[1].output.seq, order[id(pair[0])]))
        counted = sorted(counted[:needed], key=lambda pair: order[id(pair[0])])
        self.cancel.extend(waiting)
        for child, _ in done:
            if all(child is not kept for kept, _ in counted):
                self.scope.pop(child.id, None)
        if step.join == "first":
            return _Outcome("done", output=counted[0][1].output)
        return _Outcome("done", output=_joined(counted))

    def loop(self, step: Step, prefix: str) -> _Outcome:
        outcome = _Outcome("done")
        for iteration in range(step.max_iterations):
            outcome = self.sequence(step.children, f"{prefix}{step.id}[{iteration}]/")
            if outcome.state != "done":
                return outcome
            if step.until is not None:
                try:
                    if step.until.holds(self.view()):
                        break
                except MissingVariable as missing:
                    return _Outcome("failed", error=f"step {step.id!r} until: {missing}")
        return outcome


def _joined(counted: list[tuple[Step, _Outcome]]) -> StepOutput:
    texts = [out.output.text for _, out in counted if out.output.text]
    data = {child.id: {"text": out.output.text, **out.output.data} for child, out in counted}
    seq = max(out.output.seq for _, out in counted)
    return StepOutput(text="\n\n".join(texts), data=data, seq=seq)
