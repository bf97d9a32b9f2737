"""The LangGraph plugin passes the shared plugin conformance suite, in each of its forms.

The glue runs real LangGraph graphs (StateGraph, the plugin's nodes around a real
ToolNode, ``langchain.agents.create_agent``, an InMemorySaver checkpointer); only the
chat model is scripted. A single call is given the scenario's approver inline
(``approver=``); a batch pauses the LangGraph way (``interrupt()``), is answered with
what the scenario's approver returns for the core ApprovalRequest behind the pause, and
resumes with ``Command(resume=...)``. A conversation is an agent loop on one thread: the
user's request is the first ``HumanMessage``, a scripted model proposes each message's
calls, and the tools' results go back into the state it reads.

* :class:`TestLangGraphConformance` — ``policy_tool_node`` (the whole suite);
* :class:`TestLangGraphOwnToolNodeConformance` — a plain ``ToolNode`` given the node's
  interceptors: the call that needs an approval interrupts *after* the rest of the batch
  ran, and LangGraph re-executes the whole node on resume;
* :class:`TestLangGraphMiddlewareConformance` — ``create_agent`` with ``PolicyMiddleware``
  (every call its own task).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.langgraph import (
    CONTEXT_CONFIG_KEY,
    PolicyMiddleware,
    create_governed_agent,
    governed_model_node,
    policy_tool_node,
)
from jevqueue.plugins.langgraph.testing import ScriptedCall, ScriptedChatModel
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    PolicyConformance,
    PolicyHarness,
    ProviderReply,
    ProviderRequest,
    RouteAttempt,
    ScriptedProvider,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
    TurnOutcome,
    TurnScenario,
    conformance_tools,
)
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command


def langchain_tool(tool: ConformanceTool) -> StructuredTool:
    """A LangChain tool whose body is the conformance tool's recorded run."""
    return StructuredTool.from_function(
        func=lambda **arguments: tool.run(arguments),
        name=tool.name,
        description=tool.description,
        args_schema=tool.parameters,
    )


def _forced_name(choice: Any) -> str | None:
    if isinstance(choice, str) and choice not in ("none", "auto", "any", "required"):
        return choice
    if isinstance(choice, dict):
        function = choice.get("function")
        if isinstance(function, dict):
            return function.get("name")
        if choice.get("type") == "tool":
            return choice.get("name")
    return None


def provider_request(call: ScriptedCall) -> ProviderRequest:
    """The scripted model's record of a request, in the suite's neutral form."""
    choice = call.tool_choice
    return ProviderRequest(
        forced_tool=_forced_name(choice),
        tools_forbidden=choice in ("none", {"type": "none"}),
        tool_choice_set=call.tool_choice_set,
        parallel_tool_calls=call.parallel_tool_calls,
        messages=tuple(convert_to_openai_messages(list(call.messages))),
        tools=call.tools,
        raw=call,
    )


def ai_message(reply: ProviderReply) -> AIMessage:
    return AIMessage(
        content=reply.text,
        tool_calls=[
            {
                "name": name,
                "args": dict(args),
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "tool_call",
            }
            for name, args in reply.tool_calls
        ],
    )


def scripted_model(provider: ScriptedProvider) -> ScriptedChatModel:
    def answer(call: ScriptedCall) -> AIMessage:
        return ai_message(provider.respond(provider_request(call)))

    # The provider fails loudly on a call beyond its script; the model just relays.
    return ScriptedChatModel(steps=[answer] * 4)


def langchain_messages(messages: list[dict[str, Any]]) -> list[Any]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


def thread(context: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex, CONTEXT_CONFIG_KEY: context.as_dict()}}


def tool_answers(result: dict[str, Any], call_ids: list[str]) -> list[ToolCallOutcome]:
    """One outcome per call id, in order; exactly one ToolMessage each."""
    outcomes = []
    for call_id in call_ids:
        answers = [
            m
            for m in result["messages"]
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id
        ]
        assert len(answers) == 1, f"expected exactly one ToolMessage for {call_id}: {answers}"
        outcomes.append(
            ToolCallOutcome(message=answers[0].text, is_error=answers[0].status == "error")
        )
    return outcomes


