"""Migration 0016 moves each usage record onto its task: what reads records reads the same."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("tasks_app", "0015_task_indexes_written_less")]
AFTER = [("tasks_app", "0016_usage_on_the_task")]


@pytest.mark.django_db(transaction=True)
def test_a_record_kept_before_the_move_reads_the_same_after_it():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    ended = timezone.now()
    task = old.get_model("tasks_app", "Task").objects.create(
        id="t-moved",
        context_id="c",
        target_kind="agent",
        target_id="echo",
        state="failed",
        client_version="1.0",
        completed_at=ended,
    )
    old.get_model("tasks_app", "Task").objects.create(
        id="t-open", context_id="c", target_kind="agent", target_id="echo", client_version="1.0"
    )
    old.get_model("tasks_app", "UsageRecord").objects.create(
        task=task,
        at=ended,
        target_kind="agent",
        target_id="echo",
        team_id="pair",
        workflow_id="",
        parent_task_id="",
        skill="echo",
        state="failed",
        error="boom",
        latency_ms=42,
        bytes_in=3,
        bytes_out=5,
        input_tokens=7,
        output_tokens=11,
        model="m-1",
        cost=Decimal("0.25"),
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    records = new.get_model("tasks_app", "UsageRecord").objects.all()

    [record] = records  # the open task kept none
    assert record.task_id == "t-moved" and record.at == ended
    assert (record.team_id, record.skill, record.state, record.error) == (
        "pair",
        "echo",
        "failed",
        "boom",
    )
    assert (record.latency_ms, record.bytes_in, record.bytes_out) == (42, 3, 5)
    assert (record.input_tokens, record.output_tokens, record.model) == (7, 11, "m-1")
    assert record.cost == Decimal("0.25") and record.parent_task_id == ""
