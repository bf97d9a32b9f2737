"""The shared plugin conformance suite, run through AgentChat.

A real ``AssistantAgent`` runs every scenario: its model client is a
``GovernedChatCompletionClient`` over the scripted client (the provider boundary), and its
workbench a ``PolicyWorkbench`` over a ``StaticWorkbench`` of real ``FunctionTool`` s.
The agent makes one model call per turn (no reflection), so the suite's one-request
checks hold as written; a tool-call scenario scripts the model to make exactly the call.
AgentChat has no native pause: the scenario's approver is the workbench's ``approver=``,
asked inline, and a batch is one model message of three calls.
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
from autogen_agentchat.messages import (
    TextMessage,
    ToolCallExecutionEvent,
    ToolCallSummaryMessage,
)
from autogen_core import CancellationToken
from autogen_core.tools import StaticWorkbench
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen import GovernedChatCompletionClient, PolicyWorkbench
from jevqueue.plugins.autogen.testing import ScriptedChatCompletionClient, tool_call
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    PolicyHarness,
    RouteAttempt,
    ScenarioApprover,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
    TurnOutcome,
    TurnScenario,
)


def as_async(approver: ScenarioApprover) -> Any:
    """The scenario's approver behind an ``async`` function (the workbench awaits it)."""

    async def approve(request: Any) -> Any:
        return approver(request)

    return approve


class TestAgentChatConformance(PluginConformance):
    """Every check through AssistantAgent, GovernedChatCompletionClient, PolicyWorkbench."""

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
        (outcome,) = asyncio.run(
            self._calls(
                call.tools,
                call.pep,
                call.registry.specs(),
                call.context,
                call.approver,
                [(call.tool.name, call.arguments, call.call_id)],
            )
        )
        return outcome

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        return asyncio.run(
            self._calls(
                batch.tools, batch.pep, batch.specs, batch.context, batch.approver, batch.calls
            )
        )

    async def _calls(
        self,
        tools: list[ConformanceTool],
        pep: Any,
        specs: Any,
        context: Any,
        approver: ScenarioApprover,
        calls: list[tuple[str, dict[str, Any], str]],
    ) -> list[ToolCallOutcome]:
        """One model message making ``calls``, run by a real AssistantAgent."""
        workbench = PolicyWorkbench(
            StaticWorkbench([function_tool(t) for t in tools]),
            pep=pep,
            specs=specs,
            context=context,
            approver=as_async(approver) if self.stream else approver,
        )
        model = ScriptedChatCompletionClient(
            [[tool_call(name, arguments, call_id=call_id) for name, arguments, call_id in calls]]
        )
        agent = AssistantAgent(
            "assistant", model_client=model, workbench=workbench, model_client_stream=self.stream
        )
        response = await agent.on_messages(
            [TextMessage(content="Please do it.", source="user")], CancellationToken()
        )
        model.assert_complete()
        message = response.chat_message
        assert isinstance(message, ToolCallSummaryMessage), message
        assert [r.call_id for r in message.results] == [call_id for _, _, call_id in calls]
        return [
            ToolCallOutcome(
                message=result.content,
                is_error=bool(result.is_error),
                approval_requested=approver.asked,
            )
            for result in message.results
        ]

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        return asyncio.run(self._conversation(conversation))

    async def _conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        """A real run: the user's request is the run's ``task``, and the agent's model
        makes each message's calls in turn (``max_tool_iterations`` lets it go on)."""
        approver = conversation.approver
        workbench = PolicyWorkbench(
            StaticWorkbench([function_tool(t) for t in conversation.tools]),
            pep=conversation.pep,
            specs=conversation.specs,
            context=conversation.context,
            approver=as_async(approver) if self.stream else approver,
        )
        model = ScriptedChatCompletionClient(
            [
                [tool_call(name, arguments, call_id=cid) for name, arguments, cid in calls]
                for calls in conversation.messages
            ]
            + ["Done."]
        )
        agent = AssistantAgent(
            "assistant",
            model_client=GovernedChatCompletionClient(
                model, delegating_governor(), guard=workbench.guard
            ),
            workbench=workbench,
            model_client_stream=self.stream,
            max_tool_iterations=len(conversation.messages) + 1,
        )
        result = await agent.run(task=conversation.user_request)
        model.assert_complete()
        executed = [m for m in result.messages if isinstance(m, ToolCallExecutionEvent)]
        assert len(executed) == len(conversation.messages), result.messages
        judged = {j.call_id: j for j in workbench.guard.judgements}
        return [
            [
                ToolCallOutcome(
                    message=r.content,
                    is_error=bool(r.is_error),
                    approval_requested=judged[r.call_id].approval_requested,
                )
                for r in event.content
            ]
            for event in executed
        ]

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        return [self._undeclared(policy), asyncio.run(self._handoff(policy))]

    def _undeclared(self, policy: PolicyHarness) -> RouteAttempt:
        stray = ConformanceTool(
            "stray_tool",
            "A tool nobody declared.",
            {"type": "object", "properties": {"note": {"type": "string"}}},
            frozenset(),
        )
        try:
            PolicyWorkbench(
                StaticWorkbench([function_tool(stray)]),
                pep=policy.pep,
                specs=policy.specs,
                context=policy.context,
            )
        except ConfigurationError as refused:
            return RouteAttempt("undeclared tool", refused=True, error=str(refused))
        return RouteAttempt("undeclared tool", refused=False, ran=bool(stray.calls))

    async def _handoff(self, policy: PolicyHarness) -> RouteAttempt:
        tools = [function_tool(t) for t in _declared(policy)]
        model = ScriptedChatCompletionClient([tool_call("transfer_to_planner", {})])
        agent = AssistantAgent(
            "assistant",
            model_client=GovernedChatCompletionClient(model),
            workbench=PolicyWorkbench(
                StaticWorkbench(tools), pep=policy.pep, specs=policy.specs, context=policy.context
            ),
            handoffs=["planner"],
            model_client_stream=self.stream,
        )
        before = len(policy.audit.events)
        try:
            response = await agent.on_messages(
                [TextMessage(content="Hand it to the planner.", source="user")],
                CancellationToken(),
            )
        except ConfigurationError as refused:
            return RouteAttempt("handoff (AssistantAgent handoffs=)", True, error=str(refused))
        return RouteAttempt(
            "handoff (AssistantAgent handoffs=)",
            refused=False,
            ran=type(response.chat_message).__name__ == "HandoffMessage",
            audited=len(policy.audit.events) > before,
        )


def delegating_governor() -> Any:
    """A governor whose ballot never picks a tool: every turn is the model's own."""
    from jevqueue import Governor, Thresholds

    class Unsure:
        def score(self, messages: Any, tools: Any) -> dict[str, float]:
            return {(t.get("function") or t)["name"]: 0.4 for t in tools}

    return Governor(Unsure(), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2))


def _declared(policy: PolicyHarness) -> list[ConformanceTool]:
    from jevqueue.testing.conformance import conformance_tools

    return [t for t in conformance_tools() if t.name in policy.registry]


class TestAgentChatStreamingConformance(TestAgentChatConformance):
    """The same checks with ``model_client_stream=True`` (``create_stream``) and an
    ``async`` approver."""

    stream = True
