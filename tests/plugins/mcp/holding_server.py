"""An MCP server whose ``hold`` call stays in flight until ``release`` is called.

    python holding_server.py

Tools: ``hold`` (logs ``holding`` to its client, then waits for ``release``),
``release``, and ``write_note`` (writes a file). A client of the proxy sees the log
message relayed, so it knows the call has reached this server, without waiting on a clock.
"""

# No ``from __future__ import annotations``: the SDK finds the Context parameter by its
# annotation, which must be the class, not a string.

from pathlib import Path

import anyio

try:
    from mcp.server.mcpserver import Context  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import Context  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

server = Server("jevqueue-holding")
_released: list[anyio.Event] = []


def _release_event() -> anyio.Event:
    if not _released:
        _released.append(anyio.Event())
    return _released[0]


@server.tool()
async def hold(ctx: Context) -> str:  # type: ignore[type-arg]
    """Wait until release is called."""
    await ctx.info("holding")
    await _release_event().wait()
    return "released"


@server.tool()
async def release() -> str:
    """End every hold."""
    _release_event().set()
    return "released the holds"


@server.tool()
def write_note(path: str, text: str) -> str:
    """Write text to the file at path."""
    Path(path).write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters to {path}"


if __name__ == "__main__":
    server.run("stdio")
