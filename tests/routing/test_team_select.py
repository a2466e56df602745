"""Teams that select: a caller's message naming no member goes to the member whose skills best
match it (registry.selection), not to the default agent. The router part is pure; the rest
runs against real agents on 127.0.0.1 through the task API."""

from __future__ import annotations

import pytest

from registry import teams
from registry.models import Agent, Team
from registry.services import agent_register
from routing.demo.agents import ECHO, RESEARCHER, WRITER, app_factory
from routing.models import RoutingHop
from routing.router import Deliver, Member, Reply, TeamView, first_hop, next_hop
from tests.servers import running

VIEW = TeamView(
    id="crew",
    members=(
        Member(id="echo", supports_routing=False, healthy=True),
        Member(id="writer", supports_routing=False, healthy=True),
        Member(id="sick", supports_routing=False, healthy=False),
    ),
    default_agent="echo",
)


DESK = TeamView(
    id="desk",
    members=(*VIEW.members, Member(id="researcher", supports_routing=False, healthy=True)),
    default_agent="echo",
)


def caller(text: str, recipient: str | None = None) -> dict:
    message = {"role": "ROLE_USER", "parts": [{"text": text}]}
    if recipient:
        from registry.extensions import CLIENT_ROUTING_URI

        message["metadata"] = {CLIENT_ROUTING_URI: {"recipient": recipient}}
    return message


def test_a_selected_member_gets_a_message_that_names_no_one():
    hop = first_hop(VIEW, caller("a memo"), selected=("writer", "chosen: Draft"))
    assert hop == Deliver(target="writer", sender="user", reason="chosen: Draft")


def test_a_named_member_wins_over_the_selection():
    hop = first_hop(VIEW, caller("a memo", recipient="echo"), selected=("writer", "why"))
    assert hop.target == "echo"


def test_an_unavailable_selection_falls_back_to_the_default_agent():
    assert first_hop(VIEW, caller("a memo"), selected=("sick", "why")).target == "echo"
    assert first_hop(VIEW, caller("a memo"), selected=("stranger", "why")).target == "echo"


def answer(text: str, recipient: str | None = None) -> dict:
    message = caller(text, recipient)
    message["role"] = "ROLE_AGENT"
    return {"message": message}


def test_a_members_answer_naming_no_one_goes_to_the_selected_member():
    hop = next_hop(
        DESK,
        answerer="writer",
        sent_by="user",
        answer=answer("a draft"),
        hops_done=1,
        selected=("researcher", "chosen: Research"),
    )
    assert hop == Deliver(target="researcher", sender="writer", reason="chosen: Research")


def test_a_member_named_in_the_answer_wins_over_the_selection():
    hop = next_hop(
        DESK,
        answerer="writer",
        sent_by="user",
        answer=answer("a draft", recipient="user"),
        hops_done=1,
        selected=("researcher", "why"),
    )
    assert isinstance(hop, Reply)


def test_a_selection_of_the_answerer_or_an_unavailable_member_falls_back_to_the_default():
    for chosen in ("writer", "sick", "stranger"):
        hop = next_hop(
            DESK,
            answerer="writer",
            sent_by="user",
            answer=answer("a draft"),
            hops_done=1,
            selected=(chosen, "why"),
        )
        assert hop.target == "echo", chosen


@pytest.fixture
def crew(allow_private_urls):
    with running(app_factory(ECHO)) as echo_url, running(app_factory(WRITER)) as writer_url:
        agent_register(url=echo_url, agent_id="echo")
        agent_register(url=writer_url, agent_id="writer")
        teams.team_create(
            team_id="crew",
            name="Crew",
            members=["echo", "writer"],
            default_agent="echo",
            no_recipient=Team.NoRecipient.SELECT,
        )
        yield


@pytest.fixture
def relay(asgi_relay):
    """The relay in this process, through its ASGI application."""
    return asgi_relay


