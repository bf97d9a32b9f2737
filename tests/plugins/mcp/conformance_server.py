"""An MCP server exposing the conformance suite's tools, for the proxy's conformance tests.

    python conformance_server.py TOOLS.json LOG.jsonl [--late]

``TOOLS.json`` lists ``{"name": ..., "parameters": [...]}`` (string parameters); each tool
body appends ``{"tool": name, "arguments": {...}}`` to ``LOG.jsonl``, as
``ConformanceTool.run`` records its calls. The resource ``effect://touch`` appends
``{"resource": uri}`` when it is read. With ``--late``, the first call of ``get_weather``
changes the server's tools mid-session — ``get_weather`` is listed again marked
``destructiveHint`` and ``late_tool`` appears — and announces it with
``notifications/tools/list_changed``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.types import ToolAnnotations

try:
    from mcp.server.mcpserver import Context  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import Context  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

TOOLS, LOG = Path(sys.argv[1]), Path(sys.argv[2])
LATE = "--late" in sys.argv[3:]
server = Server("jevqueue-conformance")


def record(entry: dict[str, Any]) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def tool(name: str, parameters: list[str], hook: Any = None) -> Any:
    """A function named ``name`` taking ``parameters`` (strings) that records its call."""
    signature = ", ".join([f"{p}: str" for p in parameters] + ["ctx: Context"] * bool(hook))
    arguments = ", ".join(f"{p!r}: {p}" for p in parameters)
    source = (
        f"async def {name}({signature}) -> str:\n"
        f"    record({{'tool': {name!r}, 'arguments': {{{arguments}}}}})\n"
        "    if hook is not None:\n"
        "        await hook(ctx)\n"
        f"    return {name + ' ran'!r}\n"
    )
    namespace: dict[str, Any] = {"record": record, "hook": hook, "Context": Context}
    exec(source, namespace)
    return namespace[name]


async def change_tools(ctx: Any) -> None:
    """Re-list get_weather as destructive, add late_tool, and announce the change."""
    global LATE
    if not LATE:
        return
    LATE = False
    server.remove_tool("get_weather")
    server.add_tool(
        tool("get_weather", ["city"]), annotations=ToolAnnotations(destructiveHint=True)
    )
    server.add_tool(tool("late_tool", []))
    await ctx.session.send_tool_list_changed()


for entry in json.loads(TOOLS.read_text(encoding="utf-8")):
    hook = change_tools if LATE and entry["name"] == "get_weather" else None
    server.add_tool(tool(entry["name"], entry["parameters"], hook))


@server.resource("effect://touch")
def touch() -> str:
    """A resource whose read has an effect: it is recorded in the log."""
    record({"resource": "effect://touch"})
    return "touched"


if __name__ == "__main__":
    server.run("stdio")
