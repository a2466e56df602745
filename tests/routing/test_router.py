"""The pure team router against every rule of CLIENT_ROUTING.md. No database, no Django."""

import copy

import pytest

from routing.router import (
    AUTH_REQUIRED,
    CLIENT_ROUTING_URI,
    INPUT_REQUIRED,
    MAX_HOPS,
    USER,
    Decision,
    Deliver,
    Fail,
    Member,
    Park,
    Reply,
    TeamView,
    Unavailable,
    decision_from_answer,
    first_hop,
    interrupted_state,
    next_hop,
    parse_recipient,
    peer_cards,
    prepare_message,
    prepare_reply,
)

URI = CLIENT_ROUTING_URI
OTHER_EXTENSION = "https://example.com/extensions/citations/v1"


# Factories -------------------------------------------------------------------------------------


def make_member(agent_id, **overrides):
    values = {
        "name": agent_id.title(),
        "description": f"The {agent_id} agent",
        "capabilities": (agent_id,),
        "supports_routing": True,
        "healthy": True,
        "protocol_version": "1.0",
    }
    values.update(overrides)
    return Member(agent_id, **values)


def make_team(*, max_hops=MAX_HOPS, default="lead", **member_overrides):
    """lead (default), researcher, writer (0.3), legacy (no extension), sick (unhealthy)."""
    members = {
        "lead": {},
        "researcher": {"capabilities": ("search", "summarize")},
        "writer": {"protocol_version": "0.3"},
        "legacy": {"supports_routing": False},
        "sick": {"healthy": False},
    }
    for agent_id, overrides in member_overrides.items():
        members[agent_id] = {**members.get(agent_id, {}), **overrides}
    return TeamView(
        id="team-1",
        members=tuple(make_member(agent_id, **values) for agent_id, values in members.items()),
        default_agent=default,
        max_hops=max_hops,
    )


TEAM = make_team()
LEAD_DOWN = make_team(lead={"healthy": False})


def routing(**fields):
    return {URI: fields}


def says(recipient=None, *, metadata=None, **fields):
    """A Message answer whose routing metadata names ``recipient`` (plus reason/handoffs)."""
    if recipient is not None:
        fields["recipient"] = recipient
    return {
        "messageId": "answer-1",
        "role": "ROLE_AGENT",
        "parts": [{"text": "done"}],
        "metadata": metadata if metadata is not None else (routing(**fields) if fields else {}),
    }


def task(state="TASK_STATE_COMPLETED", *, status_metadata=None, task_metadata=None):
    answer = {
        "id": "upstream-task-1",
        "contextId": "upstream-context-1",
        "status": {"state": state},
        "artifacts": [],
        "history": [],
    }
    if status_metadata is not None:
        answer["status"]["message"] = {
            "messageId": "status-1",
            "role": "ROLE_AGENT",
            "parts": [{"text": "status"}],
            "metadata": status_metadata,
        }
    if task_metadata is not None:
        answer["metadata"] = task_metadata
    return answer


def caller_message(metadata=None, extensions=None):
    message = {
        "messageId": "caller-1",
        "role": "ROLE_USER",
        "parts": [{"text": "write me a report"}],
        "contextId": "team-context",
        "metadata": {} if metadata is None else metadata,
    }
    if extensions is not None:
        message["extensions"] = extensions
    return message


# parse_recipient -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param(
            routing(recipient="researcher"),
            Decision("researcher"),
            id="a plain string names an agent",
        ),
        pytest.param(routing(recipient="user"), Decision(USER), id="a plain user means the caller"),
        pytest.param(
            routing(recipient="sender"), Decision("sender"), id="a plain sender means the sender"
        ),
        pytest.param(
            routing(recipient={"type": "agent", "id": "writer"}),
            Decision("writer"),
            id="the tagged agent form names an agent",
        ),
        pytest.param(
            routing(recipient={"type": "user"}), Decision(USER), id="the tagged user form"
        ),
        pytest.param(
            routing(recipient={"type": "sender"}), Decision("sender"), id="the tagged sender form"
        ),
        pytest.param(
            {"x-recipient": "writer"}, Decision("writer"), id="a legacy x-recipient names an agent"
        ),
        pytest.param(
            {**routing(recipient="researcher"), "x-recipient": "writer"},
            Decision("researcher"),
            id="the extension wins over a legacy x-recipient",
        ),
        pytest.param(
            {**routing(recipient=42), "x-recipient": "writer"},
            Decision("writer"),
            id="a legacy x-recipient is used when the extension's recipient is garbage",
        ),
        pytest.param(
            routing(recipient="researcher", reason="needs web search", handoffs=["writer"]),
            Decision("researcher", "needs web search", ("writer",)),
            id="reason and handoffs are read",
        ),
        pytest.param(
            routing(handoffs=["writer", " writer ", "lead"]),
            Decision(None, "", ("writer", "lead")),
            id="handoffs are stripped and deduplicated and need no recipient",
        ),
        pytest.param(
            routing(recipient="researcher", handoffs=[]),
            Decision("researcher", "", ()),
            id="empty handoffs are kept as an empty list, not as none given",
        ),
        pytest.param(
            routing(recipient="  researcher  "),
            Decision("researcher"),
            id="surrounding whitespace is ignored",
        ),
        pytest.param(
            routing(recipient="User"), Decision(USER), id="reserved words match whatever the case"
        ),
        pytest.param(
            routing(recipient={"type": "SENDER"}),
            Decision("sender"),
            id="tagged reserved words match whatever the case",
        ),
        # Garbage: never raises, reads as no decision.
        pytest.param(None, Decision(), id="no metadata is no decision"),
        pytest.param(["researcher"], Decision(), id="metadata that is a list is no decision"),
        pytest.param({URI: "researcher"}, Decision(), id="an extension value that is a string"),
        pytest.param(routing(recipient=42), Decision(), id="a numeric recipient is no decision"),
        pytest.param(routing(recipient=""), Decision(), id="an empty recipient is no decision"),
        pytest.param(routing(recipient="   "), Decision(), id="a blank recipient is no decision"),
        pytest.param(
            routing(recipient=["researcher"]), Decision(), id="a list recipient is no decision"
        ),
        pytest.param(
            routing(recipient={"type": "robot", "id": "x"}),
            Decision(),
            id="an unknown tag is no decision",
        ),
        pytest.param(
            routing(recipient={"type": "agent"}),
            Decision(),
            id="a tagged agent without id is no decision",
        ),
        pytest.param(
            routing(recipient={"type": "agent", "id": 7}),
            Decision(),
            id="a tagged agent with a numeric id is no decision",
        ),
        pytest.param(
            routing(recipient={"id": "writer"}), Decision(), id="an untagged object is no decision"
        ),
        pytest.param({"x-recipient": 3}, Decision(), id="a numeric legacy x-recipient is ignored"),
        pytest.param(
            routing(recipient="writer", handoffs="researcher"),
            Decision("writer"),
            id="handoffs that are not a list are ignored",
        ),
        pytest.param(
            routing(recipient="writer", handoffs=["researcher", 5]),
            Decision("writer"),
            id="handoffs holding a non-string are ignored",
        ),
        pytest.param(
            routing(recipient="writer", reason={"why": "x"}),
            Decision("writer"),
            id="a reason that is not text is ignored",
        ),
    ],
)
def test_parse_recipient(metadata, expected):
    assert parse_recipient(metadata) == expected


