"""The shared plugin conformance suite, run through the LlamaIndex plugin.

The glue drives real LlamaIndex agents, with only the model scripted:

* a turn is one run of a :class:`~jevqueue.plugins.llamaindex.GovernedFunctionAgent` (its
  tools wrapped with ``governed_tools`` and marked ``return_direct``, so the run ends
  after the tool step instead of asking the model again);
* a tool call is one run of a ``GovernedFunctionAgent`` whose every step delegates, built
  with ``pep=``/``specs=``/``context=`` and the scenario's approver as ``approver=``; its
  request is empty, so the call has no provenance and the suite's digest;
* a conversation is one run of such an agent: the user's request is its ``user_msg``, and
  each scripted model message calls its tools after the previous results came back (the
  agent reads what it read from its own memory and scratchpad);
* a batch is one model message of three calls: the gated one pauses the workflow the
  LlamaIndex way (``ApprovalRequiredEvent``), the paused run is serialized with
  ``ctx.to_dict()``, cancelled, restored with ``Context.from_dict`` and answered with an
  ``ApprovalResponseEvent`` carrying what the scenario's approver returns;
* the routes around the guard are an undeclared tool (given to the agent, to a ReAct
  agent, or assigned after the build: refused) and retrieved tools (``tool_retriever=``,
  alone and in an ``AgentWorkflow``: judged).

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

import asyncio
import json
from collections.abc import Callable
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.llamaindex import (
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
    GovernedFunctionAgent,
    GovernedReActAgent,
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
from llama_index.core import SummaryIndex
from llama_index.core.agent.workflow import AgentWorkflow, ToolCallResult
from llama_index.core.llms import ChatMessage
from llama_index.core.objects import ObjectIndex
from llama_index.core.tools import FunctionTool, ToolMetadata
from llama_index.core.workflow import Context
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


def undeclared_tool() -> ConformanceTool:
    """A tool the routes around the guard offer without a declaration."""
    return ConformanceTool(
        name="send_money",
        description="Send money to a city's treasury.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        side_effects=frozenset({"network"}),
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


async def settled(handler: Any) -> dict[str, Any]:
    """The paused run's context, once no tool step is still running (a step running when
    the context is serialized is run again on resume: LlamaIndex's replay)."""
    data = handler.ctx.to_dict()
    for _ in range(500):
        if not data["workers"]["call_tool"]["in_progress"]:
            return data
        await asyncio.sleep(0.01)
        data = handler.ctx.to_dict()
    raise AssertionError("a tool step never ended")


def llamaindex_reply(reply: ProviderReply) -> ChatMessage:
    if reply.tool_calls:
        return scripted_tool_calls(*reply.tool_calls, text=reply.text)
    return scripted_reply(reply.text)


