"""``PolicyProxyServer``: an MCP server that relays another one and judges every tool call.

Embed it in Python, or run it as ``jevqueue mcp-proxy``. The relay is written once per MCP
major (``_relay_v1`` for ``mcp`` 1.x, ``_relay_v2`` for 2.x); the judging is shared
(:class:`~jevqueue.plugins.mcp.call_judge.CallJudge`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from jevqueue.context import ExecutionContext
from jevqueue.errors import ConfigurationError, JevRuntimeError
from jevqueue.plugins.mcp._framework import MCP_MAJOR
from jevqueue.plugins.mcp.approval_request import PendingApprovals
from jevqueue.plugins.mcp.call_judge import CallJudge
from jevqueue.plugins.mcp.tool_spec import describe_tools
from jevqueue.plugins.mcp.upstream import Upstream, connect_upstream
from jevqueue.registry import ToolSpec

__all__ = ["PolicyProxyServer", "UpstreamStoppedError", "describe_upstream"]

_logger = logging.getLogger("jevqueue.plugins.mcp")


class UpstreamStoppedError(JevRuntimeError):
    """The upstream server exited or its connection dropped; the proxy stopped with it."""


def _relay() -> Any:
    """The relay written for the installed MCP major."""
    if MCP_MAJOR >= 2:
        from jevqueue.plugins.mcp import _relay_v2 as relay
    else:
        from jevqueue.plugins.mcp import _relay_v1 as relay
    return relay


def describe_upstream(upstream: Upstream | str | Sequence[str]) -> str:
    """Start (or reach) ``upstream`` once and return a starting tools file for its tools.

    Raises:
        UpstreamStoppedError: the upstream could not be started or did not answer.
    """
    target = Upstream.coerce(upstream)

    async def read() -> list[dict[str, Any]]:
        async with connect_upstream(target) as connection:
            tools: list[dict[str, Any]] = await _relay().all_tools(connection.session)
            return tools

    try:
        tools = anyio.run(read)
    except ConfigurationError:
        raise
    except Exception as error:
        raise UpstreamStoppedError(
            f"could not list the tools of {target.describe()} ({type(error).__name__}: "
            f"{error}): check that the command runs on its own"
        ) from None
    return describe_tools(tools, source=target.describe())


class PolicyProxyServer:
    """Relay an upstream MCP server and put the PEP in front of every ``tools/call``.

    ``initialize`` (server name, version, instructions, capabilities), ``tools/list``,
    resources, prompts and completions are relayed as the upstream answers them. A
    ``tools/call`` runs upstream only when the PEP allows it; otherwise the client gets a
    ``CallToolResult`` with ``isError`` true saying why, and the upstream never sees it.
    Tools without a spec are hidden from ``tools/list`` and refused when called anyway.

    Args:
        upstream: an :class:`Upstream`, a command list (``["npx", "-y", "pkg", "/ws"]``) or
            a streamable HTTP URL.
        pep: the :class:`jevqueue.PolicyEnforcementPoint` (its audit log records every
            decision).
        specs: the tools the upstream may run (``jevqueue.load_tools_file(path)``).
        context: the :class:`jevqueue.ExecutionContext` every call is judged in.
        authority: the approval authority that signs a user's "yes" to an elicited
            approval (the PEP's verifier must trust it). Without one, a call that needs
            approval can only run with a signed record from ``jevqueue approve``.
        approvals_dir: a directory of records printed by ``jevqueue approve`` (unattended
            approvals), each offered for the digest it names.
        approval_ttl: seconds an approval question (protocol 2026-07-28) stays answerable.

    Raises:
        ConfigurationError: any of the above is unusable.
    """

    def __init__(
        self,
        upstream: Upstream | str | Sequence[str],
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        authority: Any = None,
        approvals_dir: str | Path | None = None,
        approval_ttl: float = 600.0,
    ) -> None:
        self.upstream = Upstream.coerce(upstream)
        self.judge = CallJudge(pep=pep, specs=specs, context=context, approvals_dir=approvals_dir)
        if authority is not None and not callable(getattr(authority, "issue", None)):
            raise ConfigurationError(
                "authority must be a jevqueue.approvals.ApprovalAuthority (it has no "
                "issue(action_digest) method)"
            )
        self.authority = authority
        self.pending = PendingApprovals(ttl_seconds=approval_ttl)
        self.mcp_major = MCP_MAJOR

    async def serve(self, read_stream: Any, write_stream: Any) -> None:
        """Connect to the upstream and serve one client on the given SDK streams.

        Returns when the client disconnects.

        Raises:
            UpstreamStoppedError: the upstream exited or dropped the connection; no call
                was let through because of it.
        """
        relay = _relay()
        notify = relay.NotificationRelay()
        async with connect_upstream(self.upstream, on_notification=notify) as connection:
            self.judge.learn_tools(await relay.all_tools(connection.session))
            stopped = False
            async with anyio.create_task_group() as tasks:

                async def watch() -> None:
                    nonlocal stopped
                    await connection.ended.wait()
                    stopped = True
                    tasks.cancel_scope.cancel()

                async def run() -> None:
                    await relay.serve(self, connection, notify, read_stream, write_stream)
                    tasks.cancel_scope.cancel()

                tasks.start_soon(watch)
                tasks.start_soon(run)
        if stopped:
            raise UpstreamStoppedError(
                f"the upstream MCP server ({self.upstream.describe()}) stopped: the proxy "
                "stopped with it, and no call was let through. Check the server's own output "
                "above, then restart the client"
            )

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout (what ``mcp-proxy`` runs)."""
        from jevqueue.plugins.mcp._framework import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await self.serve(read_stream, write_stream)

    def run_stdio(self) -> int:
        """Serve over stdio until the client leaves; return the process exit status.

        0 when the client disconnected, 1 when the upstream stopped (reported on stderr).
        """
        try:
            anyio.run(self.serve_stdio)
        except UpstreamStoppedError as error:
            print(f"jevqueue mcp-proxy: {error}", file=sys.stderr)
            return 1
        return 0
