"""Shared fixtures. Factories for data live in tests/factories.py; live agents in tests/agents.py.

Markers by kind, set here at collection so ``make test-fast`` can leave the slow kinds out
(``-m "not (live or browser or chaos or fuzz or production)"``) without a mark on each test:

- ``live``: the test starts relay processes or other servers in subprocesses: it uses a fixture
  of LIVE_FIXTURES (a relay from the run's migrated template, the a2a-sdk 0.3 or @a2a-js/sdk
  subprocesses, the production services, the chaos cluster), its module imports one of
  ``tests.live``'s PROCESS_STARTERS (found, so a new module cannot be missed), or it lives in
  a module of LIVE_MODULES, whose own fixtures or bodies start processes another way.
- ``fuzz``: the module is in FUZZ_MODULES (Hypothesis and Schemathesis). Their budgets come from
  the Hypothesis profile named by RELAY_FUZZ_PROFILE: ``dev`` (the default, a few examples),
  ``ci`` (what ``make test`` runs) or ``deep`` (a long hunt, by hand).

Under pytest-xdist (``--dist loadfile``) each module runs on one worker, so a live module's
module-scoped relay starts once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

LIVE_FIXTURES = frozenset(
    {"relay_template", "a2a_sdk_03", "a2a_js_sdk", "services", "chaos_cluster"}
)
LIVE_MODULES = frozenset(
    {
        "tests/interop/test_js_harness.py",
        "tests/routing/test_call_snippets_live.py",
        "tests/routing/test_run_relay_console.py",
        "tests/routing/test_run_relay_grpc.py",
        "tests/routing/test_run_relay_health.py",
        "tests/routing/test_team_agent_parity.py",
        "tests/routing/test_team_live.py",
        "tests/routing/test_team_stream.py",
        "tests/tasks_app/test_event_notify.py",
        "tests/tasks_app/test_gateway_redis.py",
        "tests/tasks_app/test_grpc_production.py",
        "tests/test_api_try_it_out.py",
        "tests/test_printed_commands.py",
        "tests/test_profiles.py",
        "tests/test_redis_profile.py",
        "tests/test_relay_peers.py",
    }
)
PROCESS_STARTERS = (
    "live_relay",
    "manage",
    "start_daphne",
    "start_grpc",
    "python_process",
    "celery",
    "gated_production_relay",
    "production_services",
)
"""The functions of ``tests.live`` that start processes: a module that imports one is live."""
FUZZ_MODULES = frozenset(
    {"tests/tasks_app/test_gateway_fuzz.py", "tests/registry/test_api_fuzz.py"}
)

# Examples per fuzzing test. ``ci`` keeps the fuzzing within the full suite's time budget
# (before the profiles: 150 per gateway test, 25 per registry operation); ``dev`` is a smoke
# run for the edit loop; ``deep`` the old gateway budget everywhere. No deadline: a slow
# example under load is no bug.
_FUZZ_DEFAULTS = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
}
hypothesis_settings.register_profile("deep", max_examples=150, **_FUZZ_DEFAULTS)
hypothesis_settings.register_profile("ci", max_examples=30, **_FUZZ_DEFAULTS)
hypothesis_settings.register_profile("dev", max_examples=10, **_FUZZ_DEFAULTS)
hypothesis_settings.load_profile(os.environ.get("RELAY_FUZZ_PROFILE", "dev"))


CHAOS_DIRECTORY = "tests/chaos/"
"""Where every test marked ``alone`` lives: ``make test`` runs them after the rest of the suite,
collecting only this directory (collecting the whole suite to select one test takes half a
minute)."""

SLOW_FIRST = ("chaos", "live", "fuzz", "browser", "production")
"""The kinds that run first, in this order, so that a slow module of few tests is not taken
last, keeping one worker busy while the other waits. The chaos modules come first: each holds
a worker for about two minutes, mostly waiting on outages and timeouts, while the other
workers' CPU work goes on. pytest-xdist (``--dist loadfile``) hands out its work units (a
module) in the order of the collected items only when told ``--no-loadscope-reorder``
(``make test`` does): by default it sorts them by their number of tests, which put the
one-test live modules (a ``run_relay`` start each) at the end."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.relative_to(config.rootpath).as_posix()
        if module in FUZZ_MODULES:
            item.add_marker(pytest.mark.fuzz)
        chaos = item.get_closest_marker("chaos") is not None
        if item.get_closest_marker("alone") and not module.startswith(CHAOS_DIRECTORY):
            raise pytest.UsageError(
                f"{item.nodeid} is marked alone outside {CHAOS_DIRECTORY}: make test runs the "
                f"tests marked alone from there, and would run this one nowhere"
            )
        if (
            chaos
            or module in LIVE_MODULES
            or LIVE_FIXTURES.intersection(item.fixturenames)
            or _starts_processes(getattr(item, "module", None))
        ):
            item.add_marker(pytest.mark.live)
    _order_modules(items)


def _starts_processes(module) -> bool:
    """Whether ``module`` imported one of ``tests.live``'s PROCESS_STARTERS."""
    from tests import live

    return any(getattr(module, name, None) is getattr(live, name) for name in PROCESS_STARTERS)


def _order_modules(items) -> None:
    """Sorts ``items`` module by module (each stays whole and in its own order): by the first
    of SLOW_FIRST's kinds any of its tests is of (modules of none after them all), then the
    modules of more tests first, as pytest-xdist's own order does."""
    modules: dict = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)

    def rank(module_items) -> tuple[int, int]:
        kind = min(map(_slowness_rank, module_items))
        return kind, -len(module_items)

    items[:] = [item for group in sorted(modules.values(), key=rank) for item in group]


