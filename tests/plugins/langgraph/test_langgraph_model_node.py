"""The governed model node inside real LangGraph graphs; only the chat model is scripted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
from jevqueue import Governor, Path
from jevqueue.errors import ProviderDisobeyedError, TurnInterruptedError
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.langgraph import (
    CONTEXT_CONFIG_KEY,
    ToolChoice,
    create_governed_agent,
    governed_model_node,
)
from jevqueue.plugins.langgraph.testing import ScriptedChatModel, scripted_tool_call
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph_support import Policy, Toolbox, fixed_governor, unparsed_call

FORCE_READ = {"read_file": 0.95, "write_file": 0.1, "run_command": 0.1}
UNSURE = {"read_file": 0.4, "write_file": 0.1, "run_command": 0.1}
NOTHING = {"read_file": 0.05, "write_file": 0.05, "run_command": 0.05}


def agent(model: Any, toolbox: Toolbox, policy: Policy, governor: Governor, **options: Any) -> Any:
    return create_governed_agent(
        model,
        toolbox.tools,
        pep=policy.pep,
        specs=toolbox.specs,
        governor=governor,
        context=policy.context,
        checkpointer=InMemorySaver(),
        **options,
    )


def run(app: Any, text: str = "Show me notes.txt") -> dict[str, Any]:
    return app.invoke(  # type: ignore[no-any-return]
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": uuid.uuid4().hex}}
    )


def test_a_forced_turn_binds_the_tool_for_that_turn_only(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[scripted_tool_call("read_file", {"path": "notes.txt"}), "Here it is."]
    )
    decisions: list[Any] = []
    app = agent(model, toolbox, policy, fixed_governor(**FORCE_READ), on_decision=decisions.append)
    result = run(app)
    assert [d.path for d in decisions] == [Path.TOOL, Path.DELEGATE]
    model.assert_complete()
    forced, after = model.requests
    assert forced.tool_choice == "read_file" and forced.parallel_tool_calls is False
    assert isinstance(forced.messages[-1], SystemMessage), "the directive is appended"
    # The next turn follows a tool result: it delegates, and nothing stays forced.
    assert not after.tool_choice_set and after.parallel_tool_calls is None
    assert toolbox.ran("read_file") == [{"path": "notes.txt"}]
    assert result["messages"][-1].content == "Here it is."
    # The directive went onto a copy: the state holds no directive message.
    assert not any(isinstance(m, SystemMessage) for m in result["messages"])


def test_a_model_that_ignores_the_forced_tool_is_blocked(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[scripted_tool_call("write_file", {"path": "a", "content": ""})]
    )
    governor = fixed_governor(**FORCE_READ)
    app = agent(model, toolbox, policy, governor)
    with pytest.raises(ProviderDisobeyedError) as caught:
        run(app)
    assert caught.value.expected == ["read_file"] and caught.value.called == ["write_file"]
    assert toolbox.runs == [] and policy.audit.events == []
    assert governor.last is not None and governor.last.error is not None


def test_on_disobey_message_replaces_the_response(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "read_file", "args": {"path": "a"}, "id": "c1", "type": "tool_call"},
                    {"name": "read_file", "args": {"path": "b"}, "id": "c2", "type": "tool_call"},
                ],
            )
        ]
    )
    app = agent(model, toolbox, policy, fixed_governor(**FORCE_READ), on_disobey="message")
    result = run(app)
    last = result["messages"][-1]
    assert last.response_metadata["model_name"] == LOCAL_MODEL_ID and not last.tool_calls
    assert "nothing was executed" in last.content
    assert toolbox.runs == []


def test_a_forced_call_with_unparseable_arguments_is_blocked(
    toolbox: Toolbox, policy: Policy
) -> None:
    governor = fixed_governor(**FORCE_READ)
    app = agent(ScriptedChatModel(steps=[unparsed_call("read_file")]), toolbox, policy, governor)
    with pytest.raises(ProviderDisobeyedError, match="do not parse") as caught:
        run(app)
    assert caught.value.expected == ["read_file"]
    assert caught.value.called == ["<read_file: arguments do not parse>"]
    assert governor.last is not None and governor.last.error is not None
    assert toolbox.runs == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_an_unparseable_forced_call_is_recorded_as_blocked_when_replaced(
    toolbox: Toolbox, policy: Policy, asynchronous: bool
) -> None:
    governor = fixed_governor(**FORCE_READ)
    decisions: list[Any] = []
    app = agent(
        ScriptedChatModel(steps=[unparsed_call("read_file")]),
        toolbox,
        policy,
        governor,
        on_disobey="message",
        on_decision=decisions.append,
    )
    state = {"messages": [HumanMessage("Show me notes.txt")]}
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    result = asyncio.run(app.ainvoke(state, config)) if asynchronous else app.invoke(state, config)
    last = result["messages"][-1]
    assert last.response_metadata["model_name"] == LOCAL_MODEL_ID
    assert "nothing was executed" in last.content
    assert not any(getattr(m, "invalid_tool_calls", None) for m in result["messages"])
    # The record says the turn was blocked, not that the forced call succeeded.
    assert governor.last is not None and governor.last.path is Path.TOOL
    assert governor.last.error is not None and "do not parse" in governor.last.error
    assert decisions == [governor.last]
    assert toolbox.runs == []


def test_an_unparseable_call_on_a_prose_turn_is_blocked(toolbox: Toolbox, policy: Policy) -> None:
    governor = fixed_governor(**NOTHING)
    app = agent(ScriptedChatModel(steps=[unparsed_call("read_file")]), toolbox, policy, governor)
    with pytest.raises(ProviderDisobeyedError) as caught:
        run(app, "hi")
    assert caught.value.expected == []
    assert caught.value.called == ["<read_file: arguments do not parse>"]
    assert governor.last is not None and governor.last.path is Path.PROSE
    assert governor.last.error is not None and toolbox.runs == []


def test_a_prose_turn_forbids_tools_and_blocks_a_call(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(steps=["Hello!"])
    app = agent(model, toolbox, policy, fixed_governor(**NOTHING))
    assert run(app, "hi")["messages"][-1].content == "Hello!"
    assert model.requests[0].tool_choice == "none"

    sneaky = ScriptedChatModel(steps=[scripted_tool_call("read_file", {"path": "x"})])
    app = agent(sneaky, toolbox, policy, fixed_governor(**NOTHING))
    with pytest.raises(ProviderDisobeyedError):
        run(app, "hi")
    assert toolbox.runs == []


def test_delegation_is_a_true_passthrough(toolbox: Toolbox) -> None:
    model = ScriptedChatModel(steps=["Maybe."])
    node = governed_model_node(model, toolbox.tools, governor=fixed_governor(**UNSURE))
    messages = [HumanMessage("hmm")]
    out = node.invoke({"messages": messages})
    (call,) = model.requests
    assert not call.tool_choice_set and call.parallel_tool_calls is None and call.kwargs == {}
    assert list(call.messages) == messages and call.messages[0] is messages[0]
    assert call.tools == ("read_file", "write_file", "run_command")
    assert out["messages"][0].content == "Maybe."
    # Exactly what the ungoverned binding sends.
    plain = ScriptedChatModel(steps=["Maybe."])
    plain.bind_tools(toolbox.tools).invoke(messages)
    assert plain.requests[0].tools == call.tools and plain.requests[0].kwargs == call.kwargs


def test_say_builds_the_answer_locally(toolbox: Toolbox) -> None:
    def risky(messages: Any, tools: Any, scores: Any) -> str:
        return "Deleting the repository is not something I will do."

    governor = Governor(fixed_governor(**FORCE_READ).ballot, risk_rules=[risky])
    model = ScriptedChatModel(steps=[])
    node = governed_model_node(model, toolbox.tools, governor=governor)
    out = node.invoke({"messages": [HumanMessage("delete the repo")]})
    (message,) = out["messages"]
    assert model.requests == []
    assert message.response_metadata == {"model_name": LOCAL_MODEL_ID}
    assert message.content.startswith("Deleting the repository")
    assert governor.last is not None and governor.last.path is Path.RISK_STOP


def test_a_static_tool_call_is_built_locally_and_still_judged(
    toolbox: Toolbox, policy: Policy
) -> None:
    governor = Governor(
        fixed_governor(**FORCE_READ).ballot,
        thresholds=fixed_governor().thresholds,
        static_tools={"read_file": {"path": "README.md"}},
    )
    model = ScriptedChatModel(steps=["Done."])
    result = run(agent(model, toolbox, policy, governor))
    first = result["messages"][1]
    assert first.response_metadata["model_name"] == LOCAL_MODEL_ID
    assert first.tool_calls[0]["args"] == {"path": "README.md"}
    assert toolbox.ran("read_file") == [{"path": "README.md"}]
    assert policy.audit.results == ["ALLOW"]
    assert len(model.requests) == 1  # only the answer after the tool result


def test_interrupted_stops_before_the_model_call(toolbox: Toolbox) -> None:
    model = ScriptedChatModel(steps=[])
    node = governed_model_node(
        model, toolbox.tools, governor=fixed_governor(**FORCE_READ), interrupted=lambda: True
    )
    with pytest.raises(TurnInterruptedError):
        node.invoke({"messages": [HumanMessage("read notes.txt")]})
    assert model.requests == []


def test_the_async_graph_forces_and_runs(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[scripted_tool_call("read_file", {"path": "notes.txt"}), "Here it is."]
    )
    app = agent(model, toolbox, policy, fixed_governor(**FORCE_READ))
    config = {"configurable": {"thread_id": "async", CONTEXT_CONFIG_KEY: policy.context}}
    result = asyncio.run(app.ainvoke({"messages": [HumanMessage("Show notes.txt")]}, config))
    assert model.requests[0].tool_choice == "read_file"
    assert isinstance(result["messages"][2], ToolMessage)
    assert toolbox.ran("read_file") == [{"path": "notes.txt"}]


def test_the_node_fits_a_graph_of_your_own(toolbox: Toolbox) -> None:
    class State(MessagesState):
        turns: int

    model = ScriptedChatModel(steps=[scripted_tool_call("read_file", {"path": "a"})])
    node = governed_model_node(model, toolbox.tools, governor=fixed_governor(**FORCE_READ))
    graph = StateGraph(State)
    graph.add_node("count", lambda state: {"turns": state.get("turns", 0) + 1})
    graph.add_node("agent", node)
    graph.add_edge(START, "count")
    graph.add_edge("count", "agent")
    graph.add_edge("agent", END)
    result = graph.compile().invoke({"messages": [HumanMessage("read a")], "turns": 0})
    assert result["turns"] == 1 and result["messages"][-1].tool_calls[0]["name"] == "read_file"


class ChatAnthropic(ScriptedChatModel):
    """Named like the integration, so the node picks the Anthropic mapping."""


class ChatOllama(ScriptedChatModel):
    """Named like the integration, so the node picks the narrowing mapping."""


def test_anthropic_gets_the_dict_forms(toolbox: Toolbox) -> None:
    model = ChatAnthropic(steps=[scripted_tool_call("read_file", {"path": "a"}), "Hi."])
    node = governed_model_node(model, toolbox.tools, governor=fixed_governor(**FORCE_READ))
    node.invoke({"messages": [HumanMessage("read a")]})
    assert model.requests[0].tool_choice == {"type": "tool", "name": "read_file"}
    assert isinstance(model.requests[0].messages[-1], HumanMessage)
    node = governed_model_node(model, toolbox.tools, governor=fixed_governor(**NOTHING))
    node.invoke({"messages": [HumanMessage("hi")]})
    assert model.requests[1].tool_choice == {"type": "none"}


def test_ollama_narrows_the_tools_because_it_drops_tool_choice(toolbox: Toolbox) -> None:
    model = ChatOllama(steps=["I will not call it."])
    assert not ToolChoice.for_model(model).can_force
    node = governed_model_node(model, toolbox.tools, governor=fixed_governor(**FORCE_READ))
    with pytest.raises(ProviderDisobeyedError):
        node.invoke({"messages": [HumanMessage("read a")]})
    assert model.requests[0].tools == ("read_file",) and not model.requests[0].tool_choice_set