def resume_answer(requests: Any, approver: Any) -> dict[str, Any]:
    """The resume value: what the approver answers for each core request of the pause."""
    return {request.call_id: approver(request) for request in requests}


def proposals(conversation: ToolConversationScenario) -> list[Any]:
    """The scripted model's answers: each message's calls, under their own ids, then prose."""
    return [
        AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": arguments, "id": call_id, "type": "tool_call"}
                for name, arguments, call_id in message
            ],
        )
        for message in conversation.messages
    ] + ["done"]


def agent_loop(model: ScriptedChatModel, tool_node: Any) -> Any:
    """START -> agent -> (tools -> agent)* -> END, the agent a plain call of the model."""

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tool_node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


class _Glue:
    """Builds one form of the plugin over a scenario's tools and runs calls through it."""

    def tool_node(
        self, tools: list[ConformanceTool], scenario: Any, approver: Any = None
    ) -> tuple[Any, Any]:
        """The graph's tool node, and the plugin object that reads its pauses."""
        raise NotImplementedError

    def app(self, tools: list[ConformanceTool], scenario: Any, approver: Any = None) -> Any:
        node, reader = self.tool_node(tools, scenario, approver)
        graph = StateGraph(MessagesState)
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        app = graph.compile(checkpointer=InMemorySaver())
        app.jevqueue_node = reader
        return app

    def conversation_app(self, conversation: ToolConversationScenario) -> Any:
        node, reader = self.tool_node(conversation.tools, conversation)
        app = agent_loop(ScriptedChatModel(steps=proposals(conversation)), node)
        app.jevqueue_node = reader
        return app

    def requests(self, app: Any, paused: Any) -> Any:
        """The core approval requests behind a pause."""
        return app.jevqueue_node.approval_requests(paused)

    def resumed(self, app: Any, result: dict[str, Any], approver: Any, config: Any) -> Any:
        """Answer every pause of ``result`` with ``approver`` until the run ends."""
        pauses = 0
        while "__interrupt__" in result:
            pauses += 1
            assert pauses <= 8, "the run keeps pausing"
            answers: dict[str, Any] = {}
            for paused in result["__interrupt__"]:
                answers[paused.id] = resume_answer(self.requests(app, paused), approver)
            resume = answers if len(answers) > 1 else next(iter(answers.values()))
            result = app.invoke(Command(resume=resume), config)
        return result

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        app = self.conversation_app(conversation)
        config = thread(conversation.context)
        start = {"messages": [HumanMessage(conversation.user_request)]}
        result = self.resumed(app, app.invoke(start, config), conversation.approver, config)
        return [
            tool_answers(result, [call_id for _, _, call_id in message])
            for message in conversation.messages
        ]

    def start(self, app: Any, proposal: AIMessage, config: dict[str, Any]) -> dict[str, Any]:
        # A call scenario shows the agent nothing (no request, no output): the state holds
        # only the model's proposal, so the call has no provenance and the suite's digest.
        return app.invoke({"messages": [proposal]}, config)  # type: ignore[no-any-return]

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        app = self.app(call.tools, call, approver=call.approver)
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        proposal = AIMessage(
            content="",
            tool_calls=[
                {"name": call.tool.name, "args": call.arguments, "id": call_id, "type": "tool_call"}
            ],
        )
        result = self.start(app, proposal, thread(call.context))
        assert "__interrupt__" not in result, "with an inline approver the run must not pause"
        (outcome,) = tool_answers(result, [call_id])
        return ToolCallOutcome(outcome.message, outcome.is_error, call.approver.asked)

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        app = self.app(batch.tools, batch)
        config = thread(batch.context)
        proposal = AIMessage(
            content="",
            tool_calls=[
                {"name": name, "args": arguments, "id": call_id, "type": "tool_call"}
                for name, arguments, call_id in batch.calls
            ],
        )
        paused = self.start(app, proposal, config)
        assert "__interrupt__" in paused, "the approval-gated call of the batch never paused"
        result = self.resumed(app, paused, batch.approver, config)
        return tool_answers(result, [call_id for _, _, call_id in batch.calls])

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        return routes_around_the_guard(policy)


