"""The relay's MCP server (``server``): every agent, team and workflow as an MCP tool
(``catalog``, ``tools``), a tool call run as an A2A call through the gateway (``calls``)."""
