"""Fixtures of the chaos suite: one cluster (tests.chaos.harness) for the whole run, brought
back to full strength before each test, and its logs' tails added to every failure report."""

from __future__ import annotations

import pytest

from tests.live import ServiceMissingError


@pytest.fixture(scope="session")
def chaos_cluster(tmp_path_factory):
    pytest.importorskip("a2a", reason="the a2a-sdk is not installed")
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    pytest.importorskip("redis", reason="the redis client is not installed")
    from tests.chaos.harness import chaos_cluster as start

    try:
        with start(tmp_path_factory.mktemp("chaos")) as cluster:
            yield cluster
    except ServiceMissingError as error:
        pytest.skip(str(error))


@pytest.fixture
def cluster(chaos_cluster, request):
    """The cluster, with Redis up and both relays answering (a relay a test killed is
    replaced by a new process)."""
    chaos_cluster.ensure_running()
    request.node.chaos_cluster = chaos_cluster
    return chaos_cluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cluster = getattr(item, "chaos_cluster", None)
    if report.failed and cluster is not None and report.when == "call":
        report.sections.append((f"chaos logs (kept in {cluster.var_dir})", cluster.log_tails()))


HEAVY_LAST = "test_64_clients_of_mixed_calls_over_both_processes"
"""The one chaos test that loads both cores (64 clients for CHAOS_LOAD_SECONDS) and asserts
latency percentiles. ``make test`` runs it by itself after the suite (it is marked ``alone``);
run by hand with the two chaos modules side by side (``-n 2``), each with its own cluster, it
comes last in test_chaos.py, so it starts when test_postgres_chaos.py, which is shorter, has
finished on the other worker."""


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.name == HEAVY_LAST)
