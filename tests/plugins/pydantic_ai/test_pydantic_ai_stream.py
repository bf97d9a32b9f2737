"""Streamed runs take the same hook: forced once, then free; a disobeying stream runs nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from jevqueue import Governor, Path, ProviderDisobeyedError, Thresholds
from jevqueue.plugins.pydantic_ai import GovernorCapability
from pydantic_ai import Agent
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel


class WeatherBallot:
    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        asked = "weather" in str(messages[-1].get("content", "")).lower()
        return {
            t["function"]["name"]: (0.95 if asked else 0.4)
            if t["function"]["name"] == "weather"
            else 0.0
            for t in tools
        }


class Streamed:
    """Pydantic AI's own ``FunctionModel`` in streaming form, recording each request."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[tuple[str, ...], Any]] = []
        self.model = FunctionModel(stream_function=self.stream)

    async def stream(self, messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
        settings = info.model_settings or {}
        self.requests.append(
            (tuple(t.name for t in info.function_tools), settings.get("tool_choice"))
        )
        yield self.replies.pop(0)


def agent_for(model: Any, ran: list[str]) -> tuple[Agent[None, Any], Governor]:
    def weather(city: str) -> str:
        """Current weather forecast for a city."""
        ran.append(f"weather({city})")
        return "sunny"

    def files(path: str) -> str:
        """List the files in a folder."""
        ran.append(f"files({path})")
        return "a.txt"

    governor = Governor(WeatherBallot(), thresholds=Thresholds(0.6, 0.25, 0.2))
    agent = Agent(model, tools=[weather, files], capabilities=[GovernorCapability(governor)])
    return agent, governor


def test_a_streamed_run_is_forced_once_then_free() -> None:
    streamed = Streamed(
        {0: DeltaToolCall(name="weather", json_args='{"city": "Oslo"}', tool_call_id="c1")},
        "Sunny in Oslo.",
    )
    ran: list[str] = []
    agent, governor = agent_for(streamed.model, ran)

    async def run() -> str:
        async with agent.run_stream("Weather in Oslo?") as result:
            return await result.get_output()

    assert asyncio.run(run()) == "Sunny in Oslo."
    assert streamed.requests == [(("weather",), ["weather"]), (("weather", "files"), None)]
    assert ran == ["weather(Oslo)"]
    assert governor.last.path is Path.DELEGATE


def test_a_disobeying_stream_is_blocked_after_its_events_and_runs_nothing() -> None:
    streamed = Streamed(
        {0: DeltaToolCall(name="files", json_args='{"path": "."}', tool_call_id="c1")}
    )
    ran: list[str] = []
    agent, _ = agent_for(streamed.model, ran)
    events: list[str] = []

    async def run() -> None:
        async with agent.run_stream_events("Weather in Oslo?") as stream:
            async for event in stream:
                events.append(type(event).__name__)

    with pytest.raises(ProviderDisobeyedError):
        asyncio.run(run())
    # The stream's events reached the caller before the read-back; no call ran.
    assert "PartStartEvent" in events
    assert ran == []
