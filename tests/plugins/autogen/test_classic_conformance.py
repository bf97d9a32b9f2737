"""The shared plugin conformance suite, run through classic AutoGen (ag2), sync and async.

Real ``ConversableAgent`` s: an assistant whose ``OpenAIWrapper`` is answered by the
scripted model client (the provider boundary), with ``GovernorCapability`` added, and an
executor with the tools registered for execution and ``PolicyCapability`` added. One turn
is AutoGen's own ``send`` / ``generate_reply`` (``a_send`` / ``a_generate_reply``): the
user's message, the assistant's governed reply, the executor's tool step. Classic AutoGen
has no native pause: the scenario's approver is the capability's ``approver=``, asked
inline, and a batch is one message of three ``tool_calls``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip(
    "autogen", reason='classic AutoGen is not installed: pip install "jevqueue[ag2]"'
)

from autogen import ConversableAgent, UserProxyAgent
from classic_kit import neutral_function, neutral_request, pair, reply_calls
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen import GovernorCapability, PolicyCapability, governed_tool
from jevqueue.plugins.autogen.testing import ScriptedModel, classic_tool_call
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    PolicyHarness,
    ProviderReply,
    RouteAttempt,
    ScenarioApprover,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
    TurnOutcome,
    TurnScenario,
    conformance_tools,
)


def classic_step(reply: ProviderReply) -> Any:
    if reply.tool_calls:
        return [classic_tool_call(name, arguments) for name, arguments in reply.tool_calls]
    return reply.text


def stray_tool() -> ConformanceTool:
    return ConformanceTool(
        "stray_tool",
        "A tool nobody declared.",
        {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]},
        frozenset(),
    )


class TestClassicConformance(PluginConformance):
    """Every check in a synchronous chat."""

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
        (outcome,) = self._calls(
            call.tools,
            call.pep,
            call.registry.specs(),
            call.context,
            call.approver,
            [(call.tool.name, call.arguments, call.call_id)],
        )
        return outcome

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        return self._calls(
            batch.tools, batch.pep, batch.specs, batch.context, batch.approver, batch.calls
        )

    def _calls(
        self,
        tools: list[ConformanceTool],
        pep: Any,
        specs: Any,
        context: Any,
        approver: ScenarioApprover,
        calls: list[tuple[str, dict[str, Any], str]],
    ) -> list[ToolCallOutcome]:
        """One assistant message making ``calls``, answered by a real executor."""
        executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
        for tool in tools:
            executor.register_for_execution(name=tool.name)(neutral_function(tool))
        capability = PolicyCapability(pep, specs=specs, context=context, approver=approver)
        capability.add_to_agent(executor)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                classic_tool_call(name, arguments, call_id=call_id)
                for name, arguments, call_id in calls
            ],
        }
        reply = self._reply(executor, message)
        responses = reply["tool_responses"]
        assert [r["tool_call_id"] for r in responses] == [call_id for _, _, call_id in calls]
        final = {j.call_id: j for j in capability.guard.judgements}  # the latest per call
        return [
            ToolCallOutcome(
                message=response["content"],
                is_error=not final[call_id].allowed,
                approval_requested=approver.asked,
            )
            for response, (_, _, call_id) in zip(responses, calls, strict=True)
        ]

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        """A real chat: an executor without an LLM (the user's proxy) opens it with the
        user's request, and the assistant's model makes each message's calls in turn."""
        model = ScriptedModel(
            [
                [classic_tool_call(name, arguments, call_id=cid) for name, arguments, cid in calls]
                for calls in conversation.messages
            ]
            + ["Done."]
        )
        functions = {t.name: neutral_function(t) for t in conversation.tools}
        assistant, executor = pair(model, functions)
        capability = PolicyCapability(
            conversation.pep,
            specs=conversation.specs,
            context=conversation.context,
            approver=conversation.approver,
        )
        capability.add_to_agent(executor)
        turns = len(conversation.messages) + 1
        if self.asynchronous:
            asyncio.run(
                executor.a_initiate_chat(
                    assistant, message=conversation.user_request, max_turns=turns, silent=True
                )
            )
        else:
            executor.initiate_chat(
                assistant, message=conversation.user_request, max_turns=turns, silent=True
            )
        model.assert_complete()
        responses = {
            response["tool_call_id"]: response["content"]
            for message in executor.chat_messages[assistant]
            for response in message.get("tool_responses") or ()
        }
        judged = {j.call_id: j for j in capability.guard.judgements}
        return [
            [
                ToolCallOutcome(
                    message=responses[cid],
                    is_error=not judged[cid].allowed,
                    approval_requested=judged[cid].approval_requested,
                )
                for _, _, cid in calls
            ]
            for calls in conversation.messages
        ]

    def _reply(self, executor: ConversableAgent, message: dict[str, Any]) -> Any:
        if self.asynchronous:
            return asyncio.run(executor.a_generate_reply(messages=[message], sender=None))
        return executor.generate_reply(messages=[message], sender=None)

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        return [
            self._built("undeclared tool on the executor", policy, self._undeclared_executor),
            self._built("undeclared tool in governed_tool", policy, self._undeclared_tool),
            self._built("code execution (code_execution_config)", policy, self._code_execution),
            self._built("code execution beside a governed_tool", policy, self._code_beside_tool),
            self._registered_later(policy),
        ]

    def _built(self, route: str, policy: PolicyHarness, build: Any) -> RouteAttempt:
        stray = stray_tool()
        try:
            build(policy, stray)
        except ConfigurationError as refused:
            return RouteAttempt(route, refused=True, error=str(refused))
        return RouteAttempt(route, refused=False, ran=bool(stray.calls))

    def _undeclared_executor(self, policy: PolicyHarness, stray: ConformanceTool) -> None:
        executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
        executor.register_for_execution(name=stray.name)(neutral_function(stray))
        PolicyCapability(policy.pep, specs=policy.specs, context=policy.context).add_to_agent(
            executor
        )

    def _undeclared_tool(self, policy: PolicyHarness, stray: ConformanceTool) -> None:
        governed_tool(
            neutral_function(stray), pep=policy.pep, specs=policy.specs, context=policy.context
        )

    def _code_execution(self, policy: PolicyHarness, stray: ConformanceTool) -> None:
        executor = UserProxyAgent(
            "executor",
            human_input_mode="NEVER",
            code_execution_config={"work_dir": str(policy.context.workspace), "use_docker": False},
        )
        PolicyCapability(policy.pep, specs=policy.specs, context=policy.context).add_to_agent(
            executor
        )

    def _code_beside_tool(self, policy: PolicyHarness, stray: ConformanceTool) -> None:
        weather = next(t for t in conformance_tools() if t.name == "get_weather")
        tool = governed_tool(
            neutral_function(weather), pep=policy.pep, specs=policy.specs, context=policy.context
        )
        tool.register_for_execution(UserProxyAgent("executor", human_input_mode="NEVER"))

    def _registered_later(self, policy: PolicyHarness) -> RouteAttempt:
        """A function registered after the capability was added: judged per call."""
        stray = stray_tool()
        executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
        for tool in conformance_tools():
            executor.register_for_execution(name=tool.name)(neutral_function(tool))
        PolicyCapability(policy.pep, specs=policy.specs, context=policy.context).add_to_agent(
            executor
        )
        executor.register_for_execution(name=stray.name)(neutral_function(stray))
        before = len(policy.audit.events)
        call = classic_tool_call(stray.name, {"note": "hi"})
        reply = self._reply(executor, {"role": "assistant", "content": None, "tool_calls": [call]})
        assert "is not registered" in reply["tool_responses"][0]["content"], reply
        return RouteAttempt(
            "undeclared tool registered after the capability",
            refused=False,
            ran=bool(stray.calls),
            audited=len(policy.audit.events) > before,
        )


class TestClassicAsyncConformance(TestClassicConformance):
    """The same checks in an asynchronous chat (``a_send``, ``a_generate_reply``)."""

    asynchronous = True
