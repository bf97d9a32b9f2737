"""The MCP SDK, imported in one place, and which major release of it is installed.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with the
install line, not with a bare ``ModuleNotFoundError`` deep in a call. The proxy speaks to
clients and upstreams through whichever major is installed: ``mcp`` 1.x (the release that
co-installs with CrewAI) or ``mcp`` 2.x.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.mcp needs the MCP SDK: pip install "jevqueue[mcp]"'
    ) from exc

try:
    MCP_MAJOR = int(version("mcp").split(".", 1)[0])
except (PackageNotFoundError, ValueError):  # pragma: no cover - a vendored or odd install
    MCP_MAJOR = 2 if hasattr(types, "InputRequiredResult") else 1

__all__ = [
    "MCP_MAJOR",
    "ClientSession",
    "Server",
    "StdioServerParameters",
    "stdio_client",
    "stdio_server",
    "streamable_http_client",
    "types",
]