def _slowness_rank(item) -> int:
    """The place of the first of SLOW_FIRST's kinds ``item`` is of, else after them all."""
    return next(
        (rank for rank, kind in enumerate(SLOW_FIRST) if item.get_closest_marker(kind)),
        len(SLOW_FIRST),
    )


def pytest_sessionstart(session):
    """Puts the run's migrated relay databases (``tests.live.shared_template`` and
    ``postgres_template``) where every pytest-xdist worker of the run finds them: the run's
    base temporary directory (a worker's own is one level down)."""
    from tests import live

    base = session.config._tmp_path_factory.getbasetemp()
    live.TEMPLATE_HOME = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def pytest_sessionfinish(session):
    """The run's PostgreSQL template is dropped once, by the process that started the run,
    after every worker has finished (when PostgreSQL is gone by then, so is the template)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        import psycopg

        from tests import live

        with contextlib.suppress(psycopg.OperationalError):
            live.drop_postgres_template(session.config._tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def relay_template():
    """The run's migrated relay database and its keys; ``live_relay`` copies it."""
    from tests.live import shared_template

    return shared_template()


@pytest.fixture(scope="session", autouse=True)
def database_thread_closed(django_db_setup, django_db_blocker):
    """At the end of the run, closes the connections that asgiref's one thread for
    thread-sensitive work opened (every ``database_sync_to_async`` of the async tests runs
    there), so the test database can be dropped: PostgreSQL refuses while a session still
    uses it."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    with django_db_blocker.unblock():
        asyncio.run(sync_to_async(connections.close_all)())


@pytest.fixture(scope="session", autouse=True)
def fast_password_hasher():
    """Passwords made in tests are hashed with MD5 (Django's advice for tests): the default
    PBKDF2 takes a quarter of a second of CPU for every admin a test makes or logs in. The
    default hashers stay listed after it, so a password hashed by a relay process (PBKDF2)
    still checks."""
    from django.conf import global_settings
    from django.test.utils import override_settings

    hashers = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
    with override_settings(PASSWORD_HASHERS=hashers):
        yield


@pytest.fixture(scope="session", autouse=True)
def remembered_vectors():
    """The embedding model encodes each text once per test process. The model is
    deterministic, and the tests register the same cards again and again (each test's rows
    being rolled back or flushed): every registration would otherwise run the model on every
    skill of the card again, and the discovery evaluation sets take seconds each."""
    import numpy as np

    from registry.embeddings import Embedder

    vectors: dict[str, np.ndarray] = {}
    encode = Embedder.encode

    def remembering(self: Embedder, texts: list[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in vectors]
        if missing:
            vectors.update(zip(missing, encode(self, missing), strict=True))
        if not texts:
            return encode(self, texts)
        return np.vstack([vectors[text] for text in texts])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Embedder, "encode", remembering)
        yield


@pytest.fixture(autouse=True)
def no_cached_targets():
    """Each test starts with no agent or team target cached: the rows of earlier tests were rolled
    back or flushed, which sends none of the signals that would drop them."""
    from routing import team_loading
    from tasks_app import gateway
    from tasks_app.usage import quotas, records

    gateway.forget_agent_targets()
    team_loading.forget_team_targets()
    records.forget_prices()
    quotas.forget_quotas()


@pytest.fixture(autouse=True)
def no_remembered_lease():
    """Each test's process registers its lease anew: the row of an earlier test's process was
    rolled back or flushed, which this process's memory of its lease does not know."""
    from tasks_app.gateway import ownership

    ownership.forget_lease()


@pytest.fixture
def services():
    """The production profile's services: a throwaway PostgreSQL database and a channel prefix
    on the test Redis (as relay environment variables), or a skip that says which is
    missing."""
    from tests.live import ServiceMissingError, production_services

    try:
        with production_services() as env:
            yield env
    except ServiceMissingError as missing:
        pytest.skip(str(missing))


@pytest.fixture
def allow_private_urls(settings):
    """Lets the relay reach agents served on 127.0.0.1 by the test."""
    settings.RELAY_ALLOW_PRIVATE_URLS = True
    return settings


@pytest.fixture
def api_key(db):
    """A fresh API key: (ApiKey row, the secret to send)."""
    from registry.services import api_key_create

    return api_key_create(name="test caller")


@pytest.fixture
def api(api_key):
    """An API client that sends the test key as a bearer token."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return client


@pytest.fixture
async def asgi_relay(api_key):
    """The relay's ASGI application in this process (the whole stack: router, consumer,
    gateway), called over httpx with the test key."""
    import httpx

    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}"},
        timeout=30,
    ) as client:
        yield client


@pytest.fixture
def anonymous():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture(scope="session")
def a2a_sdk_03():
    """a2a-sdk 0.3.26 in its own virtualenv (``tests/sdk03.py``): its real client and agent,
    as subprocesses. Skips, saying why, when uv cannot install it."""
    from tests.sdk03 import Sdk03Unavailable, build

    try:
        return build()
    except Sdk03Unavailable as error:
        pytest.skip(f"a2a-sdk 0.3.26 could not be installed in its own virtualenv: {error}")


@pytest.fixture(scope="session")
def a2a_js_sdk():
    """Skips the test, saying why, when @a2a-js/sdk cannot run here (node, or the npm modules
    of tests/js that ``scripts/ensure-js`` installs, are missing). Drive it with
    ``tests.jsinterop``."""
    from tests.jsinterop import js_missing

    if (reason := js_missing()) is not None:
        pytest.skip(f"@a2a-js/sdk is not available: {reason}")
