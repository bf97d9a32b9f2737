"""The OpenAI-compatible plugin passes the shared plugin conformance suite.

The glue puts the suite's scripted provider behind the real host at the HTTP boundary
(an in-process transport translates each request body into the suite's neutral
``ProviderRequest``), and runs tool calls through :class:`PolicyToolRunner`.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("httpx", reason='the openai plugin needs pip install "jevqueue[openai]"')

from jevqueue.plugins.openai import (
    OpenAIChatHost,
    PolicyToolRunner,
    ScriptedChatTransport,
    text_completion,
    tool_calls_completion,
)
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    ProviderReply,
    ProviderRequest,
    ScriptedProvider,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)


def _provider_model(provider: ScriptedProvider) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        choice = body.get("tool_choice")
        forced = choice["function"]["name"] if isinstance(choice, dict) else None
        request = ProviderRequest(
            forced_tool=forced,
            tools_forbidden=choice == "none",
            tool_choice_set="tool_choice" in body,
            parallel_tool_calls=body.get("parallel_tool_calls"),
            messages=tuple(body["messages"]),
            tools=tuple(tool["function"]["name"] for tool in body.get("tools", [])),
            raw=body,
        )
        reply: ProviderReply = provider.respond(request)
        if reply.tool_calls:
            return tool_calls_completion(reply.tool_calls, model=body["model"])
        return text_completion(reply.text, model=body["model"])

    return respond


def _functions(tools: list[ConformanceTool]) -> dict[str, Any]:
    def bind(tool: ConformanceTool) -> Any:
        return lambda **arguments: tool.run(arguments)

    return {tool.name: bind(tool) for tool in tools}


class TestOpenAIConformance(PluginConformance):
    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        host = OpenAIChatHost(
            model="conformance-model",
            messages=turn.messages,
            tools=[tool.openai_schema() for tool in turn.tools],
            base_url="http://provider.test/v1",
            transport=ScriptedChatTransport(_provider_model(turn.provider)),
        )
        response = turn.governor.step(host)
        PolicyToolRunner(
            _functions(turn.tools), pep=turn.pep, specs=turn.specs, context=turn.context
        ).run(response)
        message = response["choices"][0]["message"]
        calls = tuple(
            (call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls") or ()
        )
        return TurnOutcome(
            text=message.get("content") or "",
            tool_calls=tuple((name, _json(arguments)) for name, arguments in calls),
            model_id=response.get("model"),
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        runner = PolicyToolRunner(
            _functions(call.tools), pep=call.pep, specs=call.specs, context=call.context
        )
        result = runner.run_call(
            call.tool.name, call.arguments, call_id="call_1", approval_records=call.approvals
        )
        return ToolCallOutcome(
            message=result.content,
            is_error=result.is_error,
            approval_requested=result.approval_requested,
        )


def _json(text: str) -> dict[str, Any]:
    import json

    value = json.loads(text)
    assert isinstance(value, dict)
    return value
