"""The governed agent workers on real LlamaIndex agents: FunctionAgent and AgentWorkflow.

Only the model is scripted (:class:`ScriptedFunctionCallingLLM`, at the provider
boundary); the agents, their workflows, the tool dispatch and the streams are
LlamaIndex's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue import ConfigurationError, ProviderDisobeyedError, TurnInterruptedError
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.llamaindex import (
    GovernedFunctionAgent,
    GovernedFunctionCallingLLM,
)
from jevqueue.plugins.llamaindex.testing import (
    ScriptedFunctionCallingLLM,
    scripted_reply,
    scripted_tool_calls,
)
from llama_index.core.agent.workflow import (
    AgentStream,
    AgentWorkflow,
    FunctionAgent,
    ToolCallResult,
)
from llama_index.core.llms import ChatMessage
from llamaindex_kit import DELEGATE, FORCE_WEATHER, PROSE, Kit, fixed_governor, run


def weather_then_answer() -> list[Any]:
    return [scripted_tool_calls(("get_weather", {"city": "Oslo"})), "It is sunny in Oslo."]


async def collect(handler: Any) -> tuple[Any, list[Any]]:
    events = [event async for event in handler.stream_events()]
    return await handler, events


@pytest.mark.parametrize("streaming", [False, True], ids=["chat", "stream"])
def test_forced_step_then_passthrough(kit: Kit, streaming: bool) -> None:
    llm = ScriptedFunctionCallingLLM(steps=weather_then_answer())
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(FORCE_WEATHER), tools=kit.tools, streaming=streaming
    )
    result = run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
    llm.assert_complete()
    assert str(result) == "It is sunny in Oslo."
    assert kit.runs == [("get_weather", {"city": "Oslo"})]
    forced, after = llm.requests
    assert forced.stream is streaming
    assert forced.forced_tool == "get_weather"
    assert forced.parallel_tool_calls is False
    assert forced.messages[-1].role.value == "system", "the directive goes last, on a copy"
    # Forcing is per turn: the step after the tool result is the agent's own request.
    assert [d.path.value for d in agent.decisions] == ["tool", "delegate"]
    assert after.tool_choice == "auto" and after.forced_tool is None
    assert after.parallel_tool_calls is True  # FunctionAgent's own default, untouched
    assert all(m.role.value != "system" for m in after.messages)


def test_passthrough_request_equals_the_stock_agent_request(kit: Kit) -> None:
    def request_of(agent_class: Any, **extra: Any) -> Any:
        llm = ScriptedFunctionCallingLLM(steps=["Hello."])
        agent = agent_class(llm=llm, tools=kit.tools, streaming=False, **extra)
        run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
        return llm.requests[0]

    stock = request_of(FunctionAgent)
    governed = request_of(GovernedFunctionAgent, governor=fixed_governor(DELEGATE))
    for name in ("tools", "tool_choice", "parallel_tool_calls", "stream", "kwargs"):
        assert getattr(governed, name) == getattr(stock, name), name
    assert [m.content for m in governed.messages] == [m.content for m in stock.messages]


@pytest.mark.parametrize("streaming", [False, True], ids=["chat", "stream"])
def test_prose_step_forbids_tools(kit: Kit, streaming: bool) -> None:
    llm = ScriptedFunctionCallingLLM(steps=["Hello! How can I help?"])
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(PROSE), tools=kit.tools, streaming=streaming
    )
    result = run(lambda: agent.run(user_msg="Hi there"))
    assert str(result) == "Hello! How can I help?"
    (request,) = llm.requests
    assert request.tool_choice == "none"
    assert request.messages[-1].role.value == "system"
    assert agent.decisions[-1].path.value == "prose"


@pytest.mark.parametrize("streaming", [False, True], ids=["chat", "stream"])
def test_two_calls_on_a_forced_step_are_blocked_before_the_stock_truncation(
    kit: Kit, streaming: bool
) -> None:
    # The stock FunctionAgent runs delete_file here: force_single_tool_call keeps the first.
    llm = ScriptedFunctionCallingLLM(
        steps=[
            scripted_tool_calls(
                ("delete_file", {"path": "notes.txt"}), ("get_weather", {"city": "Oslo"})
            )
        ]
    )
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(FORCE_WEATHER), tools=kit.tools, streaming=streaming
    )

    async def go() -> list[Any]:
        handler = agent.run(user_msg="What is the weather in Oslo?")
        events: list[Any] = []
        with pytest.raises(ProviderDisobeyedError) as raised:
            async for event in handler.stream_events():
                events.append(event)
            await handler
        assert raised.value.called == ["delete_file", "get_weather"]
        return events

    events = run(go())
    assert kit.runs == [], "a disobeyed step executed a tool"
    assert not [e for e in events if isinstance(e, ToolCallResult)]
    # Streaming: the buffered chunks never reached the stream, partial calls included.
    assert not [e for e in events if isinstance(e, AgentStream) and e.tool_calls]
    assert agent.decisions[-1].error is not None


def test_the_stock_agent_truncates_the_same_reply_and_runs_the_first_call(kit: Kit) -> None:
    """The control: what the read-back prevents really happens without it."""
    llm = ScriptedFunctionCallingLLM(
        steps=[
            scripted_tool_calls(
                ("delete_file", {"path": "notes.txt"}), ("get_weather", {"city": "Oslo"})
            ),
            "Done.",
        ]
    )
    agent = FunctionAgent(
        llm=llm, tools=kit.tools, streaming=False, allow_parallel_tool_calls=False
    )
    run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
    assert kit.names_run() == ["delete_file"]


def test_a_prose_reply_on_a_forced_step_is_blocked(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=["I would rather not call tools."])
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(FORCE_WEATHER), tools=kit.tools, streaming=False
    )
    with pytest.raises(ProviderDisobeyedError):
        run(lambda: agent.run(user_msg="What is the weather in Oslo?"))


def test_a_tool_call_on_a_prose_step_is_blocked(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("run_command", {"command": "ls"}))]
    )
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(PROSE), tools=kit.tools, streaming=False
    )
    with pytest.raises(ProviderDisobeyedError):
        run(lambda: agent.run(user_msg="Hi"))
    assert kit.runs == []


def test_risk_stop_answers_locally_without_a_provider_call(kit: Kit) -> None:
    from jevqueue import Governor
    from jevqueue.governor import Thresholds

    governor = Governor(
        fixed_governor(FORCE_WEATHER).ballot,
        thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2),
        risk_rules=(lambda messages, tools, scores: "Not today.",),
    )
    llm = ScriptedFunctionCallingLLM(steps=[])
    agent = GovernedFunctionAgent(llm=llm, governor=governor, tools=kit.tools, streaming=True)
    result = run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
    assert llm.requests == []
    assert "Not today." in str(result)
    assert result.raw["model"] == LOCAL_MODEL_ID


def test_static_tool_call_is_built_locally_and_runs(kit: Kit) -> None:
    from jevqueue import Governor
    from jevqueue.governor import Thresholds

    governor = Governor(
        fixed_governor(FORCE_WEATHER).ballot,
        thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2),
        static_tools={"get_weather": {"city": "Lisbon"}},
    )
    llm = ScriptedFunctionCallingLLM(steps=["Sunny in Lisbon."])
    agent = GovernedFunctionAgent(llm=llm, governor=governor, tools=kit.tools, streaming=False)
    run(lambda: agent.run(user_msg="What is the weather in Lisbon?"))
    assert kit.runs == [("get_weather", {"city": "Lisbon"})]
    assert len(llm.requests) == 1, "only the answer after the tool result reached the model"


def test_inside_agent_workflow_forced_and_disobeyed(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=weather_then_answer())
    agent = GovernedFunctionAgent(
        name="weather",
        description="Answers weather questions",
        llm=llm,
        governor=fixed_governor(FORCE_WEATHER),
        tools=kit.tools,
        streaming=False,
    )
    workflow = AgentWorkflow(agents=[agent], root_agent="weather")
    result = run(lambda: workflow.run(user_msg="What is the weather in Oslo?"))
    assert "sunny" in str(result).lower()
    assert llm.requests[0].forced_tool == "get_weather"
    assert kit.runs == [("get_weather", {"city": "Oslo"})]

    kit.runs.clear()
    bad = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("run_command", {"command": "rm -rf /"}))]
    )
    agent = GovernedFunctionAgent(
        name="weather",
        description="Answers weather questions",
        llm=bad,
        governor=fixed_governor(FORCE_WEATHER),
        tools=kit.tools,
        streaming=True,
    )
    workflow = AgentWorkflow(agents=[agent], root_agent="weather")
    with pytest.raises(ProviderDisobeyedError):
        run(lambda: workflow.run(user_msg="What is the weather in Oslo?"))
    assert kit.runs == []


def test_agent_workflow_with_two_agents_governs_each_and_hands_off(kit: Kit) -> None:
    weather_tools = [t for t in kit.tools if t.metadata.name == "get_weather"]
    front_llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("handoff", {"to_agent": "weather", "reason": "weather"}))]
    )
    weather_llm = ScriptedFunctionCallingLLM(steps=weather_then_answer())
    front = GovernedFunctionAgent(
        name="front",
        description="Routes questions",
        llm=front_llm,
        governor=fixed_governor({"handoff": 0.95}),
        tools=[],
        can_handoff_to=["weather"],
        streaming=False,
    )
    weather = GovernedFunctionAgent(
        name="weather",
        description="Answers weather questions",
        llm=weather_llm,
        governor=fixed_governor(FORCE_WEATHER),
        tools=weather_tools,
        streaming=False,
    )
    workflow = AgentWorkflow(agents=[front, weather], root_agent="front")
    run(lambda: workflow.run(user_msg="What is the weather in Oslo?"))
    assert front_llm.requests[0].forced_tool == "handoff"
    assert weather_llm.requests[0].forced_tool is None, (
        "after the hand-off the newest message is a tool result: the step delegates"
    )
    assert kit.runs == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("mode", ["chat", "stream", "achat", "astream"])
def test_governed_llm_in_a_custom_loop(kit: Kit, mode: str) -> None:
    llm = ScriptedFunctionCallingLLM(steps=[scripted_tool_calls(("get_weather", {"city": "Oslo"}))])
    governed = GovernedFunctionCallingLLM(llm, fixed_governor(FORCE_WEATHER))
    history = [ChatMessage(role="user", content="What is the weather in Oslo?")]

    async def call() -> Any:
        if mode == "achat":
            return await governed.achat_with_tools(kit.tools, chat_history=history)
        chunks = [
            c async for c in await governed.astream_chat_with_tools(kit.tools, chat_history=history)
        ]
        return chunks[-1]

    if mode == "chat":
        response = governed.chat_with_tools(kit.tools, chat_history=history)
    elif mode == "stream":
        response = list(governed.stream_chat_with_tools(kit.tools, chat_history=history))[-1]
    else:
        response = run(call())
    calls = governed.get_tool_calls_from_response(response)
    assert [(c.tool_name, c.tool_kwargs) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert llm.requests[0].forced_tool == "get_weather"
    assert len(history) == 1, "the caller's history was mutated"
    assert governed.last_decision is not None and governed.last_decision.path.value == "tool"


def test_narrowing_for_an_integration_without_tool_choice(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=[scripted_tool_calls(("get_weather", {"city": "Oslo"}))])
    governed = GovernedFunctionCallingLLM(llm, fixed_governor(FORCE_WEATHER), forcing="narrow")
    governed.chat_with_tools(kit.tools, user_msg="What is the weather in Oslo?")
    (request,) = llm.requests
    assert request.tools == ("get_weather",)
    assert request.tool_choice == "required"


def test_interrupted_step_sends_nothing(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=[])
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=fixed_governor(FORCE_WEATHER),
        tools=kit.tools,
        interrupted=lambda: True,
        streaming=False,
    )
    with pytest.raises(TurnInterruptedError):
        run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
    assert llm.requests == []


def test_configuration_is_checked(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=[])
    with pytest.raises(ConfigurationError, match="initial_tool_choice"):
        GovernedFunctionAgent(llm=llm, tools=kit.tools, initial_tool_choice="get_weather")
    with pytest.raises(ConfigurationError, match="FunctionCallingLLM"):
        GovernedFunctionCallingLLM(object())
    with pytest.raises(ConfigurationError, match="Governor"):
        GovernedFunctionCallingLLM(llm, governor="not a governor")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="forcing"):
        GovernedFunctionCallingLLM(llm, forcing="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="already governed"):
        GovernedFunctionCallingLLM(GovernedFunctionCallingLLM(llm))
    governed = GovernedFunctionCallingLLM(llm)
    with pytest.raises(ConfigurationError, match="tool_choice"):
        governed.chat_with_tools(kit.tools, user_msg="hi", tool_choice="get_weather")
    with pytest.raises(ConfigurationError, match="pep"):
        GovernedFunctionAgent(llm=llm, tools=kit.tools, specs=kit.specs())


def test_scripted_llm_fails_loudly_when_the_script_is_exhausted(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=[scripted_reply("one")])
    llm.chat([ChatMessage(role="user", content="hi")])
    with pytest.raises(AssertionError, match="unexpected provider call #2"):
        llm.chat([ChatMessage(role="user", content="again")])
    unused = ScriptedFunctionCallingLLM(steps=["never"])
    with pytest.raises(AssertionError, match="never used"):
        unused.assert_complete()
    assert unused.remaining == 1


def test_governed_llm_inside_a_custom_workflow(kit: Kit) -> None:
    from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

    llm = ScriptedFunctionCallingLLM(
        steps=[
            scripted_tool_calls(("get_weather", {"city": "Oslo"}), ("delete_file", {"path": "x"}))
        ]
    )
    governed = GovernedFunctionCallingLLM(llm, fixed_governor(FORCE_WEATHER))
    executed: list[str] = []

    class OneStep(Workflow):
        @step
        async def decide(self, ev: StartEvent) -> StopEvent:
            response = await governed.achat_with_tools(kit.tools, user_msg=ev.get("question"))
            for call in governed.get_tool_calls_from_response(response):
                executed.append(call.tool_name)
            return StopEvent(result=response)

    with pytest.raises(ProviderDisobeyedError):
        run(lambda: OneStep(timeout=30).run(question="What is the weather in Oslo?"))
    assert executed == [] and kit.runs == []
    assert llm.requests[0].forced_tool == "get_weather"
