"""The MCP catalog against the database: which tool a name finds for a caller."""

from __future__ import annotations

import pytest

from routing.mcp import catalog
from routing.mcp.tools import NAME_LIMIT, tool_name
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

LONG_ID = "a-very-long-agent-id-that-runs-past-the-tool-name-limit-of-mcp"


def test_a_long_agent_id_gets_a_hashed_tool_name_that_a_call_finds(api_key):
    # Regression: the hashed name looks like ``agent_<id>``, so the lookup narrowed to an
    # agent of that (truncated) id, found none, and the call was refused as an unknown tool.
    make_agent(agent_id=LONG_ID)
    name = tool_name("agent", LONG_ID)
    assert len(name) == NAME_LIMIT and not name.endswith(LONG_ID[-8:])

    listed = {tool.name for tool in catalog.tools_for(api_key[0])}
    found = catalog.tool_named(api_key[0], None, name)

    assert name in listed
    assert found is not None and found.target_id == LONG_ID


def test_a_long_agent_ids_tool_is_found_on_its_own_agent_endpoint(api_key):
    make_agent(agent_id=LONG_ID)
    subset = catalog.Subset("agent", LONG_ID)

    found = catalog.tool_named(api_key[0], subset, tool_name("agent", LONG_ID))

    assert found is not None and found.target_id == LONG_ID


def test_a_short_agent_id_is_found_by_its_plain_name(api_key):
    make_agent(agent_id="weather")

    found = catalog.tool_named(api_key[0], None, "agent_weather")

    assert found is not None and found.target_id == "weather"


def test_an_unknown_tool_name_finds_nothing(api_key):
    make_agent(agent_id="weather")

    assert catalog.tool_named(api_key[0], None, "agent_nobody") is None
    assert catalog.tool_named(api_key[0], None, "agent_" + "x" * (NAME_LIMIT - 6)) is None