# decision_from_answer --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(
            says("writer", reason="draft it"),
            Decision("writer", "draft it"),
            id="a message answer carries its decision in its metadata",
        ),
        pytest.param(
            task(status_metadata=routing(recipient="writer")),
            Decision("writer"),
            id="a task answer carries it in the status message",
        ),
        pytest.param(
            task(task_metadata=routing(recipient="writer")),
            Decision("writer"),
            id="a task answer without a status message carries it in the task metadata",
        ),
        pytest.param(
            task(status_metadata={"note": 1}, task_metadata=routing(recipient="writer")),
            Decision("writer"),
            id="the task metadata is read when the status message names no one",
        ),
        pytest.param(
            task(
                status_metadata=routing(recipient="writer"),
                task_metadata=routing(recipient="researcher"),
            ),
            Decision("writer"),
            id="the status message wins over the task metadata",
        ),
        pytest.param(
            task(
                status_metadata=routing(recipient="writer"),
                task_metadata=routing(reason="because", handoffs=["lead"]),
            ),
            Decision("writer", "because", ("lead",)),
            id="each field missing from the status message comes from the task metadata",
        ),
        pytest.param(
            task(status_metadata={"x-recipient": "writer"}),
            Decision("writer"),
            id="a legacy x-recipient in a task's status message is read",
        ),
        pytest.param(
            {**task(), "history": [says("writer")]},
            Decision(),
            id="the task history is not read",
        ),
        pytest.param(
            {"message": says("writer")}, Decision("writer"), id="a wrapped message is read"
        ),
        pytest.param(
            {"task": task(status_metadata=routing(recipient="writer"))},
            Decision("writer"),
            id="a wrapped task is read",
        ),
        pytest.param(
            says(metadata=routing(agentCards=[], sender="user")),
            Decision(),
            id="an agent echoing the router's own metadata makes no decision",
        ),
        pytest.param(None, Decision(), id="no answer is no decision"),
        pytest.param("user", Decision(), id="a string answer is no decision"),
        pytest.param([says("writer")], Decision(), id="a list answer is no decision"),
        pytest.param(
            {**says("writer"), "metadata": "x"}, Decision(), id="string metadata is no decision"
        ),
        pytest.param(
            {"id": "t", "status": "TASK_STATE_COMPLETED", "metadata": routing(recipient="writer")},
            Decision("writer"),
            id="a task whose status is garbage is read as a message",
        ),
        pytest.param(
            {"id": "t", "status": {"state": "x", "message": "hi"}},
            Decision(),
            id="a status message that is not an object is no decision",
        ),
    ],
)
def test_decision_from_answer(answer, expected):
    assert decision_from_answer(answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(task(INPUT_REQUIRED), INPUT_REQUIRED, id="input required waits"),
        pytest.param(task(AUTH_REQUIRED), AUTH_REQUIRED, id="auth required waits"),
        pytest.param(task("input-required"), INPUT_REQUIRED, id="the 0.3 input spelling waits"),
        pytest.param(task("auth-required"), AUTH_REQUIRED, id="the 0.3 auth spelling waits"),
        pytest.param({"task": task(INPUT_REQUIRED)}, INPUT_REQUIRED, id="a wrapped task waits"),
        pytest.param(task(), None, id="a completed task does not wait"),
        pytest.param(task("TASK_STATE_FAILED"), None, id="a failed task does not wait"),
        pytest.param(says("user"), None, id="a message does not wait"),
        pytest.param({"status": {"state": 5}}, None, id="a numeric state does not wait"),
        pytest.param(None, None, id="no answer does not wait"),
    ],
)
def test_interrupted_state(answer, expected):
    assert interrupted_state(answer) == expected


