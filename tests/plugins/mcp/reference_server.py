"""A small Python MCP server the proxy tests run as an upstream, on the installed mcp major.

    python reference_server.py                  # over stdio
    python reference_server.py --http PORT      # over streamable HTTP on 127.0.0.1:PORT

Tools: ``write_note`` (writes a file), ``echo``, ``crash`` (the process dies mid-call),
``wipe`` (marked destructive by the server itself), ``undeclared``; one resource, one
prompt, and instructions, so the relay of each can be checked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.types import ToolAnnotations

try:
    from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server  # mcp 1.x

INSTRUCTIONS = "Reference server for the jevqueue proxy tests."

port = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--http" else None
settings = (
    {"host": "127.0.0.1", "port": port}
    if port is not None and "fastmcp" in Server.__module__
    else {}
)
server = Server("jevqueue-reference", instructions=INSTRUCTIONS, **settings)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def write_note(path: str, text: str) -> str:
    """Write text to the file at path."""
    Path(path).write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters to {path}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def crash() -> str:
    """Exit the server process at once, mid-call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def wipe(path: str) -> str:
    """Remove the file at path."""
    Path(path).unlink()
    return f"removed {path}"


@server.tool()
def read_env(name: str) -> str:
    """Return the value of an environment variable of the server process."""
    return os.environ.get(name, "<unset>")


@server.tool()
def undeclared() -> str:
    """A tool the proxy's tools file does not declare."""
    return "should never run through the proxy"


@server.resource("note://greeting")
def greeting() -> str:
    """A fixed resource."""
    return "hello from the reference server"


@server.prompt()
def review(topic: str) -> str:
    """A prompt with one argument."""
    return f"Review {topic} carefully."


if __name__ == "__main__":
    if port is None:
        server.run("stdio")
    elif settings:
        server.run("streamable-http")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)
