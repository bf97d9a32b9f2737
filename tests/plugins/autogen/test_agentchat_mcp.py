"""``PolicyWorkbench`` in front of a real ``McpWorkbench`` over a stdio MCP server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "autogen_ext.tools.mcp",
    reason='AgentChat MCP is not installed: pip install "jevqueue[autogen]"',
)

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams
from autogen_kit import build_policy
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen import PolicyWorkbench, tool_spec
from jevqueue.plugins.autogen.testing import ScriptedChatCompletionClient, tool_call

SERVER = Path(__file__).with_name("mcp_notes_server.py")
# McpWorkbench waits 5 s for each answer by default; a loaded 2-core machine can take
# longer just to start the server's Python (the MCP SDK then reports the timeout as
# anyio.BrokenResourceError). A minute is a hang, not a slow start.
TIMEOUT = 60.0


def test_mcp_calls_are_judged_before_the_server_runs_them(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    (workspace / "a.txt").write_text("ship on Friday")

    async def scenario() -> list[str]:
        params = StdioServerParams(
            command=sys.executable, args=[str(SERVER), str(log)], read_timeout_seconds=TIMEOUT
        )
        async with McpWorkbench(params) as mcp:
            schemas = {tool["name"]: tool for tool in await mcp.list_tools()}
            specs = [
                tool_spec(schemas["read_note"], side_effects={"file_read"}, path_fields=["path"]),
                tool_spec(
                    schemas["delete_note"], side_effects={"file_write"}, path_fields=["path"]
                ),
            ]
            policy = build_policy(workspace, specs)
            model = ScriptedChatCompletionClient(
                [
                    [
                        tool_call("read_note", {"path": "a.txt"}),
                        tool_call("delete_note", {"path": "../../etc/passwd"}),
                    ]
                ]
            )
            agent = AssistantAgent(
                "assistant",
                model_client=model,
                workbench=PolicyWorkbench(mcp, pep=policy.pep, specs=specs, context=policy.context),
            )
            result = await agent.run(task="Read a.txt, then delete /etc/passwd")
            return [r.content for r in result.messages[-1].results]

    read, deleted = asyncio.run(scenario())
    assert read == "ship on Friday"
    assert "denied" in deleted
    # The server ran the allowed call, with the path the policy resolved, and nothing else.
    assert log.read_text().splitlines() == [f"read_note {workspace / 'a.txt'}"]


def test_an_mcp_tool_without_a_spec_stops_before_any_call(workspace: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        params = StdioServerParams(
            command=sys.executable,
            args=[str(SERVER), str(tmp_path / "l")],
            read_timeout_seconds=TIMEOUT,
        )
        async with McpWorkbench(params) as mcp:
            schemas = {tool["name"]: tool for tool in await mcp.list_tools()}
            specs = [
                tool_spec(schemas["read_note"], side_effects={"file_read"}, path_fields=["path"])
            ]
            policy = build_policy(workspace, specs)
            workbench = PolicyWorkbench(mcp, pep=policy.pep, specs=specs, context=policy.context)
            with pytest.raises(ConfigurationError, match="delete_note"):
                await workbench.list_tools()

    asyncio.run(scenario())
    assert not (tmp_path / "l").exists()