# Team ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_hops", "expected"),
    [
        pytest.param(5, 5, id="a limit inside the range is kept"),
        pytest.param(0, 1, id="a limit of zero becomes one"),
        pytest.param(-3, 1, id="a negative limit becomes one"),
        pytest.param(25, 10, id="a limit above ten becomes ten"),
        pytest.param(10, 10, id="ten is allowed"),
    ],
)
def test_team_hop_limit_is_clamped_to_one_to_ten(max_hops, expected):
    assert make_team(max_hops=max_hops).max_hops == expected


def test_team_hop_limit_defaults_to_ten():
    assert TeamView(id="t", members=[make_member("lead")], default_agent="lead").max_hops == 10


def test_team_and_members_are_frozen_and_hashable_even_from_lists():
    team = TeamView(id="t", members=[make_member("lead", capabilities=["a"])], default_agent="lead")
    assert team.members[0].capabilities == ("a",)
    assert hash(team)
    with pytest.raises(AttributeError):
        team.default_agent = "other"


# Rule 1 and rule 5 (resume): first_hop -------------------------------------------------------


def first_case(description, *, message, expected, team=TEAM, parked_on=None):
    return pytest.param(team, message, parked_on, expected, id=description)


@pytest.mark.parametrize(
    ("team", "message", "parked_on", "expected"),
    [
        first_case(
            "no recipient reaches default", message=caller_message(), expected=Deliver("lead", USER)
        ),
        first_case(
            "a caller naming a member reaches that member",
            message=caller_message(routing(recipient="researcher")),
            expected=Deliver("researcher", USER),
        ),
        first_case(
            "a caller naming a member in the tagged form reaches that member",
            message=caller_message(routing(recipient={"type": "agent", "id": "writer"})),
            expected=Deliver("writer", USER),
        ),
        first_case(
            "the caller's reason is kept for the trace",
            message=caller_message(routing(recipient="researcher", reason="search first")),
            expected=Deliver("researcher", USER, reason="search first"),
        ),
        first_case(
            "a caller naming the default agent reaches it without a note",
            message=caller_message(routing(recipient="lead")),
            expected=Deliver("lead", USER),
        ),
        first_case(
            "a caller naming a non-member reaches the default agent with a note",
            message=caller_message(routing(recipient="ghost")),
            expected=Deliver("lead", USER, "recipient 'ghost' is not a member of this team"),
        ),
        first_case(
            "a caller naming an unhealthy member reaches the default agent with a note",
            message=caller_message(routing(recipient="sick")),
            expected=Deliver("lead", USER, "recipient 'sick' is unavailable (unhealthy)"),
        ),
        first_case(
            "a caller naming user reaches the default agent with a note",
            message=caller_message(routing(recipient="user")),
            expected=Deliver("lead", USER, "the caller can only name a team member, not 'user'"),
        ),
        first_case(
            "a caller naming sender reaches the default agent with a note",
            message=caller_message(routing(recipient="sender")),
            expected=Deliver("lead", USER, "the caller can only name a team member, not 'sender'"),
        ),
        first_case(
            "a caller's garbage recipient reaches the default agent",
            message=caller_message(routing(recipient=12)),
            expected=Deliver("lead", USER),
        ),
        first_case(
            "a caller message that is not an object reaches the default agent",
            message="not a message",
            expected=Deliver("lead", USER),
        ),
        first_case(
            "the caller cannot set handoffs",
            message=caller_message(routing(recipient="researcher", handoffs=["writer"])),
            expected=Deliver("researcher", USER),
        ),
        first_case(
            "an unhealthy default agent makes the team answer with an error at once",
            team=LEAD_DOWN,
            message=caller_message(),
            expected=Unavailable("the team's default agent 'lead' is unavailable"),
        ),
        first_case(
            "a caller naming an unhealthy default agent gets the error once",
            team=LEAD_DOWN,
            message=caller_message(routing(recipient="lead")),
            expected=Unavailable("the team's default agent 'lead' is unavailable"),
        ),
        first_case(
            "a caller naming a non-member of a team whose default is down learns both",
            team=LEAD_DOWN,
            message=caller_message(routing(recipient="ghost")),
            expected=Unavailable(
                "the team's default agent 'lead' is unavailable;"
                " recipient 'ghost' is not a member of this team"
            ),
        ),
        first_case(
            "a caller naming a healthy member still reaches it when the default is down",
            team=LEAD_DOWN,
            message=caller_message(routing(recipient="researcher")),
            expected=Deliver("researcher", USER),
        ),
        first_case(
            "a default agent missing from the members is unavailable",
            team=TeamView(id="t", members=(make_member("researcher"),), default_agent="lead"),
            message=caller_message(),
            expected=Unavailable("the team's default agent 'lead' is unavailable"),
        ),
        # Rule 5: the caller's next message on a parked task.
        first_case(
            "a parked task resumes at the agent that asked for input",
            message=caller_message(),
            parked_on="writer",
            expected=Deliver("writer", USER),
        ),
        first_case(
            "a parked task resumes at that agent whatever the caller names",
            message=caller_message(routing(recipient="researcher", reason="x")),
            parked_on="writer",
            expected=Deliver("writer", USER),
        ),
        first_case(
            "a task parked on the default agent resumes there",
            message=caller_message(),
            parked_on="lead",
            expected=Deliver("lead", USER),
        ),
        first_case(
            "a task parked on an agent now unhealthy goes to the default agent with a note",
            message=caller_message(),
            parked_on="sick",
            expected=Deliver(
                "lead", USER, "agent 'sick', which asked for input, is unavailable (unhealthy)"
            ),
        ),
        first_case(
            "a task parked on an agent no longer in the team goes to the default with a note",
            message=caller_message(),
            parked_on="ghost",
            expected=Deliver(
                "lead", USER, "agent 'ghost', which asked for input, is not a member of this team"
            ),
        ),
        first_case(
            "a task parked on a default agent now unhealthy is unavailable",
            team=LEAD_DOWN,
            message=caller_message(),
            parked_on="lead",
            expected=Unavailable("the team's default agent 'lead' is unavailable"),
        ),
        first_case(
            "a task parked on a healthy agent resumes even when the default is down",
            team=LEAD_DOWN,
            message=caller_message(),
            parked_on="researcher",
            expected=Deliver("researcher", USER),
        ),
    ],
)
def test_first_hop(team, message, parked_on, expected):
    assert first_hop(team, message, parked_on=parked_on) == expected


