"""URIs of the A2A extensions the relay itself speaks. Plain constants: any layer may import
this module, including the pure cores."""

CLIENT_ROUTING_URI = "https://ranch.woi.dev/extensions/client-routing/v1"
MCP_SERVER_URI = "https://ranch.woi.dev/extensions/mcp-server/v1"
"""An agent that is an MCP server the relay calls: its card is written by the relay
(``registry.mcp_servers``), with each tool's input schema in this extension's params."""
