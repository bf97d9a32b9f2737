"""The policy half of the conformance suite, through the real proxy and a real MCP session.

The proxy never sees the model, so it runs :class:`PolicyConformance` (not the model-turn
checks). Each scenario serves an embedded :class:`PolicyProxyServer` to an SDK
``ClientSession`` over in-memory streams; the proxy starts ``conformance_server.py`` as its
upstream (a real MCP server over stdio) whose tool bodies log every call they receive —
the log is read back into each ``ConformanceTool.calls``. The scenario's approver is given
to the proxy as ``approver=``. Routes: the undeclared tool, tools the upstream changes
mid-session, and ``resources/read``, which no policy judges and the proxy leaves out
unless told to relay it (``relay_unjudged``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from jevqueue.plugins.mcp import PolicyProxyServer, Upstream
from jevqueue.testing.conformance import (
    ConformanceTool,
    PolicyConformance,
    PolicyHarness,
    RouteAttempt,
    ScenarioApprover,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
)
from mcp import ClientSession
from proxy_client import MAJOR

SERVER = Path(__file__).resolve().parent / "conformance_server.py"


def _flag(result: Any) -> bool:
    return bool(getattr(result, "isError" if MAJOR < 2 else "is_error"))


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


class Upstreamed:
    """The upstream for one scenario: its tools file, its call log, the proxy in front."""

    def __init__(self, tools: Sequence[ConformanceTool], *, extra: Sequence[str] = ()) -> None:
        self.tools = list(tools)
        folder = Path(tempfile.mkdtemp(prefix="jevqueue-mcp-conformance-"))
        self.log = folder / "calls.jsonl"
        listing = [
            {"name": tool.name, "parameters": list(tool.parameters["properties"])} for tool in tools
        ]
        listing += [{"name": name, "parameters": []} for name in extra]
        (folder / "tools.json").write_text(json.dumps(listing), encoding="utf-8")
        self.command = [sys.executable, str(SERVER), str(folder / "tools.json"), str(self.log)]

    def proxy(self, pep: Any, specs: Any, context: Any, approver: Any, *flags: str) -> Any:
        return PolicyProxyServer(
            Upstream.stdio(*self.command, *flags),
            pep=pep,
            specs=specs,
            context=context,
            approver=approver,
        )

    def ran(self) -> list[dict[str, Any]]:
        """Every entry the upstream logged; the tools' calls are added to their ``calls``."""
        entries = (
            [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
            if self.log.exists()
            else []
        )
        for tool in self.tools:
            tool.calls.extend(e["arguments"] for e in entries if e.get("tool") == tool.name)
        return entries


async def _session(proxy: PolicyProxyServer, scenario: Any) -> Any:
    """Serve ``proxy`` to a client session and run ``scenario(session)``."""
    to_proxy = anyio.create_memory_object_stream[Any](16)
    from_proxy = anyio.create_memory_object_stream[Any](16)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(proxy.serve, to_proxy[1], from_proxy[0])
        async with ClientSession(from_proxy[1], to_proxy[0]) as session:
            await session.initialize()
            outcome = await scenario(session)
        tasks.cancel_scope.cancel()
    return outcome


class TestMcpPolicyConformance(PolicyConformance):
    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        upstream = Upstreamed(call.tools)
        proxy = upstream.proxy(call.pep, call.specs, call.context, call.approver)

        async def scenario(session: Any) -> Any:
            return await session.call_tool(call.tool.name, call.arguments)

        result = anyio.run(_session, proxy, scenario)
        upstream.ran()
        return ToolCallOutcome(_text(result), _flag(result), call.approver.asked)

    def run_tool_batch(self, batch: ToolBatchScenario) -> Sequence[ToolCallOutcome]:
        upstream = Upstreamed(batch.tools)
        proxy = upstream.proxy(batch.pep, batch.specs, batch.context, batch.approver)

        async def scenario(session: Any) -> list[Any]:
            # One message's calls are concurrent requests of one session; the one that
            # needs an approval waits for the approver while the others run.
            results: list[Any] = [None] * len(batch.calls)

            async def call(index: int, name: str, arguments: dict[str, Any]) -> None:
                results[index] = await session.call_tool(name, arguments)

            async with anyio.create_task_group() as calls:
                for index, (name, arguments, _) in enumerate(batch.calls):
                    calls.start_soon(call, index, name, arguments)
            return results

        results = anyio.run(_session, proxy, scenario)
        upstream.ran()
        return [ToolCallOutcome(_text(r), _flag(r), batch.approver.asked) for r in results]

    def routes_around_the_guard(self, policy: PolicyHarness) -> Sequence[RouteAttempt]:
        tools = _tools_of(policy)
        upstream = Upstreamed(tools, extra=["undeclared_tool"])
        approver = ScenarioApprover()
        proxy = upstream.proxy(policy.pep, policy.specs, policy.context, approver, "--late")

        async def scenario(session: Any) -> dict[str, Any]:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            undeclared = await session.call_tool("undeclared_tool", {})
            first = await session.call_tool("get_weather", {"city": "Lisbon"})
            # The upstream re-listed get_weather as destructive and added late_tool, and
            # announced it; the client calls both without listing again.
            again = await session.call_tool("get_weather", {"city": "Porto"})
            late = await session.call_tool("late_tool", {})
            try:  # a resource read reaches the upstream unjudged: left out by default
                await session.read_resource("effect://touch")
            except Exception as error:  # the SDK's JSON-RPC error
                resource = str(error) or type(error).__name__
            else:
                resource = ""
            return {
                "resource": resource,
                "listed": listed,
                "undeclared": undeclared,
                "first": first,
                "again": again,
                "late": late,
            }

        seen = anyio.run(_session, proxy, scenario)
        entries = upstream.ran()
        ran = [e.get("tool") for e in entries]
        assert "undeclared_tool" not in seen["listed"], seen["listed"]
        assert not _flag(seen["first"]), _text(seen["first"])
        assert "destructive" in _text(seen["again"]), _text(seen["again"])
        refused = [
            str(_event(event, "tool"))
            for event in policy.audit.events
            if str(getattr(_event(event, "result"), "value", _event(event, "result"))) == "DENY"
        ]

        def attempt(route: str, name: str, result: Any, runs: int) -> RouteAttempt:
            assert _flag(result), f"{route}: {_text(result)}"
            return RouteAttempt(
                route=route,
                refused=False,
                ran=ran.count(name) > runs,
                audited=name in refused and "jevqueue denied" in _text(result),
            )

        return [
            attempt(
                "undeclared tool (hidden, refused when called)",
                "undeclared_tool",
                seen["undeclared"],
                0,
            ),
            attempt(
                "a tool the upstream lists after the session starts", "late_tool", seen["late"], 0
            ),
            attempt(
                "a declared tool the upstream re-lists as destructive",
                "get_weather",
                seen["again"],
                1,
            ),
            RouteAttempt(
                route="resources/read (no policy judges it: left out unless relay_unjudged)",
                refused=bool(seen["resource"]),
                ran=any("resource" in entry for entry in entries),
                error=seen["resource"],
            ),
        ]


def _tools_of(policy: PolicyHarness) -> list[ConformanceTool]:
    from jevqueue.testing.conformance import conformance_tools

    declared = {spec.name for spec in policy.specs}
    return [tool for tool in conformance_tools() if tool.name in declared]


def _event(event: Any, name: str) -> Any:
    return event.get(name) if isinstance(event, dict) else getattr(event, name, None)