# Rules 2, 3 and 5: next_hop --------------------------------------------------------------------


def next_case(description, *, answerer, sent_by, answer, expected, team=TEAM, handoffs=None):
    """One answer from ``answerer``, which got its message from ``sent_by`` with ``handoffs``."""
    return pytest.param(team, answerer, sent_by, answer, handoffs, expected, id=description)


@pytest.mark.parametrize(
    ("team", "answerer", "sent_by", "answer", "handoffs", "expected"),
    [
        # Rule 2, "user".
        next_case(
            "an agent saying user sends its answer to the caller",
            answerer="researcher",
            sent_by="lead",
            answer=says("user"),
            expected=Reply(),
        ),
        next_case(
            "an agent saying user in the tagged form sends its answer to the caller",
            answerer="researcher",
            sent_by="lead",
            answer=says({"type": "user"}),
            expected=Reply(),
        ),
        next_case(
            "the default agent saying user sends its answer to the caller with its reason",
            answerer="lead",
            sent_by=USER,
            answer=says("user", reason="all done"),
            expected=Reply(reason="all done"),
        ),
        # Rule 2, "sender".
        next_case(
            "an agent called by the caller saying sender answers the caller",
            answerer="researcher",
            sent_by=USER,
            answer=says("sender"),
            expected=Reply(),
        ),
        next_case(
            "an agent called by the default agent saying sender answers the default agent",
            answerer="researcher",
            sent_by="lead",
            answer=says("sender"),
            expected=Deliver("lead", "researcher"),
        ),
        next_case(
            "an agent called by another agent saying sender goes back to that agent",
            answerer="writer",
            sent_by="researcher",
            answer=says({"type": "sender"}),
            expected=Deliver("researcher", "writer"),
        ),
        next_case(
            "sender pointing at an agent now unhealthy goes to the default agent with a note",
            answerer="researcher",
            sent_by="sick",
            answer=says("sender"),
            expected=Deliver("lead", "researcher", "recipient 'sick' is unavailable (unhealthy)"),
        ),
        # Rule 2, an agent id.
        next_case(
            "the default agent naming a member sends the answer to it with itself as sender",
            answerer="lead",
            sent_by=USER,
            answer=says("researcher"),
            expected=Deliver("researcher", "lead"),
        ),
        next_case(
            "an agent naming a member in the tagged form sends the answer to it",
            answerer="researcher",
            sent_by="lead",
            answer=says({"type": "agent", "id": "writer"}),
            expected=Deliver("writer", "researcher"),
        ),
        next_case(
            "an old agent naming a member with x-recipient sends the answer to it",
            answerer="researcher",
            sent_by="lead",
            answer=says(metadata={"x-recipient": "writer"}),
            expected=Deliver("writer", "researcher"),
        ),
        next_case(
            "an agent naming the default agent explicitly reaches it without a note",
            answerer="researcher",
            sent_by="lead",
            answer=says("lead", reason="found it"),
            expected=Deliver("lead", "researcher", reason="found it"),
        ),
        next_case(
            "the reason and the handoffs travel with the delivery",
            answerer="lead",
            sent_by=USER,
            answer=says("researcher", reason="needs web search", handoffs=["writer"]),
            expected=Deliver("researcher", "lead", handoffs=("writer",), reason="needs web search"),
        ),
        next_case(
            "a completed task naming a member in its status message is delivered to it",
            answerer="lead",
            sent_by=USER,
            answer=task(status_metadata=routing(recipient="writer")),
            expected=Deliver("writer", "lead"),
        ),
        next_case(
            "a completed task naming a member in its task metadata is delivered to it",
            answerer="lead",
            sent_by=USER,
            answer=task(task_metadata=routing(recipient="writer")),
            expected=Deliver("writer", "lead"),
        ),
        # Rule 2, no decision.
        next_case(
            "the default agent without a decision answers the caller",
            answerer="lead",
            sent_by=USER,
            answer=says(),
            expected=Reply(),
        ),
        next_case(
            "the default agent called by an agent without a decision still answers the caller",
            answerer="lead",
            sent_by="researcher",
            answer=says(),
            expected=Reply(),
        ),
        next_case(
            "another agent without a decision hands its answer to the default agent",
            answerer="researcher",
            sent_by="lead",
            answer=says(),
            expected=Deliver("lead", "researcher"),
        ),
        next_case(
            "an agent the caller named without a decision hands its answer to the default",
            answerer="researcher",
            sent_by=USER,
            answer=says(),
            expected=Deliver("lead", "researcher"),
        ),
        next_case(
            "an agent without the extension hands its answer to the default agent",
            answerer="legacy",
            sent_by="lead",
            answer=task(),
            expected=Deliver("lead", "legacy"),
        ),
        next_case(
            "a failed task without a decision is handed to the default agent",
            answerer="researcher",
            sent_by="lead",
            answer=task("TASK_STATE_FAILED"),
            expected=Deliver("lead", "researcher"),
        ),
        next_case(
            "garbage routing metadata counts as no decision",
            answerer="researcher",
            sent_by="lead",
            answer=says(metadata={URI: ["writer"]}),
            expected=Deliver("lead", "researcher"),
        ),
        next_case(
            "handoffs without a recipient narrow the default agent's peers",
            answerer="researcher",
            sent_by="lead",
            answer=says(reason="no idea", handoffs=["writer"]),
            expected=Deliver("lead", "researcher", handoffs=("writer",), reason="no idea"),
        ),
        # Rule 3, a recipient that cannot get the message.
        next_case(
            "a non-member recipient sends the answer to the default agent with a note",
            answerer="researcher",
            sent_by="lead",
            answer=says("ghost"),
            expected=Deliver(
                "lead", "researcher", "recipient 'ghost' is not a member of this team"
            ),
        ),
        next_case(
            "an agent naming itself sends the answer to the default agent with a note",
            answerer="researcher",
            sent_by="lead",
            answer=says("researcher"),
            expected=Deliver("lead", "researcher", "agent 'researcher' cannot route to itself"),
        ),
        next_case(
            "an unhealthy recipient sends the answer to the default agent with a note",
            answerer="researcher",
            sent_by="lead",
            answer=says("sick"),
            expected=Deliver("lead", "researcher", "recipient 'sick' is unavailable (unhealthy)"),
        ),
        next_case(
            "the handoffs still travel when the recipient is refused",
            answerer="researcher",
            sent_by="lead",
            answer=says("ghost", handoffs=["writer"]),
            expected=Deliver(
                "lead",
                "researcher",
                "recipient 'ghost' is not a member of this team",
                handoffs=("writer",),
            ),
        ),
        next_case(
            "the default agent naming a non-member answers the caller with the note",
            answerer="lead",
            sent_by=USER,
            answer=says("ghost"),
            expected=Reply("recipient 'ghost' is not a member of this team"),
        ),
        next_case(
            "the default agent naming itself answers the caller with the note",
            answerer="lead",
            sent_by=USER,
            answer=says("lead"),
            expected=Reply("agent 'lead' cannot route to itself"),
        ),
        next_case(
            "the default agent naming an unhealthy member answers the caller with the note",
            answerer="lead",
            sent_by=USER,
            answer=says("sick"),
            expected=Reply("recipient 'sick' is unavailable (unhealthy)"),
        ),
        next_case(
            "no decision while the default agent is down answers the caller with a note",
            team=LEAD_DOWN,
            answerer="researcher",
            sent_by=USER,
            answer=says(),
            expected=Reply("the default agent 'lead' is unavailable"),
        ),
        next_case(
            "a refused recipient while the default agent is down answers the caller",
            team=LEAD_DOWN,
            answerer="researcher",
            sent_by=USER,
            answer=says("ghost"),
            expected=Reply(
                "recipient 'ghost' is not a member of this team;"
                " the default agent 'lead' is unavailable"
            ),
        ),
        next_case(
            "naming a default agent that is down answers the caller with one note",
            team=LEAD_DOWN,
            answerer="researcher",
            sent_by=USER,
            answer=says("lead"),
            expected=Reply("recipient 'lead' is unavailable (unhealthy)"),
        ),
        next_case(
            "a healthy recipient is reached even while the default agent is down",
            team=LEAD_DOWN,
            answerer="researcher",
            sent_by=USER,
            answer=says("writer"),
            expected=Deliver("writer", "researcher"),
        ),
        # Handoffs given to the answerer limit whom it may name.
        next_case(
            "an agent naming one of its handoffs reaches it",
            answerer="researcher",
            sent_by="lead",
            answer=says("writer"),
            handoffs=("writer",),
            expected=Deliver("writer", "researcher"),
        ),
        next_case(
            "an agent naming a member outside its handoffs reaches the default with a note",
            answerer="researcher",
            sent_by="lead",
            answer=says("legacy"),
            handoffs=("writer",),
            expected=Deliver(
                "lead",
                "researcher",
                "recipient 'legacy' is not among the handoffs 'researcher' was given (writer)",
            ),
        ),
        next_case(
            "an agent given empty handoffs may name no other agent",
            answerer="researcher",
            sent_by="lead",
            answer=says("writer"),
            handoffs=(),
            expected=Deliver(
                "lead",
                "researcher",
                "recipient 'writer' is not among the handoffs 'researcher' was given (none)",
            ),
        ),
        next_case(
            "an agent may name its own sender whatever its handoffs",
            answerer="writer",
            sent_by="researcher",
            answer=says("researcher"),
            handoffs=("legacy",),
            expected=Deliver("researcher", "writer"),
        ),
        next_case(
            "an agent may name the default agent whatever its handoffs",
            answerer="writer",
            sent_by="researcher",
            answer=says("lead"),
            handoffs=("legacy",),
            expected=Deliver("lead", "writer"),
        ),
        next_case(
            "an agent may answer the caller whatever its handoffs",
            answerer="writer",
            sent_by="researcher",
            answer=says("user"),
            handoffs=(),
            expected=Reply(),
        ),
        next_case(
            "the default agent naming a member outside its handoffs answers the caller",
            answerer="lead",
            sent_by="researcher",
            answer=says("legacy"),
            handoffs=("writer",),
            expected=Reply(
                "recipient 'legacy' is not among the handoffs 'lead' was given (writer)"
            ),
        ),
        # Rule 5, interrupted tasks park the team task.
        next_case(
            "an agent asking for input parks the team task on it",
            answerer="writer",
            sent_by="lead",
            answer=task(INPUT_REQUIRED),
            expected=Park("writer", INPUT_REQUIRED),
        ),
        next_case(
            "an agent asking for authorization parks the team task on it",
            answerer="writer",
            sent_by="lead",
            answer=task(AUTH_REQUIRED),
            expected=Park("writer", AUTH_REQUIRED),
        ),
        next_case(
            "a 0.3 agent asking for input parks the team task on it",
            answerer="writer",
            sent_by="lead",
            answer=task("input-required"),
            expected=Park("writer", INPUT_REQUIRED),
        ),
        next_case(
            "the default agent asking for input parks the team task on it",
            answerer="lead",
            sent_by=USER,
            answer=task(INPUT_REQUIRED),
            expected=Park("lead", INPUT_REQUIRED),
        ),
        next_case(
            "an agent asking for input parks the task even when it names a recipient",
            answerer="writer",
            sent_by="lead",
            answer=task(
                INPUT_REQUIRED, status_metadata=routing(recipient="researcher", reason="ask")
            ),
            expected=Park("writer", INPUT_REQUIRED, reason="ask"),
        ),
    ],
)
def test_next_hop(team, answerer, sent_by, answer, handoffs, expected):
    hop = next_hop(
        team, answerer=answerer, sent_by=sent_by, answer=answer, hops_done=1, handoffs=handoffs
    )
    assert hop == expected


