"""The shared plugin conformance suite, run through the Hermes plugin.

The glue drives Hermes' own pieces: the model turn goes through Hermes' LLM execution
middleware chain (``run_llm_execution_middleware``) with the governor installed in it, and
the reply is read with Hermes' chat-completions response normaliser; the tool step is
Hermes' dispatcher ``handle_function_call``, whose ``pre_tool_call`` hook and
``tool_execution`` middleware carry the PEP. The end-to-end ``AIAgent`` loop is in
``test_hermes_agent.py``.

The middleware never raises into Hermes (Hermes would send or use the call ungoverned);
it answers a disobeying reply with a local refusal and records the error. The glue
re-raises that recorded ``ProviderDisobeyedError``, which is what the suite checks.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
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
from hermes_kit import register_tools
from jevqueue.errors import ProviderDisobeyedError
from jevqueue.plugins.hermes import GovernorMiddleware, PolicyGuard
from jevqueue.plugins.hermes.testing import completion, text_reply, tool_reply
from jevqueue.testing.conformance import (
    PluginConformance,
    ProviderReply,
    ProviderRequest,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)
from model_tools import handle_function_call
from openai.types.chat import ChatCompletion


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


class ApprovalDesk:
    """The approval callback the glue installs: shows the digest, hands over the records."""

    def __init__(self, records: tuple[Any, ...]) -> None:
        self.records = records
        self.asked: str | None = None

    def __call__(self, request: Any) -> Any:
        self.asked = request.action_digest
        return self.records or None


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
    """The seven checks through ``GovernorMiddleware`` and ``PolicyGuard``."""

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
        desk = ApprovalDesk(call.approvals)
        guard = PolicyGuard(
            pep=call.pep, specs=register_tools(call.tools), context=call.context, approvals=desk
        )
        response = ChatCompletion.model_validate(
            completion(tool_reply(call.tool.name, call.arguments))
        )
        (result,) = run_tools(response, guard)
        parsed = json.loads(result)
        is_error = "error" in parsed
        message = parsed["error"] if is_error else str(parsed.get("result"))
        return ToolCallOutcome(message=message, is_error=is_error, approval_requested=desk.asked)
