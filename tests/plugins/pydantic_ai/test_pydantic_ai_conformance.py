"""The shared plugin conformance suite, run through the Pydantic AI plugin.

The glue drives a real ``Agent`` loop (``agent.iter``) over Pydantic AI's own
``FunctionModel``: the governor runs in the agent's ``wrap_model_request``, the guard in its
``before_tool_execute``. A single call is given the scenario's approver as ``approver=``
(and an empty prompt, so it has no provenance and the suite's digest); a batch really
pauses with ``DeferredToolRequests`` and resumes with ``approval_results`` carrying what
the approver returned; a conversation is one run whose prompt is the user's request and
whose scripted responses make each message's calls. How a Pydantic AI request maps onto the suite's
neutral request: a request counts as forced only when both levers were pulled — the
function tools narrowed to exactly the chosen one (text output off) *and* ``tool_choice``
naming it — and as forbidding tools only when no function tool is offered and
``tool_choice="none"``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.pydantic_ai import PolicyCapability, approval_results
from jevqueue.plugins.pydantic_ai.testing import ModelCall, ScriptedModel, tool_call
from jevqueue.policy import approval_records
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
    conformance_tools,
)
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    NativeOutput,
    TextOutput,
    Tool,
    ToolOutput,
)
from pydantic_ai.messages import (
    ModelRequest,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai_kit import build_agent, first_step, pydantic_tool, specs_for


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
    """Every check through ``GovernorCapability`` and ``PolicyCapability``."""

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
        seen: list[ModelCall] = []

        def after(request: ModelCall) -> str:
            seen.append(request)
            return "done"

        scripted = ScriptedModel(
            [tool_call(call.tool.name, call.arguments, call_id=call.call_id), after]
        )
        policy = PolicyCapability(
            pep=call.pep, specs=specs_for(call.tools), context=call.context, approver=call.approver
        )
        agent = build_agent(scripted.model, call.tools, policy=policy)
        # A call scenario shows the agent nothing (an empty prompt, no output): the call
        # has no provenance, so its digest is the suite's.
        result = agent.run_sync("")
        assert not isinstance(result.output, DeferredToolRequests), (
            "with an inline approver the run must not pause"
        )
        scripted.assert_complete()
        message, is_error = seen_by_model(seen[-1], call.call_id)
        return ToolCallOutcome(
            message=message, is_error=is_error, approval_requested=call.approver.asked
        )

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        """One model message calling all three; the run pauses natively with
        ``DeferredToolRequests`` and resumes with ``approval_results``."""
        seen: list[ModelCall] = []

        def after(request: ModelCall) -> str:
            seen.append(request)
            return "done"

        scripted = ScriptedModel(
            [
                [
                    tool_call(name, arguments, call_id=call_id)
                    for name, arguments, call_id in batch.calls
                ],
                after,
            ]
        )
        policy = PolicyCapability(
            pep=batch.pep, specs=specs_for(batch.tools), context=batch.context
        )
        agent = build_agent(scripted.model, batch.tools, policy=policy)
        paused = agent.run_sync("Go ahead.")
        assert isinstance(paused.output, DeferredToolRequests), paused.output
        requests = paused.output
        asked = policy.approval_requests(requests)
        assert [r.call_id for r in asked] == [c.tool_call_id for c in requests.approvals]
        for request in asked:
            assert requests.metadata[request.call_id] == request.to_dict()
        records = [
            record for request in asked for record in approval_records(batch.approver(request))
        ]
        agent.run_sync(
            message_history=paused.all_messages(),
            deferred_tool_results=approval_results(requests, records),
        )
        scripted.assert_complete()
        outcomes = []
        for _, _, call_id in batch.calls:
            message, is_error = seen_by_model(seen[-1], call_id)
            outcomes.append(ToolCallOutcome(message=message, is_error=is_error))
        return outcomes

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        """One run of one agent: the user's request is the run's prompt, each scripted
        model response calls its message's tools, and the scenario's approver is the
        capability's ``approver=``."""
        seen: list[ModelCall] = []

        def after(request: ModelCall) -> str:
            seen.append(request)
            return "done"

        scripted = ScriptedModel(
            [
                *(
                    [tool_call(name, arguments, call_id=call_id) for name, arguments, call_id in m]
                    for m in conversation.messages
                ),
                after,
            ]
        )
        policy = PolicyCapability(
            pep=conversation.pep,
            specs=specs_for(conversation.tools),
            context=conversation.context,
            approver=conversation.approver,
        )
        agent = build_agent(scripted.model, conversation.tools, policy=policy)
        result = agent.run_sync(conversation.user_request)
        assert result.output == "done", result.output
        scripted.assert_complete()
        outcomes = []
        for message in conversation.messages:
            shown = [seen_by_model(seen[-1], call_id) for _, _, call_id in message]
            outcomes.append([ToolCallOutcome(text, is_error) for text, is_error in shown])
        return outcomes

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        tools = conformance_tools()
        ran: list[str] = []

        def erase_disk(device: str) -> str:
            """Erase a disk."""
            ran.append("erase_disk")
            return "erased"

        def save_report(text: str) -> str:
            """Save the report to disk."""
            ran.append("save_report")
            return text

        def governed(extra: Sequence[Tool[Any]] = (), **options: Any) -> Agent[None, Any]:
            capability = PolicyCapability(
                pep=policy.pep, specs=policy.specs, context=policy.context
            )
            return Agent(
                ScriptedModel(["never"]).model,
                tools=[*(pydantic_tool(tool) for tool in tools), *extra],
                capabilities=[capability],
                **options,
            )

        def attempt(route: str, take: Callable[[], Any]) -> RouteAttempt:
            before = len(policy.audit.events)
            del ran[:]
            try:
                take()
            except ConfigurationError as refused:
                return RouteAttempt(route, refused=True, ran=bool(ran), error=str(refused))
            return RouteAttempt(
                route, refused=False, ran=bool(ran), audited=len(policy.audit.events) > before
            )

        def at_run_time(**options: Any) -> Any:
            scripted = ScriptedModel([tool_call("erase_disk", {"device": "/dev/sda"}), "done"])
            capability = PolicyCapability(
                pep=policy.pep, specs=policy.specs, context=policy.context
            )
            agent = Agent(scripted.model, capabilities=[capability])
            return agent.run_sync("Go.", **options)

        def output_at_run_time() -> Any:
            scripted = ScriptedModel([tool_call("final_result", {"text": "x"})])
            capability = PolicyCapability(
                pep=policy.pep, specs=policy.specs, context=policy.context
            )
            agent = Agent(scripted.model, capabilities=[capability])
            return agent.run_sync("Go.", output_type=[save_report])

        return [
            attempt("undeclared tool", lambda: governed([Tool(erase_disk)])),
            attempt(
                "undeclared tool of a run-time toolset",
                lambda: at_run_time(toolsets=[FunctionToolset([erase_disk])]),
            ),
            attempt(
                "output function (output_type=[fn])", lambda: governed(output_type=[save_report])
            ),
            attempt(
                "output function (ToolOutput)",
                lambda: governed(output_type=ToolOutput(save_report)),
            ),
            attempt(
                "output function (TextOutput)",
                lambda: governed(output_type=TextOutput(save_report)),
            ),
            attempt(
                "output function (NativeOutput)",
                lambda: governed(output_type=NativeOutput(save_report)),
            ),
            attempt("output function given at run time", output_at_run_time),
        ]
