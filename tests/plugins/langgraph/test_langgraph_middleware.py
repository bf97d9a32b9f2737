"""The middleware form inside langchain's real ``create_agent``; only the model is scripted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
from jevqueue import Governor, Path
from jevqueue.errors import ProviderDisobeyedError
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.langgraph import GovernorMiddleware, PolicyMiddleware
from jevqueue.plugins.langgraph.testing import ScriptedChatModel, scripted_tool_call
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_support import Policy, Toolbox, fixed_governor, unparsed_call

COMMAND = {"command": "make test", "cwd": "."}
FORCE_READ = {"read_file": 0.95, "write_file": 0.1, "run_command": 0.1}


def governed(model: Any, toolbox: Toolbox, policy: Policy, **scores: float) -> Any:
    return create_agent(
        model,
        toolbox.tools,
        middleware=[
            GovernorMiddleware(fixed_governor(**scores)),
            PolicyMiddleware(pep=policy.pep, specs=toolbox.specs, context=policy.context),
        ],
        checkpointer=InMemorySaver(),
    )


def test_forced_turn_then_passthrough(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[scripted_tool_call("read_file", {"path": "notes.txt"}), "Here it is."]
    )
    app = governed(model, toolbox, policy, read_file=0.95, write_file=0.1, run_command=0.1)
    result = app.invoke(
        {"messages": [HumanMessage("Show notes.txt")]},
        {"configurable": {"thread_id": uuid.uuid4().hex}},
    )
    forced, after = model.requests
    assert forced.tool_choice == "read_file" and forced.parallel_tool_calls is False
    assert isinstance(forced.messages[-1], SystemMessage)
    assert not after.tool_choice_set and after.parallel_tool_calls is None
    assert toolbox.ran("read_file") == [{"path": "notes.txt"}]
    assert result["messages"][-1].content == "Here it is."


def test_disobeying_model_raises(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(steps=[scripted_tool_call("run_command", COMMAND)])
    app = governed(model, toolbox, policy, read_file=0.95, write_file=0.1, run_command=0.1)
    with pytest.raises(ProviderDisobeyedError):
        app.invoke({"messages": [HumanMessage("x")]}, {"configurable": {"thread_id": "t"}})
    assert toolbox.runs == []


def unparsed_agent(
    toolbox: Toolbox, policy: Policy, governor: Governor, **options: Any
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(steps=[unparsed_call("read_file")])
    app = create_agent(
        model,
        toolbox.tools,
        middleware=[
            GovernorMiddleware(governor, **options),
            PolicyMiddleware(pep=policy.pep, specs=toolbox.specs, context=policy.context),
        ],
        checkpointer=InMemorySaver(),
    )
    return app, model


def invoke(app: Any, asynchronous: bool) -> Any:
    state = {"messages": [HumanMessage("Show notes.txt")]}
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    return asyncio.run(app.ainvoke(state, config)) if asynchronous else app.invoke(state, config)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_an_unparseable_forced_call_is_blocked(
    toolbox: Toolbox, policy: Policy, asynchronous: bool
) -> None:
    governor = fixed_governor(**FORCE_READ)
    app, model = unparsed_agent(toolbox, policy, governor)
    with pytest.raises(ProviderDisobeyedError, match="do not parse") as caught:
        invoke(app, asynchronous)
    assert model.requests[0].tool_choice == "read_file"
    assert caught.value.expected == ["read_file"]
    assert caught.value.called == ["<read_file: arguments do not parse>"]
    assert governor.last is not None and governor.last.path is Path.TOOL
    assert governor.last.error is not None
    assert toolbox.runs == [] and policy.audit.events == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_an_unparseable_forced_call_is_replaced_and_recorded(
    toolbox: Toolbox, policy: Policy, asynchronous: bool
) -> None:
    governor = fixed_governor(**FORCE_READ)
    app, model = unparsed_agent(toolbox, policy, governor, on_disobey="message")
    result = invoke(app, asynchronous)
    model.assert_complete()
    last = result["messages"][-1]
    assert last.response_metadata["model_name"] == LOCAL_MODEL_ID and not last.tool_calls
    assert "nothing was executed" in last.content
    assert not any(getattr(m, "invalid_tool_calls", None) for m in result["messages"])
    assert governor.last is not None and governor.last.path is Path.TOOL
    assert governor.last.error is not None and "do not parse" in governor.last.error
    assert toolbox.runs == [] and policy.audit.events == []


def test_denial_and_approval_through_middleware(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[
            scripted_tool_call("write_file", {"path": "/etc/hosts", "content": "x"}),
            scripted_tool_call("run_command", COMMAND),
            "Tests pass.",
        ]
    )
    app = governed(model, toolbox, policy, read_file=0.3, write_file=0.3, run_command=0.3)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    paused = app.invoke({"messages": [HumanMessage("fix and test")]}, config)
    denial = next(m for m in paused["messages"] if isinstance(m, ToolMessage))
    assert denial.status == "error"
    assert denial.content.startswith("jevqueue denied the call to 'write_file'"), denial.content
    (action,) = paused["__interrupt__"][0].value["actions"]
    assert toolbox.runs == []
    done = app.invoke(Command(resume=policy.authority.issue(action["action_digest"])), config)
    assert toolbox.ran("run_command") == [COMMAND] and len(toolbox.runs) == 1
    assert done["messages"][-1].content == "Tests pass."
    model.assert_complete()


def test_async_middleware_forces_and_judges(toolbox: Toolbox, policy: Policy) -> None:
    model = ScriptedChatModel(
        steps=[scripted_tool_call("read_file", {"path": "/etc/passwd"}), "Not allowed."]
    )
    app = governed(model, toolbox, policy, read_file=0.95, write_file=0.1, run_command=0.1)
    result = asyncio.run(
        app.ainvoke(
            {"messages": [HumanMessage("Show /etc/passwd")]}, {"configurable": {"thread_id": "a"}}
        )
    )
    assert model.requests[0].tool_choice == "read_file"
    denial = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert denial.status == "error" and toolbox.runs == []


def test_two_waiting_calls_resume_by_interrupt_id(toolbox: Toolbox, policy: Policy) -> None:
    other = {"command": "make lint", "cwd": "."}
    both = AIMessage(
        content="",
        tool_calls=[
            {"name": "run_command", "args": COMMAND, "id": "c1", "type": "tool_call"},
            {"name": "run_command", "args": other, "id": "c2", "type": "tool_call"},
        ],
    )
    model = ScriptedChatModel(steps=[both, "Tests ran; lint was declined."])
    app = governed(model, toolbox, policy, read_file=0.3, write_file=0.3, run_command=0.3)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    paused = app.invoke({"messages": [HumanMessage("test and lint")]}, config)
    waiting = paused["__interrupt__"]
    assert len(waiting) == 2 and toolbox.runs == []
    answers = {}
    for interrupt in waiting:
        (action,) = interrupt.value["actions"]
        if action["tool_call_id"] == "c1":
            answers[interrupt.id] = policy.authority.issue(action["action_digest"])
        else:
            answers[interrupt.id] = False  # the lint run is declined
    done = app.invoke(Command(resume=answers), config)
    assert toolbox.ran("run_command") == [COMMAND] and len(toolbox.runs) == 1
    replies = {m.tool_call_id: m for m in done["messages"] if isinstance(m, ToolMessage)}
    assert replies["c1"].status == "success" and replies["c2"].status == "error"
    assert done["messages"][-1].content == "Tests ran; lint was declined."
