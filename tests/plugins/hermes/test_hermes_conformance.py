"""The shared plugin conformance suite, run through the Hermes plugin.

The glue drives Hermes' own pieces: the model turn goes through Hermes' LLM execution
middleware chain (``run_llm_execution_middleware``) with the governor installed in it, and
the reply is read with Hermes' chat-completions response normaliser; the tool step is
Hermes' dispatcher ``handle_function_call``, whose ``pre_tool_call`` hook and
``tool_execution`` middleware carry the PEP. A batch and a conversation run in a real
``AIAgent`` loop (its executor, its approver asked inline; the conversation's calls judged
with what Hermes sent the model, through the ``pre_api_request`` hook), and each route
around the guard is tried on a real ``AIAgent``. The end-to-end loop is also in
``test_hermes_agent.py``.

The middleware never raises into Hermes (Hermes would send or use the call ungoverned);
it answers a disobeying reply with a local refusal and records the error. The glue
re-raises that recorded ``ProviderDisobeyedError``, which is what the suite checks.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip(
    "run_agent",
    reason="Hermes Agent is not installed here: it runs in its own venv (make test builds it; "
    'pip install "jevqueue[hermes]")',
)

from agent.transports import get_transport
from hermes_cli.middleware import run_llm_execution_middleware
from hermes_cli.plugins import get_plugin_manager
from hermes_kit import TOOLSET, calls_reply, hermes_agent, register_tools
from jevqueue.errors import ConfigurationError, ProviderDisobeyedError
from jevqueue.plugins.hermes import GovernorMiddleware, HermesGovernance, PolicyGuard, tool_spec
from jevqueue.plugins.hermes.testing import (
    RecordingChatServer,
    completion,
    text_reply,
    tool_reply,
)
from jevqueue.testing.conformance import (
    PluginConformance,
    PolicyHarness,
    ProviderReply,
    ProviderRequest,
    RouteAttempt,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
    TurnOutcome,
    TurnScenario,
    policy_tools,
)
from model_tools import handle_function_call
from openai.types.chat import ChatCompletion

pytestmark = pytest.mark.network_allowed  # the batch runs against a server on 127.0.0.1


@contextmanager
def installed(kind: str, name: str, callback: Any) -> Iterator[None]:
    manager = get_plugin_manager()
    table = manager._hooks if kind == "hook" else manager._middleware
    table.setdefault(name, []).append(callback)
    try:
        yield
    finally:
        table[name] = [entry for entry in table[name] if entry != callback]


def neutral_request(body: dict[str, Any]) -> ProviderRequest:
    choice = body.get("tool_choice")
    forced = choice["function"]["name"] if isinstance(choice, dict) else None
    return ProviderRequest(
        forced_tool=forced,
        tools_forbidden=choice == "none",
        tool_choice_set="tool_choice" in body,
        parallel_tool_calls=body.get("parallel_tool_calls"),
        messages=tuple(body["messages"]),
        tools=tuple(tool["function"]["name"] for tool in body.get("tools") or []),
        raw=body,
    )


def hermes_reply(reply: ProviderReply) -> dict[str, Any]:
    if reply.tool_calls:
        return tool_reply(*reply.tool_calls)
    return text_reply(reply.text)


def outcome_of(result: str) -> ToolCallOutcome:
    parsed = json.loads(result)
    is_error = isinstance(parsed, dict) and "error" in parsed
    message = parsed["error"] if is_error else str(parsed.get("result"))
    return ToolCallOutcome(message=message, is_error=is_error)


def run_tools(response: Any, guard: PolicyGuard) -> list[str]:
    """Hermes' dispatcher over the reply's calls, with the guard's hook and gate installed."""
    normalized = get_transport("chat_completions").normalize_response(response)
    results = []
    with (
        installed("hook", "pre_tool_call", guard.pre_tool_call),
        installed("middleware", "tool_execution", guard.tool_execution),
    ):
        for call in normalized.tool_calls or []:
            results.append(
                handle_function_call(
                    call.name, json.loads(call.arguments), tool_call_id=call.id, session_id=""
                )
            )
    return results


