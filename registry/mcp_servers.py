"""MCP servers as agents: the relay connects to an MCP server (streamable HTTP) with the
official ``mcp`` client, lists its tools and writes an Agent Card for it, one skill per tool.
The card is stored as any fetched card (``FetchedCard``), so the server is searched, shown,
health-checked and routed to as any agent; its tools' input schemas ride in the card's
``MCP_SERVER_URI`` extension (``params.tools``: name -> inputSchema).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
from asgiref.sync import async_to_sync
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from registry.cards import InvalidCardError, parse_card
from registry.extensions import MCP_SERVER_URI
from registry.fetching import CardFetchError, FetchedCard
from relay_project import outbound
from relay_project.outbound_mcp import mcp_client

INPUT_MODES = ["text/plain", "application/json"]
OUTPUT_MODES = ["text/plain", "application/json"]


def mcp_session(url: str, headers: dict[str, str] | None = None, *, timeout: float | None = None):
    """An MCP client session to the server at ``url`` (``async with``), through the guard."""
    http = mcp_client(headers, timeout=timeout)
    return Client(streamable_http_client(url, http_client=http))


async def list_tools(url: str, headers: dict[str, str] | None = None) -> tuple[Any, list[Any]]:
    """Initializes a session with the server and lists its tools (every page): the server's
    info and the tools. Raises CardFetchError saying why not."""
    try:
        outbound.check_url_shape(url)
    except outbound.UnsafeURLError as error:
        raise CardFetchError("unsafe_url", str(error)) from error
    try:
        with anyio.fail_after(outbound.OutboundPolicy.from_settings().deadline):
            async with mcp_session(url, headers) as session:
                tools, cursor = [], None
                while True:
                    page = (
                        await session.list_tools(cursor=cursor)
                        if cursor
                        else (await session.list_tools())
                    )
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return session.server_info, tools
    except CardFetchError:
        raise
    except BaseException as error:  # the SDK raises from task groups (ExceptionGroup)
        if not isinstance(error, Exception):
            raise
        raise _fetch_error(url, error) from error


def _fetch_error(url: str, error: BaseException) -> CardFetchError:
    leaves = _leaves(error)
    for leaf in leaves:
        if isinstance(leaf, outbound.UnsafeURLError):
            return CardFetchError("unsafe_url", str(leaf))
    for leaf in leaves:
        if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
            return CardFetchError("timeout", f"{url} did not answer in time", status=422)
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectError):
            return CardFetchError("unreachable", f"cannot reach {url}: {leaf}", status=422)
    detail = "; ".join(str(leaf) or type(leaf).__name__ for leaf in leaves)[:300]
    return CardFetchError(
        "not_mcp",
        f"{url} did not answer as an MCP server over streamable HTTP ({detail})",
        status=422,
    )


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    cause = error.__cause__
    return [error, *(_leaves(cause) if cause is not None else [])]


def card_document(url: str, server_info: Any, tools: list[Any]) -> dict[str, Any]:
    """The Agent Card the relay writes for an MCP server: one skill per tool (id = the tool's
    name), text and data in, the tools' input schemas in the MCP server extension."""
    name = (getattr(server_info, "title", None) or getattr(server_info, "name", None)) or url
    skills = [
        {
            "id": tool.name,
            "name": tool.title or tool.name,
            "description": tool.description or tool.title or tool.name,
            "tags": ["mcp"],
            "inputModes": INPUT_MODES,
            "outputModes": OUTPUT_MODES,
        }
        for tool in tools
    ]
    return {
        "name": name,
        # The server's address stays out of the card: callers reach it through the relay.
        "description": (getattr(server_info, "description", None) or "")
        or f"The MCP server {name}: its tools are its skills.",
        "version": getattr(server_info, "version", None) or "0",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {
            # The relay streams the server's progress notifications as working updates.
            "streaming": True,
            "extensions": [
                {
                    "uri": MCP_SERVER_URI,
                    "description": "An MCP server the relay calls; params.tools holds each "
                    "tool's input schema.",
                    "params": {"tools": {tool.name: tool.input_schema for tool in tools}},
                }
            ],
        },
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": skills,
    }


def fetch_mcp_card(url: str, *, headers: dict[str, str] | None = None) -> FetchedCard:
    """Connects to the MCP server at ``url``, lists its tools and returns the card the relay
    writes for it, as a fetched card. Raises CardFetchError saying why not."""
    server_info, tools = async_to_sync(list_tools)(url, headers)
    document = card_document(url, server_info, tools)
    try:
        card = parse_card(document)
    except InvalidCardError as error:
        raise CardFetchError("invalid_card", str(error), status=422) from error
    return FetchedCard(url=url, document=document, card=card)


def tool_schemas(extensions) -> dict[str, Any]:
    """The tools' input schemas (name -> schema) from an agent's declared extensions."""
    for extension in extensions:
        if extension.uri == MCP_SERVER_URI:
            return (extension.params or {}).get("tools") or {}
    return {}
