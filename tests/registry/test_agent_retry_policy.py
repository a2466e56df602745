"""An agent's retry policy (docs/concepts/retries.md): set through the registry API and the
admin, shown on the agent page with the sends that were retried."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from registry.models import Agent
from tasks_app.models import Task
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def owned(api_key) -> Agent:
    """An agent registered by the test key, which may then change it."""
    agent = make_agent(agent_id="weather")
    Agent.objects.filter(pk=agent.pk).update(created_by=api_key[0])
    return agent


def completed_tasks(agent: Agent, **varying: tuple) -> None:
    """One completed task of ``agent`` for each value of the one field named in ``varying``."""
    ((field, values),) = varying.items()
    now = timezone.now()
    for value in values:
        Task.objects.create(
            agent=agent,
            target_kind="agent",
            target_id=agent.pk,
            context_id="c",
            state="completed",
            completed_at=now,
            **{field: value},
        )


def test_the_policy_is_read_and_changed_through_the_api(api, api_key):
    owned(api_key)
    assert api.get("/a2a/registry/weather").json()["retries"] == {
        "attempts": 3,
        "baseDelayMs": 200,
        "deadlineSeconds": 10,
        "idempotent": False,
    }
    response = api.patch(
        "/a2a/registry/weather",
        {"retries": {"attempts": 5, "idempotent": True}},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["retries"]["attempts"] == 5
    agent = Agent.objects.get(pk="weather")
    assert (agent.retry_attempts, agent.idempotent, agent.retry_deadline_seconds) == (5, True, 10)


@pytest.mark.parametrize(
    "retries",
    [{"attempts": 0}, {"attempts": 11}, {"deadlineSeconds": 0}, {"baseDelayMs": -1}],
)
def test_a_policy_out_of_bounds_is_a_400_and_changes_nothing(api, api_key, retries):
    owned(api_key)
    response = api.patch("/a2a/registry/weather", {"retries": retries}, format="json")
    assert response.status_code == 400, response.content
    assert Agent.objects.get(pk="weather").retry_attempts == 3


def test_the_admin_change_page_has_the_retries_fieldset(admin_client):
    make_agent(agent_id="weather")
    page = admin_client.get(reverse("admin:registry_agent_change", args=["weather"]))
    html = page.content.decode()
    assert "Retries" in html
    for name in ("retry_attempts", "retry_base_delay_ms", "retry_deadline_seconds", "idempotent"):
        assert f'name="{name}"' in html


def test_the_agent_page_shows_the_policy_and_the_sends_retried(client):
    agent = make_agent(agent_id="weather")
    Agent.objects.filter(pk="weather").update(retry_attempts=4, idempotent=True)
    completed_tasks(
        agent, attempts=(None, [{"attempt": 1, "outcome": "failed", "reason": "refused"}])
    )
    page = client.get(reverse("agent-page", args=["weather"])).content.decode()
    assert "<dt>Sends retried</dt><dd>1</dd>" in page
    assert "up to 4 tries in 10 s, from 200 ms apart" in page
    assert "idempotent: also sends that may have reached it" in page


def test_the_agent_page_shows_its_failover_and_the_sends_that_failed_over(client):
    from registry.models import AgentAlternate

    agent = make_agent(agent_id="weather")
    make_agent(agent_id="backup")
    make_agent(agent_id="spare")
    AgentAlternate.objects.create(agent_id="weather", alternate_id="spare", order=2)
    AgentAlternate.objects.create(agent_id="weather", alternate_id="backup", order=1)
    Agent.objects.filter(pk="weather").update(failover_same_skill=True)
    completed_tasks(
        agent,
        selection=(
            None,
            {"agentId": "backup", "failoverFrom": "weather", "passed": []},
            {"agentId": "other", "failoverFrom": "weather", "sameSkill": "forecast", "passed": []},
        ),
    )
    page = client.get(reverse("agent-page", args=["weather"])).content.decode()
    assert "<dt>Sends failed over</dt><dd>2 " in page
    assert "(1 to the same skill)" in page
    assert "alternates, in order: backup, spare; then any healthy agent with the same skill" in page


def test_an_agent_without_failover_says_so_on_its_page(client):
    make_agent(agent_id="weather")
    page = client.get(reverse("agent-page", args=["weather"])).content.decode()
    assert "<dt>Sends failed over</dt><dd>0</dd>" in page
    assert "no alternates; not to other agents with the same skill" in page


def test_alternates_are_set_in_order_in_the_admin(admin_client):
    from registry.models import AgentAlternate

    make_agent(agent_id="weather")
    make_agent(agent_id="backup")
    make_agent(agent_id="spare")
    url = reverse("admin:registry_agent_change", args=["weather"])
    html = admin_client.get(url).content.decode()
    assert "Alternates: agents that serve a send when this one is down" in html
    assert 'name="alternate_links-0-alternate"' in html or "alternate_links-TOTAL_FORMS" in html
    AgentAlternate.objects.create(agent_id="weather", alternate_id="spare", order=2)
    AgentAlternate.objects.create(agent_id="weather", alternate_id="backup", order=1)
    weather = Agent.objects.get(pk="weather")
    assert list(weather.alternate_links.values_list("alternate_id", flat=True)) == [
        "backup",
        "spare",
    ]


def test_an_agent_cannot_be_its_own_alternate():
    from django.db import IntegrityError, transaction

    from registry.models import AgentAlternate

    make_agent(agent_id="weather")
    with pytest.raises(IntegrityError), transaction.atomic():
        AgentAlternate.objects.create(agent_id="weather", alternate_id="weather")


def test_failover_to_an_agent_with_the_same_skill_is_an_opt_in_set_through_the_api(api, api_key):
    owned(api_key)
    assert api.get("/a2a/registry/weather").json()["failover"] == {"sameSkill": False}
    response = api.patch("/a2a/registry/weather", {"failover": {"sameSkill": True}}, format="json")
    assert response.status_code == 200, response.text
    assert response.json()["failover"] == {"sameSkill": True}
    assert Agent.objects.get(pk="weather").failover_same_skill is True
    refused = api.patch("/a2a/registry/weather", {"failover": {"sameSkill": "x"}}, format="json")
    assert refused.status_code == 400
    assert Agent.objects.get(pk="weather").failover_same_skill is True


def test_the_admin_change_page_sets_the_same_skill_failover_next_to_the_alternates(
    admin_client,
):
    make_agent(agent_id="weather")
    page = admin_client.get(reverse("admin:registry_agent_change", args=["weather"]))
    html = page.content.decode()
    assert "Failover" in html and 'name="failover_same_skill"' in html
    assert "agents that serve a send when this one is down" in html
