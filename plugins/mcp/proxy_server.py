"""``PolicyProxyServer``: an MCP server that relays another one and judges every tool call.

Embed it in Python, or run it as ``jevqueue mcp-proxy``. The relay is written once per MCP
major (``_relay_v1`` for ``mcp`` 1.x, ``_relay_v2`` for 2.x); the judging is shared: one
:class:`~jevqueue.policy.Guard` per proxy (:class:`~jevqueue.plugins.mcp.call_judge.CallJudge`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from jevqueue.errors import ConfigurationError, JevError, JevRuntimeError
from jevqueue.plugins.mcp._framework import MCP_MAJOR
from jevqueue.plugins.mcp.approval_request import PendingApprovals
from jevqueue.plugins.mcp.call_judge import CallJudge
from jevqueue.plugins.mcp.tool_spec import describe_tools
from jevqueue.plugins.mcp.upstream import Upstream, connect_upstream
from jevqueue.policy import Approver, ExecutionContext, ToolSpec

__all__ = ["PolicyProxyServer", "UpstreamStoppedError", "describe_upstream"]

_logger = logging.getLogger("jevqueue.plugins.mcp")

_GRACE_SECONDS = 0.5


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

    async def read() -> tuple[list[dict[str, Any]], bool]:
        async with connect_upstream(target) as connection:
            offered = connection.initialize_result.capabilities
            if offered.tools is None:
                return [], offered.resources is not None  # nothing to declare but resources
            tools: list[dict[str, Any]] = await _relay().all_tools(connection.session)
            return tools, offered.resources is not None

    try:
        tools, resources = anyio.run(read)
    except ConfigurationError:
        raise
    except Exception as error:
        raise UpstreamStoppedError(
            f"could not list the tools of {target.describe()} ({type(error).__name__}: "
            f"{error}): check that the command runs on its own"
        ) from None
    return describe_tools(tools, source=target.describe(), resources=resources)


UNJUDGED_ROUTES = ("prompts", "completions")
"""What an MCP server offers besides tools and resources, which no policy judges; the proxy
relays each only when told to."""


def _unjudged_routes(names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):
        names = (names,)
    chosen = frozenset(names)
    if "resources" in chosen:
        raise ConfigurationError(
            "relay_unjudged names 'resources', and resources are never relayed unjudged: "
            "each resources/read is judged as a call of the tool 'resources/read'. Declare "
            'it in the tools file ([[tool]] name = "resources/read", side_effects = '
            '["file_read"], path_fields = ["path"]) to relay resources, and drop '
            "'resources' from relay_unjudged (--relay-unjudged)"
        )
    unknown = sorted(chosen - set(UNJUDGED_ROUTES))
    if unknown:
        raise ConfigurationError(
            f"relay_unjudged names {unknown}: choose among {', '.join(UNJUDGED_ROUTES)}"
        )
    return chosen


class PolicyProxyServer:
    """Relay an upstream MCP server and put the PEP in front of every ``tools/call``.

    ``initialize`` (server name, version, instructions, capabilities) and ``tools/list``
    are relayed as the upstream answers them, less what the proxy refuses: tools without
    a spec, a name listed twice, and a tool listed otherwise than pinned
    (:class:`~jevqueue.policy.ListingPins`) are hidden from ``tools/list`` and refused
    when called anyway. A ``tools/call`` runs upstream only when the PEP allows it, with
    declared arguments only; otherwise the client gets a ``CallToolResult`` with
    ``isError`` true saying why, and the upstream never sees it. Resources are relayed
    when the tools file declares ``resources/read``, each read judged as a call of it
    (:mod:`~jevqueue.plugins.mcp.resource_read`). Prompts and completions reach the
    upstream unjudged, so they are left out — not advertised to the client, and refused
    if asked for anyway — unless named in ``relay_unjudged``. Every declaration carries
    the upstream's :attr:`~Upstream.origin`, so approvals bind to this upstream.

    Args:
        upstream: an :class:`Upstream`, a command list (``["npx", "-y", "pkg", "/ws"]``) or
            a streamable HTTP URL.
        pep: the :class:`jevqueue.PolicyEnforcementPoint` (its audit log records every
            decision).
        specs: the tools the upstream may run (``jevqueue.load_tools_file(path)``).
        context: the :class:`jevqueue.ExecutionContext` every call is judged in.
        approver: who approves a call that needs an explicit approval, in place of the
            client's user: a :class:`jevqueue.policy.Approver` (plain or ``async``) shown
            the core :class:`~jevqueue.policy.ApprovalRequest`, answering with signed
            records or raising :class:`~jevqueue.errors.ApprovalDeclinedError`.
        authority: the approval authority that signs a user's "yes" to an elicited
            approval (the PEP's verifier must trust it). Without it or ``approver``, a
            call that needs approval can only run with a signed record from
            ``jevqueue approve``.
        approvals_dir: a directory of records printed by ``jevqueue approve`` (unattended
            approvals), each offered for the digest it names.
        approval_ttl: seconds an approval question (protocol 2026-07-28) stays answerable.
        relay_unjudged: which of ``"prompts"`` and ``"completions"`` to relay although no
            policy judges them (default: neither).

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
        approver: Approver | None = None,
        authority: Any = None,
        approvals_dir: str | Path | None = None,
        approval_ttl: float = 600.0,
        relay_unjudged: Iterable[str] = (),
    ) -> None:
        self.upstream = Upstream.coerce(upstream)
        self.relay_unjudged = _unjudged_routes(relay_unjudged)
        self.judge = CallJudge(
            pep=pep,
            specs=specs,
            context=context,
            approver=approver,
            authority=authority,
            approvals_dir=approvals_dir,
            origin=self.upstream.origin,
        )
        self.guard = self.judge.guard
        self.approver = self.judge.approver
        self.authority = authority
        self.pending = PendingApprovals(ttl_seconds=approval_ttl)
        self.mcp_major = MCP_MAJOR
        self._on_upstream_stop: Callable[[UpstreamStoppedError], None] | None = None

    @property
    def relayed(self) -> frozenset[str]:
        """The routes besides tools the proxy relays: ``"resources"`` when the tools file
        declares ``resources/read`` (judged), and the ``relay_unjudged`` ones."""
        judged = {"resources"} if self.judge.reads_resources else set()
        return self.relay_unjudged | judged

    async def serve(self, read_stream: Any, write_stream: Any) -> None:
        """Connect to the upstream and serve one client on the given SDK streams.

        Returns when the client disconnects.

        Raises:
            UpstreamStoppedError: the upstream could not be started, exited, or dropped
                the connection; no call was let through because of it.
            ConfigurationError: the upstream command does not exist.
        """
        async with self._connected() as (connection, notify):
            await self._serve_on(connection, notify, read_stream, write_stream)

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout (what ``mcp-proxy`` runs).

        The upstream is started first, so a server that cannot start is reported before
        the client is answered at all.
        """
        from jevqueue.plugins.mcp._framework import stdio_server
        from jevqueue.plugins.mcp.stdio_pipes import stdio_pipes

        async with self._connected() as (connection, notify), stdio_pipes() as pipes:
            stdin, stdout = pipes if pipes is not None else (None, None)
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):
                await self._serve_on(connection, notify, read_stream, write_stream)

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[tuple[Any, Any]]:
        relay = _relay()
        notify = relay.NotificationRelay(self.judge)
        try:
            async with AsyncExitStack() as stack:
                connection = await stack.enter_async_context(
                    connect_upstream(self.upstream, on_notification=notify)
                )
                if connection.initialize_result.capabilities.tools is not None:
                    self.judge.learn_tools(await relay.all_tools(connection.session))
                entered = True
                yield connection, notify
        except (JevError, anyio.get_cancelled_exc_class()):
            raise
        except Exception as error:
            if locals().get("entered"):
                raise
            raise UpstreamStoppedError(
                f"the upstream MCP server ({self.upstream.describe()}) did not start or "
                f"answer initialize ({_first_leaf(error)}): run the command on its own to "
                "see why"
            ) from error

    async def _serve_on(
        self, connection: Any, notify: Any, read_stream: Any, write_stream: Any
    ) -> None:
        relay = _relay()
        stopped = False
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                nonlocal stopped
                await connection.ended.wait()
                stopped = True
                # Calls in flight fail upstream now; give their error answers time to leave.
                await anyio.sleep(_GRACE_SECONDS)
                if self._on_upstream_stop is not None:
                    self._on_upstream_stop(self._stopped_error())
                tasks.cancel_scope.cancel()

            async def run() -> None:
                await relay.serve(self, connection, notify, read_stream, write_stream)
                tasks.cancel_scope.cancel()

            tasks.start_soon(watch)
            tasks.start_soon(run)
        if stopped:
            raise self._stopped_error()

    def _stopped_error(self) -> UpstreamStoppedError:
        return UpstreamStoppedError(
            f"the upstream MCP server ({self.upstream.describe()}) stopped: the proxy "
            "stopped with it, and no call was let through. Check the server's own output "
            "above, then restart the client"
        )

    def run_stdio(self) -> int:
        """Serve over stdio until the client leaves; return the process exit status.

        0 when the client disconnected; 1 when the upstream could not start or stopped
        (reported on stderr).
        """

        def stop_now(error: UpstreamStoppedError) -> None:
            # The SDK reads stdin in a worker thread that no cancellation interrupts, so a
            # proxy whose upstream died would wait for the client's next line: exit instead.
            sys.stdout.flush()
            print(f"jevqueue mcp-proxy: {error}", file=sys.stderr, flush=True)
            os._exit(1)

        self._on_upstream_stop = stop_now
        try:
            anyio.run(self.serve_stdio)
        except BaseException as raised:
            error = _jev_error(raised)
            if error is None:
                raise
            print(f"jevqueue mcp-proxy: {error}", file=sys.stderr)
            return 1
        return 0


def _first_leaf(error: BaseException) -> str:
    """``Type: message`` of the first error inside nested exception groups."""
    while getattr(error, "exceptions", None):
        error = error.exceptions[0]  # type: ignore[attr-defined]
    return f"{type(error).__name__}: {error}"


def _jev_error(raised: BaseException) -> JevError | None:
    """The jevqueue error in ``raised``, looking inside task-group exception groups."""
    if isinstance(raised, JevError):
        return raised
    for inner in getattr(raised, "exceptions", ()):
        found = _jev_error(inner)
        if found is not None:
            return found
    return None
