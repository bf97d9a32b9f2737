"""The policy half of the conformance suite, through the real proxy and a real MCP session.

The proxy never sees the model, so it runs :class:`PolicyConformance` (not the model-turn
checks). Each scenario serves an embedded :class:`PolicyProxyServer` to an SDK
``ClientSession`` over in-memory streams; the proxy starts ``conformance_server.py`` as its
upstream (a real MCP server over stdio) whose tool bodies log every call they receive —
the log is read back into each ``ConformanceTool.calls``. The scenario's approver is given
to the proxy as ``approver=``. Routes: the undeclared tool, an argument the declaration
does not name, tools the upstream changes mid-session, and ``resources/read``, which the
proxy leaves out unless the tools file declares it (then each read is judged).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from jevqueue.plugins.mcp import PolicyProxyServer, Upstream
from jevqueue.testing import conformance
from jevqueue.testing.conformance import (
    ConformanceTool,
    PolicyConformance,
    PolicyHarness,
    RouteAttempt,
    ScenarioApprover,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
)
from mcp import ClientSession
from proxy_client import MAJOR

SERVER = Path(__file__).resolve().parent / "conformance_server.py"


def _flag(result: Any) -> bool:
    return bool(getattr(result, "isError" if MAJOR < 2 else "is_error"))


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


ORIGIN_NAME = "conformance"


class Upstreamed:
    """The upstream for one scenario: its tools file, its call log, the proxy in front.

    The tools file and the log reach the server through its environment, so its command
    line — and the origin every declaration is bound to — is the same for every scenario.
    """

    def __init__(self, tools: Sequence[ConformanceTool], *, extra: Sequence[str] = ()) -> None:
        self.tools = list(tools)
        folder = Path(tempfile.mkdtemp(prefix="jevqueue-mcp-conformance-"))
        self.log = folder / "calls.jsonl"
        listing = [
            {
                "name": tool.name,
                "parameters": list(tool.parameters["properties"]),
                **({"result": tool.result} if tool.result is not None else {}),
            }
            for tool in tools
        ]
        listing += [{"name": name, "parameters": []} for name in extra]
        (folder / "tools.json").write_text(json.dumps(listing), encoding="utf-8")
        self.env = {
            "CONFORMANCE_TOOLS": str(folder / "tools.json"),
            "CONFORMANCE_LOG": str(self.log),
        }

    def proxy(
        self, pep: Any, specs: Any, context: Any, approver: Any, *, late: bool = False
    ) -> Any:
        env = {**self.env, **({"CONFORMANCE_LATE": "1"} if late else {})}
        return PolicyProxyServer(
            Upstream.stdio(sys.executable, str(SERVER), env=env, name=ORIGIN_NAME),
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


ORIGIN = Upstream.stdio(sys.executable, str(SERVER), name=ORIGIN_NAME).origin


@pytest.fixture(autouse=True)
def _declarations_bound_to_the_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite computes each expected digest from its own declarations; the proxy binds
    every declaration to its upstream (``ToolSpec.origin``, part of the digest). The
    suite's declarations are bound to the same upstream, or every digest it expects would
    name another action."""
    build = conformance._build_policy

    def bound(*args: Any, **kwargs: Any) -> Any:
        harness = build(*args, **kwargs)
        for spec in harness.registry.specs():
            harness.registry.register(dataclasses.replace(spec, origin=ORIGIN), replace=True)
        return harness

    monkeypatch.setattr(conformance, "_build_policy", bound)


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

    #: The proxy never sees what the user wrote: only the calls the client sends.
    sees_user_request = False
    sees_call_ids = False  # the proxy names calls session/request-id

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> Sequence[Sequence[ToolCallOutcome]]:
        # One client session is one agent's: each message's calls after the previous
        # message's results came back. The user's request never reaches an MCP server.
        upstream = Upstreamed(conversation.tools)
        proxy = upstream.proxy(
            conversation.pep, conversation.specs, conversation.context, conversation.approver
        )

        async def scenario(session: Any) -> list[list[Any]]:
            results: list[list[Any]] = []
            for message in conversation.messages:
                batch: list[Any] = [None] * len(message)

                async def call(
                    into: list[Any], index: int, name: str, arguments: dict[str, Any]
                ) -> None:
                    into[index] = await session.call_tool(name, arguments)

                async with anyio.create_task_group() as calls:
                    for index, (name, arguments, _) in enumerate(message):
                        calls.start_soon(call, batch, index, name, arguments)
                results.append(batch)
            return results

        results = anyio.run(_session, proxy, scenario)
        upstream.ran()
        asked = conversation.approver.asked
        return [[ToolCallOutcome(_text(r), _flag(r), asked) for r in batch] for batch in results]

    def routes_around_the_guard(self, policy: PolicyHarness) -> Sequence[RouteAttempt]:
        tools = _tools_of(policy)
        upstream = Upstreamed(tools, extra=["undeclared_tool"])
        approver = ScenarioApprover()
        proxy = upstream.proxy(policy.pep, policy.specs, policy.context, approver, late=True)

        async def scenario(session: Any) -> dict[str, Any]:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            undeclared = await session.call_tool("undeclared_tool", {})
            extra = await session.call_tool("get_weather", {"city": "Lisbon", "path": "/etc"})
            first = await session.call_tool("get_weather", {"city": "Lisbon"})
            # The upstream re-listed get_weather as destructive and added late_tool, and
            # announced it; the client calls both without listing again.
            again = await session.call_tool("get_weather", {"city": "Porto"})
            late = await session.call_tool("late_tool", {})
            try:  # a resource read is left out unless resources/read is declared
                await session.read_resource("effect://touch")
            except Exception as error:  # the SDK's JSON-RPC error
                resource = str(error) or type(error).__name__
            else:
                resource = ""
            return {
                "resource": resource,
                "listed": listed,
                "undeclared": undeclared,
                "extra": extra,
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
            attempt("an argument the declaration does not name", "get_weather", seen["extra"], 1),
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
                route="resources/read (left out unless the tools file declares resources/read)",
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
