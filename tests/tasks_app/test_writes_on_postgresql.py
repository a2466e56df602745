"""The tests of a task's writes, its usage record and the budgets, run again on PostgreSQL.

The in-process suite runs on SQLite, where a task's events are written by the ORM's
compare-and-set. On PostgreSQL they are written by one statement of their own
(``tasks_app.postgres_events``), and the usage record rides in it: these tests run the same
modules in a pytest of their own with ``DATABASE_URL`` naming a throwaway PostgreSQL database
(pytest-django makes its test database beside it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.live import ServiceMissingError, drop_postgres_database, postgres_database

MODULES = (
    "tests/tasks_app/test_task_services.py",
    "tests/tasks_app/test_query_budgets.py",
    "tests/usage",
    "tests/routing/test_team_query_budget.py",
    "tests/routing/test_mcp_budgets.py",
)


@pytest.mark.production
def test_the_write_usage_and_budget_tests_pass_on_postgresql():
    try:
        with postgres_database("relay_writes") as (name, url):
            try:
                ran = _pytest(url)
            finally:
                drop_postgres_database(
                    f"test_{name}"
                )  # pytest-django's own, left when a connection outlives it
    except ServiceMissingError as missing:
        pytest.skip(str(missing))
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    summary = ran.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary


def _pytest(database_url: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
        + list(MODULES),
        env={**env, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=600,
    )