class TestHermesConformance(PluginConformance):
    """Every conformance check through ``GovernorMiddleware``, ``PolicyGuard`` and a real agent."""

    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        register_tools(turn.tools)
        guard = PolicyGuard(pep=turn.pep, specs=register_tools(turn.tools), context=turn.context)
        middleware = GovernorMiddleware(turn.governor)
        request = {
            "model": "test-model",
            "messages": copy.deepcopy(turn.messages),
            "tools": [tool.openai_schema() for tool in turn.tools],
        }

        def provider(body: dict[str, Any]) -> ChatCompletion:
            reply = turn.provider.respond(neutral_request(body))
            return ChatCompletion.model_validate(completion(hermes_reply(reply)))

        with installed("middleware", "llm_execution", middleware):
            response = run_llm_execution_middleware(request, provider, session_id="")
        if middleware.refusals and isinstance(
            middleware.refusals[-1].error, ProviderDisobeyedError
        ):
            raise middleware.refusals[-1].error
        run_tools(response, guard)
        normalized = get_transport("chat_completions").normalize_response(response)
        calls = tuple(
            (call.name, json.loads(call.arguments)) for call in normalized.tool_calls or []
        )
        return TurnOutcome(
            text=normalized.content or "",
            tool_calls=calls,
            model_id=getattr(response, "model", None),
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        guard = PolicyGuard(
            pep=call.pep,
            specs=register_tools(call.tools),
            context=call.context,
            approver=call.approver,
        )
        response = ChatCompletion.model_validate(
            completion(calls_reply([(call.tool.name, call.arguments, call.call_id)]))
        )
        (result,) = run_tools(response, guard)
        seen = outcome_of(result)
        return ToolCallOutcome(seen.message, seen.is_error, call.approver.asked)

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        """One model message with the three calls, run by a real ``AIAgent``'s executor."""
        specs = register_tools(batch.tools)  # before the agent, which reads its tools once
        steps = [calls_reply(batch.calls), text_reply("Done.")]
        with RecordingChatServer(steps) as server:
            agent = hermes_agent(server.base_url)
            governance = HermesGovernance(
                agent,
                pep=batch.pep,
                specs=specs,
                context=batch.context,
                approver=batch.approver,
            )
            with governance:
                agent.run_conversation("Do the three things.")
        server.assert_complete()
        results = {
            message["tool_call_id"]: message["content"]
            for message in server.requests[1]["messages"]
            if message["role"] == "tool"
        }
        return [outcome_of(results[call_id]) for _, _, call_id in batch.calls]

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        """One conversation of a real ``AIAgent``: the user's request is its message, the
        server plays each model message's calls in turn, and the approver is inline."""
        specs = register_tools(conversation.tools)
        steps = [*(calls_reply(message) for message in conversation.messages)]
        with RecordingChatServer([*steps, text_reply("Done.")]) as server:
            agent = hermes_agent(server.base_url, max_iterations=len(steps) + 2)
            governance = HermesGovernance(
                agent,
                pep=conversation.pep,
                specs=specs,
                context=conversation.context,
                approver=conversation.approver,
            )
            with governance:
                agent.run_conversation(conversation.user_request)
        server.assert_complete()
        outcomes = []
        for index, message in enumerate(conversation.messages):
            results = {
                sent["tool_call_id"]: sent["content"]
                for sent in server.requests[index + 1]["messages"]
                if sent["role"] == "tool"
            }
            outcomes.append([outcome_of(results[call_id]) for _, _, call_id in message])
        return outcomes

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        tools = policy_tools()
        specs = register_tools(tools)
        attempts: list[RouteAttempt] = []

        def build(route: str, toolsets: list[str], given: list[Any], **agent_fields: Any) -> None:
            agent = hermes_agent("http://127.0.0.1:9/v1", enabled_toolsets=toolsets)
            for name, value in agent_fields.items():
                setattr(agent, name, value)
            try:
                HermesGovernance(agent, pep=policy.pep, specs=given, context=policy.context)
            except ConfigurationError as refused:
                attempts.append(RouteAttempt(route, refused=True, error=str(refused)))
            else:
                attempts.append(RouteAttempt(route, refused=False))

        def judged(
            route: str, name: str, args: dict[str, Any], given: list[Any], **kw: Any
        ) -> None:
            before = len(policy.audit.events)
            guard = PolicyGuard(pep=policy.pep, specs=given, context=policy.context)
            with (
                installed("hook", "pre_tool_call", guard.pre_tool_call),
                installed("middleware", "tool_execution", guard.tool_execution),
            ):
                result = handle_function_call(name, args, tool_call_id="route-1", **kw)
            attempts.append(
                RouteAttempt(
                    route,
                    refused=False,
                    ran="error" not in json.loads(result),
                    audited=len(policy.audit.events) > before,
                )
            )

        build("undeclared tool", [TOOLSET], specs[:1])
        build("code execution (execute_code), undeclared", [TOOLSET, "code_execution"], specs)
        marker = os.path.join(policy.context.workspace, "ran.txt")
        code = f"open({marker!r}, 'w').write('ran')"
        execute_code = tool_spec("execute_code", side_effects={"shell_command"})
        judged(
            "code execution (execute_code), declared",
            "execute_code",
            {"code": code},
            [*specs, execute_code],
            session_id="",
        )
        assert not os.path.exists(marker), "a denied script ran"
        build("delegated subagents (delegate_task), undeclared", [TOOLSET, "delegation"], specs)
        delegate = tool_spec("delegate_task", side_effects={"shell_command"})
        judged(
            "a delegated subagent's tool call (another session)",
            "delete_file",
            {"path": "notes.txt"},
            [*specs, delegate],
            session_id="subagent-session",
        )
        with mcp_server_tools("notes") as mcp_toolset:
            build("MCP tool, undeclared", [TOOLSET, mcp_toolset], specs)
        build("Codex app-server runtime", [TOOLSET], specs, api_mode="codex_app_server")
        return attempts


@contextmanager
def mcp_server_tools(server_name: str) -> Iterator[str]:
    """An MCP server's tools registered by Hermes' own MCP client code, as on a connection.

    Only the connection is a stand-in (no MCP server process): Hermes' registration, its
    ``mcp-<server>`` toolset and its availability check are its own.
    """
    from tools import mcp_tool
    from tools.registry import registry

    server = mcp_tool.MCPServerTask(server_name)
    server.session = object()  # the one stand-in: a live session
    server._tools = [
        SimpleNamespace(
            name="append_note",
            description="Append a line to a note on the MCP server.",
            inputSchema={"type": "object", "properties": {"text": {"type": "string"}}},
        )
    ]
    with mcp_tool._lock:
        mcp_tool._servers[server_name] = server
    names = mcp_tool._register_server_tools(
        server_name, server, {"tools": {"resources": False, "prompts": False}}
    )
    try:
        assert names, "Hermes registered no MCP tool"
        yield f"mcp-{server_name}"
    finally:
        for name in names:
            registry.deregister(name)
        with mcp_tool._lock:
            mcp_tool._servers.pop(server_name, None)
