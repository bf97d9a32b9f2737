"""A real MCP client session with the proxy, the same few calls on either mcp major.

The client starts ``jevqueue mcp-proxy`` as a subprocess over stdio (which starts the
upstream in turn): three processes, client -> proxy -> upstream. On mcp 2.x ``era``
picks the protocol: ``"auto"`` negotiates 2026-07-28 (approvals as InputRequiredResult),
``"legacy"`` the initialize handshake (approvals as elicitation requests).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import mcp.types as types
from mcp import StdioServerParameters

MAJOR = int(version("mcp").split(".", 1)[0])

Answer = Callable[[str, dict[str, Any]], tuple[str, dict[str, Any] | None]]


def approve(message: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """An elicitation answer that approves."""
    return "accept", {"approve": True}


def decline(message: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """An elicitation answer that declines."""
    return "decline", None


@dataclass
class Outcome:
    """One tools/call result, read the same way on both majors."""

    is_error: bool
    text: str


@dataclass
class ProxyClient:
    """The session plus what it learnt at connect time."""

    session: Any
    server_name: str
    instructions: str | None
    protocol_version: str
    questions: list[str] = field(default_factory=list)

    async def list_tools(self) -> list[str]:
        result = await self.session.list_tools()
        return [tool.name for tool in result.tools]

    async def call(
        self, name: str, arguments: Any = None, meta: dict[str, Any] | None = None
    ) -> Outcome:
        result = await self.session.call_tool(name, arguments, meta=meta)
        is_error = result.isError if MAJOR < 2 else result.is_error
        text = "\n".join(block.text for block in result.content if block.type == "text")
        return Outcome(bool(is_error), text)

    async def resource_uris(self) -> list[str]:
        result = await self.session.list_resources()
        return [str(resource.uri) for resource in result.resources]

    async def read_resource(self, uri: str) -> str:
        result = await self.session.read_resource(uri)
        return "".join(getattr(item, "text", "") for item in result.contents)

    async def prompt_names(self) -> list[str]:
        result = await self.session.list_prompts()
        return [prompt.name for prompt in result.prompts]

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        result = await self.session.get_prompt(name, arguments)
        return "".join(message.content.text for message in result.messages)


def _callback(client: list[ProxyClient], answer: Answer) -> Any:
    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        client[0].questions.append(params.message)
        schema = params.requestedSchema if MAJOR < 2 else params.requested_schema
        action, content = answer(params.message, schema)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return elicitation


@asynccontextmanager
async def proxy_client(
    command: Sequence[str],
    env: dict[str, str],
    *,
    answer: Answer | None = None,
    era: str = "auto",
) -> AsyncIterator[ProxyClient]:
    """Start ``command`` (the proxy) and yield a connected client.

    Args:
        command: the proxy's command line.
        env: environment variables for it.
        answer: how the user answers elicitations; ``None`` declares no elicitation
            capability at all.
        era: on mcp 2.x, ``"auto"`` or ``"legacy"``.
    """
    parameters = StdioServerParameters(command=command[0], args=list(command[1:]), env=env)
    holder: list[ProxyClient] = []
    callback = None if answer is None else _callback(holder, answer)
    if MAJOR < 2:
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write, elicitation_callback=callback) as session,
        ):
            result = await session.initialize()
            holder.append(
                ProxyClient(
                    session, result.serverInfo.name, result.instructions, result.protocolVersion
                )
            )
            yield holder[0]
    else:
        from mcp import Client

        mode = "legacy" if era == "legacy" else "auto"
        async with Client(parameters, elicitation_callback=callback, mode=mode) as client:
            info = client.server_info
            holder.append(
                ProxyClient(
                    client,
                    info.name if info is not None else "",
                    client.instructions,
                    client.protocol_version,
                )
            )
            yield holder[0]