class _PolicyToolNodeGlue(_Glue):
    def tool_node(
        self, tools: list[ConformanceTool], scenario: Any, approver: Any = None
    ) -> tuple[Any, Any]:
        node = policy_tool_node(
            [langchain_tool(tool) for tool in tools],
            pep=scenario.pep,
            specs=scenario.specs,
            approver=approver,
        )
        return node, node


class TestLangGraphConformance(_PolicyToolNodeGlue, PluginConformance):
    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        tools = [langchain_tool(tool) for tool in turn.tools]
        graph = StateGraph(MessagesState)
        graph.add_node(
            "agent",
            governed_model_node(scripted_model(turn.provider), tools, governor=turn.governor),
        )
        graph.add_node("tools", policy_tool_node(tools, pep=turn.pep, specs=turn.specs))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
        graph.add_edge("tools", END)
        app = graph.compile(checkpointer=InMemorySaver())
        result = app.invoke({"messages": langchain_messages(turn.messages)}, thread(turn.context))
        response = next(m for m in reversed(result["messages"]) if isinstance(m, AIMessage))
        return TurnOutcome(
            text=response.text,
            tool_calls=tuple((c["name"], c["args"]) for c in response.tool_calls),
            model_id=response.response_metadata.get("model_name"),
        )


class TestLangGraphOwnToolNodeConformance(_Glue, PolicyConformance):
    def tool_node(
        self, tools: list[ConformanceTool], scenario: Any, approver: Any = None
    ) -> tuple[Any, Any]:
        framework_tools = [langchain_tool(tool) for tool in tools]
        node = policy_tool_node(
            framework_tools, pep=scenario.pep, specs=scenario.specs, approver=approver
        )
        own = ToolNode(
            framework_tools,
            wrap_tool_call=node.wrap_tool_call,
            awrap_tool_call=node.awrap_tool_call,
        )
        return own, node