# Rule 4: the hop limit -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_hops", "hops_done", "sent_by", "answer", "expected"),
    [
        pytest.param(
            10,
            9,
            "lead",
            says("writer"),
            Deliver("writer", "researcher"),
            id="the tenth call is still made",
        ),
        pytest.param(
            10,
            10,
            "lead",
            says("writer"),
            Fail("routing stopped after 10 hops (the team's limit)"),
            id="an eleventh call fails naming the limit",
        ),
        pytest.param(
            3,
            3,
            "lead",
            says("writer"),
            Fail("routing stopped after 3 hops (the team's limit)"),
            id="a team's own lower limit is named when reached",
        ),
        pytest.param(
            3,
            3,
            "lead",
            says(),
            Fail("routing stopped after 3 hops (the team's limit)"),
            id="falling back to the default agent at the limit fails too",
        ),
        pytest.param(
            3,
            3,
            "lead",
            says("ghost"),
            Fail("routing stopped after 3 hops (the team's limit)"),
            id="a refused recipient at the limit fails too",
        ),
        pytest.param(
            3, 3, "lead", says("user"), Reply(), id="answering the caller at the limit succeeds"
        ),
        pytest.param(
            3,
            3,
            USER,
            says("sender"),
            Reply(),
            id="answering the caller through sender at the limit succeeds",
        ),
        pytest.param(
            3,
            3,
            "lead",
            task(INPUT_REQUIRED),
            Park("researcher", INPUT_REQUIRED),
            id="asking for input at the limit parks the task",
        ),
        pytest.param(
            1,
            1,
            USER,
            says("writer"),
            Fail("routing stopped after 1 hops (the team's limit)"),
            id="a team limited to one hop never forwards",
        ),
    ],
)
def test_hop_limit(max_hops, hops_done, sent_by, answer, expected):
    team = make_team(max_hops=max_hops)
    hop = next_hop(team, answerer="researcher", sent_by=sent_by, answer=answer, hops_done=hops_done)
    assert hop == expected


