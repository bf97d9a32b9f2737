"""The shared plugin conformance suite, run through the Pydantic AI plugin.

The glue drives a real ``Agent`` loop (``agent.iter``) over Pydantic AI's own
``FunctionModel``: the governor runs in the agent's ``wrap_model_request``, the PEP in its
``before_tool_execute``, and approvals go through ``DeferredToolRequests`` /
``DeferredToolResults``. How a Pydantic AI request maps onto the suite's neutral request:
a request counts as forced only when both levers were pulled — the function tools narrowed
to exactly the chosen one (text output off) *and* ``tool_choice`` naming it — and as
forbidding tools only when no function tool is offered and ``tool_choice="none"``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jevqueue.plugins.pydantic_ai import PolicyCapability, approval_results
from jevqueue.plugins.pydantic_ai.testing import ModelCall, ScriptedModel, tool_call
from jevqueue.testing.conformance import (
    PluginConformance,
    ProviderReply,
    ProviderRequest,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)
from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import (
    ModelRequest,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai_kit import build_agent, first_step, specs_for


def neutral_request(call: ModelCall) -> ProviderRequest:
    return ProviderRequest(
        forced_tool=call.forced_tool,
        tools_forbidden=call.tools_forbidden,
        tool_choice_set=call.tool_choice is not None,
        parallel_tool_calls=call.parallel_tool_calls,
        messages=call.messages,
        tools=call.tools,
        raw=call,
    )


def pydantic_reply(reply: ProviderReply) -> Any:
    if reply.tool_calls:
        return [tool_call(name, arguments) for name, arguments in reply.tool_calls]
    return reply.text


def seen_by_model(call: ModelCall, call_id: str) -> tuple[str, bool]:
    """What the model read for ``call_id``: (text, is_error)."""
    for message in call.history:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_call_id == call_id:
                return part.model_response_str(), False
            if isinstance(part, RetryPromptPart) and part.tool_call_id == call_id:
                return part.model_response(), True
    raise AssertionError(f"the model was shown nothing for call {call_id}")


class TestPydanticAIConformance(PluginConformance):
    """The seven checks through ``GovernorCapability`` and ``PolicyCapability``."""

    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        def answer(call: ModelCall) -> Any:
            return pydantic_reply(turn.provider.respond(neutral_request(call)))

        scripted = ScriptedModel([answer])
        policy = PolicyCapability(pep=turn.pep, specs=specs_for(turn.tools), context=turn.context)
        system, user = turn.messages
        agent = build_agent(
            scripted.model,
            turn.tools,
            system_prompt=str(system["content"]),
            governor=turn.governor,
            policy=policy,
        )
        response = asyncio.run(first_step(agent, str(user["content"])))
        assert response is not None
        calls = tuple(
            (part.tool_name, part.args_as_dict())
            for part in response.parts
            if isinstance(part, ToolCallPart)
        )
        text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
        return TurnOutcome(text=text, tool_calls=calls, model_id=response.model_name)

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        call_id = "call_conformance_1"
        seen: list[ModelCall] = []

        def after(request: ModelCall) -> str:
            seen.append(request)
            return "done"

        scripted = ScriptedModel(
            [tool_call(call.tool.name, call.arguments, call_id=call_id), after]
        )
        policy = PolicyCapability(pep=call.pep, specs=specs_for(call.tools), context=call.context)
        agent = build_agent(scripted.model, call.tools, policy=policy)
        result = agent.run_sync("Go ahead.")
        asked: str | None = None
        if isinstance(result.output, DeferredToolRequests):
            requests = result.output
            asked = requests.metadata[call_id]["action_digest"]
            if not call.approvals:
                return ToolCallOutcome(message="", is_error=False, approval_requested=asked)
            result = agent.run_sync(
                message_history=result.all_messages(),
                deferred_tool_results=approval_results(requests, call.approvals),
            )
        scripted.assert_complete()
        message, is_error = seen_by_model(seen[-1], call_id)
        return ToolCallOutcome(message=message, is_error=is_error, approval_requested=asked)
