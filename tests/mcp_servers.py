"""MCP servers for tests, written with the official SDK (``MCPServer`` over streamable HTTP,
served at ``/mcp``): register one with ``mcpServer=True`` and call its tools as an agent's.

    with running(slow_tools_app()) as url:
        relay.register(f"{url}/mcp", "slow-tools", mcpServer=True)

The servers run in the test's process, so a test sees what their tools saw: ``WAITING``
holds the notes of the ``wait_for_cancel`` calls running now, ``CANCELLED`` those the server
saw cancelled.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer

WAITING: list[str] = []
CANCELLED: list[str] = []


def slow_tools_app():
    """Tools that take their time: one reports progress, one answers after a silence, one
    waits without a word until its call is cancelled."""
    server = MCPServer("Slow Tools")

    @server.tool(description="Counts to the number slowly, reporting each step as progress.")
    async def count_slowly(steps: int, ctx: Context) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"counted {step} of {steps}")
            await anyio.sleep(0.2)
        return f"counted to {steps}"

    @server.tool(description="Answers after a while without a word before it.")
    async def answer_later(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"answered after {seconds:g} s"

    @server.tool(description="Waits without a word until the call is cancelled.")
    async def wait_for_cancel(note: str) -> str:
        WAITING.append(note)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            CANCELLED.append(note)
            raise
        finally:
            WAITING.remove(note)
        return "never"

    return server.streamable_http_app(streamable_http_path="/mcp")