def run_team(team, message, answers, parked_on=None):
    """Drives the router the way the Django side does; ``answers`` maps each agent to the answers
    it gives, in order. Returns the final hop and each call as (target, message, headers)."""
    scripted = {agent_id: list(given) for agent_id, given in answers.items()}
    calls = []
    hop = first_hop(team, message, parked_on=parked_on)
    while isinstance(hop, Deliver):
        outgoing, headers = prepare_message(
            message,
            team=team,
            target=hop.target,
            sender=hop.sender,
            handoffs=hop.handoffs,
            routing_error=hop.routing_error,
        )
        calls.append((hop.target, outgoing, headers))
        answer = scripted[hop.target].pop(0)
        hop = next_hop(
            team,
            answerer=hop.target,
            sent_by=hop.sender,
            handoffs=hop.handoffs,
            answer=answer,
            hops_done=len(calls),
        )
        message = answer
    return hop, calls


def test_a_team_conversation_runs_as_one_straight_loop():
    hop, calls = run_team(
        TEAM,
        caller_message(),
        {
            "lead": [says("researcher"), says("user")],
            "researcher": [says("writer", handoffs=["lead"]), says("lead")],
            "writer": [says("sender")],
        },
    )
    assert [target for target, _, _ in calls] == [
        "lead",
        "researcher",
        "writer",
        "researcher",
        "lead",
    ]
    senders = [message["metadata"][URI]["sender"] for _, message, _ in calls]
    assert senders == ["user", "lead", "researcher", "writer", "researcher"]
    writer_peers = calls[2][1]["metadata"][URI]["agentCards"]
    assert [card["id"] for card in writer_peers] == ["lead"]
    assert hop == Reply()


