"""End to end with the default ballot: real scores, the recording host, no fixed numbers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jevqueue import Governor, LexicalBallot, Path
from jevqueue.testing import ScriptedHost, ScriptedModel, Step, text_response, tool_call_response

from .conftest import THRESHOLDS, after_tool_result


def toolset() -> list[dict[str, Any]]:
    def tool(name: str, description: str, **params: str) -> dict[str, Any]:
        properties = {key: {"type": "string", "description": text} for key, text in params.items()}
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": properties},
            },
        }

    return [
        tool("get_weather", "Get the current weather forecast for a city.", city="City name"),
        tool("send_email", "Send an email message to a recipient.", to="Recipient address"),
        tool("read_file", "Read a text file from the workspace.", path="File path"),
        tool("search_files", "Search files in the workspace for text.", query="Text to find"),
    ]


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You help."}, {"role": "user", "content": text}]


def test_a_clear_request_is_forced_to_the_matching_tool() -> None:
    reply = tool_call_response(("get_weather", {"city": "Paris"}))
    model = ScriptedModel([Step(reply, force_tool="get_weather")])
    host = ScriptedHost(toolset(), ask("what's the weather forecast in Paris"), model)
    gov = Governor(LexicalBallot(), thresholds=THRESHOLDS)

    assert gov.step(host) is reply
    assert gov.last is not None and gov.last.path is Path.TOOL
    assert gov.last.tool == "get_weather"
    assert all(0.0 <= score <= 1.0 for score in gov.last.scores.values())
    model.assert_complete()


def test_a_request_no_tool_covers_answers_in_prose() -> None:
    model = ScriptedModel([Step(text_response("Why did..."), force_tool=None)])
    host = ScriptedHost(toolset(), ask("tell me a joke"), model)
    gov = Governor(LexicalBallot(), thresholds=THRESHOLDS)
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.PROSE
    model.assert_complete()


def test_after_the_tool_result_the_agent_continues_unforced() -> None:
    messages = ask("read the file notes.txt")
    tools = toolset()
    gov = Governor(LexicalBallot(), thresholds=THRESHOLDS)
    convo = [*messages, *after_tool_result()[2:]]
    decision = gov.decide(convo, tools)
    assert decision.path is Path.DELEGATE
    assert decision.directive == ""


@pytest.mark.parametrize(
    ("text", "right"),
    [
        ("what's the weather forecast in Paris", "get_weather"),
        ("send an email message to bob", "send_email"),
        ("search the workspace files for TODO", "search_files"),
    ],
)
def test_the_default_governor_never_forces_a_wrong_tool(text: str, right: str) -> None:
    decision = Governor().decide(ask(text), toolset())
    assert decision.top is not None and decision.top[0] == right
    if decision.path is Path.TOOL:
        assert decision.tool == right


def test_fresh_equal_toolsets_each_turn_give_the_same_decision() -> None:
    gov = Governor(LexicalBallot(), thresholds=THRESHOLDS)
    messages = ask("what's the weather forecast in Paris")
    first = gov.decide(messages, toolset())
    second = gov.decide(copy.deepcopy(messages), toolset())
    assert (first.path, first.tool, dict(first.scores)) == (
        second.path,
        second.tool,
        dict(second.scores),
    )
