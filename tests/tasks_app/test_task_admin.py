"""The admin's task page reads as a page: state, target, a link to the conversation page, the
answer, artifacts as text, JSON and file links, a timeline of events, the stored JSON folded
at the bottom. Also the admin's branding, date format, escaped help text and plurals."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tasks_app import services
from tasks_app.task_display import shown_parts, timeline_entry
from tests.factories import make_agent, make_task

pytestmark = pytest.mark.django_db

HOSTILE = '<img src=x onerror="alert(1)">'


def artifact_event(task, artifact_id: str, parts: list[dict], name: str = "") -> dict:
    artifact = {"artifactId": artifact_id, "parts": parts}
    if name:
        artifact["name"] = name
    return {
        "artifactUpdate": {
            "taskId": task.pk,
            "contextId": task.context_id,
            "artifact": artifact,
            "lastChunk": True,
        }
    }


@pytest.fixture
def finished_task():
    agent = make_agent(agent_id="writer", name="Writer")
    task = make_task(agent, state="working")
    services.task_record(
        task=task,
        event=artifact_event(task, "report", [{"text": "The report, in words."}], name="report"),
    )
    services.task_record(
        task=task,
        event=artifact_event(task, "figures", [{"data": {"rain_mm": 12}}], name="figures"),
    )
    services.task_record(
        task=task,
        event=artifact_event(
            task,
            "files",
            [
                {
                    "url": "https://files.example.org/r.pdf",
                    "filename": "r.pdf",
                    "mediaType": "application/pdf",
                },
                {"url": "javascript:alert(1)", "filename": "trap"},
            ],
            name="files",
        ),
    )
    services.task_record(
        task=task, event=services.status_event(task, "completed", "All done: " + HOSTILE)
    )
    task.refresh_from_db()
    return task


def change_page(admin_client, task):
    response = admin_client.get(reverse("admin:tasks_app_task_change", args=[task.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_task_page_shows_state_target_and_a_link_to_the_conversation(admin_client, finished_task):
    page = change_page(admin_client, finished_task)

    assert '<span class="task-state task-state-completed">completed</span>' in page
    assert '<a href="/agents/writer/"><code>writer</code></a>' in page
    assert f'href="/tasks/{finished_task.pk}/"' in page
    assert "Open the conversation page and its diagram" in page


def test_task_page_shows_artifacts_as_text_json_and_safe_links(admin_client, finished_task):
    page = change_page(admin_client, finished_task)

    assert '<pre class="part-text">The report, in words.</pre>' in page
    assert re.search(r'<pre class="json">\{\s+&quot;rain_mm&quot;: 12\s+\}</pre>', page)
    assert (
        '<a href="https://files.example.org/r.pdf" rel="nofollow noopener">'
        "r.pdf · application/pdf</a>"
    ) in page
    assert 'href="javascript:' not in page
    assert "<code>trap</code>" in page


def test_task_page_has_a_timeline_of_events(admin_client, finished_task):
    page = change_page(admin_client, finished_task)

    timeline = page[page.index('<table class="task-timeline">') :]
    timeline = timeline[: timeline.index("</table>")]
    rows = re.findall(r"<tr><td>(\d+)</td>", timeline)
    assert rows == [str(number) for number in range(1, finished_task.last_sequence + 1)]
    assert "report (last chunk): The report, in words." in timeline
    assert "files (last chunk): [link: r.pdf · application/pdf] [link: trap]" in timeline
    assert "All done: &lt;img src=x" in timeline


def test_task_page_escapes_what_agents_wrote(admin_client, finished_task):
    page = change_page(admin_client, finished_task)

    assert HOSTILE not in page
    assert "All done: &lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_task_page_keeps_the_stored_json_folded_at_the_bottom(admin_client, finished_task):
    page = change_page(admin_client, finished_task)

    folded = re.search(
        r'<fieldset class="module aligned collapse"[^>]*>\s*<details><summary>'
        r"\s*<h2[^>]*>Stored JSON</h2>",
        page,
    )
    assert folded, "the stored JSON is not in a folded fieldset"
    assert folded.start() > page.index('<table class="task-timeline">')
    # The old page showed every event's payload as JSON: now only the task's own four blocks.
    assert page.count('<pre class="json">') == 1 + 4


def test_task_page_runs_the_same_queries_with_more_events(admin_client, finished_task):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            change_page(admin_client, finished_task)
        return len(captured)

    queries()  # warms the per-process caches (content types) whatever ran before on this worker
    before = queries()
    for number in range(10):
        services.task_record(
            task=finished_task,
            event=artifact_event(finished_task, f"extra-{number}", [{"text": "more"}]),
        )

    assert queries() == before


def test_unknown_task_in_the_admin_goes_back_to_the_list(admin_client):
    response = admin_client.get(reverse("admin:tasks_app_task_change", args=["no-such-task"]))

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")


def test_task_list_fits_its_columns(admin_client, finished_task):
    response = admin_client.get(reverse("admin:tasks_app_task_changelist"))

    page = response.content.decode()
    assert f'<code title="{finished_task.pk}">{finished_task.pk[:13]}…</code>' in page
    assert "agent writer" in page


# --- the parts and timeline, pure -----------------------------------------------------------


def test_parts_of_0_3_file_kind_and_inline_bytes_are_named():
    parts = shown_parts(
        [
            {"kind": "file", "file": {"uri": "http://x.test/a.png", "name": "a.png"}},
            {"raw": "AAAAAAAA", "filename": "blob.bin"},
            "not a part",
        ]
    )

    assert [(part.kind, part.text, part.url) for part in parts] == [
        ("link", "a.png", "http://x.test/a.png"),
        ("bytes", "blob.bin: about 6 bytes, inline", ""),
    ]


def test_timeline_entry_of_a_status_update_names_the_state_and_message():
    entry = timeline_entry(
        sequence=3,
        at=None,
        kind="status",
        payload={
            "statusUpdate": {
                "status": {
                    "state": "TASK_STATE_INPUT_REQUIRED",
                    "message": {"parts": [{"text": "Your name?"}]},
                }
            }
        },
    )

    assert (entry.state, entry.summary) == ("input-required", "Your name?")


def test_timeline_entry_cuts_long_text():
    entry = timeline_entry(
        sequence=1,
        at=None,
        kind="status",
        payload={
            "statusUpdate": {
                "status": {
                    "state": "TASK_STATE_WORKING",
                    "message": {"parts": [{"text": "x" * 1000}]},
                }
            }
        },
    )

    assert len(entry.summary) == 160 and entry.summary.endswith("…")


def test_a_streamed_artifact_reads_as_one_text():
    from tasks_app.task_display import artifact_parts

    parts = artifact_parts(
        [{"text": "Once "}, {"text": "upon "}, {"data": {"a": 1}}, {"text": "a time."}]
    )

    assert [(part.kind, part.text) for part in parts] == [
        ("text", "Once upon "),
        ("json", '{\n  "a": 1\n}'),
        ("text", "a time."),
    ]


# --- the admin's look -----------------------------------------------------------------------


def test_admin_is_branded_brass_relay(admin_client, client):
    index = admin_client.get(reverse("admin:index")).content.decode()
    login = client.get(reverse("admin:login")).content.decode()

    for page in (index, login):
        assert "Brass Relay" in page
        assert "Django administration" not in page and "Django site admin" not in page


def test_push_deliveries_are_spelt_right(admin_client):
    index = admin_client.get(reverse("admin:index")).content.decode()

    assert "Push deliveries" in index
    assert "deliverys" not in index


def test_credential_help_text_shows_the_bearer_placeholder(admin_client):
    make_agent(agent_id="weather", name="Weather")

    page = admin_client.get(reverse("admin:registry_agent_change", args=["weather"]))

    assert "Authorization: Bearer &lt;value&gt;;" in page.content.decode()


def test_admin_writes_dates_one_way(admin_client, finished_task):
    page = change_page(admin_client, finished_task)
    listing = admin_client.get(reverse("admin:tasks_app_task_changelist")).content.decode()

    created = f"{finished_task.created_at:%Y-%m-%d %H:%M:%S}"
    assert created in page and created in listing
    assert not re.search(r"\b(a\.m\.|p\.m\.)", page + listing)