def test_agents_bouncing_forever_stop_at_exactly_the_team_limit():
    hop, calls = run_team(
        make_team(max_hops=4),
        caller_message(),
        {"lead": [says("researcher")] * 10, "researcher": [says("lead")] * 10},
    )
    assert [target for target, _, _ in calls] == ["lead", "researcher", "lead", "researcher"]
    assert hop == Fail("routing stopped after 4 hops (the team's limit)")


def test_the_hop_count_starts_again_with_the_caller_message_that_resumes_a_parked_task():
    team = make_team(max_hops=2)
    hop, calls = run_team(
        team, caller_message(), {"lead": [says("writer")], "writer": [task(INPUT_REQUIRED)]}
    )
    assert hop == Park("writer", INPUT_REQUIRED)
    assert len(calls) == 2
    hop, calls = run_team(
        team, caller_message(), {"writer": [says("lead")], "lead": [says()]}, parked_on=hop.agent
    )
    assert [target for target, _, _ in calls] == ["writer", "lead"]
    assert hop == Reply()


# peer_cards ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "handoffs", "expected_ids"),
    [
        pytest.param(
            "lead",
            None,
            ["researcher", "writer", "legacy"],
            id="every other healthy member is offered in team order",
        ),
        pytest.param(
            "researcher", None, ["lead", "writer", "legacy"], id="the target is never offered"
        ),
        pytest.param(
            "researcher", ("writer",), ["writer"], id="handoffs narrow the peers to those named"
        ),
        pytest.param(
            "researcher",
            ("legacy", "lead"),
            ["lead", "legacy"],
            id="narrowed peers keep the team order",
        ),
        pytest.param("researcher", (), [], id="empty handoffs offer no peers"),
        pytest.param(
            "researcher",
            ("researcher", "writer"),
            ["writer"],
            id="handoffs naming the target do not offer it",
        ),
        pytest.param(
            "researcher",
            ("sick", "ghost", "writer"),
            ["writer"],
            id="handoffs naming unhealthy members or non-members do not offer them",
        ),
        pytest.param(
            "ghost",
            None,
            ["lead", "researcher", "writer", "legacy"],
            id="a target outside the team is offered every healthy member",
        ),
    ],
)
def test_peer_cards_offer(target, handoffs, expected_ids):
    cards = peer_cards(TEAM, target=target, handoffs=handoffs)
    assert [card["id"] for card in cards] == expected_ids


def test_peer_cards_describe_each_peer_as_the_extension_says():
    cards = peer_cards(TEAM, target="lead", handoffs=("researcher", "legacy"))
    assert cards == [
        {
            "id": "researcher",
            "name": "Researcher",
            "description": "The researcher agent",
            "capabilities": ["search", "summarize"],
            "supportsClientRouting": True,
        },
        {
            "id": "legacy",
            "name": "Legacy",
            "description": "The legacy agent",
            "capabilities": ["legacy"],
            "supportsClientRouting": False,
        },
    ]


# prepare_message -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "expected_headers"),
    [
        pytest.param(
            "researcher", {"A2A-Extensions": URI}, id="a 1.0 agent gets the A2A-Extensions header"
        ),
        pytest.param(
            "writer", {"X-A2A-Extensions": URI}, id="a 0.3 agent gets the X-A2A-Extensions header"
        ),
        pytest.param("legacy", {}, id="an agent without the extension gets no header"),
        pytest.param("ghost", {}, id="a target outside the team gets no header"),
    ],
)
def test_prepare_message_activation_header(target, expected_headers):
    _, headers = prepare_message(caller_message(), team=TEAM, target=target, sender=USER)
    assert headers == expected_headers


def test_agent_with_extension_gets_peers_and_sender():
    message, _ = prepare_message(caller_message(), team=TEAM, target="researcher", sender=USER)
    assert message["extensions"] == [URI]
    assert message["metadata"][URI] == {
        "agentCards": peer_cards(TEAM, target="researcher"),
        "sender": "user",
    }


def test_agent_with_extension_gets_the_answering_agent_as_sender_and_the_narrowed_peers():
    message, _ = prepare_message(
        says("writer"), team=TEAM, target="writer", sender="researcher", handoffs=("lead",)
    )
    assert message["metadata"][URI]["sender"] == "researcher"
    assert [card["id"] for card in message["metadata"][URI]["agentCards"]] == ["lead"]


def test_agent_with_extension_gets_the_routing_error_when_there_is_one():
    message, _ = prepare_message(
        caller_message(), team=TEAM, target="lead", sender="researcher", routing_error="why"
    )
    assert message["metadata"][URI]["routingError"] == "why"


def test_agent_with_extension_gets_no_routing_error_key_without_one():
    message, _ = prepare_message(caller_message(), team=TEAM, target="lead", sender=USER)
    assert "routingError" not in message["metadata"][URI]


