"""The shared plugin conformance suite, run through the LlamaIndex plugin.

The glue drives real LlamaIndex agents: a turn is one run of a
:class:`~jevqueue.plugins.llamaindex.GovernedFunctionAgent` (its tools wrapped with
``governed_tools`` and marked ``return_direct``, so the run ends after the tool step
instead of asking the model again); a tool call is one run of a stock ``FunctionAgent``
over governed tools, whose approvals are answered through the workflow's events.

How a request at the provider boundary maps onto the suite's neutral request: the
scripted ``FunctionCallingLLM`` prepares requests as ``llama-index-llms-openai`` does,
which resolves "no tool_choice" to ``"auto"`` and always sends the agent's
``parallel_tool_calls``. So ``tool_choice_set`` means a choice other than ``"auto"``, and
``parallel_tool_calls`` is reported only when it is ``False`` (``FunctionAgent`` defaults
to ``True``; a ``False`` comes from the governed step). That the delegated request is
exactly the stock agent's is shown directly in ``test_llamaindex_agent.py`` and on the
wire in ``test_llamaindex_wire.py``.
"""

from __future__ import annotations

from typing import Any

from jevqueue.plugins.llamaindex import (
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
    GovernedFunctionAgent,
    governed_tools,
)
from jevqueue.plugins.llamaindex.step_host import openai_messages
from jevqueue.plugins.llamaindex.testing import (
    ScriptedFunctionCallingLLM,
    ScriptedRequest,
    scripted_reply,
    scripted_tool_calls,
)
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    ProviderReply,
    ProviderRequest,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.llms import ChatMessage
from llama_index.core.tools import FunctionTool, ToolMetadata
from llamaindex_kit import run
from pydantic import create_model


def llamaindex_tool(neutral: ConformanceTool, *, return_direct: bool = False) -> FunctionTool:
    """A real FunctionTool whose body is the suite's tool."""
    fields: dict[str, Any] = {name: (str, ...) for name in neutral.parameters["properties"]}
    schema = create_model(f"{neutral.name.title().replace('_', '')}Args", **fields)

    def body(**kwargs: Any) -> str:
        return neutral.run(kwargs)

    return FunctionTool.from_defaults(
        fn=body,
        tool_metadata=ToolMetadata(
            name=neutral.name,
            description=neutral.description,
            fn_schema=schema,
            return_direct=return_direct,
        ),
    )


def neutral_request(request: ScriptedRequest) -> ProviderRequest:
    choice = request.tool_choice
    return ProviderRequest(
        forced_tool=request.forced_tool,
        tools_forbidden=choice == "none",
        tool_choice_set=choice not in (None, "auto"),
        parallel_tool_calls=False if request.parallel_tool_calls is False else None,
        messages=tuple(openai_messages(request.messages)),
        tools=request.tools,
        raw=request,
    )


def llamaindex_reply(reply: ProviderReply) -> ChatMessage:
    if reply.tool_calls:
        return scripted_tool_calls(*reply.tool_calls, text=reply.text)
    return scripted_reply(reply.text)


class TestLlamaIndexConformance(PluginConformance):
    """The seven checks through GovernedFunctionAgent and governed_tools."""

    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        def answer(request: ScriptedRequest) -> ChatMessage:
            return llamaindex_reply(turn.provider.respond(neutral_request(request)))

        tools = governed_tools(
            [llamaindex_tool(t, return_direct=True) for t in turn.tools],
            pep=turn.pep,
            specs=turn.specs,
            context=turn.context,
        )
        system, user = turn.messages
        agent = GovernedFunctionAgent(
            llm=ScriptedFunctionCallingLLM(steps=[answer]),
            governor=turn.governor,
            tools=tools,
            system_prompt=system["content"],
            streaming=False,
        )
        result = run(lambda: agent.run(user_msg=user["content"]))
        raw = result.raw if isinstance(result.raw, dict) else {}
        return TurnOutcome(
            text=str(result.response.content or ""),
            tool_calls=tuple((c.tool_name, c.tool_kwargs) for c in result.tool_calls),
            model_id=raw.get("model"),
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        tools = governed_tools(
            [llamaindex_tool(t) for t in call.tools],
            pep=call.pep,
            specs=call.specs,
            context=call.context,
        )
        llm = ScriptedFunctionCallingLLM(
            steps=[scripted_tool_calls((call.tool.name, call.arguments)), "Noted."]
        )
        agent = FunctionAgent(llm=llm, tools=tools, streaming=False)

        async def go() -> ToolCallOutcome:
            handler = agent.run(user_msg="Please make the call.")
            asked: str | None = None
            async for event in handler.stream_events():
                if isinstance(event, ApprovalRequiredEvent):
                    asked = event.action_digest
                    if not call.approvals:
                        await handler.cancel_run()
                        return ToolCallOutcome("", False, asked)
                    for record in call.approvals:
                        # The approver hands each record to the request it was shown.
                        handler.ctx.send_event(
                            ApprovalResponseEvent(
                                response="approved",
                                action_digest=event.action_digest,
                                record=record.to_dict(),
                            )
                        )
                elif isinstance(event, ToolCallResult):
                    output = event.tool_output
                    await handler
                    return ToolCallOutcome(str(output.content), bool(output.is_error), asked)
            raise AssertionError("the run ended without a tool result")

        return run(go)
