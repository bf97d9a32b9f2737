"""A tiny MCP server over stdio for the McpWorkbench test: notes in one directory."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

LOG = Path(sys.argv[1])  # every call the server runs is appended here
server = FastMCP("notes")


@server.tool()
def read_note(path: str) -> str:
    """Read a note from the workspace."""
    with LOG.open("a") as log:
        log.write(f"read_note {path}\n")
    return Path(path).read_text() if Path(path).exists() else "(empty)"


@server.tool()
def delete_note(path: str) -> str:
    """Delete a note from the workspace."""
    with LOG.open("a") as log:
        log.write(f"delete_note {path}\n")
    return "deleted"


if __name__ == "__main__":
    server.run("stdio")
