"""The shared plugin conformance suite, run through AgentChat.

A real ``AssistantAgent`` runs every scenario: its model client is a
``GovernedChatCompletionClient`` over the scripted client (the provider boundary), and its
workbench a ``PolicyWorkbench`` over a ``StaticWorkbench`` of real ``FunctionTool`` s.
The agent makes one model call per turn (no reflection), so the suite's one-request
checks hold as written; a tool-call scenario scripts the model to make exactly the call.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "autogen_agentchat", reason='AgentChat is not installed: pip install "jevqueue[autogen]"'
)

from agentchat_kit import agentchat_step, calls_of, function_tool, neutral_request
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import TextMessage, ToolCallSummaryMessage
from autogen_core import CancellationToken
from autogen_core.tools import StaticWorkbench
from jevqueue.plugins.autogen import (
    ApprovalRequest,
    GovernedChatCompletionClient,
    PolicyWorkbench,
)
from jevqueue.plugins.autogen.testing import ScriptedChatCompletionClient, tool_call
from jevqueue.testing.conformance import (
    PluginConformance,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)


class ApprovalDesk:
    """The approval function the glue installs: shows the digest, hands over the records."""

    def __init__(self, records: tuple[Any, ...]) -> None:
        self.records = records
        self.asked: str | None = None

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.asked = request.action_digest
        return self.records or None


class TestAgentChatConformance(PluginConformance):
    """The seven checks through AssistantAgent, GovernedChatCompletionClient, PolicyWorkbench."""

    stream = False

    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        return asyncio.run(self._turn(turn))

    async def _turn(self, turn: TurnScenario) -> TurnOutcome:
        def answer(request: Any) -> Any:
            return agentchat_step(turn.provider.respond(neutral_request(request)))

        client = GovernedChatCompletionClient(
            ScriptedChatCompletionClient([answer] * 3), turn.governor
        )
        workbench = PolicyWorkbench(
            StaticWorkbench([function_tool(t) for t in turn.tools]),
            pep=turn.pep,
            specs=turn.registry.specs(),
            context=turn.context,
        )
        agent = AssistantAgent(
            "assistant",
            model_client=client,
            workbench=workbench,
            system_message=turn.messages[0]["content"],
            model_client_stream=self.stream,
        )
        response = await agent.on_messages(
            [TextMessage(content=turn.messages[-1]["content"], source="user")], CancellationToken()
        )
        message = response.chat_message
        result = client.last_result
        return TurnOutcome(
            text=message.content if isinstance(message, TextMessage) else "",
            tool_calls=calls_of(message),
            model_id=getattr(result, "model", None),
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        return asyncio.run(self._tool_call(call))

    async def _tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        desk = ApprovalDesk(call.approvals)
        workbench = PolicyWorkbench(
            StaticWorkbench([function_tool(t) for t in call.tools]),
            pep=call.pep,
            specs=call.registry.specs(),
            context=call.context,
            approval_func=desk,
        )
        model = ScriptedChatCompletionClient([tool_call(call.tool.name, call.arguments)])
        agent = AssistantAgent("assistant", model_client=model, workbench=workbench)
        response = await agent.on_messages(
            [TextMessage(content="Please do it.", source="user")], CancellationToken()
        )
        model.assert_complete()
        message = response.chat_message
        assert isinstance(message, ToolCallSummaryMessage), message
        (result,) = message.results
        return ToolCallOutcome(
            message=result.content, is_error=bool(result.is_error), approval_requested=desk.asked
        )


class TestAgentChatStreamingConformance(TestAgentChatConformance):
    """The same seven checks with ``model_client_stream=True`` (``create_stream``)."""

    stream = True