class TestLangGraphMiddlewareConformance(_Glue, PolicyConformance):
    def agent(
        self, tools: list[ConformanceTool], scenario: Any, steps: list[Any], approver: Any = None
    ) -> Any:
        middleware = PolicyMiddleware(pep=scenario.pep, specs=scenario.specs, approver=approver)
        app = create_agent(
            ScriptedChatModel(steps=steps),
            [langchain_tool(tool) for tool in tools],
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        app.jevqueue_node = middleware
        return app

    def app(self, tools: list[ConformanceTool], scenario: Any, approver: Any = None) -> Any:
        # The model proposes the scenario's calls (start() scripts them), then answers.
        return self.agent(tools, scenario, [lambda call: self._proposal, "done"], approver)

    def conversation_app(self, conversation: ToolConversationScenario) -> Any:
        return self.agent(conversation.tools, conversation, proposals(conversation))

    def start(self, app: Any, proposal: AIMessage, config: dict[str, Any]) -> dict[str, Any]:
        self._proposal = proposal
        return app.invoke({"messages": []}, config)  # type: ignore[no-any-return]


# --- routes around the guard ---------------------------------------------------------------


def _undeclared() -> ConformanceTool:
    return ConformanceTool(
        name="send_email",
        description="Send an email to anyone.",
        parameters={
            "type": "object",
            "properties": {"to": {"type": "string"}},
            "required": ["to"],
        },
        side_effects=frozenset({"network"}),
    )


PROVIDER_TOOL = {"type": "web_search_preview"}


def _attempt(
    route: str,
    build: Any,
    run: Any = None,
    tool: ConformanceTool | None = None,
    policy: PolicyHarness | None = None,
) -> RouteAttempt:
    """Build with the route; when accepted, take it; report what happened."""
    try:
        app = build()
        if run is not None:
            run(app)
    except ConfigurationError as error:
        return RouteAttempt(route, refused=True, ran=bool(tool and tool.calls), error=str(error))
    audited = (
        policy is not None
        and tool is not None
        and any(
            (event.get("tool") if isinstance(event, dict) else getattr(event, "tool", None))
            == tool.name
            for event in policy.audit.events
        )
    )
    return RouteAttempt(route, refused=False, ran=bool(tool and tool.calls), audited=audited)


class _ToolFromMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    def __init__(self, tool: Any) -> None:
        super().__init__()
        self.tools = [tool]


def routes_around_the_guard(policy: PolicyHarness) -> list[RouteAttempt]:
    tools = conformance_tools()
    context = policy.context
    declared = [langchain_tool(tool) for tool in tools]
    attempts = []

    extra = _undeclared()
    attempts.append(
        _attempt(
            "undeclared tool (policy_tool_node)",
            lambda: policy_tool_node(
                [*declared, langchain_tool(extra)], pep=policy.pep, specs=policy.specs
            ),
            tool=extra,
        )
    )
    extra = _undeclared()
    attempts.append(
        _attempt(
            "undeclared tool (create_governed_agent)",
            lambda: create_governed_agent(
                ScriptedChatModel(steps=[]),
                [*declared, langchain_tool(extra)],
                pep=policy.pep,
                specs=policy.specs,
                context=context,
            ),
            tool=extra,
        )
    )
    attempts.append(
        _attempt(
            "provider-executed tool (create_governed_agent)",
            lambda: create_governed_agent(
                ScriptedChatModel(steps=[]),
                [*declared, PROVIDER_TOOL],
                pep=policy.pep,
                specs=policy.specs,
                context=context,
            ),
        )
    )

    def agent(agent_tools: list[Any], middleware: list[Any], steps: list[Any]) -> Any:
        return create_agent(
            ScriptedChatModel(steps=steps),
            agent_tools,
            middleware=[*middleware, PolicyMiddleware(pep=policy.pep, specs=policy.specs)],
            checkpointer=InMemorySaver(),
        )

    def run(app: Any) -> None:
        app.invoke({"messages": [HumanMessage("go")]}, thread(context))

    def calls(name: str, arguments: dict[str, Any]) -> list[Any]:
        proposal = AIMessage(
            content="",
            tool_calls=[{"name": name, "args": arguments, "id": "route-1", "type": "tool_call"}],
        )
        return [proposal, "done"]

    extra = _undeclared()
    attempts.append(
        _attempt(
            "undeclared tool (create_agent with PolicyMiddleware)",
            lambda: agent([*declared, langchain_tool(extra)], [], calls("send_email", {"to": "x"})),
            run,
            extra,
            policy,
        )
    )
    attempts.append(
        _attempt(
            "provider-executed tool (create_agent with PolicyMiddleware)",
            lambda: agent([*declared, PROVIDER_TOOL], [], ["done"]),
            run,
        )
    )
    extra = _undeclared()
    attempts.append(
        _attempt(
            "undeclared tool added by another middleware (create_agent)",
            lambda: agent(
                declared,
                [_ToolFromMiddleware(langchain_tool(extra))],
                calls("send_email", {"to": "x"}),
            ),
            run,
            extra,
            policy,
        )
    )

    class _WrapsToolCalls(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    weather = next(t for t in tools if t.name == "get_weather")
    attempts.append(
        _attempt(
            "a middleware wrapping tool calls after PolicyMiddleware (create_agent)",
            lambda: create_agent(
                ScriptedChatModel(steps=calls("get_weather", {"city": "Oslo"})),
                declared,
                middleware=[
                    PolicyMiddleware(pep=policy.pep, specs=policy.specs),
                    _WrapsToolCalls(),
                ],
                checkpointer=InMemorySaver(),
            ),
            run,
            weather,
            policy,
        )
    )

    # A ToolNode of your own, given the interceptors, with a tool the node never saw.
    extra = _undeclared()
    node = policy_tool_node(declared, pep=policy.pep, specs=policy.specs)

    def own_tool_node() -> Any:
        graph = StateGraph(MessagesState)
        graph.add_node(
            "tools",
            ToolNode(
                [*declared, langchain_tool(extra)],
                wrap_tool_call=node.wrap_tool_call,
                awrap_tool_call=node.awrap_tool_call,
            ),
        )
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        return graph.compile(checkpointer=InMemorySaver())

    def call_it(app: Any) -> None:
        proposal, _ = calls("send_email", {"to": "x"})
        result = app.invoke({"messages": [HumanMessage("go"), proposal]}, thread(context))
        (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
        assert answer.status == "error" and "no policy declaration" not in answer.text

    attempts.append(
        _attempt(
            "undeclared tool in a ToolNode of your own with the interceptors",
            own_tool_node,
            call_it,
            extra,
            policy,
        )
    )
    return attempts