def test_agent_with_extension_gets_the_uri_once_and_other_extensions_kept():
    original = caller_message(extensions=[URI, OTHER_EXTENSION, URI])
    message, _ = prepare_message(original, team=TEAM, target="researcher", sender=USER)
    assert message["extensions"].count(URI) == 1
    assert OTHER_EXTENSION in message["extensions"]


def test_the_previous_agents_routing_decision_is_replaced_not_forwarded():
    answer = says("researcher", reason="secret plan", metadata=None)
    answer["metadata"]["x-recipient"] = "researcher"
    message, _ = prepare_message(answer, team=TEAM, target="researcher", sender="lead")
    assert set(message["metadata"][URI]) == {"agentCards", "sender"}
    assert "x-recipient" not in message["metadata"]


@pytest.mark.parametrize("target", ["researcher", "legacy"], ids=["with extension", "without"])
def test_other_metadata_and_fields_are_kept(target):
    original = caller_message({"trace": "abc", "nested": {"k": [1, 2]}}, [OTHER_EXTENSION])
    message, _ = prepare_message(original, team=TEAM, target=target, sender=USER)
    assert message["metadata"]["trace"] == "abc"
    assert message["metadata"]["nested"] == {"k": [1, 2]}
    assert OTHER_EXTENSION in message["extensions"]
    for field in ("messageId", "role", "parts", "contextId"):
        assert message[field] == original[field]


@pytest.mark.parametrize("target", ["researcher", "legacy"], ids=["with extension", "without"])
def test_prepare_message_never_changes_its_input(target):
    original = caller_message(
        {**routing(recipient="researcher"), "x-recipient": "lead", "trace": {"a": 1}},
        [URI, OTHER_EXTENSION],
    )
    before = copy.deepcopy(original)
    message, _ = prepare_message(original, team=TEAM, target=target, sender=USER)
    message["metadata"]["trace"]["a"] = 2
    assert original == before


def test_agent_without_extension_learns_nothing_about_the_team():
    original = caller_message(
        {**routing(recipient="legacy", reason="x"), "x-recipient": "legacy", "trace": "abc"},
        [URI, OTHER_EXTENSION],
    )
    message, headers = prepare_message(
        original, team=TEAM, target="legacy", sender="lead", routing_error="why"
    )
    assert message["metadata"] == {"trace": "abc"}
    assert message["extensions"] == [OTHER_EXTENSION]
    assert headers == {}


def test_message_without_metadata_or_extensions_gets_them_for_an_agent_with_extension():
    original = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    message, _ = prepare_message(original, team=TEAM, target="researcher", sender=USER)
    assert message["extensions"] == [URI]
    assert message["metadata"][URI]["sender"] == "user"


def test_message_without_metadata_or_extensions_stays_bare_for_an_agent_without_extension():
    original = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    message, _ = prepare_message(original, team=TEAM, target="legacy", sender=USER)
    assert message == original


def test_garbage_metadata_and_extensions_are_replaced_for_an_agent_with_extension():
    original = {**caller_message(), "metadata": "oops", "extensions": "oops"}
    message, _ = prepare_message(original, team=TEAM, target="researcher", sender=USER)
    assert message["extensions"] == [URI]
    assert set(message["metadata"]) == {URI}


# prepare_reply ---------------------------------------------------------------------------------


def test_reply_to_the_caller_drops_the_members_routing_decision():
    answer = says("user", reason="done", metadata=None)
    answer["metadata"].update({"x-recipient": "user", "trace": "abc"})
    answer["extensions"] = [URI, OTHER_EXTENSION]
    reply = prepare_reply(answer)
    assert reply["metadata"] == {"trace": "abc"}
    assert reply["extensions"] == [OTHER_EXTENSION]
    assert reply["parts"] == answer["parts"]


def test_reply_to_the_caller_carries_the_routing_error():
    reply = prepare_reply(says("ghost"), routing_error="recipient 'ghost' is not a member")
    assert reply["metadata"] == {URI: {"routingError": "recipient 'ghost' is not a member"}}
    assert reply["extensions"] == [URI]


def test_task_reply_drops_routing_from_status_message_and_task_and_notes_the_error_in_status():
    answer = task(
        status_metadata=routing(recipient="ghost"),
        task_metadata={**routing(reason="x"), "x-recipient": "ghost", "keep": 1},
    )
    reply = prepare_reply(answer, routing_error="why")
    assert reply["metadata"] == {"keep": 1}
    assert reply["status"]["message"]["metadata"] == {URI: {"routingError": "why"}}
    assert reply["status"]["message"]["extensions"] == [URI]


def test_task_reply_without_status_message_notes_the_error_on_the_task():
    reply = prepare_reply(
        task(INPUT_REQUIRED, task_metadata=routing(recipient="x")), routing_error="why"
    )
    assert reply["metadata"] == {URI: {"routingError": "why"}}
    assert "extensions" not in reply


def test_wrapped_reply_keeps_its_wrapper():
    reply = prepare_reply({"message": says("user")})
    assert reply == {"message": {**says("user"), "metadata": {}}}


def test_prepare_reply_never_changes_its_input_and_tolerates_garbage():
    answer = task(status_metadata=routing(recipient="user"))
    before = copy.deepcopy(answer)
    prepare_reply(answer, routing_error="why")
    assert answer == before
    assert prepare_reply("not an answer") == "not an answer"
