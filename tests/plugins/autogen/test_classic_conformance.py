"""The shared plugin conformance suite, run through classic AutoGen (ag2), sync and async.

Real ``ConversableAgent`` s: an assistant whose ``OpenAIWrapper`` is answered by the
scripted model client (the provider boundary), with ``GovernorCapability`` added, and an
executor with the tools registered for execution and ``PolicyCapability`` added. One turn
is AutoGen's own ``send`` / ``generate_reply`` (``a_send`` / ``a_generate_reply``): the
user's message, the assistant's governed reply, the executor's tool step.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "autogen", reason='classic AutoGen is not installed: pip install "jevqueue[ag2]"'
)

from autogen import ConversableAgent
from classic_kit import neutral_function, neutral_request, pair, reply_calls
from jevqueue.plugins.autogen import ApprovalRequest, GovernorCapability, PolicyCapability
from jevqueue.plugins.autogen.testing import ScriptedModel, classic_tool_call
from jevqueue.testing.conformance import (
    PluginConformance,
    ProviderReply,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)


def classic_step(reply: ProviderReply) -> Any:
    if reply.tool_calls:
        return [classic_tool_call(name, arguments) for name, arguments in reply.tool_calls]
    return reply.text


class ApprovalDesk:
    def __init__(self, records: tuple[Any, ...]) -> None:
        self.records = records
        self.asked: str | None = None

    def __call__(self, request: ApprovalRequest) -> Any:
        self.asked = request.action_digest
        return self.records or None


class TestClassicConformance(PluginConformance):
    """The seven checks in a synchronous chat."""

    asynchronous = False

    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        def answer(request: Any) -> Any:
            return classic_step(turn.provider.respond(neutral_request(request)))

        model = ScriptedModel([answer] * 3)
        functions = {t.name: neutral_function(t) for t in turn.tools}
        assistant, executor = pair(model, functions, system_message=turn.messages[0]["content"])
        GovernorCapability(turn.governor).add_to_agent(assistant)
        PolicyCapability(turn.pep, specs=turn.registry.specs(), context=turn.context).add_to_agent(
            executor
        )
        reply = self.exchange(assistant, executor, turn.messages[-1]["content"])
        text = reply.get("content") if isinstance(reply, dict) else reply
        return TurnOutcome(
            text=text or "",
            tool_calls=reply_calls(reply),
            model_id=reply.get("model") if isinstance(reply, dict) else None,
        )

    def exchange(self, assistant: ConversableAgent, executor: ConversableAgent, text: str) -> Any:
        if self.asynchronous:
            return asyncio.run(self._aexchange(assistant, executor, text))
        executor.send(text, assistant, request_reply=False, silent=True)
        reply = assistant.generate_reply(sender=executor)
        assistant.send(reply, executor, request_reply=False, silent=True)
        executor.generate_reply(sender=assistant)  # the tool step
        return reply

    async def _aexchange(
        self, assistant: ConversableAgent, executor: ConversableAgent, text: str
    ) -> Any:
        await executor.a_send(text, assistant, request_reply=False, silent=True)
        reply = await assistant.a_generate_reply(sender=executor)
        await assistant.a_send(reply, executor, request_reply=False, silent=True)
        await executor.a_generate_reply(sender=assistant)
        return reply

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        desk = ApprovalDesk(call.approvals)
        executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
        for tool in call.tools:
            executor.register_for_execution(name=tool.name)(neutral_function(tool))
        capability = PolicyCapability(
            call.pep, specs=call.registry.specs(), context=call.context, approval=desk
        )
        capability.add_to_agent(executor)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [classic_tool_call(call.tool.name, call.arguments)],
        }
        if self.asynchronous:
            reply = asyncio.run(executor.a_generate_reply(messages=[message], sender=None))
        else:
            reply = executor.generate_reply(messages=[message], sender=None)
        (response,) = reply["tool_responses"]
        assert response["tool_call_id"] == message["tool_calls"][0]["id"]
        assert capability.last is not None
        return ToolCallOutcome(
            message=response["content"],
            is_error=not capability.last.allowed,
            approval_requested=desk.asked,
        )


class TestClassicAsyncConformance(TestClassicConformance):
    """The same seven checks in an asynchronous chat (``a_send``, ``a_generate_reply``)."""

    asynchronous = True