class TestLlamaIndexConformance(PluginConformance):
    """Every check (model turn and policy half) through GovernedFunctionAgent."""

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

    def governed_agent(
        self,
        neutral: list[ConformanceTool],
        steps: list[Any],
        setting: ToolCallScenario | ToolBatchScenario | ToolConversationScenario | PolicyHarness,
        **options: Any,
    ) -> tuple[GovernedFunctionAgent, ScriptedFunctionCallingLLM]:
        """A GovernedFunctionAgent whose every step delegates, over the suite's tools."""
        llm = ScriptedFunctionCallingLLM(steps=steps)
        options.setdefault("tools", [llamaindex_tool(t) for t in neutral])
        agent = GovernedFunctionAgent(
            llm=llm,
            governor=self.make_governor({t.name: 0.4 for t in [*neutral, undeclared_tool()]}),
            pep=setting.pep,
            specs=setting.specs,
            context=setting.context,
            streaming=False,
            **options,
        )
        return agent, llm

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        # The scenario's approver is the agent's inline approver=.
        agent, llm = self.governed_agent(
            call.tools,
            [
                scripted_tool_calls((call.tool.name, call.arguments), ids=[call.call_id]),
                "Noted.",
            ],
            call,
            approver=call.approver,
        )

        async def go() -> ToolCallOutcome:
            # A call scenario shows the agent nothing (an empty request, no output): the
            # call has no provenance, so its digest is the suite's. (LlamaIndex reads an
            # empty string as no request at all, and refuses to run.)
            handler = agent.run(user_msg=ChatMessage(role="user", content=""))
            async for event in handler.stream_events():
                if isinstance(event, ToolCallResult):
                    output = event.tool_output
                    await handler
                    return ToolCallOutcome(
                        str(output.content), bool(output.is_error), call.approver.asked
                    )
            raise AssertionError("the run ended without a tool result")

        outcome = run(go)
        llm.assert_complete()
        return outcome

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        # LlamaIndex's own pause: the gated call waits for an ApprovalResponseEvent while
        # the others run; the paused run is serialized, cancelled, restored with
        # Context.from_dict and answered with what the scenario's approver gives.
        agent, llm = self.governed_agent(
            batch.tools,
            [
                scripted_tool_calls(
                    *[(name, arguments) for name, arguments, _ in batch.calls],
                    ids=[call_id for _, _, call_id in batch.calls],
                ),
                "Done.",
            ],
            batch,
        )
        results: dict[str, ToolCallResult] = {}

        async def pause() -> tuple[dict[str, Any], ApprovalRequiredEvent]:
            handler = agent.run(user_msg="Make the three calls.")
            request: ApprovalRequiredEvent | None = None
            async for event in handler.stream_events():
                if isinstance(event, ApprovalRequiredEvent):
                    request = event
                elif isinstance(event, ToolCallResult):
                    results.setdefault(event.tool_id, event)
                if request is not None and len(results) == len(batch.calls) - 1:
                    data = await settled(handler)
                    await handler.cancel_run()
                    return data, request
            raise AssertionError(f"the batch never paused for an approval: {results}")

        async def resume(data: dict[str, Any], request: ApprovalRequiredEvent) -> None:
            handler = agent.run(ctx=Context.from_dict(agent, data))
            handler.ctx.send_event(ApprovalResponseEvent.answer(request, batch.approver))
            async for event in handler.stream_events():
                if isinstance(event, ToolCallResult):
                    results.setdefault(event.tool_id, event)
            await handler

        data, request = run(pause)
        run(lambda: resume(json.loads(json.dumps(data)), request))
        llm.assert_complete()
        assert request.call_id in [call_id for _, _, call_id in batch.calls], request.call_id
        outcomes = []
        for _, _, call_id in batch.calls:
            output = results[call_id].tool_output
            asked = request.action_digest if request.call_id == call_id else None
            outcomes.append(ToolCallOutcome(str(output.content), bool(output.is_error), asked))
        return outcomes

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        # One run of one agent: the user's request is the run's user_msg, each scripted
        # model message calls its tools once the previous message's results are in the
        # agent's scratchpad, and the scenario's approver is the agent's approver=.
        agent, llm = self.governed_agent(
            conversation.tools,
            [
                *(
                    scripted_tool_calls(
                        *[(name, arguments) for name, arguments, _ in message],
                        ids=[call_id for _, _, call_id in message],
                    )
                    for message in conversation.messages
                ),
                "Done.",
            ],
            conversation,
            approver=conversation.approver,
        )

        async def go() -> dict[str, ToolCallResult]:
            handler = agent.run(user_msg=conversation.user_request)
            results: dict[str, ToolCallResult] = {}
            async for event in handler.stream_events():
                if isinstance(event, ToolCallResult):
                    results.setdefault(event.tool_id, event)
            await handler
            return results

        results = run(go)
        llm.assert_complete()
        return [
            [
                ToolCallOutcome(
                    str(results[call_id].tool_output.content),
                    bool(results[call_id].tool_output.is_error),
                )
                for _, _, call_id in message
            ]
            for message in conversation.messages
        ]

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        tools = conformance_tools()
        weather = next(t for t in tools if t.name == "get_weather")
        attempts = []

        def refused(route: str, build: Callable[[], Any]) -> RouteAttempt:
            try:
                build()
            except ConfigurationError as error:
                return RouteAttempt(route, refused=True, error=str(error))
            return RouteAttempt(route, refused=False)

        undeclared = undeclared_tool()
        attempts.append(
            refused(
                "undeclared tool",
                lambda: self.governed_agent([*tools, undeclared], [], policy),
            )
        )
        attempts.append(
            refused(
                "undeclared tool on a ReAct agent",
                lambda: GovernedReActAgent(
                    llm=ScriptedFunctionCallingLLM(steps=[]),
                    tools=[llamaindex_tool(undeclared)],
                    pep=policy.pep,
                    specs=policy.specs,
                    context=policy.context,
                ),
            )
        )
        agent, _ = self.governed_agent(tools, [], policy)

        def assign() -> None:
            agent.tools = [*(agent.tools or []), llamaindex_tool(undeclared)]

        attempts.append(refused("undeclared tool assigned after the build", assign))

        # Retrieved tools: each one the retriever returns is judged when it is called, by
        # the agent alone or by an AgentWorkflow (whose own call_tool step reads the agent's
        # tool_retriever).
        for route, retrieved, in_workflow in (
            ("retrieved tool (tool_retriever=)", weather, False),
            ("retrieved undeclared tool (tool_retriever=)", undeclared, False),
            ("retrieved undeclared tool in an AgentWorkflow", undeclared_tool(), True),
        ):
            before = len(policy.audit.events)
            agent, llm = self.governed_agent(
                tools,
                [scripted_tool_calls((retrieved.name, {"city": "Lisbon"})), "Done."],
                policy,
                tools=[],
                tool_retriever=ObjectIndex.from_objects(
                    [llamaindex_tool(retrieved)], index_cls=SummaryIndex
                ).as_retriever(),
                name="treasurer",
                description="Pays and reads the weather.",
            )
            runner: Any = (
                AgentWorkflow(agents=[agent], root_agent="treasurer") if in_workflow else agent
            )
            run(lambda runner=runner: runner.run(user_msg="weather in Lisbon?"))
            llm.assert_complete()
            judged = [
                event
                for event in policy.audit.events[before:]
                if retrieved.name in json.dumps(event, default=str)
            ]
            attempts.append(
                RouteAttempt(route, refused=False, ran=bool(retrieved.calls), audited=bool(judged))
            )
        return attempts
