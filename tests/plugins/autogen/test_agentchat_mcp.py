"""``PolicyWorkbench`` in front of a real ``McpWorkbench`` over a stdio MCP server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen_ext.tools.mcp",
    reason='AgentChat MCP is not installed: pip install "jevqueue[autogen]"',
)

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams
from autogen_kit import build_policy
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


def test_an_mcp_tool_without_a_spec_is_hidden_and_refused(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"

    async def scenario() -> tuple[list[str], Any, Any]:
        params = StdioServerParams(
            command=sys.executable, args=[str(SERVER), str(log)], read_timeout_seconds=TIMEOUT
        )
        async with McpWorkbench(params) as mcp:
            schemas = {tool["name"]: tool for tool in await mcp.list_tools()}
            specs = [
                tool_spec(schemas["read_note"], side_effects={"file_read"}, path_fields=["path"])
            ]
            policy = build_policy(workspace, specs)
            workbench = PolicyWorkbench(mcp, pep=policy.pep, specs=specs, context=policy.context)
            listed = [tool["name"] for tool in await workbench.list_tools()]
            deleted = await workbench.call_tool("delete_note", {"path": "a.txt"})
            return listed, deleted, policy

    listed, deleted, policy = asyncio.run(scenario())
    assert listed == ["read_note"]
    assert deleted.is_error and "denied" in deleted.result[0].content
    assert not log.exists()  # the server ran nothing
    assert policy.results() == [("delete_note", "DENY")]


# --- the filesystem server (npm), a server of fourteen tools ---------------------------

FILESYSTEM_SERVER = (
    Path(__file__).resolve().parents[3] / ".npm-tools" / "node_modules" / ".bin"
) / "mcp-server-filesystem"


def _filesystem(workspace: Path) -> Any:
    if not FILESYSTEM_SERVER.exists():
        pytest.fail(
            f"{FILESYSTEM_SERVER} is missing: run `make test`, or `npm install --prefix "
            ".npm-tools @modelcontextprotocol/server-filesystem`"
        )
    return StdioServerParams(
        command=str(FILESYSTEM_SERVER), args=[str(workspace)], read_timeout_seconds=TIMEOUT
    )


def test_a_declared_subset_of_a_servers_tools_is_offered_and_the_rest_refused(
    workspace: Path,
) -> None:
    (workspace / "draft.txt").write_text("draft")

    async def scenario() -> tuple[int, list[str], Any, Any]:
        async with McpWorkbench(_filesystem(workspace)) as mcp:
            schemas = {tool["name"]: tool for tool in await mcp.list_tools()}
            specs = [
                tool_spec(
                    schemas["read_text_file"], side_effects={"file_read"}, path_fields=["path"]
                ),
                tool_spec(
                    schemas["read_multiple_files"],
                    side_effects={"file_read"},
                    path_fields=["paths"],
                ),
                tool_spec(schemas["list_allowed_directories"], side_effects=()),
            ]
            policy = build_policy(workspace, specs)
            workbench = PolicyWorkbench(mcp, pep=policy.pep, specs=specs, context=policy.context)
            listed = sorted(tool["name"] for tool in await workbench.list_tools())
            moved = await workbench.call_tool(
                "move_file", {"source": "draft.txt", "destination": "moved.txt"}
            )
            return len(schemas), listed, moved, policy

    served, listed, moved, policy = asyncio.run(scenario())
    assert served >= 14
    assert listed == ["list_allowed_directories", "read_multiple_files", "read_text_file"]
    assert moved.is_error and "denied" in moved.result[0].content
    assert (workspace / "draft.txt").read_text() == "draft"
    assert not (workspace / "moved.txt").exists()
    assert policy.results() == [("move_file", "DENY")]


def test_each_path_of_read_multiple_files_is_judged(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("alpha")
    (workspace / "b.txt").write_text("bravo")
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret")

    async def scenario() -> tuple[Any, Any, Any]:
        # The server may read the secret: it serves the directory that holds it.
        async with McpWorkbench(_filesystem(tmp_path)) as mcp:
            schemas = {tool["name"]: tool for tool in await mcp.list_tools()}
            specs = [
                tool_spec(
                    schemas["read_multiple_files"],
                    side_effects={"file_read"},
                    path_fields=["paths"],
                )
            ]
            policy = build_policy(workspace, specs)
            workbench = PolicyWorkbench(mcp, pep=policy.pep, specs=specs, context=policy.context)
            refused = await workbench.call_tool(
                "read_multiple_files", {"paths": ["a.txt", str(secret)]}
            )
            allowed = await workbench.call_tool(
                "read_multiple_files", {"paths": ["a.txt", "b.txt"]}
            )
            return refused, allowed, policy

    refused, allowed, policy = asyncio.run(scenario())
    text = refused.result[0].content
    assert refused.is_error and "outside the workspace" in text
    assert "the secret" not in text and "alpha" not in text
    read = allowed.result[0].content
    assert not allowed.is_error and "alpha" in read and "bravo" in read
    # The server was given the paths the policy resolved.
    assert str(workspace.resolve() / "a.txt") in read
    assert policy.results() == [("read_multiple_files", "DENY"), ("read_multiple_files", "ALLOW")]


def test_an_argument_the_declared_schema_does_not_name_never_reaches_the_server(
    workspace: Path, tmp_path: Path
) -> None:
    """The notes server's schema does not close its properties; a second, undeclared path
    would reach it unjudged. The call is refused, naming it."""
    log = tmp_path / "calls.log"

    async def scenario() -> tuple[Any, Any]:
        params = StdioServerParams(
            command=sys.executable, args=[str(SERVER), str(log)], read_timeout_seconds=TIMEOUT
        )
        async with McpWorkbench(params) as mcp:
            schemas = {tool["name"]: tool for tool in await mcp.list_tools()}
            specs = [
                tool_spec(schemas["read_note"], side_effects={"file_read"}, path_fields=["path"])
            ]
            policy = build_policy(workspace, specs)
            workbench = PolicyWorkbench(mcp, pep=policy.pep, specs=specs, context=policy.context)
            outside = str(tmp_path / "outside.txt")
            refused = await workbench.call_tool("read_note", {"path": "a.txt", "also": outside})
            return refused, policy

    refused, policy = asyncio.run(scenario())
    assert refused.is_error and "'also'" in refused.result[0].content
    assert not log.exists()
    assert policy.results() == [("read_note", "DENY")]
