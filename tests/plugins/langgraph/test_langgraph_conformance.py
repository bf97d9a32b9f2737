"""The LangGraph plugin passes the shared plugin conformance suite.

The glue runs real LangGraph graphs (StateGraph, the plugin's nodes around a real
ToolNode, an InMemorySaver checkpointer); only the chat model is scripted.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)

from jevqueue.plugins.langgraph import (
    CONTEXT_CONFIG_KEY,
    governed_model_node,
    policy_tool_node,
)
from jevqueue.plugins.langgraph.testing import ScriptedCall, ScriptedChatModel
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
from langgraph.prebuilt import tools_condition
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


class TestLangGraphConformance(PluginConformance):
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
        config = {
            "configurable": {
                "thread_id": uuid.uuid4().hex,
                CONTEXT_CONFIG_KEY: turn.context.as_dict(),
            }
        }
        result = app.invoke({"messages": langchain_messages(turn.messages)}, config)
        response = next(m for m in reversed(result["messages"]) if isinstance(m, AIMessage))
        return TurnOutcome(
            text=response.text,
            tool_calls=tuple((c["name"], c["args"]) for c in response.tool_calls),
            model_id=response.response_metadata.get("model_name"),
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        tools = [langchain_tool(tool) for tool in call.tools]
        graph = StateGraph(MessagesState)
        graph.add_node("tools", policy_tool_node(tools, pep=call.pep, specs=call.specs))
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        app = graph.compile(checkpointer=InMemorySaver())
        config = {
            "configurable": {
                "thread_id": uuid.uuid4().hex,
                CONTEXT_CONFIG_KEY: call.context.as_dict(),
            }
        }
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        proposal = AIMessage(
            content="",
            tool_calls=[
                {"name": call.tool.name, "args": call.arguments, "id": call_id, "type": "tool_call"}
            ],
        )
        result = app.invoke({"messages": [HumanMessage("go"), proposal]}, config)
        requested = None
        if "__interrupt__" in result:
            (paused,) = result["__interrupt__"]
            (action,) = paused.value["actions"]
            requested = action["action_digest"]
            if not call.approvals:
                return ToolCallOutcome(message="", is_error=False, approval_requested=requested)
            answer = [record.to_dict() for record in call.approvals]
            result = app.invoke(Command(resume=answer), config)
        answers = [
            m
            for m in result["messages"]
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id
        ]
        assert len(answers) == 1, f"expected exactly one ToolMessage for {call_id}: {answers}"
        return ToolCallOutcome(
            message=answers[0].text,
            is_error=answers[0].status == "error",
            approval_requested=requested,
        )
