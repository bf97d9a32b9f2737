"""The direct host, the message projection, and the governor capability's edges."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from jevqueue import LOCAL_MODEL_ID, Governor, Path, ProviderDisobeyedError, Thresholds
from jevqueue.errors import TurnInterruptedError
from jevqueue.plugins.pydantic_ai import (
    AsyncPydanticAIHost,
    GovernorCapability,
    PydanticAIHost,
    openai_messages,
)
from jevqueue.plugins.pydantic_ai.testing import ScriptedModel, UnexpectedModelCallError, tool_call
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


class Fixed:
    def __init__(self, **scores: float) -> None:
        self.scores = scores

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return {t["function"]["name"]: self.scores.get(t["function"]["name"], 0.0) for t in tools}


def governor(**scores: float) -> Governor:
    return Governor(Fixed(**scores), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2))


def weather(city: str) -> str:
    """Current weather forecast for a city."""
    return f"sunny in {city}"


def files(path: str) -> str:
    """List the files in a folder."""
    return "a.txt"


TOOLS = [Tool(weather).tool_def, Tool(files).tool_def]


def conversation() -> list[Any]:
    return [ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("Weather in Oslo?")])]


def test_the_projection_flattens_parts_by_kind() -> None:
    history = [
        ModelRequest(
            parts=[SystemPromptPart("Be brief."), UserPromptPart("Weather?")],
            instructions="Answer in English.",
        ),
        ModelResponse(
            parts=[TextPart("Looking."), ToolCallPart("weather", {"city": "Oslo"}, "c1")]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("weather", "sunny", "c1"),
                RetryPromptPart("city is required", tool_name="weather", tool_call_id="c2"),
                RetryPromptPart("answer in prose"),
            ]
        ),
    ]
    projected = openai_messages(history)
    assert [m["role"] for m in projected] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert projected[3]["content"] == "Looking."
    assert projected[3]["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert projected[4] == {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "weather",
        "content": "sunny",
    }
    assert "city is required" in projected[5]["content"]


def test_the_direct_host_forces_and_the_caller_messages_stay_unchanged() -> None:
    scripted = ScriptedModel([tool_call("weather", {"city": "Oslo"})])
    messages = conversation()
    before = list(messages), list(messages[0].parts)
    host = PydanticAIHost(scripted.model, messages, TOOLS)
    gov = governor(weather=0.95)
    response = gov.step(host)
    scripted.assert_complete()
    assert gov.last.path is Path.TOOL
    (call,) = scripted.requests
    assert call.forced_tool == "weather" and call.parallel_tool_calls is False
    assert call.messages[-1]["role"] == "system"  # the directive, on a copy
    assert (list(messages), list(messages[0].parts)) == before
    assert response.tool_calls[0].tool_name == "weather"


def test_the_direct_host_blocks_a_disobeying_reply() -> None:
    scripted = ScriptedModel(["It is sunny."])
    with pytest.raises(ProviderDisobeyedError):
        governor(weather=0.95).step(PydanticAIHost(scripted.model, conversation(), TOOLS))


def test_the_async_host_delegates_untouched() -> None:
    scripted = ScriptedModel(["Sunny."])
    host = AsyncPydanticAIHost(scripted.model, conversation(), TOOLS)
    gov = governor(weather=0.4)
    response = asyncio.run(gov.astep(host))
    assert gov.last.path is Path.DELEGATE
    (call,) = scripted.requests
    assert call.tool_choice is None and call.parallel_tool_calls is None
    assert call.tools == ("weather", "files") and call.allow_text_output
    assert [m["role"] for m in call.messages] == ["system", "user"]
    assert response.text == "Sunny."


def test_say_is_local() -> None:
    host = PydanticAIHost(ScriptedModel().model, conversation(), TOOLS)
    assert host.say("No.").model_name == LOCAL_MODEL_ID
    assert host.say_tool_call("weather", {"city": "Oslo"}).tool_calls[0].args == {"city": "Oslo"}


def test_forcing_an_unknown_tool_is_a_typed_error() -> None:
    from jevqueue import ConfigurationError

    host = PydanticAIHost(ScriptedModel().model, conversation(), TOOLS)
    with pytest.raises(ConfigurationError, match="offers no function tool"):
        host.request(force_tool="delete_everything", directive="Call it.")
    with pytest.raises(ConfigurationError, match="ToolDefinition"):
        PydanticAIHost(ScriptedModel().model, conversation(), [weather])  # type: ignore[list-item]


def test_an_interrupt_stops_the_run_before_the_model_is_called() -> None:
    scripted = ScriptedModel(["never"])
    agent = Agent(
        scripted.model,
        tools=[weather, files],
        capabilities=[GovernorCapability(governor(weather=0.95), interrupted=lambda: True)],
    )
    with pytest.raises(TurnInterruptedError):
        agent.run_sync("Weather in Oslo?")
    assert scripted.requests == []


def test_a_forced_tool_is_forced_once_then_the_loop_is_free() -> None:
    scripted = ScriptedModel([tool_call("weather", {"city": "Oslo"}), "Sunny in Oslo."])
    gov = governor(weather=0.95)
    agent = Agent(scripted.model, tools=[weather, files], capabilities=[GovernorCapability(gov)])
    result = agent.run_sync("Weather in Oslo?")
    scripted.assert_complete()
    first, second = scripted.requests
    assert first.forced_tool == "weather"
    assert second.tool_choice is None and second.tools == ("weather", "files")
    assert gov.last.path is Path.DELEGATE
    # The directive was sent, never stored: the run's history holds no trace of it.
    assert not any(
        isinstance(part, SystemPromptPart) and "weather" in part.content
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
    )


def test_the_scripted_model_fails_loudly_on_an_unexpected_request() -> None:
    scripted = ScriptedModel([])
    with pytest.raises(UnexpectedModelCallError):
        Agent(scripted.model).run_sync("hi")
    with pytest.raises(AssertionError, match="unexpected"):
        scripted.assert_complete()


def test_a_prose_turn_keeps_the_output_tools_of_a_structured_output_type() -> None:
    from pydantic import BaseModel

    class Forecast(BaseModel):
        city: str
        sky: str

    scripted = ScriptedModel([tool_call("final_result", {"city": "Oslo", "sky": "clear"})])
    gov = governor()  # every function tool scores 0: the prose path
    agent = Agent(
        scripted.model,
        tools=[weather, files],
        output_type=Forecast,
        capabilities=[GovernorCapability(gov)],
    )
    result = agent.run_sync("Describe the sky.")
    assert gov.last.path is Path.PROSE
    (call,) = scripted.requests
    assert call.tools == () and call.tool_choice == "none"
    assert call.output_tools == ("final_result",)
    assert result.output == Forecast(city="Oslo", sky="clear")