async def first_member(relay, text: str) -> RoutingHop:
    response = await relay.post(
        "/a2a/tasks/send",
        json={
            "teamId": "crew",
            "message": {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]},
        },
    )
    assert response.status_code == 200, response.text
    return await RoutingHop.objects.filter(order=1).order_by("-pk").afirst()


@pytest.mark.django_db(transaction=True)
async def test_a_selecting_team_sends_to_the_best_matching_member(crew, relay):
    hop = await first_member(relay, "compose a short written document about rain")
    assert hop.to_id == "writer"
    assert "agent selector" in hop.reason and "Draft" in hop.reason


@pytest.mark.django_db(transaction=True)
async def test_a_selecting_team_skips_an_unhealthy_match(crew, relay):
    await Agent.objects.filter(pk="writer").aupdate(health="unhealthy")
    hop = await first_member(relay, "compose a short written document about rain")
    assert hop.to_id == "echo"


@pytest.mark.django_db(transaction=True)
async def test_a_team_with_a_default_agent_still_sends_there(crew, relay):
    await Team.objects.filter(pk="crew").aupdate(no_recipient=Team.NoRecipient.DEFAULT_AGENT)
    hop = await first_member(relay, "compose a short written document about rain")
    assert hop.to_id == "echo"


@pytest.fixture
def desk(allow_private_urls):
    """A selecting team of three: the default agent echoes; the researcher's notes name no
    one, nor does the writer's draft."""
    with (
        running(app_factory(ECHO)) as echo_url,
        running(app_factory(RESEARCHER)) as researcher_url,
        running(app_factory(WRITER)) as writer_url,
    ):
        agent_register(url=echo_url, agent_id="echo")
        agent_register(url=researcher_url, agent_id="researcher")
        agent_register(url=writer_url, agent_id="writer")
        teams.team_create(
            team_id="desk",
            name="Desk",
            members=["echo", "researcher", "writer"],
            default_agent="echo",
            no_recipient=Team.NoRecipient.SELECT,
        )
        yield


@pytest.mark.django_db(transaction=True)
async def test_a_members_answer_naming_no_one_goes_to_the_member_selected_for_it(desk, relay):
    """The researcher's notes name no recipient: a team that selects sends them to the member
    whose skills fit them (the writer, who turns notes into drafts), never back to a member
    already called; the writer's draft then goes to the one member left, and that member (the
    default agent) answers the caller."""
    response = await relay.post(
        "/a2a/tasks/send",
        json={
            "teamId": "desk",
            "message": {
                "messageId": "m-desk",
                "role": "ROLE_USER",
                "parts": [{"text": "research the facts about ocean tides"}],
            },
        },
    )
    assert response.status_code == 200, response.text
    hops = [hop async for hop in RoutingHop.objects.order_by("order")]
    assert [(hop.from_id, hop.to_id) for hop in hops] == [
        ("user", "researcher"),
        ("researcher", "writer"),
        ("writer", "echo"),
    ]
    assert "agent selector" in hops[1].reason


@pytest.mark.django_db
def test_the_team_api_sets_and_shows_no_recipient(allow_private_urls):
    from rest_framework.test import APIClient

    from registry.services import api_key_create
    from tests.factories import make_agent

    make_agent(agent_id="echo")
    make_agent(agent_id="writer")
    teams.team_create(team_id="crew", name="Crew", members=["echo", "writer"], default_agent="echo")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='a', is_admin=True)[1]}")
    assert client.get("/a2a/teams/crew").json()["noRecipient"] == "default_agent"
    changed = client.patch("/a2a/teams/crew", {"noRecipient": "select"}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["noRecipient"] == "select"
    assert Team.objects.get(pk="crew").no_recipient == "select"
    refused = client.patch("/a2a/teams/crew", {"noRecipient": "guess"}, format="json")
    assert refused.status_code == 400
    assert "noRecipient must be one of default_agent, select" in refused.json()["error"]["message"]
    assert Team.objects.get(pk="crew").no_recipient == "select"
