"""ReAct honesty: the ReAct agent cannot be forced, and the plugin says so and does not try.

The scripted model records what reached it: no tool schemas, no ``tool_choice``. The
calls the agent parses from the model's text are still judged before they run.
"""

from __future__ import annotations

import json
import warnings

import pytest
from jevqueue import ConfigurationError
from jevqueue.plugins.llamaindex import REACT_NOTE, GovernedReActAgent
from jevqueue.plugins.llamaindex.testing import ScriptedFunctionCallingLLM
from llama_index.core.agent.workflow import ToolCallResult
from llamaindex_kit import FORCE_WEATHER, Kit, fixed_governor, run


def react_action(tool: str, arguments: dict[str, str]) -> str:
    return f"Thought: I need a tool.\nAction: {tool}\nAction Input: {json.dumps(arguments)}"


def test_a_governor_is_refused_with_the_reason(kit: Kit) -> None:
    with pytest.raises(ConfigurationError, match="no tool schemas and no tool_choice"):
        GovernedReActAgent(
            llm=ScriptedFunctionCallingLLM(steps=[]),
            tools=kit.tools,
            governor=fixed_governor(FORCE_WEATHER),
        )


def test_react_steps_are_passthroughs_and_the_calls_are_judged(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(
        steps=[
            react_action("read_file", {"path": "/etc/passwd"}),
            react_action("get_weather", {"city": "Oslo"}),
            "Thought: I can answer.\nAnswer: Sunny in Oslo.",
        ]
    )
    agent = GovernedReActAgent(
        llm=llm,
        tools=kit.tools,
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
        streaming=False,
    )

    async def go() -> tuple[object, list[ToolCallResult]]:
        handler = agent.run(user_msg="Show /etc/passwd, then the weather in Oslo")
        results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
        return await handler, results

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, results = run(go)
    assert "Sunny in Oslo." in str(result)
    assert [w for w in caught if REACT_NOTE in str(w.message)], "no warning said so"
    # Nothing forcing-like reached the model: ReAct sends no tools and no tool_choice.
    for request in llm.requests:
        assert request.tools == () and request.tool_choice is None
    assert [d.path.value for d in agent.decisions] == ["delegate"] * 3
    assert all(d.reason == REACT_NOTE for d in agent.decisions)
    # The calls parsed from the text were judged: the denied one never ran.
    assert kit.runs == [("get_weather", {"city": "Oslo"})]
    assert results[0].tool_output.is_error
    assert "jevqueue denied the call to 'read_file'" in results[0].tool_output.content
    assert kit.results() == ["DENY", "ALLOW"]
