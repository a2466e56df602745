"""How to call an agent or a team through the relay: copyable snippets for curl, the Python
a2a-sdk client (over JSON-RPC, and over gRPC), the JavaScript @a2a-js/sdk client, the
AG-UI client (@ag-ui/client's HttpAgent, at the target's AG-UI endpoint) and the Python MCP
client (the target's tool at the relay's MCP server), shown on the agent and team pages.

Pure: takes the relay's URL of the target and returns text. Each snippet reads the API key from
the environment variable ``RELAY_API_KEY`` (sent as ``Authorization: Bearer <key>``), so it runs
as pasted once the variable is set, and no key is ever written into a page.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

KEY_VARIABLE = "RELAY_API_KEY"
CARD_PATH = ".well-known/agent-card.json"
GREETING = "Hello"


@dataclass(frozen=True)
class CallSnippets:
    """Where to call a target and five ways to do it."""

    url: str
    card_url: str
    curl: str
    python: str
    grpc: str
    javascript: str
    agui_url: str
    agui: str
    mcp_url: str = ""
    mcp_tool: str = ""
    mcp: str = ""


def call_snippets(
    url: str, *, agui_url: str, mcp_url: str = "", mcp_tool: str = ""
) -> CallSnippets:
    """The snippets for the target whose A2A base URL at the relay is ``url`` (ending in "/",
    as ``/a2a/agents/{id}/`` and ``/a2a/teams/{id}/`` do; JSON-RPC, A2A 1.0) and whose AG-UI
    endpoint is ``agui_url`` (``/agui/agents/{id}``, ``/agui/teams/{id}``). With ``mcp_url``
    (its endpoint at the relay's MCP server) and ``mcp_tool`` (its tool's name), the MCP
    client's snippet too."""
    return CallSnippets(
        url=url,
        card_url=url + CARD_PATH,
        curl=_curl(url),
        python=_python(url),
        grpc=_grpc(url),
        javascript=_javascript(url),
        agui_url=agui_url,
        agui=_agui(agui_url),
        mcp_url=mcp_url,
        mcp_tool=mcp_tool,
        mcp=_mcp(mcp_url, mcp_tool) if mcp_url else "",
    )


def _curl(url: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"text": GREETING}],
            }
        },
    }
    return "\n".join(
        [
            f"curl -s -X POST {shlex.quote(url)} \\",
            f'  -H "Authorization: Bearer ${KEY_VARIABLE}" \\',
            "  -H 'Content-Type: application/json' \\",
            "  -H 'A2A-Version: 1.0' \\",
            f"  -d {shlex.quote(json.dumps(body))}",
        ]
    )


def _python(url: str) -> str:
    # A JSON string is a valid Python string literal, whatever the URL holds. Not streaming:
    # a stream's events and its final task would each print the answer.
    return f"""import asyncio
import os

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_stream_response_text, new_text_message
from a2a.types import Role, SendMessageRequest

URL = {json.dumps(url)}


async def main():
    headers = {{"Authorization": f"Bearer {{os.environ['{KEY_VARIABLE}']}}"}}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await create_client(URL, ClientConfig(httpx_client=http, streaming=False))
        message = new_text_message({json.dumps(GREETING)}, role=Role.ROLE_USER)
        async for response in client.send_message(SendMessageRequest(message=message)):
            print(get_stream_response_text(response))


asyncio.run(main())
"""


def _grpc(url: str) -> str:
    # The card (fetched over HTTP) names the relay's gRPC address; the key goes as metadata.
    return f"""import asyncio
import os
from urllib.parse import urlsplit

import grpc
import httpx
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.helpers import get_stream_response_text, new_text_message
from a2a.types import Role, SendMessageRequest

URL = {json.dumps(url)}


def channel(address):
    # The card's gRPC address: https://host:port, http://host:port or a bare host:port.
    target = urlsplit(address).netloc if "://" in address else address
    if address.startswith("https://"):
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
    return grpc.aio.insecure_channel(target)


async def main():
    headers = {{"Authorization": f"Bearer {{os.environ['{KEY_VARIABLE}']}}"}}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        config = ClientConfig(
            httpx_client=http,
            streaming=False,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=channel,
        )
        client = await create_client(URL, config)
        message = new_text_message({json.dumps(GREETING)}, role=Role.ROLE_USER)
        context = ClientCallContext(service_parameters=headers)
        request = SendMessageRequest(message=message)
        async for response in client.send_message(request, context=context):
            print(get_stream_response_text(response))
        await client.close()


asyncio.run(main())
"""


def _javascript(url: str) -> str:
    return f"""import {{ randomUUID }} from "node:crypto";
import {{ Role }} from "@a2a-js/sdk";
import {{ ClientFactory }} from "@a2a-js/sdk/client";

const client = await new ClientFactory().createFromUrl({json.dumps(url)});
const headers = {{ Authorization: `Bearer ${{process.env.{KEY_VARIABLE}}}` }};
const result = await client.sendMessage(
  {{
    message: {{
      messageId: randomUUID(),
      role: Role.ROLE_USER,
      parts: [{{ content: {{ $case: "text", value: {json.dumps(GREETING)} }} }}],
    }},
  }},
  {{ serviceParameters: headers }},
);
console.log(JSON.stringify(result, null, 2));
"""


def _agui(url: str) -> str:
    # Each event as it arrives, then the answer: the last assistant message.
    return f"""import {{ HttpAgent }} from "@ag-ui/client";

const agent = new HttpAgent({{
  url: {json.dumps(url)},
  headers: {{ Authorization: `Bearer ${{process.env.{KEY_VARIABLE}}}` }},
}});
agent.addMessage({{ id: "m-1", role: "user", content: {json.dumps(GREETING)} }});
const {{ newMessages }} = await agent.runAgent({{}}, {{
  onEvent: ({{ event }}) => console.error(event.type),
}});
console.log(newMessages.filter((m) => m.role === "assistant").at(-1)?.content);
"""


def _mcp(url: str, tool: str) -> str:
    return f"""import asyncio
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = {json.dumps(url)}
TOOL = {json.dumps(tool)}


async def main():
    headers = {{"Authorization": f"Bearer {{os.environ['{KEY_VARIABLE}']}}"}}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as client:
            result = await client.call_tool(TOOL, {{"text": {json.dumps(GREETING)}}})
            print(result.content[0].text)


asyncio.run(main())
"""
