"""Wire proof: Pydantic AI's own ``OpenAIChatModel`` against a recording server on 127.0.0.1.

The agent loop is real, the OpenAI client is real, the bytes go over a socket; only the
model's answers are scripted. What the server recorded is what a provider would receive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from jevqueue import Governor, ProviderDisobeyedError, Thresholds
from jevqueue.plugins.openai import ScriptedChatServer, text_completion, tool_call_completion
from jevqueue.plugins.pydantic_ai import PolicyCapability
from jevqueue.testing.conformance import conformance_tools
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_kit import build_agent, specs_for

pytestmark = pytest.mark.network_allowed


class WeatherBallot:
    """Routes a weather question to ``get_weather``; anything else is left to the model."""

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        text = str(messages[-1].get("content", "")).lower()
        names = [tool["function"]["name"] for tool in tools]
        weather = 0.95 if "weather" in text else 0.4  # 0.4: between the floors, so delegate
        return {name: weather if name == "get_weather" else 0.05 for name in names}


def governor() -> Governor:
    return Governor(WeatherBallot(), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2))


def agent_for(server: ScriptedChatServer, policy_parts: Any) -> tuple[Any, list[Any]]:
    tools = conformance_tools()
    pep, context = policy_parts
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test-key")
    )
    policy = PolicyCapability(pep=pep, specs=specs_for(tools), context=context)
    return build_agent(
        model, tools, system_prompt="You help.", governor=governor(), policy=policy
    ), tools


@pytest.fixture
def policy_parts(tmp_path: Any) -> Any:
    from jevqueue import ExecutionContext, PolicyEnforcementPoint
    from jevqueue.testing.conformance import ConformancePolicy
    from jevqueue.testing.recording_audit import RecordingAuditSink

    context = ExecutionContext(
        task_id="wire", actor_id="tester", workspace=str(tmp_path), git_sha="0123456"
    )
    return PolicyEnforcementPoint(ConformancePolicy(), audit_logger=RecordingAuditSink()), context


def test_forced_request_names_the_tool_and_the_next_request_is_untouched(policy_parts: Any) -> None:
    replies = [
        tool_call_completion("get_weather", {"city": "Lisbon"}),
        text_completion("Sunny in Lisbon."),
    ]
    with ScriptedChatServer(lambda body: replies.pop(0)) as server:
        agent, tools = agent_for(server, policy_parts)
        result = agent.run_sync("What is the weather in Lisbon?")
    assert result.output == "Sunny in Lisbon."
    forced, follow_up = server.requests
    # Narrowed to the one tool, a call required, one call at most: exactly one get_weather.
    assert [tool["function"]["name"] for tool in forced["tools"]] == ["get_weather"]
    assert forced["tool_choice"] == "required"
    assert forced["parallel_tool_calls"] is False
    assert forced["messages"][-1]["role"] == "system"
    assert "get_weather" in forced["messages"][-1]["content"]
    # Per turn: after the tool result the governor delegates, and nothing of the forced
    # request remains — Pydantic AI's own default choice, no parallel setting, every tool,
    # no directive.
    assert follow_up["tool_choice"] == "auto"
    assert "parallel_tool_calls" not in follow_up
    assert sorted(tool["function"]["name"] for tool in follow_up["tools"]) == sorted(
        tool.name for tool in tools
    )
    assert [m["role"] for m in follow_up["messages"]] == ["system", "user", "assistant", "tool"]
    weather = next(tool for tool in tools if tool.name == "get_weather")
    assert weather.calls == [{"city": "Lisbon"}]


def test_a_provider_that_calls_another_tool_is_blocked_before_any_tool_runs(
    policy_parts: Any,
) -> None:
    with ScriptedChatServer(
        lambda body: tool_call_completion("run_command", {"command": "echo hi"})
    ) as server:
        agent, tools = agent_for(server, policy_parts)
        with pytest.raises(ProviderDisobeyedError):
            agent.run_sync("What is the weather in Lisbon?")
    assert len(server.requests) == 1
    assert [tool["function"]["name"] for tool in server.requests[0]["tools"]] == ["get_weather"]
    assert server.requests[0]["tool_choice"] == "required"
    assert all(tool.calls == [] for tool in tools)


def test_delegated_request_is_sent_as_the_ungoverned_agent_sends_it(policy_parts: Any) -> None:
    prompt = "Tell me about the tools you have."  # no weather: the ballot does not route
    bodies: dict[str, dict[str, Any]] = {}
    for governed in (False, True):
        with ScriptedChatServer(lambda body: text_completion("I have three.")) as server:
            agent, _ = agent_for(server, policy_parts)
            if not governed:
                agent = build_agent(agent.model, conformance_tools(), system_prompt="You help.")
            agent.run_sync(prompt)
        bodies["governed" if governed else "plain"] = server.requests[0]
    assert bodies["governed"] == bodies["plain"]
    assert bodies["governed"]["tool_choice"] == "auto"  # Pydantic AI's own default
    assert "parallel_tool_calls" not in bodies["governed"]


def test_prose_request_offers_no_tools(policy_parts: Any) -> None:
    class ProseBallot:
        def score(self, messages: Any, tools: Any) -> Mapping[str, float]:
            return {tool["function"]["name"]: 0.0 for tool in tools}

    with ScriptedChatServer(lambda body: text_completion("Hello!")) as server:
        agent, _ = agent_for(server, policy_parts)
        agent = build_agent(
            agent.model,
            conformance_tools(),
            system_prompt="You help.",
            governor=Governor(ProseBallot(), thresholds=Thresholds(0.6, 0.25, 0.2)),
        )
        result = agent.run_sync("Hi there")
    assert result.output == "Hello!"
    (body,) = server.requests
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"][-1]["role"] == "system"
