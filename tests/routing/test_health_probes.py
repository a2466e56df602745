"""The health probes against real servers on 127.0.0.1: an A2A agent that answers, one that
refuses connections, one that hangs, one that answers garbage, one that answers 500, one whose
card changes, and the health state, results and events the sweep stores from them."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from django.core.management import call_command
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from registry.models import Agent, CardSnapshot
from routing import health_services, probes
from routing.models import HealthEvent, ProbeResult
from tests.agents import CardServer, sample_card, v0_3_only_agent, v1_only_agent
from tests.factories import card, make_agent
from tests.servers import closed_port_url, running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

CARD_PATH = "/.well-known/agent-card.json"


def site(*, card_answer, rpc_answer):
    """An app factory: the card path and the JSON-RPC endpoint (``/rpc``) answer as given; the
    card it serves (when ``card_answer`` is None) names ``/rpc`` as its 1.0 interface."""

    def make(base_url: str) -> Starlette:
        document = card(
            name="Site Agent",
            supportedInterfaces=[
                {"url": base_url + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
        )

        async def card_route(request: Request) -> Response:
            if card_answer is None:
                return JSONResponse(document)
            return await card_answer(request)

        return Starlette(
            routes=[
                Route(CARD_PATH, card_route, methods=["GET"]),
                Route("/rpc", rpc_answer, methods=["POST"]),
            ]
        )

    return make


async def hang(request: Request) -> Response:
    await asyncio.sleep(30)
    return Response("late")


async def server_error(request: Request) -> Response:
    return Response("upstream exploded", status_code=500, media_type="text/plain")


async def garbage(request: Request) -> Response:
    return Response("<html><body>hello</body></html>", media_type="text/html")


async def a_task(request: Request) -> Response:
    call = json.loads(await request.body())
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": call["id"],
            "result": {
                "id": call["params"]["id"],
                "contextId": "c",
                "status": {"state": "TASK_STATE_WORKING"},
            },
        }
    )


def register_at(base_url: str, *, agent_id: str, **fields) -> Agent:
    """An agent whose card lives at ``base_url`` and whose interface is ``base_url/rpc``
    (registered from a copy of the card, so the server may misbehave from the start)."""
    agent = make_agent(
        url=base_url,
        agent_id=agent_id,
        supportedInterfaces=[
            {"url": base_url + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
    )
    if fields:
        Agent.objects.filter(pk=agent.pk).update(**fields)
    agent.refresh_from_db()
    return agent


def register_real(base_url: str, agent_id: str) -> Agent:
    from registry.services import agent_register

    return agent_register(url=base_url, agent_id=agent_id)


def results_of(agent_id: str) -> dict[str, ProbeResult]:
    return {r.level: r for r in ProbeResult.objects.filter(agent_id=agent_id)}


def check(agent_id: str) -> health_services.AgentCheck:
    [found] = health_services.sweep_now(agent_ids=[agent_id])
    return found


# --- each level, each category --------------------------------------------------------------


@pytest.mark.parametrize("make_app", [v1_only_agent, v0_3_only_agent])
def test_an_answering_agent_passes_card_and_transport_in_its_own_version(make_app):
    with running(make_app) as url:
        agent = register_real(url, "answering")
        found = check(agent.pk)
    assert [(r.level, r.ok, r.category) for r in found.results] == [
        ("card", True, ""),
        ("transport", True, ""),
    ]
    assert found.state_after == "healthy"
    agent.refresh_from_db()
    assert agent.health == "healthy"
    assert agent.health_checked_at is not None and agent.health_latency_ms > 0
    assert agent.next_probe_at > agent.health_checked_at
    stored = results_of(agent.pk)
    assert set(stored) == {"card", "transport"} and all(r.ok for r in stored.values())


def test_an_agent_over_http_json_passes_the_transport_probe():
    with running(v1_only_agent) as url:
        agent = register_real(url, "rest-only")
        rest = [i for i in agent.interfaces if i["protocolBinding"] == "HTTP+JSON"]
        Agent.objects.filter(pk=agent.pk).update(interfaces=rest)
        found = check(agent.pk)
    assert [r.ok for r in found.results] == [True, True], found.results


def test_a_refusing_agent_fails_both_levels_as_refused():
    url = closed_port_url()
    agent = register_at(url, agent_id="refusing")
    found = check(agent.pk)
    assert {(r.level, r.ok, r.category) for r in found.results} == {
        ("card", False, "refused"),
        ("transport", False, "refused"),
    }
    assert found.state_after == "degraded"
    assert "refused the connection" in Agent.objects.get(pk=agent.pk).health_detail


def test_a_hanging_agent_times_out_within_its_probe_timeout():
    with running(site(card_answer=hang, rpc_answer=hang)) as url:
        agent = register_at(url, agent_id="hanging", probe_timeout_seconds=0.5)
        started = time.monotonic()
        found = check(agent.pk)
        elapsed = time.monotonic() - started
    assert {(r.level, r.ok, r.category) for r in found.results} == {
        ("card", False, "timeout"),
        ("transport", False, "timeout"),
    }
    assert elapsed < 3
    assert all(400 <= r.latency_ms < 2000 for r in found.results)


def test_an_agent_answering_garbage_fails_as_invalid_card_and_protocol_error():
    with running(site(card_answer=garbage, rpc_answer=garbage)) as url:
        agent = register_at(url, agent_id="garbage")
        found = check(agent.pk)
    by_level = {r.level: r for r in found.results}
    assert (by_level["card"].ok, by_level["card"].category) == (False, "invalid_card")
    assert "did not return JSON" in by_level["card"].detail
    assert (by_level["transport"].ok, by_level["transport"].category) == (False, "protocol")


def test_an_agent_answering_500_fails_as_http_status():
    with running(site(card_answer=server_error, rpc_answer=server_error)) as url:
        agent = register_at(url, agent_id="erroring")
        found = check(agent.pk)
    assert {(r.level, r.category) for r in found.results} == {
        ("card", "http_status"),
        ("transport", "http_status"),
    }
    assert "HTTP 500" in results_of(agent.pk)["transport"].detail


def test_a_card_that_is_not_a_card_is_invalid():
    async def not_a_card(request):
        return JSONResponse({"name": "no interfaces, no skills"})

    with running(site(card_answer=not_a_card, rpc_answer=server_error)) as url:
        agent = register_at(url, agent_id="bad-card")
        found = check(agent.pk)
    assert found.results[0].category == "invalid_card"


def test_an_agent_answering_getTask_with_a_task_is_a_protocol_error():
    with running(site(card_answer=None, rpc_answer=a_task)) as url:
        agent = register_at(url, agent_id="lenient")
        found = check(agent.pk)
    transport = next(r for r in found.results if r.level == "transport")
    assert (transport.ok, transport.category) == (False, "protocol")
    assert "not TaskNotFound" in transport.detail
    # The card answers, the transport does not: it can take no work.
    assert found.state_after == "degraded"


def test_a_tls_failure_is_reported_as_tls():
    with running(v1_only_agent) as url:
        agent = register_at(url.replace("http://", "https://"), agent_id="tls")
        found = check(agent.pk)
    assert {r.category for r in found.results} == {"tls"}


def test_a_host_that_does_not_resolve_is_reported_as_dns():
    def no_such_host(request):
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    target = probes.ProbeTarget(
        agent_id="nowhere",
        card_url="http://nowhere.invalid" + CARD_PATH,
        interfaces=(
            {
                "url": "http://nowhere.invalid/rpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            },
        ),
    )

    async def run():
        async with httpx.AsyncClient(transport=httpx.MockTransport(no_such_host)) as client:
            return await probes.probe_agent(target, client=client)

    found = asyncio.run(run())
    assert {r.category for r in found.results} == {"dns"}


def test_a_private_address_is_refused_as_unsafe_when_private_urls_are_off(settings):
    with running(v1_only_agent) as url:
        agent = register_real(url, "private")
        settings.RELAY_ALLOW_PRIVATE_URLS = False
        found = check(agent.pk)
    assert {r.category for r in found.results} == {"unsafe_url"}


# --- the card level keeps the card history --------------------------------------------------


def test_a_changed_card_becomes_a_new_snapshot():
    server = CardServer()
    with running(server) as url:
        agent = register_real(url, "changing")
        assert check(agent.pk).card_changed is False
        server.set_card(lambda base: sample_card(base, description="Now with more echo."))
        found = check(agent.pk)
    assert found.card_changed is True
    assert CardSnapshot.objects.filter(agent=agent).count() == 2
    agent.refresh_from_db()
    assert agent.current_snapshot.raw["description"] == "Now with more echo."


# --- readiness and scale to zero ----------------------------------------------------------


def test_the_readiness_probe_is_off_by_default_and_sends_a_real_message_when_on():
    with running(v1_only_agent) as url:
        agent = register_real(url, "ready")
        assert [r.level for r in check(agent.pk).results] == ["card", "transport"]
        Agent.objects.filter(pk=agent.pk).update(
            readiness_probe=True, readiness_message="are you there?"
        )
        found = check(agent.pk)
    assert [(r.level, r.ok) for r in found.results] == [
        ("card", True),
        ("transport", True),
        ("readiness", True),
    ]


def test_a_failing_readiness_probe_degrades_an_agent_that_answers_otherwise():
    async def refuse_messages(request: Request) -> Response:
        call = json.loads(await request.body())
        if call["method"] == "GetTask":
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": call["id"],
                    "error": {"code": -32001, "message": "no such task"},
                }
            )
        return JSONResponse(
            {
                "jsonrpc": "2.0",
                "id": call["id"],
                "error": {"code": -32603, "message": "model not loaded"},
            }
        )

    with running(site(card_answer=None, rpc_answer=refuse_messages)) as url:
        agent = register_at(url, agent_id="not-ready", readiness_probe=True)
        found = check(agent.pk)
    assert [(r.level, r.ok) for r in found.results] == [
        ("card", True),
        ("transport", True),
        ("readiness", False),
    ]
    assert "model not loaded" in found.results[2].detail
    assert found.state_after == "degraded"


def test_scale_to_zero_agents_are_probed_on_the_card_only_or_not_at_all():
    calls = []

    async def counting(request: Request) -> Response:
        calls.append(request.url.path)
        return await garbage(request)

    with running(site(card_answer=None, rpc_answer=counting)) as url:
        agent = register_at(url, agent_id="sleepy", scale_to_zero=True, readiness_probe=True)
        found = check(agent.pk)
        assert [(r.level, r.ok) for r in found.results] == [("card", True)]
        Agent.objects.filter(pk=agent.pk).update(scale_to_zero_probes="none")
        assert health_services.sweep_now(agent_ids=[agent.pk]) == []
    assert calls == []


# --- thresholds, compare-and-set, events -------------------------------------------------------


def test_a_stopped_agent_turns_unhealthy_at_the_threshold_and_comes_back(settings):
    settings.RELAY_HEALTH_UNHEALTHY_AFTER = 2
    settings.RELAY_HEALTH_HEALTHY_AFTER = 2
    server = running(v1_only_agent)
    url = server.__enter__()
    try:
        agent = register_real(url, "flaky")
        assert check(agent.pk).state_after == "healthy"
    finally:
        server.__exit__(None, None, None)
    assert check(agent.pk).state_after == "degraded"
    assert check(agent.pk).state_after == "unhealthy"
    assert check(agent.pk).state_after == "unhealthy"
    events = list(
        HealthEvent.objects.filter(agent=agent)
        .order_by("at", "id")
        .values_list("from_state", "to_state")
    )
    assert events == [("unknown", "healthy"), ("healthy", "degraded"), ("degraded", "unhealthy")]
    assert "refused" in HealthEvent.objects.filter(agent=agent).first().reason
    assert ProbeResult.objects.filter(agent=agent, ok=False).count() == 6


def test_a_recovered_agent_needs_the_healthy_threshold_of_good_rounds(settings):
    settings.RELAY_HEALTH_HEALTHY_AFTER = 2
    with running(v1_only_agent) as url:
        agent = register_real(url, "recovering")
        Agent.objects.filter(pk=agent.pk).update(health="unhealthy", health_failures=4)
        assert check(agent.pk).state_after == "degraded"
        assert check(agent.pk).state_after == "healthy"
    assert list(
        HealthEvent.objects.filter(agent=agent)
        .order_by("at", "id")
        .values_list("to_state", flat=True)
    ) == ["degraded", "healthy"]


def test_a_state_moved_by_another_writer_is_re_read_not_overwritten():
    with running(v1_only_agent) as url:
        agent = register_real(url, "contended")
        targets, counts = health_services.probes_claim(now=agent.created_at, agent_ids=[agent.pk])
        # Another sweep moved it meanwhile (three failures: unhealthy).
        Agent.objects.filter(pk=agent.pk).update(health="unhealthy", health_failures=3)
        round_ = asyncio.run(_probe(targets[0]))
    [found] = health_services.health_record_rounds(rounds=[round_], counts=counts)
    assert (found.state_before, found.state_after) == ("unhealthy", "degraded")
    assert list(HealthEvent.objects.filter(agent=agent).values_list("from_state", "to_state")) == [
        ("unhealthy", "degraded")
    ]


async def _probe(target):
    async with httpx.AsyncClient() as client:
        return await probes.probe_agent(target, client=client)


def test_an_agent_deleted_during_the_sweep_stores_nothing():
    with running(v1_only_agent) as url:
        agent = register_real(url, "vanishing")
        targets, counts = health_services.probes_claim(now=agent.created_at, agent_ids=[agent.pk])
        round_ = asyncio.run(_probe(targets[0]))
    Agent.objects.filter(pk=agent.pk).delete()
    assert health_services.health_record_rounds(rounds=[round_], counts=counts) == []
    assert ProbeResult.objects.count() == 0


# --- the sweep -----------------------------------------------------------------------------


def test_the_sweep_probes_only_agents_that_are_due(settings):
    settings.RELAY_HEALTH_INTERVAL_SECONDS = 3600
    with running(v1_only_agent) as url:
        agent = register_real(url, "due")
        assert [c.agent_id for c in health_services.sweep_now()] == ["due"]
        assert health_services.sweep_now() == []
        Agent.objects.filter(pk=agent.pk).update(next_probe_at=None)
        assert [c.agent_id for c in health_services.sweep_now()] == ["due"]


def test_disabled_agents_are_not_probed():
    with running(v1_only_agent) as url:
        agent = register_real(url, "off")
        Agent.objects.filter(pk=agent.pk).update(status="disabled")
        assert health_services.sweep_now() == []


def test_hanging_agents_do_not_delay_the_others(settings):
    settings.RELAY_HEALTH_TIMEOUT_SECONDS = 1.0
    with running(site(card_answer=hang, rpc_answer=hang)) as slow, running(v1_only_agent) as fast:
        for number in range(4):
            register_at(f"{slow}/a{number}", agent_id=f"slow-{number}")
        Agent.objects.filter(pk__startswith="slow-").update(
            card_url=slow + CARD_PATH,
            interfaces=[
                {"url": slow + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
        )
        register_real(fast, "fast")
        started = time.monotonic()
        checks = asyncio.run(health_services.sweep(concurrency=5))
        elapsed = time.monotonic() - started
    by_id = {c.agent_id: c for c in checks}
    assert len(by_id) == 5
    # Four hanging agents probed one after another would take four timeouts.
    assert elapsed < 2.5
    assert all(r.ok and r.latency_ms < 1000 for r in by_id["fast"].results)
    assert all(r.category == "timeout" for n in range(4) for r in by_id[f"slow-{n}"].results)


def test_old_probe_results_are_pruned_after_the_retention(settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.RELAY_HEALTH_RETENTION_DAYS = 7
    agent = make_agent(agent_id="kept")
    now = timezone.now()
    for days in (1, 6, 8, 30):
        ProbeResult.objects.create(
            agent=agent, level="card", ok=True, checked_at=now - timedelta(days=days)
        )
    assert health_services.probe_results_prune(now=now) == 2
    assert ProbeResult.objects.count() == 2


# --- check_agents --------------------------------------------------------------------------


def test_check_agents_prints_a_table_of_every_level(capsys):
    with running(v1_only_agent) as url:
        register_real(url, "listed")
        register_at(closed_port_url(), agent_id="down")
        call_command("check_agents")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == [
        "AGENT",
        "LEVEL",
        "OUTCOME",
        "CATEGORY",
        "LATENCY",
        "STATE",
        "DETAIL",
    ]
    assert any(line.split()[:4] == ["down", "card", "failed", "refused"] for line in lines)
    assert any(
        line.split()[:3] == ["listed", "card", "ok"] and "unknown -> healthy" in line
        for line in lines
    )
    assert "2 agent(s) probed, 0 unhealthy." in out


def test_check_agents_for_one_agent_and_for_unknown_ones(capsys):
    from django.core.management.base import CommandError

    with running(v1_only_agent) as url:
        register_real(url, "one")
        register_at(closed_port_url(), agent_id="other")
        call_command("check_agents", "--agent", "one")
    out = capsys.readouterr().out
    assert "one" in out and "other" not in out
    with pytest.raises(CommandError, match="no agent with id 'ghost'"):
        call_command("check_agents", "--agent", "ghost")
    Agent.objects.filter(pk="other").update(status="disabled")
    with pytest.raises(CommandError, match="disabled"):
        call_command("check_agents", "--agent", "other")
